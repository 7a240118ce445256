/**
 * The standby side of a push (SPEC §6, S7). A push is: `begin` with the manifest and SHA256SUMS
 * → the list of blobs (by sha256) this standby lacks → `putChunk` for each → `commit`.
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
 *     the local agent's seen generation, when given, is a floor under the mark);
 *     a push without a lease generation (0: the bootstrap before the first lease) only while
 *     nothing with one was accepted; within one lease generation a tier only moves forward;
 *  4. at most `keep[tier]` generations are kept; `latest` is never pruned.
 * Commits are serialized (one at a time); the guard is checked at `begin` and again at commit.
 */
import { constants } from 'node:fs';
import { link, lstat, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import { fsyncDir, mkdirPrivate, rand, readLatest, removeTree, swapLink, writeFileAtomic, writeFileNew } from './fsx.js';
import { refuse, type Refusal } from './errors.js';
import { formatManifest, GENERATION_RE, parseSums, SHA256_RE, sumsDisagreement, TIERS, type Manifest, type StandbyStatus, type Tier } from '@hq/protocol';
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

interface Push {
  readonly id: string;
  readonly manifest: Manifest;
  readonly sums: string;
  readonly dir: string;
  readonly blobs: Map<string, Blob>;
  lastActive: number;
  committing: boolean;
}

export type Ok<T> = { readonly ok: true } & T;

const quiet: ReceiverLog = { info: () => undefined, warn: () => undefined };

export class StandbyReceiver {
  private readonly pushes = new Map<string, Push>();
  private commits: Promise<unknown> = Promise.resolve();
  private readonly log: ReceiverLog;
  private readonly staging: string;
  private readonly markFile: string;

  private constructor(private readonly opts: ReceiverOptions) {
    this.log = opts.log ?? quiet;
    this.staging = join(opts.standbyDir, '.staging');
    this.markFile = join(opts.standbyDir, 'accepted-generation');
  }

  /** Creates the standby folders (0700) and wipes what an earlier life left in staging. */
  static async open(opts: ReceiverOptions): Promise<StandbyReceiver> {
    await mkdirPrivate(opts.standbyDir);
    const r = new StandbyReceiver(opts);
    await removeTree(r.staging);
    await mkdirPrivate(r.staging);
    for (const t of TIERS) await mkdirPrivate(join(opts.standbyDir, t));
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
    const name = await readLatest(join(tierRoot, 'latest'));
    if (name === null || !GENERATION_RE.test(name)) return null;
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
      let names: string[];
      try {
        names = (await readdir(tierRoot)).filter((n) => GENERATION_RE.test(n)).sort().reverse();
      } catch {
        continue;
      }
      for (const n of names) {
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
  async begin(body: { readonly manifest: unknown; readonly sums: unknown }): Promise<Ok<{ push: string; missing: string[]; have: number }> | Refusal> {
    const now = Date.now();
    await this.sweep(now);
    const m = checkManifest(body.manifest);
    if (typeof m === 'string') return refuse('BAD_MANIFEST', m);
    if (typeof body.sums !== 'string') return refuse('BAD_MANIFEST', 'sums must be the text of SHA256SUMS');
    const sums = parseSums(body.sums);
    if (!sums.ok) return refuse('BAD_MANIFEST', sums.reason);
    const dis = sumsDisagreement(m, sums.sums);
    if (dis !== null) return refuse('BAD_MANIFEST', `manifest/checksum list mismatch: ${dis}`);
    const g = this.guard(await this.floor(), m.leaseGeneration);
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
    const push: Push = { id, manifest: m, sums: body.sums, dir, blobs, lastActive: now, committing: false };
    this.pushes.set(id, push);
    const missing = [...blobs.values()].filter((b) => !b.done).map((b) => b.sha256);
    this.log.info({ category: 'hq.standby', event: 'push-begun', push: id, tier: m.tier, generation: m.generation, missing: missing.length, have }, 'push begun');
    return { ok: true, push: id, missing, have };
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
    push.lastActive = Date.now();
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
          push.lastActive = Date.now();
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
    const missing = [...push.blobs.values()].filter((b) => !b.done).map((b) => b.sha256);
    if (missing.length > 0) return refuse('INCOMPLETE', `${missing.length} blobs are missing`, { missing });
    push.committing = true;
    const m = push.manifest;
    try {
      // 1. The guard and the order again: another push may have been accepted meanwhile.
      const highest = await this.acceptedGeneration();
      const g = this.guard(await this.floor(), m.leaseGeneration);
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
      // 4. Raise the mark, publish the folder, move latest.
      if (highest !== null && m.leaseGeneration > highest) await writeFileAtomic(this.markFile, `${m.leaseGeneration}\n`);
      const tierRoot = join(this.opts.standbyDir, m.tier);
      await mkdirPrivate(tierRoot);
      await rename(gen, join(tierRoot, m.generation));
      await fsyncDir(tierRoot);
      await swapLink(join(tierRoot, 'latest'), m.generation);
      await this.prune(m.tier, m.generation);
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

  private async prune(tier: Tier, latest: string): Promise<void> {
    const tierRoot = join(this.opts.standbyDir, tier);
    const names = (await readdir(tierRoot)).filter((n) => GENERATION_RE.test(n)).sort();
    const keep = this.opts.keep[tier];
    for (const n of names.slice(0, Math.max(0, names.length - keep))) if (n !== latest) await removeTree(join(tierRoot, n));
  }

  async status(): Promise<StandbyStatus> {
    const tiers = [];
    for (const t of TIERS) {
      const tierRoot = join(this.opts.standbyDir, t);
      const names = await readdir(tierRoot).catch(() => [] as string[]);
      const latest = await readLatest(join(tierRoot, 'latest'));
      tiers.push({ tier: t, latest, generations: names.filter((n) => GENERATION_RE.test(n)).sort() });
    }
    return { acceptedGeneration: await this.acceptedGeneration(), pushes: this.pushes.size, tiers };
  }
}

function drain<T>(stream: Readable, answer: T): T {
  stream.resume();
  return answer;
}
