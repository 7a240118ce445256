/**
 * Survival copies in an S3-compatible bucket (AWS S3, MinIO, Backblaze B2, Ceph RGW), beside
 * the arbiter's, so that losing the arbiter's machine loses no survival copy.
 *
 * Layout under `{prefix}/{tier}/{generation}/`: `files/{path}` for each file of the survival
 * subset, `SHA256SUMS`, and `MANIFEST.json` written last, which publishes the generation (a
 * folder without it is an unfinished push and never counts). Guarantees:
 *  - every PUT asks for server-side encryption (`x-amz-server-side-encryption`, and the KMS key
 *    when one is named) and carries the file's sha256 as `x-amz-content-sha256`, so the server
 *    refuses a body that changed on the way;
 *  - no secret is sent: the subset is checked again here with the configured patterns and the
 *    default secret names (what the arbiter checks), and one secret refuses the whole copy
 *    before anything is sent;
 *  - a copy from a lower lease generation than the newest published one is refused (as the
 *    arbiter refuses it), so a holder back from a pause does not publish over its successor;
 *  - after a publish, only the newest `keep` published generations of the tier stay: older ones
 *    and unfinished ones are deleted, manifest first, so a half-deleted one never looks published;
 *  - `verifyS3` reads the newest published generation back and checks every file against the
 *    manifest.
 * Credentials come from the AWS environment or a profile, never from hq's config; the client
 * (signing, transport) is s3-bucket.ts, loaded only when a copy is sent or verified.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import {
  ERRORS,
  formatSums,
  GENERATION_RE,
  isSecretPath,
  parseSums,
  sumsDisagreement,
  type Manifest,
  type ManifestEntry,
  type Tier,
} from '@hq/protocol';
import type { S3Target } from './config.js';
import { awsIdentity, S3Bucket, S3Error, sseHeaders } from './s3-bucket.js';

export {
  awsIdentity,
  parseIni,
  S3Bucket,
  S3Error,
  sseHeaders,
  type AwsCredentials,
  type AwsIdentity,
} from './s3-bucket.js';

/** The tier's generations in the bucket, oldest first, and which of them are published (one listing). */
async function generations(b: S3Bucket, tier: Tier): Promise<{ name: string; published: boolean }[]> {
  const root = b.key(`${tier}/`);
  const { keys } = await b.list(root);
  const found = new Map<string, boolean>();
  for (const k of keys) {
    const [name, ...rest] = k.slice(root.length).split('/');
    if (name === undefined || !GENERATION_RE.test(name)) continue;
    found.set(name, found.get(name) === true || rest.join('/') === 'MANIFEST.json');
  }
  return [...found.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, published]) => ({ name, published }));
}

/** Deletes one generation: its manifest first (unpublished at once), then the rest. */
async function deleteGeneration(b: S3Bucket, tier: Tier, name: string): Promise<void> {
  const root = b.key(`${tier}/${name}/`);
  await b.expect('DELETE', `${root}MANIFEST.json`, {}, [200, 204, 404]);
  const { keys } = await b.list(root);
  for (const k of keys) await b.expect('DELETE', k, {}, [200, 204, 404]);
}

/**
 * Keeps the newest `keep` published generations of the tier and `current`; deletes every other
 * one (older published ones, unfinished ones). Returns the names deleted.
 */
export async function pruneS3(b: S3Bucket, tier: Tier, keep: number, current: string | null): Promise<string[]> {
  const all = await generations(b, tier);
  const kept = new Set(
    all
      .filter((g) => g.published)
      .map((g) => g.name)
      .slice(-keep),
  );
  const gone: string[] = [];
  for (const g of all) {
    if (kept.has(g.name) || g.name === current) continue;
    await deleteGeneration(b, tier, g.name);
    gone.push(g.name);
  }
  return gone;
}

export type S3SurvivalResult =
  | { readonly ok: true; readonly files: number; readonly sentBytes: number; readonly pruned: readonly string[] }
  | {
      readonly ok: false;
      /** `refused`: S3 said no (4xx) or the copy was refused here (a secret, no credentials); `unreachable`: no usable answer or 5xx. */
      readonly kind: 'refused' | 'unreachable';
      readonly status: number | null;
      readonly error: string | null;
      readonly message: string;
    };

/** The first entry that is a secret by the configured patterns or the default names, or null. */
export function secretEntry(entries: readonly ManifestEntry[], patterns: readonly RegExp[]): ManifestEntry | null {
  return entries.find((e) => isSecretPath(e.path, patterns) || isSecretPath(e.path)) ?? null;
}

function failure(err: unknown): S3SurvivalResult {
  if (err instanceof S3Error)
    return {
      ok: false,
      kind: err.status === null || err.status >= 500 ? 'unreachable' : 'refused',
      status: err.status,
      error: err.code,
      message: err.message,
    };
  return { ok: false, kind: 'unreachable', status: null, error: null, message: (err as Error).message ?? String(err) };
}

/**
 * Sends the survival subset of a generation to the bucket, publishes it, prunes the tier.
 * Never throws: a refusal carries the HTTP status, no usable answer has status null.
 */
export async function pushSurvivalS3(opts: {
  readonly dir: string;
  readonly manifest: Manifest;
  readonly entries: readonly ManifestEntry[];
  readonly target: S3Target;
  readonly secretPatterns: readonly RegExp[];
  readonly timeoutSeconds: number;
  readonly env?: NodeJS.ProcessEnv;
}): Promise<S3SurvivalResult> {
  const secret = secretEntry(opts.entries, opts.secretPatterns);
  if (secret !== null)
    return {
      ok: false,
      kind: 'refused',
      status: null,
      error: null,
      message: `${secret.path} is a secret and never goes to a survival copy`,
    };
  const id = await awsIdentity(opts.target, opts.env);
  if ('problem' in id) return { ok: false, kind: 'refused', status: null, error: null, message: id.problem };
  try {
    const b = await S3Bucket.open(opts.target, id, opts.timeoutSeconds);
    const m = opts.manifest;
    // A holder from an older lease (paused, then back) must not publish over its successor's
    // copies: the bucket has no compare-and-set, so the newest published manifest is read first.
    const newest = (await generations(b, m.tier)).filter((g) => g.published).at(-1);
    if (newest !== undefined) {
      const { parseManifest } = await import('@hq/protocol/schemas');
      const was = parseManifest((await b.expect('GET', b.key(`${m.tier}/${newest.name}/MANIFEST.json`))).text);
      if (typeof was !== 'string' && was.leaseGeneration > m.leaseGeneration) {
        return {
          ok: false,
          kind: 'refused',
          status: null,
          error: ERRORS.STALE_GENERATION.code,
          message: `the bucket holds ${newest.name} from lease generation ${was.leaseGeneration}, newer than this one (${m.leaseGeneration})`,
        };
      }
    }
    const root = `${m.tier}/${m.generation}`;
    const sse = sseHeaders(opts.target);
    let sentBytes = 0;
    for (const e of opts.entries) {
      await b.expect('PUT', b.key(`${root}/files/${e.path}`), {
        body: e.bytes === 0 ? '' : createReadStream(join(opts.dir, e.path)),
        bytes: e.bytes,
        sha256: e.sha256,
        headers: { ...sse, 'content-type': 'application/octet-stream' },
      });
      sentBytes += e.bytes;
    }
    const manifest: Manifest = { ...m, entries: [...opts.entries] };
    const put = async (name: string, text: string, type: string): Promise<void> => {
      const data = Buffer.from(text);
      await b.expect('PUT', b.key(`${root}/${name}`), {
        body: data,
        bytes: data.length,
        sha256: createHash('sha256').update(data).digest('hex'),
        headers: { ...sse, 'content-type': type },
      });
      sentBytes += data.length;
    };
    await put('SHA256SUMS', formatSums(manifest.entries), 'text/plain');
    await put('MANIFEST.json', `${JSON.stringify(manifest, null, 2)}\n`, 'application/json');
    const pruned = await pruneS3(b, m.tier, opts.target.keep[m.tier], m.generation);
    return { ok: true, files: opts.entries.length, sentBytes, pruned };
  } catch (err) {
    return failure(err);
  }
}

export interface S3TierVerification {
  readonly tier: Tier;
  readonly ok: boolean;
  readonly generation: string | null;
  readonly generations: number;
  readonly holder: string | null;
  readonly leaseGeneration: number | null;
  readonly entries: number | null;
  readonly checked: number;
  readonly reason: string | null;
}

/**
 * Reads the newest published generation of a tier back: the manifest (well formed, this tier
 * and generation, no secret), SHA256SUMS equal to it, and every file's size and sha256.
 */
export async function verifyS3Tier(
  b: S3Bucket,
  tier: Tier,
  secretPatterns: readonly RegExp[],
): Promise<S3TierVerification> {
  const base = {
    tier,
    ok: false,
    generation: null,
    generations: 0,
    holder: null,
    leaseGeneration: null,
    entries: null,
    checked: 0,
  };
  try {
    const all = (await generations(b, tier)).filter((g) => g.published);
    const name = all.at(-1)?.name;
    if (name === undefined) return { ...base, reason: `${tier}: no published generation in the bucket` };
    const info = { ...base, generation: name, generations: all.length };
    const root = `${tier}/${name}`;
    const { parseManifest } = await import('@hq/protocol/schemas');
    const m = parseManifest((await b.expect('GET', b.key(`${root}/MANIFEST.json`))).text);
    if (typeof m === 'string') return { ...info, reason: `${tier}: invalid manifest: ${m}` };
    const known = { ...info, holder: m.holder, leaseGeneration: m.leaseGeneration, entries: m.entries.length };
    if (m.generation !== name || m.tier !== tier)
      return { ...known, reason: `${tier}: manifest names ${m.tier} ${m.generation}, the folder is ${tier} ${name}` };
    const secret = secretEntry(m.entries, secretPatterns);
    if (secret !== null) return { ...known, reason: `${tier}: the copy holds a secret: ${secret.path}` };
    const sums = parseSums((await b.expect('GET', b.key(`${root}/SHA256SUMS`))).text);
    if (!sums.ok) return { ...known, reason: `${tier}: ${sums.reason}` };
    const disagreement = sumsDisagreement(m, sums.sums);
    if (disagreement !== null) return { ...known, reason: `${tier}: manifest/checksum list mismatch: ${disagreement}` };
    let checked = 0;
    for (const e of m.entries) {
      const res = await b.call('GET', b.key(`${root}/files/${e.path}`));
      if (res.status !== 200) {
        await res.body.text().catch(() => '');
        return { ...known, checked, reason: `${tier}: ${e.path}: HTTP ${res.status}` };
      }
      const h = createHash('sha256');
      let bytes = 0;
      for await (const c of res.body as AsyncIterable<Buffer>) {
        h.update(c);
        bytes += c.length;
      }
      if (h.digest('hex') !== e.sha256) return { ...known, checked, reason: `${tier}: checksum mismatch: ${e.path}` };
      if (bytes !== e.bytes) return { ...known, checked, reason: `${tier}: size mismatch: ${e.path}` };
      checked++;
    }
    return { ...known, checked, ok: true, reason: null };
  } catch (err) {
    return { ...base, reason: `${tier}: ${(err as Error).message}` };
  }
}

/** Verifies the given tiers; a missing credential is one failed line for each. */
export async function verifyS3(opts: {
  readonly target: S3Target;
  readonly tiers: readonly Tier[];
  readonly secretPatterns: readonly RegExp[];
  readonly timeoutSeconds: number;
  readonly env?: NodeJS.ProcessEnv;
}): Promise<S3TierVerification[]> {
  const id = await awsIdentity(opts.target, opts.env);
  if ('problem' in id) {
    return opts.tiers.map((tier) => ({
      tier,
      ok: false,
      generation: null,
      generations: 0,
      holder: null,
      leaseGeneration: null,
      entries: null,
      checked: 0,
      reason: id.problem,
    }));
  }
  const b = await S3Bucket.open(opts.target, id, opts.timeoutSeconds);
  const out: S3TierVerification[] = [];
  for (const t of opts.tiers) out.push(await verifyS3Tier(b, t, opts.secretPatterns));
  return out;
}

/** `hq-standby verify s3://bucket/prefix core=GEN(holder · ok 3/3 · 4 kept) OK`. */
export function formatS3Verification(target: S3Target, results: readonly S3TierVerification[]): string {
  const parts = results.map(
    (t) =>
      `${t.tier}=${t.generation ?? 'missing'}(${t.holder ?? '?'} · ok ${t.checked}/${t.entries ?? '?'} · ${t.generations} kept)`,
  );
  const bad = results.filter((t) => !t.ok).map((t) => t.reason ?? `${t.tier}: failed`);
  const where = `s3://${target.bucket}${target.prefix === '' ? '' : `/${target.prefix}`}`;
  return `hq-standby verify ${where} ${parts.join(' ')} ${bad.length === 0 ? 'OK' : `FAIL ${bad.join(', ')}`}`;
}
