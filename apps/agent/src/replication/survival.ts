/**
 * Survival copies: the survival subset of a generation (plan items marked `survival`, never a
 * secret — checked by the plan, again by `survivalSubset`, and a third time by the arbiter) goes
 * to the arbiter with the member token: each blob, then the subset manifest, which publishes it.
 */
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { formatSums, type Manifest, type ManifestEntry, PROTOCOL_HEADER, PROTOCOL_VERSION } from '@hq/protocol';

export type SurvivalResult =
  | { readonly ok: true; readonly files: number; readonly sentBytes: number }
  | { readonly ok: false; readonly status: number | null; readonly error: string | null; readonly message: string };

export async function pushSurvival(opts: {
  readonly dir: string;
  readonly manifest: Manifest;
  readonly entries: readonly ManifestEntry[];
  readonly arbiterUrl: string;
  readonly token: string;
  readonly timeoutSeconds: number;
}): Promise<SurvivalResult> {
  const base = `${opts.arbiterUrl.replace(/\/+$/, '')}/v1/survival/${opts.manifest.tier}/${opts.manifest.generation}`;
  const ms = Math.max(1, Math.round(opts.timeoutSeconds * 1000));
  const headers = { authorization: `Bearer ${opts.token}`, accept: 'application/json', [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) };
  let sentBytes = 0;
  const answer = async (res: Awaited<ReturnType<typeof request>>): Promise<SurvivalResult | null> => {
    const text = await res.body.text();
    if (res.statusCode === 200) return null;
    let b: { error?: unknown; message?: unknown } | null;
    try {
      b = JSON.parse(text) as { error?: unknown; message?: unknown } | null;
    } catch {
      b = null;
    }
    return {
      ok: false,
      status: res.statusCode,
      error: typeof b?.error === 'string' ? b.error : null,
      message: typeof b?.message === 'string' ? b.message : `HTTP ${res.statusCode}`,
    };
  };
  try {
    const sent = new Set<string>();
    for (const e of opts.entries) {
      if (sent.has(e.sha256)) continue;
      sent.add(e.sha256);
      const res = await request(`${base}/blobs/${e.sha256}`, {
        method: 'PUT',
        headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(e.bytes) },
        body: e.bytes === 0 ? '' : createReadStream(join(opts.dir, e.path)),
        headersTimeout: ms,
        bodyTimeout: ms,
      });
      const bad = await answer(res);
      if (bad !== null) return bad;
      sentBytes += e.bytes;
    }
    const manifest: Manifest = { ...opts.manifest, entries: [...opts.entries] };
    const res = await request(base, {
      method: 'PUT',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ manifest, sums: formatSums(manifest.entries) }),
      headersTimeout: ms,
      bodyTimeout: ms,
    });
    const bad = await answer(res);
    if (bad !== null) return bad;
    return { ok: true, files: opts.entries.length, sentBytes };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { ok: false, status: null, error: null, message: e.code ?? e.message ?? 'error' };
  }
}
