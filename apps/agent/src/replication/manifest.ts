/**
 * A generation's two index files and the rules every reader applies to them.
 *
 *  - `MANIFEST.json` {generation, tier, createdAt, source, host, leaseGeneration, holder,
 *    entries[{path, bytes, sha256, kind, reused}]};
 *  - `SHA256SUMS`: one `<64 hex>  <path>` line per entry, in manifest order, `sha256sum -c`
 *    compatible.
 *
 * A path is relative, `/`-separated, and may not climb (`..`), start at the root, hold a
 * backslash, a NUL or a newline, or name one of the two index files. Everything that reads a
 * path from a manifest or a sums file checks it here first.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import Type, { type Static } from 'typebox';
import Value from 'typebox/value';

export const TIERS = ['core', 'big', 'obs'] as const;
export type Tier = (typeof TIERS)[number];

export function isTier(v: unknown): v is Tier {
  return v === 'core' || v === 'big' || v === 'obs';
}

/** `YYYYMMDDTHHMMSSZ` (UTC). */
export const GENERATION_RE = /^[0-9]{8}T[0-9]{6}Z$/;
export const SHA256_RE = /^[0-9a-f]{64}$/;
export const INDEX_FILES: readonly string[] = ['MANIFEST.json', 'SHA256SUMS'];

/** The generation id of one clock reading (ms since the epoch). */
export function generationId(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.[0-9]+Z$/, 'Z');
}

/** Why a manifest path is unusable, or null. */
export function relPathProblem(p: unknown): string | null {
  if (typeof p !== 'string' || p === '') return 'must be a non-empty relative path';
  if (p.length > 1024) return 'is longer than 1024 characters';
  if (p.startsWith('/')) return 'must be relative (it starts with /)';
  if (/[\\\0\n\r]/.test(p)) return 'may not hold a backslash, NUL or newline';
  for (const part of p.split('/')) {
    if (part === '' || part === '.' || part === '..') return 'may not hold empty, "." or ".." components';
  }
  if (INDEX_FILES.includes(p)) return 'names an index file';
  return null;
}

const Entry = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 1024 }),
    bytes: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    kind: Type.Union([Type.Literal('sqlite'), Type.Literal('file')]),
    reused: Type.Boolean(),
  },
  { additionalProperties: false },
);

export const ManifestSchema = Type.Object(
  {
    generation: Type.String({ pattern: '^[0-9]{8}T[0-9]{6}Z$' }),
    tier: Type.Union([Type.Literal('core'), Type.Literal('big'), Type.Literal('obs')]),
    createdAt: Type.String({ minLength: 1, maxLength: 64 }),
    source: Type.String({ maxLength: 4096 }),
    host: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,31}$' }),
    leaseGeneration: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    holder: Type.Union([Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,31}$' }), Type.Null()]),
    entries: Type.Array(Entry, { maxItems: 100_000 }),
  },
  { additionalProperties: false },
);

export type Manifest = Static<typeof ManifestSchema>;
export type ManifestEntry = Static<typeof Entry>;

/** Checks a parsed manifest completely (schema, paths, duplicates, createdAt); a Manifest or the problem. */
export function checkManifest(v: unknown): Manifest | string {
  if (!Value.Check(ManifestSchema, v)) {
    const first = [...Value.Errors(ManifestSchema, v)][0];
    return `manifest ${first === undefined ? 'is invalid' : `${first.instancePath || '(top level)'} ${first.message}`}`;
  }
  const m = v as Manifest;
  if (!Number.isFinite(Date.parse(m.createdAt))) return 'manifest createdAt is not a date';
  const seen = new Set<string>();
  for (const e of m.entries) {
    const problem = relPathProblem(e.path);
    if (problem !== null) return `manifest path ${JSON.stringify(e.path)} ${problem}`;
    if (seen.has(e.path)) return `manifest lists ${JSON.stringify(e.path)} twice`;
    seen.add(e.path);
  }
  // A file and a directory of the same name cannot both exist.
  for (const p of seen) {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) if (seen.has(parts.slice(0, i).join('/'))) return `manifest path ${JSON.stringify(p)} lies under a listed file`;
  }
  return m;
}

export function parseManifest(text: string): Manifest | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'MANIFEST.json is not valid JSON';
  }
  return checkManifest(v);
}

export function formatManifest(m: Manifest): string {
  return `${JSON.stringify(m, null, 2)}\n`;
}

export function formatSums(entries: readonly ManifestEntry[]): string {
  return entries.map((e) => `${e.sha256}  ${e.path}\n`).join('');
}

export type SumsResult = { readonly ok: true; readonly sums: ReadonlyMap<string, string> } | { readonly ok: false; readonly reason: string };

/** Parses SHA256SUMS strictly: every line well formed, lower-case hex, no duplicates, safe paths. */
export function parseSums(text: string): SumsResult {
  const sums = new Map<string, string>();
  if (text === '') return { ok: true, sums };
  if (!text.endsWith('\n')) return { ok: false, reason: 'SHA256SUMS does not end with a newline' };
  const lines = text.slice(0, -1).split('\n');
  for (const [i, line] of lines.entries()) {
    const m = /^([0-9a-f]{64})  (.+)$/.exec(line);
    if (m === null) return { ok: false, reason: `SHA256SUMS line ${i + 1} is not "<sha256>  <path>"` };
    const path = m[2] as string;
    const problem = relPathProblem(path);
    if (problem !== null) return { ok: false, reason: `SHA256SUMS line ${i + 1}: path ${problem}` };
    if (sums.has(path)) return { ok: false, reason: `SHA256SUMS lists ${JSON.stringify(path)} twice` };
    sums.set(path, m[1] as string);
  }
  return { ok: true, sums };
}

/** Do the manifest and the sums file describe the same files with the same digests? null when they do. */
export function sumsDisagreement(m: Manifest, sums: ReadonlyMap<string, string>): string | null {
  if (sums.size !== m.entries.length) return `SHA256SUMS has ${sums.size} lines, the manifest ${m.entries.length} entries`;
  for (const e of m.entries) {
    const s = sums.get(e.path);
    if (s === undefined) return `SHA256SUMS does not list ${JSON.stringify(e.path)}`;
    if (s !== e.sha256) return `SHA256SUMS and the manifest disagree on ${JSON.stringify(e.path)}`;
  }
  return null;
}

export async function sha256File(path: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}
