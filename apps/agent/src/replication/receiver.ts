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
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { link, lstat, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Readable } from 'node:stream';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import { sleepSafeClockMs, type MsClock } from '@hq/runtime/clock';
import { fsyncDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { rand, removeTree, writeFileNew } from './fsx.js';
import { latestGeneration, listGenerations, publishGeneration, pruneGenerations, tierListing } from '@hq/runtime/generations';
import { decodeRecipe, runsOf, type RecipeRead } from './chunks.js';
import { applyEntries, decodeRecipeDelta } from './delta.js';
import { RecipeStore } from './recipes.js';
import { refuse, type Refusal } from './errors.js';
import {
  formatManifest,
  formatSums,
  GENERATION_RE,
  isTier,
  MIN_CHUNK_BYTES,
  parseSums,
  RECIPE_RECORD_BYTES,
  REPLICATION_ERRORS,
  SHA256_RE,
  sumsDisagreement,
  TIERS,
  type Chunk,
  type Manifest,
  type ManifestEntry,
  type StandbyStatus,
  type Tier,
} from '@hq/protocol';
import { checkManifest, parseManifest } from '@hq/protocol/schemas';
import { sha256File } from './manifest.js';
import { checkGenerationDir } from './verify.js';

export interface ReceiverLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface ReceiverOptions {
  readonly standbyDir: string;
  readonly keep: Readonly<Record<Tier, number>>;
  /** Open pushes at once; more are refused (503). Default 4. */
  readonly maxPushes?: number;
  /** A push untouched this long is dropped. Default 10 minutes. */
  readonly idleMs?: number;
  readonly log?: ReceiverLog;
  /**
   * This host's seen generation (the agent's), a floor under the accepted mark: once this host
   * has seen generation g (it may hold the lease itself), a copy from a lower one is stale.
   */
  readonly seenGeneration?: () => number | Promise<number>;
  /**
   * The highest lease generation this host knows of from the arbiter or its peers (the agent's
   * seen generation). A push naming a higher one is a claim nothing here can check — a holder
   * that invented it would lock the real one out for good (S7 turned against its owner) — so it
   * is refused and never raises the accepted mark.
   */
  readonly knownGeneration: () => number | Promise<number>;
  /** Asks the arbiter now (one heartbeat), once, before a push above `knownGeneration` is refused: a new holder pushes before this standby's next refresh. */
  readonly learnGeneration?: () => Promise<unknown>;
  /** Epoch ms for the idle timeout (a local duration). Default: sleep-safe, so a wall jump back cannot keep a push alive. */
  readonly clock?: MsClock;
}

interface Blob {
  readonly sha256: string;
  readonly bytes: number;
  /** Received bytes so far (a `.part` file), or done. */
  received: number;
  done: boolean;
  /** Linked from a generation this standby already held (not sent). */
  linked: boolean;
  busy: boolean;
}

/** A missing file being assembled from its chunk list in `asm/<sha256>` (sparse until filled). */
interface Assembly {
  readonly sha256: string;
  readonly path: string;
  readonly chunks: readonly Chunk[];
  readonly offsets: readonly number[];
  /** 1 where the chunk's bytes are in the file already (written as it arrived, or copied). */
  readonly written: Uint8Array;
}

/** A chunk a push needs: `wanted` until it arrives, then `have`; or `have` at once when held here. */
interface ChunkNeed {
  readonly bytes: number;
  state: 'wanted' | 'have';
  /** Asked for in a chunk-list answer already (so a second list that names it does not ask again). */
  asked: boolean;
  /** Where its bytes can be read: a hard link in staging to a file held here, or an assembly of this push. */
  src: { readonly file: string; readonly offset: number } | null;
  /** The places it is written to when it arrives. */
  targets: { readonly asm: Assembly; readonly index: number }[];
}

/** Where a chunk held here lies: a file of a kept generation (by content) and the offset. */
interface Held {
  readonly file: string;
  readonly offset: number;
  readonly bytes: number;
}

interface Push {
  readonly id: string;
  readonly manifest: Manifest;
  readonly sums: string;
  readonly dir: string;
  readonly blobs: Map<string, Blob>;
  /** File sha256 → a file of a kept generation holding it (begin's index). */
  readonly held: ReadonlyMap<string, { abs: string; bytes: number }>;
  /** The missing files sent as chunk lists, by file sha256. */
  readonly assemblies: Map<string, Assembly>;
  readonly chunks: Map<string, ChunkNeed>;
  /** Chunk sha256 → where this standby holds it; built at the first chunk list. */
  heldChunks: Map<string, Held> | null;
  /** Files held here found damaged: none of their chunks is used. */
  readonly damaged: Set<string>;
  /** Files held here linked into `src/` (by sha256). */
  readonly linked: Set<string>;
  receiving: boolean;
  /** Chunk lists being taken now: a commit waits for them (their assembly and needs come together). */
  recipes: number;
  lastActive: number;
  committing: boolean;
}

export type Ok<T> = { readonly ok: true } & T;

/** `POST /v1/standby/pushes` (schema StandbyPushBody): a full manifest, or one as differences from `base`. */
export interface BeginBody {
  readonly manifest: unknown;
  readonly sums?: unknown;
  readonly base?: string;
  readonly changed?: readonly unknown[];
  readonly removed?: readonly string[];
  readonly commit?: boolean;
  readonly inline?: readonly { readonly sha256: string; readonly data: string }[];
}

export interface Committed {
  readonly tier: Tier;
  readonly generation: string;
  readonly latest: string;
  readonly received: number;
  readonly linked: number;
}

export interface Begun {
  readonly push: string;
  readonly missing: string[];
  readonly have: number;
  readonly chunked: true;
  readonly committed?: Committed;
}

const quiet: ReceiverLog = { info: () => undefined, warn: () => undefined };

export class StandbyReceiver {
  private readonly pushes = new Map<string, Push>();
  private commits: Promise<unknown> = Promise.resolve();
  private readonly log: ReceiverLog;
  private readonly staging: string;
  private readonly markFile: string;
  private readonly recipes: RecipeStore;

  private readonly clock: MsClock;

  private constructor(private readonly opts: ReceiverOptions) {
    this.log = opts.log ?? quiet;
    this.clock = opts.clock ?? sleepSafeClockMs();
    this.staging = join(opts.standbyDir, '.staging');
    this.markFile = join(opts.standbyDir, 'accepted-generation');
    this.recipes = new RecipeStore(join(opts.standbyDir, '.chunks'));
  }

  /** Creates the standby folders (0700) and wipes what an earlier life left in staging. */
  static async open(opts: ReceiverOptions): Promise<StandbyReceiver> {
    await mkdirPrivate(opts.standbyDir);
    const r = new StandbyReceiver(opts);
    await removeTree(r.staging);
    await mkdirPrivate(r.staging);
    for (const t of TIERS) await mkdirPrivate(join(opts.standbyDir, t));
    await mkdirPrivate(r.recipes.dir);
    await r.collect();
    return r;
  }

  get standbyDir(): string {
    return this.opts.standbyDir;
  }

  /** The floor a push must reach: the accepted mark, raised to this host's seen generation. */
  private async floor(): Promise<number | null> {
    const mark = await this.acceptedGeneration();
    if (mark === null) return null;
    const seen = this.opts.seenGeneration === undefined ? 0 : await this.opts.seenGeneration();
    return Math.max(mark, Number.isSafeInteger(seen) && seen > 0 ? seen : 0);
  }

  /** The highest lease generation accepted; null when the mark file is unreadable (fail closed). */
  async acceptedGeneration(): Promise<number | null> {
    try {
      const st = await lstat(this.markFile);
      if (!st.isFile()) return null;
    } catch {
      return 0;
    }
    return parseGeneration(await readFile(this.markFile, 'utf8'));
  }

  /** Null when this standby knows of lease generation `incoming` (asking the arbiter once when `learn`), else the refusal. */
  private async unknownGeneration(incoming: number, learn: boolean): Promise<Refusal | null> {
    if (incoming === 0) return null;
    let known = await this.opts.knownGeneration();
    if (incoming > known && learn && this.opts.learnGeneration !== undefined) {
      await this.opts.learnGeneration().catch(() => undefined);
      known = await this.opts.knownGeneration();
    }
    if (incoming <= known) return null;
    this.log.warn({ category: 'hq.standby', event: 'push-refused', reason: 'unknown-generation', leaseGeneration: incoming, known }, 'push refused');
    return refuse('UNKNOWN_GENERATION', `lease generation ${incoming} is higher than ${known}, the highest this standby has seen from the arbiter or its peers; nothing was accepted`, { highest: known });
  }

  private guard(highest: number | null, incoming: number): Refusal | null {
    if (highest === null) return refuse('INTERNAL', `${this.markFile} is unreadable; refusing every push until it is fixed`);
    if (incoming === 0) {
      return highest === 0 ? null : refuse('STALE_GENERATION', `a push without a lease generation is refused once generation ${highest} was accepted or seen`, { highest });
    }
    const v = checkGeneration(highest, incoming);
    if (v.ok) return null;
    return v.reason === 'stale-generation'
      ? refuse('STALE_GENERATION', `lease generation ${incoming} is lower than ${highest}, the highest accepted or seen`, { highest })
      : refuse('BAD_GENERATION');
  }

  /** The manifest of a tier's `latest`, or null. */
  private async latestManifest(tier: Tier): Promise<Manifest | null> {
    const tierRoot = join(this.opts.standbyDir, tier);
    const name = await latestGeneration(tierRoot);
    if (name === null) return null;
    try {
      const m = parseManifest(await readFile(join(tierRoot, name, 'MANIFEST.json'), 'utf8'));
      return typeof m === 'string' ? null : m;
    } catch {
      return null;
    }
  }

  private async order(m: Manifest): Promise<Refusal | null> {
    try {
      await lstat(join(this.opts.standbyDir, m.tier, m.generation));
      return refuse('GENERATION_EXISTS', `generation ${m.tier}/${m.generation} was already accepted`);
    } catch {
      /* not there: fine */
    }
    const latest = await this.latestManifest(m.tier);
    if (latest === null) return null;
    if (m.leaseGeneration < latest.leaseGeneration) {
      return refuse('STALE_GENERATION', `lease generation ${m.leaseGeneration} is lower than that of ${m.tier}/latest (${latest.leaseGeneration})`, {
        highest: latest.leaseGeneration,
      });
    }
    if (m.leaseGeneration === latest.leaseGeneration && m.generation <= latest.generation) {
      return refuse('OLDER_SNAPSHOT', `generation ${m.generation} is not newer than ${m.tier}/latest ${latest.generation} of the same lease generation`);
    }
    return null;
  }

  /** sha256 → a file of a kept generation holding it (its manifest says so; verified at commit). */
  private async index(): Promise<Map<string, { abs: string; bytes: number }>> {
    const idx = new Map<string, { abs: string; bytes: number }>();
    for (const t of TIERS) {
      const tierRoot = join(this.opts.standbyDir, t);
      for (const n of (await listGenerations(tierRoot)).reverse()) {
        try {
          const m = parseManifest(await readFile(join(tierRoot, n, 'MANIFEST.json'), 'utf8'));
          if (typeof m === 'string') continue;
          for (const e of m.entries) if (!idx.has(e.sha256)) idx.set(e.sha256, { abs: join(tierRoot, n, e.path), bytes: e.bytes });
        } catch {
          /* an unreadable generation offers nothing */
        }
      }
    }
    return idx;
  }

  private async sweep(now: number): Promise<void> {
    const idle = this.opts.idleMs ?? 10 * 60_000;
    for (const p of [...this.pushes.values()]) {
      if (!p.committing && now - p.lastActive > idle) {
        this.pushes.delete(p.id);
        await removeTree(p.dir);
        this.log.warn({ category: 'hq.standby', event: 'push-expired', push: p.id, generation: p.manifest.generation }, 'push expired');
      }
    }
  }

  /** Starts a push: checks the manifest, the sums and the guard; links what is already here. */
  async begin(body: BeginBody): Promise<Ok<Begun> | Refusal> {
    const now = this.clock.now();
    await this.sweep(now);
    let manifest = body.manifest;
    if (body.base !== undefined) {
      // 0. The manifest as differences from a generation kept here: rebuild it, then check it as a full one.
      const head = body.manifest;
      if (typeof head !== 'object' || head === null || Array.isArray(head) || Object.hasOwn(head, 'entries')) {
        return refuse('BAD_MANIFEST', 'a manifest sent as differences has no entries of its own');
      }
      const tier = (head as { tier?: unknown }).tier;
      const base = isTier(tier) && GENERATION_RE.test(body.base) ? await this.keptManifest(tier, body.base) : null;
      if (base === null) return refuse('UNKNOWN_BASE', `this standby keeps no generation ${String(tier)}/${body.base}`);
      const changed = body.changed ?? [];
      if (!changed.every((e) => typeof e === 'object' && e !== null && typeof (e as { path?: unknown }).path === 'string')) {
        return refuse('BAD_MANIFEST', 'every changed entry needs a path');
      }
      manifest = { ...head, entries: applyEntries(base.entries, changed as ManifestEntry[], body.removed ?? []) };
    }
    const m = checkManifest(manifest);
    if (typeof m === 'string') return refuse('BAD_MANIFEST', m);
    const sumsText = body.sums ?? formatSums(m.entries);
    if (typeof sumsText !== 'string') return refuse('BAD_MANIFEST', 'sums must be the text of SHA256SUMS');
    const sums = parseSums(sumsText);
    if (!sums.ok) return refuse('BAD_MANIFEST', sums.reason);
    const dis = sumsDisagreement(m, sums.sums);
    if (dis !== null) return refuse('BAD_MANIFEST', `manifest/checksum list mismatch: ${dis}`);
    const g = this.guard(await this.floor(), m.leaseGeneration) ?? (await this.unknownGeneration(m.leaseGeneration, true));
    if (g !== null) return g;
    const o = await this.order(m);
    if (o !== null) return o;
    if (this.pushes.size >= (this.opts.maxPushes ?? 4)) return refuse('TOO_MANY_PUSHES');
    const id = rand() + rand();
    const dir = join(this.staging, id);
    await mkdirPrivate(join(dir, 'blobs'));
    const idx = await this.index();
    const blobs = new Map<string, Blob>();
    let have = 0;
    for (const e of m.entries) {
      if (blobs.has(e.sha256)) continue;
      const blob: Blob = { sha256: e.sha256, bytes: e.bytes, received: 0, done: false, linked: false, busy: false };
      const found = idx.get(e.sha256);
      if (found !== undefined && found.bytes === e.bytes) {
        // Link it now: a prune by another commit cannot take it away from this push.
        try {
          await link(found.abs, join(dir, 'blobs', e.sha256));
          blob.done = true;
          blob.linked = true;
          have++;
        } catch {
          /* gone meanwhile: ask for it */
        }
      }
      blobs.set(e.sha256, blob);
    }
    // Small files sent inline: checked like any blob, kept like one received.
    for (const f of body.inline ?? []) {
      const blob = blobs.get(f.sha256);
      if (blob === undefined || blob.done) continue;
      const data = Buffer.from(f.data, 'base64');
      if (data.length !== blob.bytes || createHash('sha256').update(data).digest('hex') !== f.sha256) {
        await removeTree(dir);
        return refuse('CHECKSUM', `the file sent inline as ${f.sha256} does not hash to it`);
      }
      await writeFileNew(join(dir, 'blobs', f.sha256), data);
      blob.received = blob.bytes;
      blob.done = true;
    }
    const push: Push = {
      id,
      manifest: m,
      sums: sumsText,
      dir,
      blobs,
      held: idx,
      assemblies: new Map(),
      chunks: new Map(),
      heldChunks: null,
      damaged: new Set(),
      linked: new Set(),
      receiving: false,
      recipes: 0,
      lastActive: now,
      committing: false,
    };
    this.pushes.set(id, push);
    const missing = [...blobs.values()].filter((b) => !b.done).map((b) => b.sha256);
    this.log.info({ category: 'hq.standby', event: 'push-begun', push: id, tier: m.tier, generation: m.generation, missing: missing.length, have }, 'push begun');
    if (body.commit !== true || missing.length > 0) return { ok: true, push: id, missing, have, chunked: true };
    // Nothing to send: commit now (one round trip for an unchanged state).
    const c = await this.commit(id);
    if (c.ok) return { ok: true, push: id, missing, have, chunked: true, committed: { tier: c.tier, generation: c.generation, latest: c.latest, received: c.received, linked: c.linked } };
    if (c.error.code === REPLICATION_ERRORS.INCOMPLETE.code && Array.isArray(c.extra?.['missing'])) {
      return { ok: true, push: id, missing: c.extra['missing'] as string[], have: have - (c.extra['missing'] as string[]).length, chunked: true };
    }
    return c;
  }

  /** The manifest of a kept generation of a tier, or null. */
  private async keptManifest(tier: Tier, generation: string): Promise<Manifest | null> {
    try {
      const st = await lstat(join(this.opts.standbyDir, tier, generation));
      if (!st.isDirectory()) return null;
      const m = parseManifest(await readFile(join(this.opts.standbyDir, tier, generation, 'MANIFEST.json'), 'utf8'));
      return typeof m === 'string' || m.tier !== tier || m.generation !== generation ? null : m;
    } catch {
      return null;
    }
  }

  /**
   * Appends one chunk of a blob starting at `offset` (must equal what was received so far).
   * A cut connection truncates the part back to `offset`. The last chunk checks the sha256.
   */
  async putChunk(pushId: string, sha: string, offset: number, stream: Readable): Promise<Ok<{ received: number; complete: boolean }> | Refusal> {
    const push = this.pushes.get(pushId);
    if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
    if (!SHA256_RE.test(sha)) return drain(stream, refuse('UNEXPECTED_BLOB', 'the blob name must be a lower-case sha256'));
    const blob = push.blobs.get(sha);
    if (blob === undefined || blob.done) return drain(stream, refuse('UNEXPECTED_BLOB'));
    if (blob.busy) return drain(stream, refuse('BLOB_BUSY'));
    if (offset !== blob.received) return drain(stream, refuse('OFFSET', `the chunk starts at ${offset}, the part ends at ${blob.received}`, { received: blob.received }));
    blob.busy = true;
    push.lastActive = this.clock.now();
    const part = join(push.dir, 'blobs', `${sha}.part`);
    try {
      const fh = await open(part, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
      let pos = offset;
      try {
        for await (const chunk of stream) {
          const buf = chunk as Buffer;
          if (pos + buf.length > blob.bytes) {
            stream.destroy();
            await fh.truncate(offset);
            return refuse('BLOB_SIZE', `the blob is longer than ${blob.bytes} bytes`);
          }
          let off = 0;
          while (off < buf.length) off += (await fh.write(buf, off, buf.length - off, pos + off)).bytesWritten;
          pos += buf.length;
          push.lastActive = this.clock.now();
        }
        await fh.sync();
      } catch (err) {
        await fh.truncate(offset).catch(() => undefined);
        throw err;
      } finally {
        await fh.close();
      }
      blob.received = pos;
      if (pos < blob.bytes) return { ok: true, received: pos, complete: false };
      const h = await sha256File(part);
      if (h.sha256 !== sha) {
        await unlink(part).catch(() => undefined);
        blob.received = 0;
        this.log.warn({ category: 'hq.standby', event: 'checksum-mismatch', push: pushId, sha256: sha }, 'blob checksum mismatch');
        return refuse('CHECKSUM', `the blob received for ${sha} hashes to ${h.sha256}`);
      }
      await rename(part, join(push.dir, 'blobs', sha));
      blob.done = true;
      return { ok: true, received: pos, complete: true };
    } catch (err) {
      // The connection was cut (or the disk failed): the part is back at `offset`.
      this.log.warn({ category: 'hq.standby', event: 'chunk-interrupted', push: pushId, sha256: sha, err }, 'chunk interrupted');
      throw err;
    } finally {
      blob.busy = false;
    }
  }

  /** Chunk sha256 → where this standby holds it: the chunk lists of the files of its kept generations. */
  private async heldChunks(push: Push): Promise<Map<string, Held>> {
    if (push.heldChunks !== null) return push.heldChunks;
    const out = new Map<string, Held>();
    for (const [sha, f] of push.held) {
      const chunks = await this.recipes.get(sha, f.bytes);
      if (chunks === null) continue;
      let offset = 0;
      for (const c of chunks) {
        if (!out.has(c.sha256)) out.set(c.sha256, { file: sha, offset, bytes: c.bytes });
        offset += c.bytes;
      }
    }
    push.heldChunks = out;
    return out;
  }

  /** A hard link in staging to a file held here (so a prune cannot take it away), or null. */
  private async source(push: Push, fileSha: string): Promise<string | null> {
    if (push.damaged.has(fileSha)) return null;
    const held = push.held.get(fileSha);
    if (held === undefined) return null;
    const dest = join(push.dir, 'src', fileSha);
    if (push.linked.has(fileSha)) return dest;
    try {
      await mkdirPrivate(join(push.dir, 'src'));
      await link(held.abs, dest);
      push.linked.add(fileSha);
      return dest;
    } catch {
      push.damaged.add(fileSha);
      return null;
    }
  }

  /**
   * Takes a missing file's chunk list (read whole, at most one record per `MIN_CHUNK_BYTES` of the
   * file); answers the runs of it to send: the chunks neither held here nor asked for already.
   * Sent again (after an incomplete commit), it asks again for what is still missing.
   */
  async putRecipe(pushId: string, sha: string, stream: Readable, base?: string): Promise<Ok<{ missing: [number, number][]; have: number }> | Refusal> {
    const push = this.pushes.get(pushId);
    if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
    const blob = push.blobs.get(sha);
    if (blob === undefined || blob.done) return drain(stream, refuse('UNEXPECTED_BLOB', 'this push does not need that file'));
    if (blob.busy) return drain(stream, refuse('BLOB_BUSY', `the chunk list of ${sha} is being received`));
    // Until its assembly and its needs are in place, this file is busy and the push may not commit.
    blob.busy = true;
    push.recipes++;
    try {
      return await this.takeRecipe(push, blob, sha, stream, base);
    } finally {
      blob.busy = false;
      push.recipes--;
    }
  }

  private async takeRecipe(push: Push, blob: Blob, sha: string, stream: Readable, base: string | undefined): Promise<Ok<{ missing: [number, number][]; have: number }> | Refusal> {
    push.lastActive = this.clock.now();
    const limit = RECIPE_RECORD_BYTES * (Math.ceil(blob.bytes / MIN_CHUNK_BYTES) + 1);
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream) {
      size += (chunk as Buffer).length;
      if (size <= limit) parts.push(chunk as Buffer);
    }
    if (size > limit) return refuse('BAD_MANIFEST', `the chunk list of ${sha} is longer than a ${blob.bytes}-byte file can need`);
    let r: RecipeRead;
    if (base === undefined) r = decodeRecipe(Buffer.concat(parts), blob.bytes);
    else {
      // A delta from the list of a file kept here.
      const kept = push.held.get(base);
      const baseChunks = kept === undefined || push.damaged.has(base) ? null : await this.recipes.get(base, kept.bytes);
      if (baseChunks === null) return refuse('UNKNOWN_BASE', `this standby keeps no chunk list of ${base}`);
      r = decodeRecipeDelta(baseChunks, Buffer.concat(parts), blob.bytes);
    }
    if (!r.ok) return refuse('BAD_MANIFEST', `the chunk list of ${sha}: ${r.reason}`);
    let asm = push.assemblies.get(sha);
    if (asm !== undefined && (asm.chunks.length !== r.chunks.length || asm.chunks.some((c, i) => c.sha256 !== r.chunks[i]?.sha256))) {
      return refuse('BAD_MANIFEST', `the chunk list of ${sha} differs from the one sent before`);
    }
    const held = await this.heldChunks(push);
    if (asm === undefined) {
      const offsets: number[] = [];
      let at = 0;
      for (const c of r.chunks) {
        offsets.push(at);
        at += c.bytes;
      }
      asm = { sha256: sha, path: join(push.dir, 'asm', sha), chunks: r.chunks, offsets, written: new Uint8Array(r.chunks.length) };
      await mkdirPrivate(join(push.dir, 'asm'));
      const fh = await open(asm.path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
      await fh.truncate(blob.bytes);
      await fh.close();
      push.assemblies.set(sha, asm);
    }
    // The files held here this list takes chunks from, linked into staging first.
    const files = new Map<string, string | null>();
    for (const c of asm.chunks) {
      const h = push.chunks.has(c.sha256) ? undefined : held.get(c.sha256);
      if (h !== undefined && !files.has(h.file)) files.set(h.file, await this.source(push, h.file));
    }
    const ask: boolean[] = [];
    let have = 0;
    for (const [i, c] of asm.chunks.entries()) {
      let need = push.chunks.get(c.sha256);
      if (need !== undefined && need.bytes !== c.bytes) return refuse('BAD_MANIFEST', `chunk ${c.sha256} is listed with two lengths`);
      if (need === undefined) {
        const h = held.get(c.sha256);
        const file = h !== undefined && h.bytes === c.bytes ? (files.get(h.file) ?? null) : null;
        need = { bytes: c.bytes, state: file === null ? 'wanted' : 'have', asked: false, src: file === null || h === undefined ? null : { file, offset: h.offset }, targets: [] };
        push.chunks.set(c.sha256, need);
      }
      if (asm.written[i] === 0 && need.state === 'wanted' && !need.targets.some((t) => t.asm === asm && t.index === i)) need.targets.push({ asm, index: i });
      const askNow = asm.written[i] === 0 && need.state === 'wanted' && !need.asked;
      if (askNow) need.asked = true;
      else have++;
      ask.push(askNow);
    }
    return { ok: true, missing: runsOf(ask), have };
  }

  /**
   * Takes a batch of chunks (each its raw sha256, then the bytes its chunk list gave): each is
   * hashed once whole and then written where its files need it; a cut batch keeps the chunks it
   * completed.
   */
  async putChunks(pushId: string, stream: Readable): Promise<Ok<{ received: number }> | Refusal> {
    const push = this.pushes.get(pushId);
    if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
    if (push.receiving) return drain(stream, refuse('BLOB_BUSY', 'another batch of chunks of this push is being received'));
    push.receiving = true;
    push.lastActive = this.clock.now();
    let header = Buffer.alloc(0);
    let cur: { sha: string; need: ChunkNeed; data: Buffer; pos: number } | null = null;
    let refusal: Refusal | null = null;
    let received = 0;
    const handles = new Map<string, FileHandle>();
    // Whole, checked chunks not yet written: written in runs (one write per contiguous stretch
    // of an assembly), then marked; at most WRITE_RUN_BYTES held.
    let pending: { need: ChunkNeed; data: Buffer }[] = [];
    const inPending = new Set<ChunkNeed>();
    let pendingBytes = 0;
    const flush = async () => {
      const writes: { asm: Assembly; index: number; data: Buffer }[] = [];
      for (const p of pending) for (const t of p.need.targets) writes.push({ asm: t.asm, index: t.index, data: p.data });
      writes.sort((a, b) => (a.asm.path < b.asm.path ? -1 : a.asm.path > b.asm.path ? 1 : a.index - b.index));
      for (let i = 0; i < writes.length; ) {
        const w0 = writes[i] as (typeof writes)[number];
        let j = i + 1;
        while (j < writes.length && writes[j]?.asm === w0.asm && writes[j]?.index === (writes[j - 1]?.index as number) + 1) j++;
        let fh = handles.get(w0.asm.path);
        if (fh === undefined) {
          fh = await open(w0.asm.path, constants.O_WRONLY | constants.O_NOFOLLOW);
          handles.set(w0.asm.path, fh);
        }
        await writeAll(fh, writes.slice(i, j).map((w) => w.data), w0.asm.offsets[w0.index] as number);
        for (const w of writes.slice(i, j)) w.asm.written[w.index] = 1;
        i = j;
      }
      for (const p of pending) {
        const first = p.need.targets[0] as ChunkNeed['targets'][number];
        p.need.src = { file: first.asm.path, offset: first.asm.offsets[first.index] as number };
        p.need.state = 'have';
        p.need.targets = [];
        received++;
      }
      pending = [];
      inPending.clear();
      pendingBytes = 0;
    };
    try {
      for await (const piece of stream) {
        const buf = piece as Buffer;
        push.lastActive = this.clock.now();
        let off = 0;
        while (refusal === null && off < buf.length) {
          if (cur === null) {
            let sha: string;
            if (header.length === 0 && off + 32 <= buf.length) {
              sha = buf.toString('hex', off, off + 32);
              off += 32;
            } else {
              const take = Math.min(32 - header.length, buf.length - off);
              header = Buffer.concat([header, buf.subarray(off, off + take)]);
              off += take;
              if (header.length < 32) continue;
              sha = header.toString('hex');
              header = Buffer.alloc(0);
            }
            const need = push.chunks.get(sha);
            if (need === undefined || need.state !== 'wanted') refusal = refuse('UNEXPECTED_BLOB', `this push does not need chunk ${sha}`);
            else if (off + need.bytes <= buf.length) {
              // The whole chunk is in this piece: no copy.
              cur = { sha, need, data: buf.subarray(off, off + need.bytes), pos: need.bytes };
              off += need.bytes;
            } else cur = { sha, need, data: Buffer.allocUnsafe(need.bytes), pos: 0 };
            if (cur === null || cur.pos < cur.data.length) continue;
          } else {
            const take = Math.min(cur.data.length - cur.pos, buf.length - off);
            buf.copy(cur.data, cur.pos, off, off + take);
            cur.pos += take;
            off += take;
            if (cur.pos < cur.data.length) continue;
          }
          const done = cur;
          cur = null;
          if (createHash('sha256').update(done.data).digest('hex') !== done.sha) {
            this.log.warn({ category: 'hq.standby', event: 'checksum-mismatch', push: pushId, sha256: done.sha }, 'chunk checksum mismatch');
            refusal = refuse('CHECKSUM', `the chunk received as ${done.sha} does not hash to it`);
            continue;
          }
          if (done.need.targets.length === 0 || inPending.has(done.need)) continue;
          inPending.add(done.need);
          pending.push({ need: done.need, data: done.data });
          pendingBytes += done.data.length;
          if (pendingBytes >= WRITE_RUN_BYTES) await flush();
        }
      }
      await flush();
      if (refusal !== null) return refusal;
      if (cur !== null || header.length > 0) return refuse('BLOB_SIZE', `the batch ends inside chunk ${cur?.sha ?? '(its sha256)'}`);
      return { ok: true, received };
    } catch (err) {
      // A cut connection: the chunks completed are kept, the one in flight is simply not.
      await flush().catch(() => undefined);
      this.log.warn({ category: 'hq.standby', event: 'chunk-interrupted', push: pushId, sha256: cur?.sha ?? null, err }, 'chunk interrupted');
      throw err;
    } finally {
      for (const fh of handles.values()) await fh.close().catch(() => undefined);
      push.receiving = false;
    }
  }

  /** A file read for chunks turned out damaged: every chunk read from it is wanted again. */
  private forget(push: Push, file: string): void {
    push.damaged.add(basename(file));
    for (const n of push.chunks.values()) {
      if (n.src?.file !== file) continue;
      n.state = 'wanted';
      n.asked = false;
      n.src = null;
    }
  }

  /**
   * Completes each missing file that has its chunk list: the chunks that did not arrive over
   * the wire are copied from where they are held, each hashed as it is read (one that does not
   * match is wanted again, and nothing more is read from its file); fsync'd and linked into
   * `blobs/`. The whole file is checked with the generation. Returns the files still missing.
   */
  private async assemble(push: Push): Promise<string[]> {
    const missing: string[] = [];
    const handles = new Map<string, FileHandle>();
    const read = async (file: string): Promise<FileHandle> => {
      let fh = handles.get(file);
      if (fh === undefined) {
        fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
        handles.set(file, fh);
      }
      return fh;
    };
    try {
      for (const blob of push.blobs.values()) {
        if (blob.done) continue;
        const asm = push.assemblies.get(blob.sha256);
        if (asm === undefined) {
          missing.push(blob.sha256);
          continue;
        }
        const out = await open(asm.path, constants.O_WRONLY | constants.O_NOFOLLOW);
        let complete = true;
        try {
          const n = asm.chunks.length;
          for (let i = 0; i < n; ) {
            const need = push.chunks.get((asm.chunks[i] as Chunk).sha256) as ChunkNeed;
            if (asm.written[i] === 1) {
              i++;
              continue;
            }
            if (need.state === 'wanted' || need.src === null) {
              complete = false;
              i++;
              continue;
            }
            // A run: the next chunks lie right after this one in the same source file.
            const src = need.src;
            let j = i + 1;
            let bytes = (asm.chunks[i] as Chunk).bytes;
            while (j < n && asm.written[j] === 0 && bytes < WRITE_RUN_BYTES) {
              const nx = push.chunks.get((asm.chunks[j] as Chunk).sha256) as ChunkNeed;
              if (nx.state !== 'have' || nx.src?.file !== src.file || nx.src.offset !== src.offset + bytes) break;
              bytes += (asm.chunks[j] as Chunk).bytes;
              j++;
            }
            const data = Buffer.allocUnsafe(bytes);
            const { bytesRead } = await (await read(src.file)).read(data, 0, bytes, src.offset);
            let at = 0;
            let good = bytesRead === bytes;
            for (let k = i; good && k < j; k++) {
              const c = asm.chunks[k] as Chunk;
              good = createHash('sha256').update(data.subarray(at, at + c.bytes)).digest('hex') === c.sha256;
              at += c.bytes;
              if (!good) this.log.warn({ category: 'hq.standby', event: 'checksum-mismatch', push: push.id, sha256: c.sha256 }, 'held chunk damaged');
            }
            if (!good) {
              // Damage here: nothing more is read from that file; its chunks are asked for.
              this.forget(push, src.file);
              complete = false;
              i = j;
              continue;
            }
            await writeAll(out, data, asm.offsets[i] as number);
            asm.written.fill(1, i, j);
            i = j;
          }
          if (complete) await out.sync();
        } finally {
          await out.close();
        }
        if (!complete || asm.written.includes(0)) {
          missing.push(blob.sha256);
          continue;
        }
        await link(asm.path, join(push.dir, 'blobs', blob.sha256));
        blob.received = blob.bytes;
        blob.done = true;
      }
    } finally {
      for (const fh of handles.values()) await fh.close().catch(() => undefined);
    }
    // A chunk wanted again is asked for again when its list comes again.
    for (const sha of missing) {
      for (const c of push.assemblies.get(sha)?.chunks ?? []) {
        const n = push.chunks.get(c.sha256);
        if (n !== undefined && n.state === 'wanted') n.asked = false;
      }
    }
    return missing;
  }

  /** Garbage collection: drops every chunk list no kept generation (of any tier) names. */
  private async collect(): Promise<number> {
    const referenced = new Set<string>();
    for (const t of TIERS) {
      const tierRoot = join(this.opts.standbyDir, t);
      for (const n of await listGenerations(tierRoot)) {
        const m = parseManifest(await readFile(join(tierRoot, n, 'MANIFEST.json'), 'utf8').catch(() => ''));
        // An unreadable generation keeps every list: a list is only a cache of its file.
        if (typeof m === 'string') return 0;
        for (const e of m.entries) referenced.add(e.sha256);
      }
    }
    return this.recipes.keepOnly(referenced);
  }

  /** Assembles, verifies and publishes the generation; serialized with every other commit. */
  commit(pushId: string): Promise<Ok<{ tier: Tier; generation: string; latest: string; received: number; linked: number }> | Refusal> {
    const run = () => this.commitNow(pushId);
    const p = this.commits.then(run, run);
    this.commits = p.catch(() => undefined);
    return p;
  }

  private async commitNow(pushId: string): Promise<Ok<{ tier: Tier; generation: string; latest: string; received: number; linked: number }> | Refusal> {
    const push = this.pushes.get(pushId);
    if (push === undefined || push.committing) return refuse('NO_PUSH');
    if (push.receiving) return refuse('BLOB_BUSY', 'a batch of chunks of this push is still being received');
    if (push.recipes > 0) return refuse('BLOB_BUSY', 'a chunk list of this push is still being received');
    push.committing = true;
    const m = push.manifest;
    try {
      // 0. Each file sent as chunks is assembled; what still lacks something is asked for.
      const missing = await this.assemble(push);
      if (missing.length > 0) {
        push.committing = false;
        return refuse('INCOMPLETE', `${missing.length} blobs are missing`, { missing });
      }
      // 1. The guard and the order again: another push may have been accepted meanwhile.
      const highest = await this.acceptedGeneration();
      const g = this.guard(await this.floor(), m.leaseGeneration) ?? (await this.unknownGeneration(m.leaseGeneration, false));
      if (g !== null) return await this.drop(push, g);
      const o = await this.order(m);
      if (o !== null) return await this.drop(push, o);
      // 2. Assemble in staging.
      const gen = join(push.dir, 'gen');
      await mkdirPrivate(gen);
      const made = new Set<string>([gen]);
      for (const e of m.entries) {
        const parts = e.path.split('/');
        let cur = gen;
        for (const part of parts.slice(0, -1)) {
          cur = join(cur, part);
          if (!made.has(cur)) {
            await mkdirPrivate(cur);
            made.add(cur);
          }
        }
        await link(join(push.dir, 'blobs', e.sha256), join(gen, e.path));
      }
      await writeFileNew(join(gen, 'MANIFEST.json'), formatManifest(m));
      await writeFileNew(join(gen, 'SHA256SUMS'), push.sums);
      // 3. Verify everything, as promote will.
      const check = await checkGenerationDir(gen, { generation: m.generation, tier: m.tier });
      if (!check.ok) {
        const healed = await this.heal(push);
        if (healed.length > 0) {
          await removeTree(gen);
          push.committing = false;
          return refuse('INCOMPLETE', `${healed.length} blobs held here were damaged; send them`, { missing: healed });
        }
        return await this.drop(push, refuse('CHECKSUM', check.reason));
      }
      for (const d of [...made].sort((a, b) => b.length - a.length)) await fsyncDir(d);
      // The chunk lists of the files assembled here, before the generation that names them is
      // published (an orphan is collected; a published file without a list only offers no chunks).
      for (const [sha, a] of push.assemblies) await this.recipes.put(sha, a.chunks);
      // 4. Raise the mark, publish the folder, move latest.
      if (highest !== null && m.leaseGeneration > highest) await writeAtomic(this.markFile, `${m.leaseGeneration}\n`);
      const tierRoot = join(this.opts.standbyDir, m.tier);
      await mkdirPrivate(tierRoot);
      await publishGeneration(tierRoot, m.generation, gen);
      await pruneGenerations(tierRoot, this.opts.keep[m.tier], m.generation);
      await this.collect();
      this.pushes.delete(push.id);
      await removeTree(push.dir);
      const linked = [...push.blobs.values()].filter((b) => b.linked).length;
      this.log.info({ category: 'hq.standby', event: 'generation-accepted', tier: m.tier, generation: m.generation, leaseGeneration: m.leaseGeneration, holder: m.holder }, 'generation accepted');
      return { ok: true, tier: m.tier, generation: m.generation, latest: m.generation, received: push.blobs.size - linked, linked };
    } catch (err) {
      await this.drop(push, null);
      throw err;
    }
  }

  /** Re-hashes the linked blobs; the damaged ones are removed and returned (to be sent). */
  private async heal(push: Push): Promise<string[]> {
    const bad: string[] = [];
    for (const b of push.blobs.values()) {
      if (!b.linked) continue;
      const p = join(push.dir, 'blobs', b.sha256);
      const h = await sha256File(p).catch(() => null);
      if (h === null || h.sha256 !== b.sha256) {
        await unlink(p).catch(() => undefined);
        // None of its chunks may be used to rebuild it (or anything else).
        this.forget(push, join(push.dir, 'src', b.sha256));
        b.done = false;
        b.linked = false;
        b.received = 0;
        bad.push(b.sha256);
      }
    }
    return bad;
  }

  private async drop<T>(push: Push, answer: T): Promise<T> {
    this.pushes.delete(push.id);
    await removeTree(push.dir);
    return answer;
  }

  /** Drops a push and everything it staged. */
  async abort(pushId: string): Promise<boolean> {
    const push = this.pushes.get(pushId);
    if (push === undefined || push.committing) return false;
    await this.drop(push, null);
    this.log.info({ category: 'hq.standby', event: 'push-aborted', push: pushId }, 'push aborted');
    return true;
  }

  async status(): Promise<StandbyStatus> {
    const tiers = [];
    for (const t of TIERS) tiers.push({ tier: t, ...(await tierListing(join(this.opts.standbyDir, t))) });
    return { acceptedGeneration: await this.acceptedGeneration(), pushes: this.pushes.size, tiers };
  }
}

/** Reads and writes of chunks are grouped up to this size: one system call per stretch, not per chunk. */
const WRITE_RUN_BYTES = 4 * 1024 * 1024;

/** Writes buffers back to back from `position` (one writev while it writes everything). */
async function writeAll(fh: FileHandle, data: Buffer | readonly Buffer[], position: number): Promise<void> {
  const bufs = Array.isArray(data) ? (data as readonly Buffer[]) : [data as Buffer];
  const total = bufs.reduce((n, b) => n + b.length, 0);
  let done = (await fh.writev(bufs as Buffer[], position)).bytesWritten;
  if (done >= total) return;
  const rest = Buffer.concat(bufs as Buffer[]);
  while (done < total) done += (await fh.write(rest, done, total - done, position + done)).bytesWritten;
}

function drain<T>(stream: Readable, answer: T): T {
  stream.resume();
  return answer;
}
