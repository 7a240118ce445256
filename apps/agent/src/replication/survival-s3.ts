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
 * Credentials come from the AWS environment or a profile (`AWS_ACCESS_KEY_ID`…, `AWS_PROFILE`,
 * `~/.aws/credentials`, `~/.aws/config`), never from hq's config. Signing is `aws4` (SigV4),
 * the transport undici, both loaded only when a copy is sent or verified.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ERRORS, formatSums, GENERATION_RE, isSecretPath, parseSums, sumsDisagreement, type Manifest, type ManifestEntry, type Tier } from '@hq/protocol';
import type { S3Target } from './config.js';

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Where credentials and the region were found, for messages (never the secret itself). */
export interface AwsIdentity {
  readonly credentials: AwsCredentials;
  readonly region: string;
  readonly source: string;
}

/** An INI file of the AWS CLI: section → key → value (comments and blank lines skipped). */
export function parseIni(text: string): Map<string, Map<string, string>> {
  const out = new Map<string, Map<string, string>>();
  let section: Map<string, string> | null = null;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const head = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (head !== null) {
      const name = head[1] as string;
      section = out.get(name) ?? new Map();
      out.set(name, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (section === null || eq < 0) continue;
    section.set(line.slice(0, eq).trim().toLowerCase(), line.slice(eq + 1).trim());
  }
  return out;
}

async function readIni(path: string): Promise<Map<string, Map<string, string>>> {
  try {
    return parseIni(await readFile(path, 'utf8'));
  } catch {
    return new Map();
  }
}

/**
 * The AWS chain as the CLI reads it, without the network: the environment's keys, else the
 * profile (`AWS_PROFILE`, else `default`) of the shared credentials file, else of the config
 * file. The region: the target's, else `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, else
 * us-east-1. Null and why when no keys are found.
 */
export async function awsIdentity(target: Pick<S3Target, 'region'>, env: NodeJS.ProcessEnv = process.env): Promise<AwsIdentity | { readonly problem: string }> {
  const home = env['HOME'] ?? homedir();
  const profile = env['AWS_PROFILE'] ?? env['AWS_DEFAULT_PROFILE'] ?? 'default';
  const credFile = env['AWS_SHARED_CREDENTIALS_FILE'] ?? join(home, '.aws', 'credentials');
  const confFile = env['AWS_CONFIG_FILE'] ?? join(home, '.aws', 'config');
  const conf = await readIni(confFile);
  const confSection = conf.get(profile === 'default' ? 'default' : `profile ${profile}`) ?? conf.get(profile);
  const region = target.region ?? env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? confSection?.get('region') ?? 'us-east-1';
  const id = env['AWS_ACCESS_KEY_ID'];
  const secret = env['AWS_SECRET_ACCESS_KEY'];
  if (id !== undefined && id !== '' && secret !== undefined && secret !== '') {
    const token = env['AWS_SESSION_TOKEN'];
    return { credentials: { accessKeyId: id, secretAccessKey: secret, ...(token ? { sessionToken: token } : {}) }, region, source: 'environment' };
  }
  for (const [file, section] of [
    [credFile, (await readIni(credFile)).get(profile)],
    [confFile, confSection],
  ] as const) {
    const k = section?.get('aws_access_key_id');
    const s = section?.get('aws_secret_access_key');
    if (k && s) {
      const token = section?.get('aws_session_token');
      return { credentials: { accessKeyId: k, secretAccessKey: s, ...(token ? { sessionToken: token } : {}) }, region, source: `profile ${profile} (${file})` };
    }
  }
  return {
    problem: `no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (AWS_PROFILE=${profile}) in ${credFile} or ${confFile}`,
  };
}

/** RFC 3986 encoding of one path segment or query value (what SigV4 signs). */
function enc(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
function unxml(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e: string) =>
    e.startsWith('#x') || e.startsWith('#X') ? String.fromCodePoint(parseInt(e.slice(2), 16)) : e.startsWith('#') ? String.fromCodePoint(parseInt(e.slice(1), 10)) : (XML_ENTITIES[e] ?? m),
  );
}
function tags(xml: string, name: string): string[] {
  return [...xml.matchAll(new RegExp(`<${name}>([\\s\\S]*?)</${name}>`, 'g'))].map((m) => unxml(m[1] as string));
}

/** An S3 refusal (HTTP status and the `<Code>` of its error body) or no usable answer (status null). */
export class S3Error extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string | null,
  ) {
    super(message);
  }
}

type Body = string | Buffer | NodeJS.ReadableStream;

/** One bucket, signed requests with deadlines. */
export class S3Bucket {
  private constructor(
    private readonly target: S3Target,
    private readonly id: AwsIdentity,
    private readonly sign: typeof import('aws4').sign,
    private readonly request: typeof import('undici').request,
    private readonly timeoutMs: number,
  ) {}

  static async open(target: S3Target, id: AwsIdentity, timeoutSeconds: number): Promise<S3Bucket> {
    const [aws4, undici] = await Promise.all([import('aws4'), import('undici')]);
    return new S3Bucket(target, id, aws4.default.sign, undici.request, Math.max(1, Math.round(timeoutSeconds * 1000)));
  }

  /** `{prefix}/{rest}`: the key of an object of this target. */
  key(rest: string): string {
    return this.target.prefix === '' ? rest : `${this.target.prefix}/${rest}`;
  }

  private url(key: string, query: string): { origin: string; host: string; path: string } {
    const endpoint = new URL(this.target.endpoint ?? `https://s3.${this.id.region}.amazonaws.com`);
    const keyPath = key === '' ? '' : key.split('/').map(enc).join('/');
    const base = endpoint.pathname.replace(/\/+$/, '');
    if (this.target.forcePathStyle) {
      return { origin: endpoint.origin, host: endpoint.host, path: `${base}/${enc(this.target.bucket)}/${keyPath}${query}` };
    }
    const host = `${this.target.bucket}.${endpoint.host}`;
    return { origin: `${endpoint.protocol}//${host}`, host, path: `${base}/${keyPath}${query}` };
  }

  async call(
    method: 'GET' | 'PUT' | 'DELETE',
    key: string,
    opts: { query?: string; body?: Body; bytes?: number; sha256?: string; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: NodeJS.ReadableStream & { text(): Promise<string> } }> {
    const u = this.url(key, opts.query ?? '');
    const empty = createHash('sha256').update('').digest('hex');
    const headers: Record<string, string> = {
      ...(opts.headers ?? {}),
      'x-amz-content-sha256': opts.sha256 ?? empty,
      ...(opts.bytes === undefined ? {} : { 'content-length': String(opts.bytes) }),
    };
    const signed = this.sign({ host: u.host, path: u.path, method, service: 's3', region: this.id.region, headers }, this.id.credentials);
    try {
      const res = await this.request(`${u.origin}${u.path}`, {
        method,
        headers: signed.headers as Record<string, string>,
        body: (opts.body ?? (method === 'PUT' ? '' : undefined)) as string | undefined,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      return { status: res.statusCode, headers: res.headers, body: res.body as unknown as NodeJS.ReadableStream & { text(): Promise<string> } };
    } catch (err) {
      const e = err as { code?: string; message?: string };
      throw new S3Error(`${method} ${u.origin}: ${e.code ?? e.message ?? 'error'}`, null, null);
    }
  }

  /** The call, refused unless the status is one of `ok`; the body of a 2xx answer as text. */
  async expect(method: 'GET' | 'PUT' | 'DELETE', key: string, opts: Parameters<S3Bucket['call']>[2] = {}, ok: readonly number[] = [200]): Promise<{ status: number; text: string }> {
    const res = await this.call(method, key, opts);
    const text = await res.body.text().catch(() => '');
    if (!ok.includes(res.status)) {
      const code = tags(text, 'Code')[0] ?? null;
      const msg = tags(text, 'Message')[0] ?? null;
      throw new S3Error(`${method} ${key === '' ? this.target.bucket : key}: HTTP ${res.status}${code === null ? '' : ` ${code}`}${msg === null ? '' : `: ${msg}`}`, res.status, code);
    }
    return { status: res.status, text };
  }

  /** Keys (and, with a delimiter, common prefixes) under a prefix, every page. */
  async list(prefix: string, delimiter?: string): Promise<{ keys: string[]; prefixes: string[] }> {
    const keys: string[] = [];
    const prefixes: string[] = [];
    let token: string | null = null;
    for (let page = 0; page < 10_000; page++) {
      const q = [`list-type=2`, `prefix=${enc(prefix)}`, ...(delimiter === undefined ? [] : [`delimiter=${enc(delimiter)}`]), ...(token === null ? [] : [`continuation-token=${enc(token)}`])];
      const { text } = await this.expect('GET', '', { query: `?${q.join('&')}` });
      for (const c of tags(text, 'Contents')) keys.push(...tags(c, 'Key'));
      for (const c of tags(text, 'CommonPrefixes')) prefixes.push(...tags(c, 'Prefix'));
      token = tags(text, 'IsTruncated')[0] === 'true' ? (tags(text, 'NextContinuationToken')[0] ?? null) : null;
      if (token === null) break;
    }
    return { keys, prefixes };
  }
}

/** The encryption headers every PUT carries. */
export function sseHeaders(target: Pick<S3Target, 'sse' | 'kmsKeyId'>): Record<string, string> {
  return {
    'x-amz-server-side-encryption': target.sse,
    ...(target.sse === 'aws:kms' && target.kmsKeyId !== undefined ? { 'x-amz-server-side-encryption-aws-kms-key-id': target.kmsKeyId } : {}),
  };
}

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
  return [...found.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, published]) => ({ name, published }));
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
  if (err instanceof S3Error) return { ok: false, kind: err.status === null || err.status >= 500 ? 'unreachable' : 'refused', status: err.status, error: err.code, message: err.message };
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
  if (secret !== null) return { ok: false, kind: 'refused', status: null, error: null, message: `${secret.path} is a secret and never goes to a survival copy` };
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
        return { ok: false, kind: 'refused', status: null, error: ERRORS.STALE_GENERATION.code, message: `the bucket holds ${newest.name} from lease generation ${was.leaseGeneration}, newer than this one (${m.leaseGeneration})` };
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
      await b.expect('PUT', b.key(`${root}/${name}`), { body: data, bytes: data.length, sha256: createHash('sha256').update(data).digest('hex'), headers: { ...sse, 'content-type': type } });
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
export async function verifyS3Tier(b: S3Bucket, tier: Tier, secretPatterns: readonly RegExp[]): Promise<S3TierVerification> {
  const base = { tier, ok: false, generation: null, generations: 0, holder: null, leaseGeneration: null, entries: null, checked: 0 };
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
    if (m.generation !== name || m.tier !== tier) return { ...known, reason: `${tier}: manifest names ${m.tier} ${m.generation}, the folder is ${tier} ${name}` };
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
    return opts.tiers.map((tier) => ({ tier, ok: false, generation: null, generations: 0, holder: null, leaseGeneration: null, entries: null, checked: 0, reason: id.problem }));
  }
  const b = await S3Bucket.open(opts.target, id, opts.timeoutSeconds);
  const out: S3TierVerification[] = [];
  for (const t of opts.tiers) out.push(await verifyS3Tier(b, t, opts.secretPatterns));
  return out;
}

/** `hq-standby verify s3://bucket/prefix core=GEN(holder · ok 3/3 · 4 kept) OK`. */
export function formatS3Verification(target: S3Target, results: readonly S3TierVerification[]): string {
  const parts = results.map((t) => `${t.tier}=${t.generation ?? 'missing'}(${t.holder ?? '?'} · ok ${t.checked}/${t.entries ?? '?'} · ${t.generations} kept)`);
  const bad = results.filter((t) => !t.ok).map((t) => t.reason ?? `${t.tier}: failed`);
  const where = `s3://${target.bucket}${target.prefix === '' ? '' : `/${target.prefix}`}`;
  return `hq-standby verify ${where} ${parts.join(' ')} ${bad.length === 0 ? 'OK' : `FAIL ${bad.join(', ')}`}`;
}
