/**
 * A small S3 client for survival copies: credentials from the AWS environment or a profile
 * (`AWS_ACCESS_KEY_ID`…, `AWS_PROFILE`, `~/.aws/credentials`, `~/.aws/config`), requests signed
 * with `aws4` (SigV4) and sent with undici, both loaded only when a bucket is opened; PUT, GET,
 * DELETE and the listing of a prefix, each refused as an `S3Error` with S3's code.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
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
export async function awsIdentity(
  target: Pick<S3Target, 'region'>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<AwsIdentity | { readonly problem: string }> {
  const home = env['HOME'] ?? homedir();
  const profile = env['AWS_PROFILE'] ?? env['AWS_DEFAULT_PROFILE'] ?? 'default';
  const credFile = env['AWS_SHARED_CREDENTIALS_FILE'] ?? join(home, '.aws', 'credentials');
  const confFile = env['AWS_CONFIG_FILE'] ?? join(home, '.aws', 'config');
  const conf = await readIni(confFile);
  const confSection = conf.get(profile === 'default' ? 'default' : `profile ${profile}`) ?? conf.get(profile);
  const region =
    target.region ?? env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? confSection?.get('region') ?? 'us-east-1';
  const id = env['AWS_ACCESS_KEY_ID'];
  const secret = env['AWS_SECRET_ACCESS_KEY'];
  if (id !== undefined && id !== '' && secret !== undefined && secret !== '') {
    const token = env['AWS_SESSION_TOKEN'];
    return {
      credentials: { accessKeyId: id, secretAccessKey: secret, ...(token ? { sessionToken: token } : {}) },
      region,
      source: 'environment',
    };
  }
  for (const [file, section] of [
    [credFile, (await readIni(credFile)).get(profile)],
    [confFile, confSection],
  ] as const) {
    const k = section?.get('aws_access_key_id');
    const s = section?.get('aws_secret_access_key');
    if (k && s) {
      const token = section?.get('aws_session_token');
      return {
        credentials: { accessKeyId: k, secretAccessKey: s, ...(token ? { sessionToken: token } : {}) },
        region,
        source: `profile ${profile} (${file})`,
      };
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
    e.startsWith('#x') || e.startsWith('#X')
      ? String.fromCodePoint(parseInt(e.slice(2), 16))
      : e.startsWith('#')
        ? String.fromCodePoint(parseInt(e.slice(1), 10))
        : (XML_ENTITIES[e] ?? m),
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
      return {
        origin: endpoint.origin,
        host: endpoint.host,
        path: `${base}/${enc(this.target.bucket)}/${keyPath}${query}`,
      };
    }
    const host = `${this.target.bucket}.${endpoint.host}`;
    return { origin: `${endpoint.protocol}//${host}`, host, path: `${base}/${keyPath}${query}` };
  }

  async call(
    method: 'GET' | 'PUT' | 'DELETE',
    key: string,
    opts: { query?: string; body?: Body; bytes?: number; sha256?: string; headers?: Record<string, string> } = {},
  ): Promise<{
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: NodeJS.ReadableStream & { text(): Promise<string> };
  }> {
    const u = this.url(key, opts.query ?? '');
    const empty = createHash('sha256').update('').digest('hex');
    const headers: Record<string, string> = {
      ...(opts.headers ?? {}),
      'x-amz-content-sha256': opts.sha256 ?? empty,
      ...(opts.bytes === undefined ? {} : { 'content-length': String(opts.bytes) }),
    };
    const signed = this.sign(
      { host: u.host, path: u.path, method, service: 's3', region: this.id.region, headers },
      this.id.credentials,
    );
    try {
      const res = await this.request(`${u.origin}${u.path}`, {
        method,
        headers: signed.headers as Record<string, string>,
        body: (opts.body ?? (method === 'PUT' ? '' : undefined)) as string | undefined,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body as unknown as NodeJS.ReadableStream & { text(): Promise<string> },
      };
    } catch (err) {
      const e = err as { code?: string; message?: string };
      throw new S3Error(`${method} ${u.origin}: ${e.code ?? e.message ?? 'error'}`, null, null);
    }
  }

  /** The call, refused unless the status is one of `ok`; the body of a 2xx answer as text. */
  async expect(
    method: 'GET' | 'PUT' | 'DELETE',
    key: string,
    opts: Parameters<S3Bucket['call']>[2] = {},
    ok: readonly number[] = [200],
  ): Promise<{ status: number; text: string }> {
    const res = await this.call(method, key, opts);
    const text = await res.body.text().catch(() => '');
    if (!ok.includes(res.status)) {
      const code = tags(text, 'Code')[0] ?? null;
      const msg = tags(text, 'Message')[0] ?? null;
      throw new S3Error(
        `${method} ${key === '' ? this.target.bucket : key}: HTTP ${res.status}${code === null ? '' : ` ${code}`}${msg === null ? '' : `: ${msg}`}`,
        res.status,
        code,
      );
    }
    return { status: res.status, text };
  }

  /** Keys (and, with a delimiter, common prefixes) under a prefix, every page. */
  async list(prefix: string, delimiter?: string): Promise<{ keys: string[]; prefixes: string[] }> {
    const keys: string[] = [];
    const prefixes: string[] = [];
    let token: string | null = null;
    for (let page = 0; page < 10_000; page++) {
      const q = [
        `list-type=2`,
        `prefix=${enc(prefix)}`,
        ...(delimiter === undefined ? [] : [`delimiter=${enc(delimiter)}`]),
        ...(token === null ? [] : [`continuation-token=${enc(token)}`]),
      ];
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
    ...(target.sse === 'aws:kms' && target.kmsKeyId !== undefined
      ? { 'x-amz-server-side-encryption-aws-kms-key-id': target.kmsKeyId }
      : {}),
  };
}
