/**
 * A file as a list of chunks addressed by their sha256, so a push sends only the chunks the
 * standby lacks.
 *
 * Guarantees:
 *  1. the same bytes always give the same chunks (no state beyond the file; the gear table is a
 *     constant derived from a fixed seed), so any two hosts agree;
 *  2. a SQLite file (`kind: 'sqlite'`, an online backup) is cut at every page (the page size read
 *     from the header: offset 16, big-endian, 1 = 65536), or every `SQLITE_CHUNK_BYTES` when pages
 *     are smaller: the backup writes pages in order, so an updated row changes its page's chunk;
 *  3. any other file (or a SQLite file whose header gives no valid page size) is cut where its
 *     content says (FastCDC: a gear rolling hash, normalized chunking), so an insertion moves
 *     the boundaries near it only and every later chunk is found again;
 *  4. the file's sha256 is computed in the same pass; chunks are 1 byte to `MAX_CHUNK_BYTES`,
 *     and only a file's last is under `MIN_CHUNK_BYTES`.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, RECIPE_RECORD_BYTES, type Chunk } from '@hq/protocol';

/**
 * SQLite chunks are one page, and at least 4 KiB (a 512-byte-page file is cut every 8 pages). A
 * page is the unit SQLite rewrites: one updated row changes one chunk; after VACUUM a page whose
 * rows stayed together is found again wherever it moved. Measured on a 200 MiB database
 * (docs/BENCH-replication.md): 64 KiB chunks sent 9 × the bytes for one updated row and 1.2 ×
 * rsync's after VACUUM (no 64 KiB group survives a shift by one page); pages cost a list of
 * 36 bytes per 4 KiB (0.9 %), which a push sends only as a delta from the base file's list.
 */
export const SQLITE_CHUNK_BYTES = 4 * 1024;
/** Content-defined chunks: at least 16 KiB (no cut is looked for before), about 64 KiB on average, at most 256 KiB. */
export const CDC_MIN_BYTES = 16 * 1024;
export const CDC_AVG_BYTES = 64 * 1024;
export const CDC_MAX_BYTES = 256 * 1024;
// Normalized chunking (FastCDC level 2): a harder mask (2 more bits than log2 avg) below the
// average size, an easier one (2 fewer) above, so sizes cluster near the average. The bits are
// the hash's top ones, which depend on the last 32 bytes.
const MASK_HARD = (0xffffffff << (32 - 18)) | 0;
const MASK_EASY = (0xffffffff << (32 - 14)) | 0;

/** 256 pseudo-random 32-bit words from a fixed seed (sha256 of `hq-gear-<i>`): part of the format. */
const GEAR: Int32Array = (() => {
  const g = new Int32Array(256);
  for (let i = 0; i < 256; i++) g[i] = createHash('sha256').update(`hq-gear-${i}`).digest().readInt32BE(0);
  return g;
})();

/** The page size a SQLite header states, or null when it is not a valid one. */
export function sqlitePageSize(header: Uint8Array): number | null {
  if (header.length < 18) return null;
  const v = (header[16] as number) * 256 + (header[17] as number);
  const size = v === 1 ? 65536 : v;
  return size >= 512 && size <= 65536 && (size & (size - 1)) === 0 ? size : null;
}

export interface FileChunks {
  readonly sha256: string;
  readonly bytes: number;
  readonly chunks: readonly Chunk[];
}

/** Chunks a stream of a file's bytes, fed in order with `update`. */
export class Chunker {
  private readonly file = createHash('sha256');
  private part: Hash = createHash('sha256');
  private partBytes = 0;
  private bytes = 0;
  private hash = 0;
  /** Fixed chunk size; null = content-defined; undefined = a SQLite file before its header. */
  private fixed: number | null | undefined;
  private head: Buffer[] = [];
  private readonly chunks: Chunk[] = [];

  constructor(kind: 'sqlite' | 'file') {
    this.fixed = kind === 'sqlite' ? undefined : null;
  }

  update(buf: Buffer): void {
    this.file.update(buf);
    this.bytes += buf.length;
    if (this.fixed !== undefined) {
      this.feed(buf);
      return;
    }
    this.head.push(buf);
    if (this.bytes >= 100) this.decide();
  }

  finish(): FileChunks {
    if (this.fixed === undefined) this.decide();
    if (this.partBytes > 0) this.cut();
    return { sha256: this.file.digest('hex'), bytes: this.bytes, chunks: this.chunks };
  }

  private decide(): void {
    const head = Buffer.concat(this.head);
    const page = sqlitePageSize(head);
    this.fixed = page === null ? null : Math.max(page, SQLITE_CHUNK_BYTES);
    this.head = [];
    this.feed(head);
  }

  private cut(): void {
    this.chunks.push({ sha256: this.part.digest('hex'), bytes: this.partBytes });
    this.part = createHash('sha256');
    this.partBytes = 0;
    this.hash = 0;
  }

  private feed(buf: Buffer): void {
    const fixed = this.fixed as number | null;
    const n = buf.length;
    if (fixed !== null) {
      for (let off = 0; off < n; ) {
        const take = Math.min(fixed - this.partBytes, n - off);
        this.part.update(buf.subarray(off, off + take));
        this.partBytes += take;
        off += take;
        if (this.partBytes === fixed) this.cut();
      }
      return;
    }
    let start = 0;
    let i = 0;
    let h = this.hash;
    while (i < n) {
      const len = this.partBytes + (i - start);
      if (len < CDC_MIN_BYTES) {
        i += Math.min(n - i, CDC_MIN_BYTES - len);
        continue;
      }
      h = ((h << 1) + (GEAR[buf[i] as number] as number)) | 0;
      i++;
      const size = len + 1;
      if (size >= CDC_MAX_BYTES || (h & (size < CDC_AVG_BYTES ? MASK_HARD : MASK_EASY)) === 0) {
        this.part.update(buf.subarray(start, i));
        this.partBytes += i - start;
        this.cut();
        h = 0;
        start = i;
      }
    }
    this.hash = h;
    if (start < n) {
      this.part.update(buf.subarray(start, n));
      this.partBytes += n - start;
    }
  }
}

/** Reads a file once: its sha256, size and chunks. */
export async function chunkFile(path: string, kind: 'sqlite' | 'file'): Promise<FileChunks> {
  const c = new Chunker(kind);
  for await (const buf of createReadStream(path, { highWaterMark: 1 << 20 })) c.update(buf as Buffer);
  return c.finish();
}

export function encodeRecipe(chunks: readonly Chunk[]): Buffer {
  const out = Buffer.allocUnsafe(chunks.length * RECIPE_RECORD_BYTES);
  chunks.forEach((c, i) => {
    out.write(c.sha256, i * RECIPE_RECORD_BYTES, 32, 'hex');
    out.writeUInt32BE(c.bytes, i * RECIPE_RECORD_BYTES + 32);
  });
  return out;
}

export type RecipeRead =
  | { readonly ok: true; readonly chunks: readonly Chunk[] }
  | { readonly ok: false; readonly reason: string };

/** Reads a chunk list strictly (record size, lengths, their total = the file's size). */
export function decodeRecipe(buf: Buffer, fileBytes: number): RecipeRead {
  if (buf.length % RECIPE_RECORD_BYTES !== 0)
    return { ok: false, reason: `a chunk list is a multiple of ${RECIPE_RECORD_BYTES} bytes, not ${buf.length}` };
  const n = buf.length / RECIPE_RECORD_BYTES;
  const chunks: Chunk[] = [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const at = i * RECIPE_RECORD_BYTES;
    const bytes = buf.readUInt32BE(at + 32);
    if (bytes === 0 || bytes > MAX_CHUNK_BYTES)
      return { ok: false, reason: `chunk ${i} is ${bytes} bytes (1 to ${MAX_CHUNK_BYTES})` };
    if (bytes < MIN_CHUNK_BYTES && i < n - 1)
      return { ok: false, reason: `chunk ${i} is ${bytes} bytes; only the last may be under ${MIN_CHUNK_BYTES}` };
    total += bytes;
    chunks.push({ sha256: buf.toString('hex', at, at + 32), bytes });
  }
  if (total !== fileBytes)
    return { ok: false, reason: `the chunks add up to ${total} bytes, the file is ${fileBytes}` };
  return { ok: true, chunks };
}

/** The runs `[first, count]` of the true flags. */
export function runsOf(flags: readonly boolean[]): [number, number][] {
  const runs: [number, number][] = [];
  for (let i = 0; i < flags.length; i++) {
    if (!flags[i]) continue;
    const last = runs.at(-1);
    if (last !== undefined && last[0] + last[1] === i) last[1]++;
    else runs.push([i, 1]);
  }
  return runs;
}
