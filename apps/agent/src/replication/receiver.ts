/**
 * The standby side of a push (S7). A push is: `begin` with the manifest and SHA256SUMS
 * → the list of blobs (files, by sha256) this standby lacks → for each, `putRecipe` (its chunk
 * list) → the chunks this standby lacks, in `putChunks` batches → `commit`, which assembles each
 * file from the chunks received and the chunks it holds. A pusher that does not chunk sends
 * each blob whole instead (`putChunk`, in pieces at offsets).
 *
 * Guarantees:
 *  1. nothing of a push is visible before its commit: blobs arrive in `.staging/<push>/`, the
 *     generation is assembled there (received blobs and hard links to blobs this standby already
 *     holds), verified completely (every checksum, manifest = sums = folder, no links), and only
 *     then renamed into `<tier>/<generation>`; `<tier>/latest` moves after that, with one rename;
 *  2. an interrupted push (a connection cut mid-chunk, a client that never commits, a crash)
 *     leaves `latest` and every generation as they were; a cut chunk is truncated back to where
 *     it started, so the sender can resume; staging is wiped at start and idle pushes expire;
 *  3. a push whose lease generation is lower than the highest one accepted is refused (lease-core
 *     `checkGeneration`, the mark kept in `accepted-generation`, raised before `latest` moves;
 *     the local agent's seen generation, when given, is a floor under the mark); so is one whose
 *     lease generation is higher than any this host knows of from the arbiter or its peers;
 *     a push without a lease generation (0: the bootstrap before the first lease) only while
 *     nothing with one was accepted; within one lease generation a tier only moves forward;
 *  4. at most `keep[tier]` generations are kept; `latest` is never pruned;
 *  5. a chunk this standby holds is never asked for: "holds" = a chunk of a file of a kept
 *     generation whose chunk list is in `.chunks/` (written before the generation is published,
 *     removed by the garbage collection after each prune once no kept generation names the
 *     file); a chunk is read from that file through a hard link in staging (a prune cannot take
 *     it away mid-push) and hashed as it is read; one that does not match is asked for again.
 * Commits are serialized (one at a time); the guard is checked at `begin` and again at commit.
 *
 * The steps live beside this file, each with its own: receive-begin (manifest, guard, staging),
 * receive-blob (a blob sent whole), receive-recipe and receive-chunks (chunk lists and chunks),
 * receive-assemble (files completed at commit), receive-publish (verify, publish, retention),
 * receive-guard (the lease generation checks), receive-kept (what is kept here), receive-state
 * (what a push holds between requests). This class holds the state and serializes commits.
 */
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { sleepSafeClockMs } from '@hq/runtime/clock';
import { mkdirPrivate } from '@hq/runtime/files';
import { tierListing } from '@hq/runtime/generations';
import { REPLICATION_ERRORS, TIERS, type StandbyStatus } from '@hq/protocol';
import type { Refusal } from './errors.js';
import { removeTree } from './fsx.js';
import { expireIdle, openPush } from './receive-begin.js';
import { putWholeBlobPiece } from './receive-blob.js';
import { putChunks } from './receive-chunks.js';
import { acceptedGeneration } from './receive-guard.js';
import { collectRecipes } from './receive-kept.js';
import { commitPush, dropPush } from './receive-publish.js';
import { putRecipe } from './receive-recipe.js';
import type { BeginBody, Begun, Committed, Ok, ReceiverOptions, ReceiverState } from './receive-state.js';
import { RecipeStore } from './recipes.js';

export type { BeginBody, Begun, Committed, Ok, ReceiverLog, ReceiverOptions } from './receive-state.js';

export class StandbyReceiver {
  private commits: Promise<unknown> = Promise.resolve();
  private readonly st: ReceiverState;

  private constructor(opts: ReceiverOptions) {
    this.st = {
      opts,
      log: opts.log ?? { info: () => undefined, warn: () => undefined },
      clock: opts.clock ?? sleepSafeClockMs(),
      staging: join(opts.standbyDir, '.staging'),
      markFile: join(opts.standbyDir, 'accepted-generation'),
      recipes: new RecipeStore(join(opts.standbyDir, '.chunks')),
      pushes: new Map(),
    };
  }

  /** Creates the standby folders (0700) and wipes what an earlier life left in staging. */
  static async open(opts: ReceiverOptions): Promise<StandbyReceiver> {
    await mkdirPrivate(opts.standbyDir);
    const r = new StandbyReceiver(opts);
    await removeTree(r.st.staging);
    await mkdirPrivate(r.st.staging);
    for (const t of TIERS) await mkdirPrivate(join(opts.standbyDir, t));
    await mkdirPrivate(r.st.recipes.dir);
    await collectRecipes(r.st);
    return r;
  }

  get standbyDir(): string {
    return this.st.opts.standbyDir;
  }

  /** The highest lease generation accepted; null when the mark file is unreadable (fail closed). */
  acceptedGeneration(): Promise<number | null> {
    return acceptedGeneration(this.st);
  }

  /** Starts a push: checks the manifest, the sums and the guard; links what is already here. */
  async begin(body: BeginBody): Promise<Ok<Begun> | Refusal> {
    const now = this.st.clock.now();
    await expireIdle(this.st, now);
    const opened = await openPush(this.st, body, now);
    if (!opened.ok) return opened;
    const { push, have } = opened;
    const m = push.manifest;
    const missing = [...push.blobs.values()].filter((b) => !b.done).map((b) => b.sha256);
    this.st.log.info(
      {
        category: 'hq.standby',
        event: 'push-begun',
        push: push.id,
        tier: m.tier,
        generation: m.generation,
        missing: missing.length,
        have,
      },
      'push begun',
    );
    if (body.commit !== true || missing.length > 0) return { ok: true, push: push.id, missing, have, chunked: true };
    // Nothing to send: commit now (one round trip for an unchanged state).
    const c = await this.commit(push.id);
    if (c.ok)
      return {
        ok: true,
        push: push.id,
        missing,
        have,
        chunked: true,
        committed: { tier: c.tier, generation: c.generation, latest: c.latest, received: c.received, linked: c.linked },
      };
    if (c.error.code === REPLICATION_ERRORS.INCOMPLETE.code && Array.isArray(c.extra?.['missing'])) {
      return {
        ok: true,
        push: push.id,
        missing: c.extra['missing'] as string[],
        have: have - (c.extra['missing'] as string[]).length,
        chunked: true,
      };
    }
    return c;
  }

  /**
   * Appends one chunk of a blob starting at `offset` (must equal what was received so far).
   * A cut connection truncates the part back to `offset`. The last chunk checks the sha256.
   */
  putChunk(
    pushId: string,
    sha: string,
    offset: number,
    stream: Readable,
  ): Promise<Ok<{ received: number; complete: boolean }> | Refusal> {
    return putWholeBlobPiece(this.st, pushId, sha, offset, stream);
  }

  /** Takes a missing file's chunk list; answers the runs of it to send. */
  putRecipe(
    pushId: string,
    sha: string,
    stream: Readable,
    base?: string,
  ): Promise<Ok<{ missing: [number, number][]; have: number }> | Refusal> {
    return putRecipe(this.st, pushId, sha, stream, base);
  }

  /** Takes a batch of chunks; a cut batch keeps the chunks it completed. */
  putChunks(pushId: string, stream: Readable): Promise<Ok<{ received: number }> | Refusal> {
    return putChunks(this.st, pushId, stream);
  }

  /** Assembles, verifies and publishes the generation; serialized with every other commit. */
  commit(pushId: string): Promise<Ok<Committed> | Refusal> {
    const run = () => commitPush(this.st, pushId);
    const p = this.commits.then(run, run);
    this.commits = p.catch(() => undefined);
    return p;
  }

  /** Drops a push and everything it staged. */
  async abort(pushId: string): Promise<boolean> {
    const push = this.st.pushes.get(pushId);
    if (push === undefined || push.committing) return false;
    await dropPush(this.st, push, null);
    this.st.log.info({ category: 'hq.standby', event: 'push-aborted', push: pushId }, 'push aborted');
    return true;
  }

  async status(): Promise<StandbyStatus> {
    const tiers = [];
    for (const t of TIERS) tiers.push({ tier: t, ...(await tierListing(join(this.st.opts.standbyDir, t))) });
    return { acceptedGeneration: await acceptedGeneration(this.st), pushes: this.st.pushes.size, tiers };
  }
}
