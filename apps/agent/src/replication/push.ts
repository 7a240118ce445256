/**
 * The holder's side of a push: the manifest first, then only the blobs the standby lacks (by
 * sha256), streamed from disk in chunks, then the commit. Every request carries the peer token
 * and has a deadline; an answer after it is never acted on. A failed push is aborted (best
 * effort) so the standby drops its staging at once instead of at expiry.
 */
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import { OFFSET_HEADER, REPLICATION_ERRORS, type Manifest } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';

export interface PushOptions {
  /** The generation folder (outbox). */
  readonly dir: string;
  /** The standby agent's peer listener, e.g. `http://node-b.tailnet:8471`. */
  readonly baseUrl: string;
  readonly token: string;
  /** Per request. */
  readonly timeoutSeconds: number;
  readonly chunkBytes: number;
}

export type PushResult =
  | {
      readonly ok: true;
      readonly tier: string;
      readonly generation: string;
      /** Bytes of the requests' bodies: manifest + sums + blob chunks. */
      readonly sentBytes: number;
      readonly sentBlobs: number;
      readonly haveBlobs: number;
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

interface Answer {
  readonly status: number;
  readonly body: { [k: string]: unknown } | null;
}

class Unreachable extends Error {}

async function call(
  opts: PushOptions,
  method: 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: string | NodeJS.ReadableStream | undefined,
  headers: Record<string, string>,
): Promise<Answer> {
  const ms = Math.max(1, Math.round(opts.timeoutSeconds * 1000));
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    const res = await request(opts.baseUrl.replace(/\/+$/, '') + path, {
      method,
      headers: { authorization: `Bearer ${opts.token}`, accept: 'application/json', ...headers },
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
    const body = JSON.stringify({ manifest, sums });
    sentBytes += Buffer.byteLength(body);
    const begun = await call(opts, 'POST', '/v1/standby/pushes', body, { 'content-type': 'application/json' });
    if (begun.status !== 200 || typeof begun.body?.['push'] !== 'string' || !Array.isArray(begun.body['missing'])) return refusal(begun, sentBytes);
    push = begun.body['push'] as string;
    const missing = new Set((begun.body['missing'] as unknown[]).filter((s): s is string => typeof s === 'string'));
    const byHash = new Map(manifest.entries.map((e) => [e.sha256, e] as const));
    let sentBlobs = 0;
    const send = async (want: Iterable<string>): Promise<PushResult | null> => {
      for (const sha of want) {
        const e = byHash.get(sha);
        if (e === undefined) return { ok: false, kind: 'refused', error: null, message: `the standby asked for an unknown blob ${sha}`, status: null, sentBytes };
        const path = join(opts.dir, e.path);
        let offset = 0;
        do {
          const len = Math.min(opts.chunkBytes, e.bytes - offset);
          const stream = len === 0 ? '' : createReadStream(path, { start: offset, end: offset + len - 1, highWaterMark: 1 << 20 });
          const a = await call(opts, 'PUT', `/v1/standby/pushes/${push}/blobs/${sha}`, stream, {
            'content-type': 'application/octet-stream',
            'content-length': String(len),
            [OFFSET_HEADER]: String(offset),
          });
          sentBytes += len;
          if (a.status !== 200) return refusal(a, sentBytes);
          offset += len;
        } while (offset < e.bytes);
        sentBlobs++;
      }
      return null;
    };
    const failed = await send(missing);
    if (failed !== null) return failed;
    let committed = await call(opts, 'POST', `/v1/standby/pushes/${push}/commit`, undefined, {});
    // The standby found a blob it held damaged: send those once more, then commit again.
    if (committed.status === 409 && committed.body?.['error'] === REPLICATION_ERRORS.INCOMPLETE.code && Array.isArray(committed.body['missing'])) {
      const again = await send((committed.body['missing'] as unknown[]).filter((s): s is string => typeof s === 'string'));
      if (again !== null) return again;
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
    };
  } catch (err) {
    return { ok: false, kind: 'unreachable', error: null, message: (err as Error).message, status: null, sentBytes };
  } finally {
    if (push !== null) await call(opts, 'DELETE', `/v1/standby/pushes/${push}`, undefined, {}).catch(() => undefined);
  }
}
