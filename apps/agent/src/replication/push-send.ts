/**
 * Sending the files a standby lacks, within one push: to a standby that takes chunks, each
 * file's chunk list (as a delta from the same path's list in the base when that is shorter),
 * then only the chunks it asks for, read from disk in stretches and sent in batches of about
 * `chunkBytes` (a chunk shared by two files goes once); to one that does not, each file whole
 * in `chunkBytes` pieces at offsets.
 */
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  BASE_HEADER,
  OFFSET_HEADER,
  REPLICATION_ERRORS,
  type Chunk,
  type Manifest,
  type ManifestEntry,
} from '@hq/protocol';
import { chunkFile, encodeRecipe } from './chunks.js';
import { encodeRecipeDelta } from './delta.js';
import { call, refusal, type Answer, type PushOptions, type PushResult } from './push-call.js';
import { RecipeStore } from './recipes.js';

/** One push under way: the standby's id for it once begun, and what was sent so far. */
export interface PushSession {
  readonly opts: PushOptions;
  readonly manifest: Manifest;
  /** The standby's id of the push; null before begin and after the commit (nothing to abort). */
  push: string | null;
  /** The standby takes chunk lists and chunks (else whole files). */
  chunked: boolean;
  /** The base generation's entries by path (a chunk list is sent as a delta from the same path's). */
  baseFiles: ReadonlyMap<string, ManifestEntry>;
  readonly byHash: ReadonlyMap<string, ManifestEntry>;
  readonly recipes: RecipeStore;
  /** Chunks sent in this round (a chunk shared by two files goes once). */
  readonly sent: Set<string>;
  sentBytes: number;
  sentBlobs: number;
  sentChunks: number;
}

export function newSession(opts: PushOptions, manifest: Manifest): PushSession {
  return {
    opts,
    manifest,
    push: null,
    chunked: false,
    baseFiles: new Map(),
    byHash: new Map(manifest.entries.map((e) => [e.sha256, e] as const)),
    recipes: new RecipeStore(join(dirname(opts.dir), '.chunks')),
    sent: new Set(),
    sentBytes: 0,
    sentBlobs: 0,
    sentChunks: 0,
  };
}

/** Chunks to send are read from the file in stretches of this size, not one by one. */
const READ_RUN_BYTES = 4 * 1024 * 1024;

function failure(s: PushSession, message: string): PushResult {
  return { ok: false, kind: 'refused', error: null, message, status: null, sentBytes: s.sentBytes };
}

/** Sends the files named (by sha256); null when all went, else the failure. */
export async function sendMissing(s: PushSession, want: Iterable<string>): Promise<PushResult | null> {
  const entries: ManifestEntry[] = [];
  for (const sha of want) {
    const e = s.byHash.get(sha);
    if (e === undefined) return failure(s, `the standby asked for an unknown blob ${sha}`);
    entries.push(e);
  }
  s.sentBlobs += entries.length;
  if (s.chunked) return sendChunked(s, entries);
  for (const e of entries) {
    const failed = await sendWhole(s, e);
    if (failed !== null) return failed;
  }
  return null;
}

/** A file whole, in `chunkBytes` pieces at offsets (a standby that does not take chunks). */
async function sendWhole(s: PushSession, e: ManifestEntry): Promise<PushResult | null> {
  const path = join(s.opts.dir, e.path);
  let offset = 0;
  do {
    const len = Math.min(s.opts.chunkBytes, e.bytes - offset);
    const stream =
      len === 0 ? '' : createReadStream(path, { start: offset, end: offset + len - 1, highWaterMark: 1 << 20 });
    const a = await call(s.opts, 'PUT', `/v1/standby/pushes/${s.push}/blobs/${e.sha256}`, stream, {
      'content-type': 'application/octet-stream',
      'content-length': String(len),
      [OFFSET_HEADER]: String(offset),
    });
    s.sentBytes += len;
    if (a.status !== 200) return refusal(a, s.sentBytes);
    offset += len;
  } while (offset < e.bytes);
  return null;
}

/** Chunk lists of the files, then the chunks the standby asks for, in batches. */
async function sendChunked(s: PushSession, entries: readonly ManifestEntry[]): Promise<PushResult | null> {
  const batch = new ChunkBatch(s);
  for (const e of entries) {
    const path = join(s.opts.dir, e.path);
    let chunks: readonly Chunk[] | null = await s.recipes.get(e.sha256, e.bytes);
    if (chunks === null) {
      const c = await chunkFile(path, e.kind);
      if (c.sha256 !== e.sha256) return failure(s, `${path} no longer matches its manifest entry`);
      chunks = c.chunks;
    }
    const a = await sendRecipe(s, e, chunks);
    if (a.status !== 200 || !Array.isArray(a.body?.['missing'])) return refusal(a, s.sentBytes);
    const failed = await sendAsked(s, batch, e, path, chunks, a.body['missing'] as unknown[]);
    if (failed !== null) return failed;
  }
  return batch.flush();
}

/** A file's chunk list: as a delta from the one of the same path in the base when that is shorter, else whole. */
async function sendRecipe(s: PushSession, e: ManifestEntry, chunks: readonly Chunk[]): Promise<Answer> {
  const full = encodeRecipe(chunks);
  const was = s.baseFiles.get(e.path);
  const wasChunks = was === undefined || was.sha256 === e.sha256 ? null : await s.recipes.get(was.sha256, was.bytes);
  const delta = wasChunks === null ? null : encodeRecipeDelta(wasChunks, chunks);
  const url = `/v1/standby/pushes/${s.push}/recipes/${e.sha256}`;
  let a: Answer | null = null;
  if (delta !== null && was !== undefined && delta.length < full.length) {
    a = await call(s.opts, 'PUT', url, delta, {
      'content-type': 'application/octet-stream',
      [BASE_HEADER]: was.sha256,
    });
    s.sentBytes += delta.length;
    if (a.status === 400 || a.body?.['error'] === REPLICATION_ERRORS.UNKNOWN_BASE.code) a = null;
  }
  if (a === null) {
    a = await call(s.opts, 'PUT', url, full, { 'content-type': 'application/octet-stream' });
    s.sentBytes += full.length;
  }
  return a;
}

/** The runs of a file's chunks the standby asked for (`[first, count]`), read from the file and added to the batch. */
async function sendAsked(
  s: PushSession,
  batch: ChunkBatch,
  e: ManifestEntry,
  path: string,
  chunks: readonly Chunk[],
  runs: readonly unknown[],
): Promise<PushResult | null> {
  const offsets: number[] = [];
  let at = 0;
  for (const c of chunks) {
    offsets.push(at);
    at += c.bytes;
  }
  const fh = await open(path, 'r');
  try {
    for (const run of runs) {
      const [first, count] = Array.isArray(run) ? (run as unknown[]) : [];
      if (
        !Number.isSafeInteger(first) ||
        !Number.isSafeInteger(count) ||
        (first as number) < 0 ||
        (first as number) + (count as number) > chunks.length
      ) {
        return failure(s, `the standby asked for chunks outside the list of ${e.sha256}`);
      }
      const end = (first as number) + (count as number);
      for (let i = first as number; i < end; ) {
        // One read for a stretch of the run (up to 4 MiB), then each chunk of it.
        let j = i;
        let bytes = 0;
        while (j < end && (j === i || bytes < READ_RUN_BYTES)) bytes += (chunks[j++] as Chunk).bytes;
        const data = Buffer.allocUnsafe(bytes);
        const { bytesRead } = await fh.read(data, 0, bytes, offsets[i] as number);
        if (bytesRead !== bytes) return failure(s, `${path} is shorter than its chunk list`);
        let at = 0;
        for (let k = i; k < j; k++) {
          const c = chunks[k] as Chunk;
          const slice = data.subarray(at, at + c.bytes);
          at += c.bytes;
          const failed = await batch.add(c, slice);
          if (failed !== null) return failed;
        }
        i = j;
      }
    }
  } finally {
    await fh.close();
  }
  return null;
}

/** Chunks to send, each its raw sha256 then its bytes; sent when about `chunkBytes` are gathered. */
class ChunkBatch {
  private parts: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly s: PushSession) {}

  /** Adds a chunk not sent yet in this round; sends the batch when it is full. */
  async add(c: Chunk, data: Buffer): Promise<PushResult | null> {
    if (this.s.sent.has(c.sha256)) return null;
    this.parts.push(Buffer.from(c.sha256, 'hex'), data);
    this.bytes += 32 + c.bytes;
    this.s.sent.add(c.sha256);
    this.s.sentChunks++;
    return this.bytes >= this.s.opts.chunkBytes ? this.flush() : null;
  }

  async flush(): Promise<PushResult | null> {
    if (this.parts.length === 0) return null;
    const body = Buffer.concat(this.parts);
    this.parts = [];
    this.bytes = 0;
    const a = await call(this.s.opts, 'PUT', `/v1/standby/pushes/${this.s.push}/chunks`, body, {
      'content-type': 'application/octet-stream',
    });
    this.s.sentBytes += body.length;
    return a.status === 200 ? null : refusal(a, this.s.sentBytes);
  }
}
