/**
 * The holder's side of a push: the manifest first; for each file the standby lacks (by sha256)
 * its chunk list, and then only the chunks the standby asks for, read from disk and sent in
 * batches of about `chunkBytes`; then the commit. A standby that does not take chunks (no
 * `chunked` in its answer) gets each missing file whole, in `chunkBytes` pieces. Every request
 * carries the peer token and has a deadline; an answer after it is never acted on. A failed
 * push is aborted (best effort) so the standby drops its staging at once instead of at expiry.
 */
import { createReadStream } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { request } from 'undici';
import { BASE_HEADER, GENERATION_RE, INLINE_MAX_BYTES, INLINE_TOTAL_BYTES, OFFSET_HEADER, REPLICATION_ERRORS, type Chunk, type Manifest, type ManifestEntry, PROTOCOL_HEADER, PROTOCOL_VERSION } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import { chunkFile, encodeRecipe } from './chunks.js';
import { RecipeStore } from './recipes.js';
import { diffEntries, encodeRecipeDelta } from './delta.js';

export interface PushOptions {
  /** The generation folder (outbox). */
  readonly dir: string;
  /** The standby agent's peer listener, e.g. `http://node-b.tailnet:8471`. */
  readonly baseUrl: string;
  readonly token: string;
  /** Per request. */
  readonly timeoutSeconds: number;
  /** Bytes per upload request (a batch of chunks, or a piece of a whole blob). */
  readonly chunkBytes: number;
}

export type PushResult =
  | {
      readonly ok: true;
      readonly tier: string;
      readonly generation: string;
      /** Bytes of the requests' bodies: manifest + sums + chunk lists + chunks (or whole blobs). */
      readonly sentBytes: number;
      /** Files the standby lacked (sent as chunk lists and the chunks it lacked, or whole). */
      readonly sentBlobs: number;
      readonly haveBlobs: number;
      /** Chunks sent (0 to a standby that takes whole blobs only). */
      readonly sentChunks: number;
    }
  | {
      readonly ok: false;
      /** `refused`: the standby said no (e.g. HQ_ERR_STALE_GENERATION); `unreachable`: no usable answer. */
      readonly kind: 'refused' | 'unreachable';
      readonly error: string | null;
      readonly message: string;
      readonly status: number | null;
      readonly sentBytes: number;
    };

export interface Answer {
  readonly status: number;
  readonly body: { [k: string]: unknown } | null;
}

export class Unreachable extends Error {}

/**
 * One request to a peer or the arbiter with the bearer token, answered within `timeoutSeconds`
 * whole (`Unreachable` otherwise); the body of the answer as an object when it is one.
 */
export async function call(
  opts: Pick<PushOptions, 'baseUrl' | 'token' | 'timeoutSeconds'>,
  method: 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: string | Buffer | NodeJS.ReadableStream | undefined,
  headers: Record<string, string>,
): Promise<Answer> {
  const ms = Math.max(1, Math.round(opts.timeoutSeconds * 1000));
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    const res = await request(opts.baseUrl.replace(/\/+$/, '') + path, {
      method,
      headers: { authorization: `Bearer ${opts.token}`, accept: 'application/json', [PROTOCOL_HEADER]: String(PROTOCOL_VERSION), ...headers },
      body: body as string | undefined,
      signal: controller.signal,
      headersTimeout: ms,
      bodyTimeout: ms,
    });
    const text = await res.body.text();
    if (controller.signal.aborted) throw new Unreachable(`no answer within ${opts.timeoutSeconds} s`);
    let parsed: { [k: string]: unknown } | null = null;
    try {
      const v: unknown = text === '' ? null : JSON.parse(text);
      parsed = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as { [k: string]: unknown }) : null;
    } catch {
      parsed = null;
    }
    return { status: res.statusCode, body: parsed };
  } catch (err) {
    if (err instanceof Unreachable) throw err;
    const e = err as { code?: string; message?: string };
    throw new Unreachable(controller.signal.aborted ? `no answer within ${opts.timeoutSeconds} s` : (e.code ?? e.message ?? 'error'));
  } finally {
    clearTimeout(timer);
  }
}

function refusal(a: Answer, sentBytes: number): PushResult {
  const error = typeof a.body?.['error'] === 'string' ? (a.body['error'] as string) : null;
  const message = typeof a.body?.['message'] === 'string' ? (a.body['message'] as string) : `HTTP ${a.status}`;
  return { ok: false, kind: a.status >= 500 && error === null ? 'unreachable' : 'refused', error, message, status: a.status, sentBytes };
}

/** Chunks to send are read from the file in stretches of this size, not one by one. */
const READ_RUN_BYTES = 4 * 1024 * 1024;

/** The manifest of the newest local generation of the tier before this one, or null. */
async function previousManifest(dir: string, m: Manifest): Promise<Manifest | null> {
  const names = (await readdir(dirname(dir)).catch(() => [] as string[])).filter((n) => GENERATION_RE.test(n) && n < m.generation).sort();
  const name = names.at(-1);
  if (name === undefined) return null;
  const prev = parseManifest(await readFile(join(dirname(dir), name, 'MANIFEST.json'), 'utf8').catch(() => ''));
  return typeof prev === 'string' || prev.tier !== m.tier ? null : prev;
}

/**
 * The small files that changed since the base (none without one: a first push has nothing to
 * save round trips on), up to `INLINE_TOTAL_BYTES`, as the begin body's `inline`.
 */
async function inlineFiles(dir: string, m: Manifest, base: Manifest | null): Promise<{ body: { inline?: { sha256: string; data: string }[] }; count: number }> {
  if (base === null) return { body: {}, count: 0 };
  const was = new Map(base.entries.map((e) => [e.path, e.sha256] as const));
  const seen = new Set<string>();
  const inline: { sha256: string; data: string }[] = [];
  let total = 0;
  for (const e of m.entries) {
    if (e.bytes > INLINE_MAX_BYTES || was.get(e.path) === e.sha256 || seen.has(e.sha256) || total + e.bytes > INLINE_TOTAL_BYTES) continue;
    inline.push({ sha256: e.sha256, data: (await readFile(join(dir, e.path))).toString('base64') });
    seen.add(e.sha256);
    total += e.bytes;
  }
  return inline.length === 0 ? { body: {}, count: 0 } : { body: { inline }, count: inline.length };
}

/** Pushes one generation folder. Never throws for a refusal or a network failure. */
export async function pushGeneration(opts: PushOptions): Promise<PushResult> {
  let sentBytes = 0;
  let manifest: Manifest;
  let sums: string;
  try {
    const m = parseManifest(await readFile(join(opts.dir, 'MANIFEST.json'), 'utf8'));
    if (typeof m === 'string') return { ok: false, kind: 'refused', error: REPLICATION_ERRORS.BAD_MANIFEST.code, message: m, status: null, sentBytes };
    manifest = m;
    sums = await readFile(join(opts.dir, 'SHA256SUMS'), 'utf8');
  } catch (err) {
    return { ok: false, kind: 'refused', error: null, message: `cannot read ${opts.dir}: ${(err as Error).message}`, status: null, sentBytes };
  }
  let push: string | null = null;
  try {
    // 1. Begin: the manifest as differences from the previous local generation (the standby most
    // likely keeps it), else whole; a standby that keeps no such base, or reads neither `base`
    // nor `commit` (an older one: 400), is asked again the plainer way.
    const base = await previousManifest(opts.dir, manifest);
    const diff = base === null ? null : diffEntries(base.entries, manifest.entries);
    const { entries: _entries, ...head } = manifest;
    const inline = await inlineFiles(opts.dir, manifest, base);
    const bodies = [
      ...(base !== null && diff !== null ? [{ base: base.generation, manifest: head, changed: diff.changed, removed: diff.removed, commit: true, ...inline.body }] : []),
      { manifest, sums, commit: true, ...inline.body },
      { manifest, sums },
    ];
    let begun: Answer | null = null;
    for (const b of bodies) {
      const body = JSON.stringify(b);
      sentBytes += Buffer.byteLength(body);
      begun = await call(opts, 'POST', '/v1/standby/pushes', body, { 'content-type': 'application/json' });
      if (begun.status !== 400 && begun.body?.['error'] !== REPLICATION_ERRORS.UNKNOWN_BASE.code) break;
    }
    if (begun === null || begun.status !== 200 || typeof begun.body?.['push'] !== 'string' || !Array.isArray(begun.body['missing'])) return refusal(begun as Answer, sentBytes);
    const inlined = begun.body['chunked'] === true ? inline.count : 0;
    if (typeof begun.body['committed'] === 'object' && begun.body['committed'] !== null) {
      // Nothing was missing: the standby committed at once.
      return { ok: true, tier: manifest.tier, generation: manifest.generation, sentBytes, sentBlobs: inlined, haveBlobs: typeof begun.body['have'] === 'number' ? begun.body['have'] : 0, sentChunks: 0 };
    }
    push = begun.body['push'] as string;
    const baseFiles = new Map((base?.entries ?? []).map((e) => [e.path, e] as const));
    const missing = new Set((begun.body['missing'] as unknown[]).filter((s): s is string => typeof s === 'string'));
    const byHash = new Map(manifest.entries.map((e) => [e.sha256, e] as const));
    const unknown = (sha: string): PushResult => ({ ok: false, kind: 'refused', error: null, message: `the standby asked for an unknown blob ${sha}`, status: null, sentBytes });
    const chunked = begun.body['chunked'] === true;
    const recipes = new RecipeStore(join(dirname(opts.dir), '.chunks'));
    let sentBlobs = inlined;
    let sentChunks = 0;
    const sent = new Set<string>();

    /** A file whole, in `chunkBytes` pieces at offsets (a standby that does not take chunks). */
    const sendWhole = async (e: ManifestEntry): Promise<PushResult | null> => {
      const path = join(opts.dir, e.path);
      let offset = 0;
      do {
        const len = Math.min(opts.chunkBytes, e.bytes - offset);
        const stream = len === 0 ? '' : createReadStream(path, { start: offset, end: offset + len - 1, highWaterMark: 1 << 20 });
        const a = await call(opts, 'PUT', `/v1/standby/pushes/${push}/blobs/${e.sha256}`, stream, {
          'content-type': 'application/octet-stream',
          'content-length': String(len),
          [OFFSET_HEADER]: String(offset),
        });
        sentBytes += len;
        if (a.status !== 200) return refusal(a, sentBytes);
        offset += len;
      } while (offset < e.bytes);
      return null;
    };

    /** Chunk lists of the files, then the chunks the standby asks for, in batches. */
    const sendChunked = async (entries: readonly ManifestEntry[]): Promise<PushResult | null> => {
      let batch: Buffer[] = [];
      let batchBytes = 0;
      const flush = async (): Promise<PushResult | null> => {
        if (batch.length === 0) return null;
        const body = Buffer.concat(batch);
        batch = [];
        batchBytes = 0;
        const a = await call(opts, 'PUT', `/v1/standby/pushes/${push}/chunks`, body, { 'content-type': 'application/octet-stream' });
        sentBytes += body.length;
        return a.status === 200 ? null : refusal(a, sentBytes);
      };
      for (const e of entries) {
        const path = join(opts.dir, e.path);
        let chunks: readonly Chunk[] | null = await recipes.get(e.sha256, e.bytes);
        if (chunks === null) {
          const c = await chunkFile(path, e.kind);
          if (c.sha256 !== e.sha256) return { ok: false, kind: 'refused', error: null, message: `${path} no longer matches its manifest entry`, status: null, sentBytes };
          chunks = c.chunks;
        }
        // The list as a delta from the one of the same path in the base, when that is shorter.
        const full = encodeRecipe(chunks);
        const was = baseFiles.get(e.path);
        const wasChunks = was === undefined || was.sha256 === e.sha256 ? null : await recipes.get(was.sha256, was.bytes);
        const delta = wasChunks === null ? null : encodeRecipeDelta(wasChunks, chunks);
        const url = `/v1/standby/pushes/${push}/recipes/${e.sha256}`;
        let a: Answer | null = null;
        if (delta !== null && was !== undefined && delta.length < full.length) {
          a = await call(opts, 'PUT', url, delta, { 'content-type': 'application/octet-stream', [BASE_HEADER]: was.sha256 });
          sentBytes += delta.length;
          if (a.status === 400 || a.body?.['error'] === REPLICATION_ERRORS.UNKNOWN_BASE.code) a = null;
        }
        if (a === null) {
          a = await call(opts, 'PUT', url, full, { 'content-type': 'application/octet-stream' });
          sentBytes += full.length;
        }
        if (a.status !== 200 || !Array.isArray(a.body?.['missing'])) return refusal(a, sentBytes);
        const offsets: number[] = [];
        let at = 0;
        for (const c of chunks) {
          offsets.push(at);
          at += c.bytes;
        }
        const fh = await open(path, 'r');
        try {
          for (const run of a.body['missing'] as unknown[]) {
            const [first, count] = Array.isArray(run) ? (run as unknown[]) : [];
            if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || (first as number) < 0 || (first as number) + (count as number) > chunks.length) {
              return { ok: false, kind: 'refused', error: null, message: `the standby asked for chunks outside the list of ${e.sha256}`, status: null, sentBytes };
            }
            const end = (first as number) + (count as number);
            for (let i = first as number; i < end; ) {
              // One read for a stretch of the run (up to 4 MiB), then each chunk of it.
              let j = i;
              let bytes = 0;
              while (j < end && (j === i || bytes < READ_RUN_BYTES)) bytes += (chunks[j++] as Chunk).bytes;
              const data = Buffer.allocUnsafe(bytes);
              const { bytesRead } = await fh.read(data, 0, bytes, offsets[i] as number);
              if (bytesRead !== bytes) return { ok: false, kind: 'refused', error: null, message: `${path} is shorter than its chunk list`, status: null, sentBytes };
              let at = 0;
              for (let k = i; k < j; k++) {
                const c = chunks[k] as Chunk;
                const slice = data.subarray(at, at + c.bytes);
                at += c.bytes;
                if (sent.has(c.sha256)) continue;
                batch.push(Buffer.from(c.sha256, 'hex'), slice);
                batchBytes += 32 + c.bytes;
                sent.add(c.sha256);
                sentChunks++;
                if (batchBytes >= opts.chunkBytes) {
                  const failed = await flush();
                  if (failed !== null) return failed;
                }
              }
              i = j;
            }
          }
        } finally {
          await fh.close();
        }
      }
      return flush();
    };

    const send = async (want: Iterable<string>): Promise<PushResult | null> => {
      const entries: ManifestEntry[] = [];
      for (const sha of want) {
        const e = byHash.get(sha);
        if (e === undefined) return unknown(sha);
        entries.push(e);
      }
      sentBlobs += entries.length;
      if (chunked) return sendChunked(entries);
      for (const e of entries) {
        const failed = await sendWhole(e);
        if (failed !== null) return failed;
      }
      return null;
    };
    const failed = await send(missing);
    if (failed !== null) return failed;
    let committed = await call(opts, 'POST', `/v1/standby/pushes/${push}/commit`, undefined, {});
    // The standby found something it held damaged: send those once more (a chunk list again
    // asks only for what is still missing), then commit again.
    for (let round = 0; round < 3 && committed.status === 409 && committed.body?.['error'] === REPLICATION_ERRORS.INCOMPLETE.code && Array.isArray(committed.body['missing']); round++) {
      const again = [...new Set((committed.body['missing'] as unknown[]).filter((s): s is string => typeof s === 'string'))];
      sent.clear();
      const failedAgain = await send(again);
      if (failedAgain !== null) return failedAgain;
      committed = await call(opts, 'POST', `/v1/standby/pushes/${push}/commit`, undefined, {});
    }
    if (committed.status !== 200) return refusal(committed, sentBytes);
    push = null;
    return {
      ok: true,
      tier: manifest.tier,
      generation: manifest.generation,
      sentBytes,
      sentBlobs,
      haveBlobs: typeof begun.body['have'] === 'number' ? (begun.body['have'] as number) : 0,
      sentChunks,
    };
  } catch (err) {
    return { ok: false, kind: 'unreachable', error: null, message: (err as Error).message, status: null, sentBytes };
  } finally {
    if (push !== null) await call(opts, 'DELETE', `/v1/standby/pushes/${push}`, undefined, {}).catch(() => undefined);
  }
}
