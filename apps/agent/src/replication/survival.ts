/**
 * Survival copies: the survival subset of a generation (plan items marked `survival`, never a
 * secret — checked by the plan, again by `survivalSubset`, and a third time by the arbiter) goes
 * to the arbiter with the member token: each blob, then the subset manifest, which publishes it.
 */
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { formatSums, type Manifest, type ManifestEntry } from '@hq/protocol';
import { call, Unreachable, type Answer } from './push-call.js';

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
  const path = `/v1/survival/${opts.manifest.tier}/${opts.manifest.generation}`;
  const to = { baseUrl: opts.arbiterUrl, token: opts.token, timeoutSeconds: opts.timeoutSeconds };
  let sentBytes = 0;
  const refused = (a: Answer): SurvivalResult => ({
    ok: false,
    status: a.status,
    error: typeof a.body?.['error'] === 'string' ? a.body['error'] : null,
    message: typeof a.body?.['message'] === 'string' ? a.body['message'] : `HTTP ${a.status}`,
  });
  try {
    const sent = new Set<string>();
    for (const e of opts.entries) {
      if (sent.has(e.sha256)) continue;
      sent.add(e.sha256);
      const body = e.bytes === 0 ? '' : createReadStream(join(opts.dir, e.path));
      const a = await call(to, 'PUT', `${path}/blobs/${e.sha256}`, body, {
        'content-type': 'application/octet-stream',
        'content-length': String(e.bytes),
      });
      if (a.status !== 200) return refused(a);
      sentBytes += e.bytes;
    }
    const manifest: Manifest = { ...opts.manifest, entries: [...opts.entries] };
    const a = await call(to, 'PUT', path, JSON.stringify({ manifest, sums: formatSums(manifest.entries) }), {
      'content-type': 'application/json',
    });
    if (a.status !== 200) return refused(a);
    return { ok: true, files: opts.entries.length, sentBytes };
  } catch (err) {
    // An exchange that failed or ran out of time: nothing was refused, nothing to read.
    return {
      ok: false,
      status: null,
      error: null,
      message: err instanceof Unreachable ? err.message : ((err as { message?: string }).message ?? 'error'),
    };
  }
}
