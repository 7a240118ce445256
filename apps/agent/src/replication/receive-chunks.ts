/**
 * A batch of chunks: each its raw sha256, then the bytes its chunk list gave. Each chunk is
 * hashed once whole, then written where the files being assembled need it, in runs (one write
 * per contiguous stretch of an assembly); a cut batch keeps the chunks it completed.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { refuse, type Refusal } from './errors.js';
import {
  drain,
  WRITE_RUN_BYTES,
  writeAll,
  type Assembly,
  type ChunkNeed,
  type Ok,
  type ReceiverState,
} from './receive-state.js';

export async function putChunks(
  st: ReceiverState,
  pushId: string,
  stream: Readable,
): Promise<Ok<{ received: number }> | Refusal> {
  const push = st.pushes.get(pushId);
  if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
  if (push.receiving)
    return drain(stream, refuse('BLOB_BUSY', 'another batch of chunks of this push is being received'));
  push.receiving = true;
  push.lastActive = st.clock.now();
  const frames = new ChunkFrames(push.chunks);
  let refusal: Refusal | null = null;
  const pending = new PendingWrites();
  try {
    for await (const piece of stream) {
      const buf = piece as Buffer;
      push.lastActive = st.clock.now();
      let off = 0;
      while (refusal === null && off < buf.length) {
        const step = frames.take(buf, off);
        off = step.off;
        refusal = step.refusal;
        if (step.done === null) continue;
        if (createHash('sha256').update(step.done.data).digest('hex') !== step.done.sha) {
          st.log.warn(
            { category: 'hq.standby', event: 'checksum-mismatch', push: pushId, sha256: step.done.sha },
            'chunk checksum mismatch',
          );
          refusal = refuse('CHECKSUM', `the chunk received as ${step.done.sha} does not hash to it`);
          continue;
        }
        await pending.add(step.done.need, step.done.data);
      }
    }
    await pending.flush();
    if (refusal !== null) return refusal;
    if (frames.midChunk)
      return refuse('BLOB_SIZE', `the batch ends inside chunk ${frames.current?.sha ?? '(its sha256)'}`);
    return { ok: true, received: pending.received };
  } catch (err) {
    // A cut connection: the chunks completed are kept, the one in flight is simply not.
    await pending.flush().catch(() => undefined);
    st.log.warn(
      { category: 'hq.standby', event: 'chunk-interrupted', push: pushId, sha256: frames.current?.sha ?? null, err },
      'chunk interrupted',
    );
    throw err;
  } finally {
    await pending.close();
    push.receiving = false;
  }
}

/** A chunk being received: its sha256, what the push needs of it, its bytes so far. */
interface InFlight {
  readonly sha: string;
  readonly need: ChunkNeed;
  readonly data: Buffer;
  pos: number;
}

/**
 * The framing of a batch — 32 bytes of raw sha256, then that chunk's bytes — over pieces of the
 * stream cut anywhere. A chunk that lies whole in one piece is not copied.
 */
class ChunkFrames {
  private header = Buffer.alloc(0);
  /** The chunk whose bytes are being read, if any. */
  current: InFlight | null = null;

  constructor(private readonly chunks: ReadonlyMap<string, ChunkNeed>) {}

  /** True when the stream so far ends inside a header or a chunk. */
  get midChunk(): boolean {
    return this.current !== null || this.header.length > 0;
  }

  /** Reads from `buf` at `at`: a whole chunk (`done`), a chunk the push does not need (`refusal`), or neither yet. */
  take(buf: Buffer, at: number): { off: number; done: InFlight | null; refusal: Refusal | null } {
    let off = at;
    let cur = this.current;
    if (cur === null) {
      let sha: string;
      if (this.header.length === 0 && off + 32 <= buf.length) {
        sha = buf.toString('hex', off, off + 32);
        off += 32;
      } else {
        const take = Math.min(32 - this.header.length, buf.length - off);
        this.header = Buffer.concat([this.header, buf.subarray(off, off + take)]);
        off += take;
        if (this.header.length < 32) return { off, done: null, refusal: null };
        sha = this.header.toString('hex');
        this.header = Buffer.alloc(0);
      }
      const need = this.chunks.get(sha);
      if (need === undefined || need.state !== 'wanted')
        return { off, done: null, refusal: refuse('UNEXPECTED_BLOB', `this push does not need chunk ${sha}`) };
      if (off + need.bytes <= buf.length) {
        cur = { sha, need, data: buf.subarray(off, off + need.bytes), pos: need.bytes };
        off += need.bytes;
      } else cur = { sha, need, data: Buffer.allocUnsafe(need.bytes), pos: 0 };
    } else {
      const take = Math.min(cur.data.length - cur.pos, buf.length - off);
      buf.copy(cur.data, cur.pos, off, off + take);
      cur.pos += take;
      off += take;
    }
    if (cur.pos < cur.data.length) {
      this.current = cur;
      return { off, done: null, refusal: null };
    }
    this.current = null;
    return { off, done: cur, refusal: null };
  }
}

/**
 * Whole, checked chunks not yet written: written in runs (one write per contiguous stretch of
 * an assembly), then marked; at most WRITE_RUN_BYTES held.
 */
class PendingWrites {
  /** Chunks written and marked `have` so far. */
  received = 0;
  private pending: { need: ChunkNeed; data: Buffer }[] = [];
  private readonly inPending = new Set<ChunkNeed>();
  private pendingBytes = 0;
  private readonly handles = new Map<string, FileHandle>();

  /** Queues a chunk a file still needs (once); writes the queue when it is long enough. */
  async add(need: ChunkNeed, data: Buffer): Promise<void> {
    if (need.targets.length === 0 || this.inPending.has(need)) return;
    this.inPending.add(need);
    this.pending.push({ need, data });
    this.pendingBytes += data.length;
    if (this.pendingBytes >= WRITE_RUN_BYTES) await this.flush();
  }

  async flush(): Promise<void> {
    const writes: { asm: Assembly; index: number; data: Buffer }[] = [];
    for (const p of this.pending)
      for (const t of p.need.targets) writes.push({ asm: t.asm, index: t.index, data: p.data });
    writes.sort((a, b) => (a.asm.path < b.asm.path ? -1 : a.asm.path > b.asm.path ? 1 : a.index - b.index));
    for (let i = 0; i < writes.length; ) {
      const w0 = writes[i] as (typeof writes)[number];
      let j = i + 1;
      while (
        j < writes.length &&
        writes[j]?.asm === w0.asm &&
        writes[j]?.index === (writes[j - 1]?.index as number) + 1
      )
        j++;
      let fh = this.handles.get(w0.asm.path);
      if (fh === undefined) {
        fh = await open(w0.asm.path, constants.O_WRONLY | constants.O_NOFOLLOW);
        this.handles.set(w0.asm.path, fh);
      }
      await writeAll(
        fh,
        writes.slice(i, j).map((w) => w.data),
        w0.asm.offsets[w0.index] as number,
      );
      for (const w of writes.slice(i, j)) w.asm.written[w.index] = 1;
      i = j;
    }
    for (const p of this.pending) {
      const first = p.need.targets[0] as ChunkNeed['targets'][number];
      p.need.src = { file: first.asm.path, offset: first.asm.offsets[first.index] as number };
      p.need.state = 'have';
      p.need.targets = [];
      this.received++;
    }
    this.pending = [];
    this.inPending.clear();
    this.pendingBytes = 0;
  }

  async close(): Promise<void> {
    for (const fh of this.handles.values()) await fh.close().catch(() => undefined);
  }
}
