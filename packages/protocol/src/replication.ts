/**
 * Standby replication: a generation's two index files, the rules every reader applies
 * to them, the secret names that never leave a host in a survival copy, and the push routes of
 * the standby (agent peer listener) and of the arbiter's survival copies.
 *
 *  - `MANIFEST.json` {generation, tier, createdAt, source, host, leaseGeneration, holder,
 *    entries[{path, bytes, sha256, kind, reused}]} (read it with `@hq/protocol/schemas`
 *    `checkManifest`);
 *  - `SHA256SUMS`: one `<64 hex>  <path>` line per entry, in manifest order, `sha256sum -c`
 *    compatible;
 *  - a file's chunk list (`encodeRecipe`): what a push sends of a file the standby lacks, so
 *    only the chunks it lacks follow
 *    (the agent's `replication/chunks.ts` writes and reads it).
 *
 * A path is relative, `/`-separated, and may not climb (`..`), start at the root, hold a
 * backslash, a NUL or a newline, or name one of the two index files. Everything that reads a
 * path from a manifest or a sums file checks it here first.
 */
import type { Host } from './host.js';

export const TIERS = Object.freeze(['core', 'big', 'obs'] as const);
export type Tier = (typeof TIERS)[number];

export function isTier(v: unknown): v is Tier {
  return (TIERS as readonly unknown[]).includes(v);
}

/** A generation id: `YYYYMMDDTHHMMSSZ` (UTC), one clock reading. */
export const GENERATION_RE = /^[0-9]{8}T[0-9]{6}Z$/;
export const SHA256_RE = /^[0-9a-f]{64}$/;
export const INDEX_FILES: readonly string[] = Object.freeze(['MANIFEST.json', 'SHA256SUMS']);
/** The longest path a manifest may list. */
export const MAX_PATH_LENGTH = 1024;

/** The generation id of one clock reading (ms since the epoch). */
export function generationId(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.[0-9]+Z$/, 'Z');
}

/** Why a manifest path is unusable, or null. */
export function relPathProblem(p: unknown): string | null {
  if (typeof p !== 'string' || p === '') return 'must be a non-empty relative path';
  if (p.length > MAX_PATH_LENGTH) return `is longer than ${MAX_PATH_LENGTH} characters`;
  if (p.startsWith('/')) return 'must be relative (it starts with /)';
  if (/[\\\0\n\r]/.test(p)) return 'may not hold a backslash, NUL or newline';
  for (const part of p.split('/')) {
    if (part === '' || part === '.' || part === '..') return 'may not hold empty, "." or ".." components';
  }
  if (INDEX_FILES.includes(p)) return 'names an index file';
  return null;
}

export interface ManifestEntry {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
  readonly kind: 'sqlite' | 'file';
  /** Hard-linked from the previous generation (unchanged SQLite file). */
  readonly reused: boolean;
}

export interface Manifest {
  readonly generation: string;
  readonly tier: Tier;
  readonly createdAt: string;
  readonly source: string;
  /** The host that built it. */
  readonly host: Host;
  /** The lease generation it was built under (S7: a receiver refuses a lower one). */
  readonly leaseGeneration: number;
  readonly holder: Host | null;
  readonly entries: readonly ManifestEntry[];
}

export function formatManifest(m: Manifest): string {
  return `${JSON.stringify(m, null, 2)}\n`;
}

export function formatSums(entries: readonly ManifestEntry[]): string {
  return entries.map((e) => `${e.sha256}  ${e.path}\n`).join('');
}

export type SumsResult =
  | { readonly ok: true; readonly sums: ReadonlyMap<string, string> }
  | { readonly ok: false; readonly reason: string };

/** Parses SHA256SUMS strictly: every line well formed, lower-case hex, no duplicates, safe paths. */
export function parseSums(text: string): SumsResult {
  const sums = new Map<string, string>();
  if (text === '') return { ok: true, sums };
  if (!text.endsWith('\n')) return { ok: false, reason: 'SHA256SUMS does not end with a newline' };
  const lines = text.slice(0, -1).split('\n');
  for (const [i, line] of lines.entries()) {
    const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
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
  if (sums.size !== m.entries.length)
    return `SHA256SUMS has ${sums.size} lines, the manifest ${m.entries.length} entries`;
  for (const e of m.entries) {
    const s = sums.get(e.path);
    if (s === undefined) return `SHA256SUMS does not list ${JSON.stringify(e.path)}`;
    if (s !== e.sha256) return `SHA256SUMS and the manifest disagree on ${JSON.stringify(e.path)}`;
  }
  return null;
}

// ---------------------------------------------------------------------------------------
// secrets

/**
 * The seeds' secret names (standby-snapshot `isSecretPath`), matched against the lower-cased
 * path: the agent's default `replication.secretPatterns`, and what the arbiter checks every
 * survival copy against (the third check, after the agent's plan and subset).
 */
export const DEFAULT_SECRET_PATTERNS: readonly string[] = Object.freeze([
  '(^|/)(secrets?|backup-key|acp-token)(/|$|\\.)',
  '(^|/)auth\\.json',
  '\\.(p8|pem|key|env)$',
  '(token|credential|password|session)[^/]*$',
]);

const DEFAULT_SECRETS: readonly RegExp[] = Object.freeze(DEFAULT_SECRET_PATTERNS.map((s) => new RegExp(s)));

/** Is this relative path a secret? (lower-cased, every pattern; the defaults unless told) */
export function isSecretPath(rel: string, patterns: readonly RegExp[] = DEFAULT_SECRETS): boolean {
  const lower = rel.toLowerCase();
  return patterns.some((p) => p.test(lower));
}

// ---------------------------------------------------------------------------------------
// the standby's push routes (agent peer listener, peer token)

/** `POST /v1/standby/pushes` and `PUT /v1/survival/:tier/:generation`: the manifest is read by `checkManifest`. */
export interface PushRequest {
  readonly manifest: unknown;
  readonly sums: string;
}

/**
 * `POST /v1/standby/pushes`, the manifest as its differences from a generation `base` of the same
 * tier the standby keeps: `manifest` without `entries`, the entries that differ (`changed`) and
 * the paths gone (`removed`); the entries are the base's with those applied, sorted by path, and
 * SHA256SUMS is made from them. `commit: true` (either form): commit at once when nothing is
 * missing (the answer then holds `committed`); `inline`: files sent with it, in either form.
 * Refused with HQ_ERR_UNKNOWN_BASE when the base is not kept.
 */
export interface PushDeltaRequest {
  readonly base: string;
  readonly manifest: unknown;
  readonly changed: readonly unknown[];
  readonly removed: readonly string[];
  readonly commit?: boolean;
  /** Small files sent with the manifest (base64), so a small change costs one round trip. */
  readonly inline?: readonly { readonly sha256: string; readonly data: string }[];
}

/** The largest file a push sends inline with its manifest; at most `INLINE_TOTAL_BYTES` of them in one. */
export const INLINE_MAX_BYTES = 16 * 1024;
export const INLINE_TOTAL_BYTES = 256 * 1024;

/** The header naming the base file of a chunk-list delta (`PUT …/recipes/:sha256`). */
export const BASE_HEADER = 'x-hq-base';

/**
 * `POST /v1/standby/pushes` → 200: the blobs the standby lacks (sha256s), and how many it has.
 * `chunked: true`: the standby takes each missing file as its chunk list and only the chunks it
 * lacks (below); a standby without it takes whole blobs only (`PUT …/blobs/:sha256`).
 */
export interface PushBegun {
  readonly push: string;
  readonly missing: readonly string[];
  readonly have: number;
  readonly chunked?: boolean;
  /** Committed at once (`commit: true` and nothing missing). */
  readonly committed?: PushCommitted;
}

// ---------------------------------------------------------------------------------------
// chunks: a file as the list of its pieces, each addressed by its sha256

/**
 * A chunk list ("recipe", `PUT /v1/standby/pushes/:push/recipes/:sha256`, the body
 * application/octet-stream) is one 36-byte record per chunk, in file order: the chunk's sha256
 * (32 raw bytes) and its length (uint32, big-endian). The lengths add up to the file's; every
 * chunk but the last is at least `MIN_CHUNK_BYTES` and none more than `MAX_CHUNK_BYTES`.
 */
export const RECIPE_RECORD_BYTES = 36;
/** The smallest SQLite page: no chunk but a file's last is shorter. */
export const MIN_CHUNK_BYTES = 512;
/** The largest chunk either side accepts (the largest SQLite page is 64 KiB, content-defined chunks stop at 256 KiB). */
export const MAX_CHUNK_BYTES = 1024 * 1024;

export interface Chunk {
  readonly sha256: string;
  readonly bytes: number;
}

/** `PUT /v1/standby/pushes/:push/recipes/:sha256` → 200: the chunks to send, as `[first index, count]` runs of the list. */
export interface RecipeAccepted {
  readonly missing: readonly (readonly [number, number])[];
  /** Chunks of this list the standby holds or was already sent in this push. */
  readonly have: number;
}

/**
 * `PUT /v1/standby/pushes/:push/chunks` (application/octet-stream): chunks back to back, each its
 * sha256 (32 raw bytes) then its bytes (the length its chunk list gave) → 200.
 */
export interface ChunkBatchReceived {
  readonly received: number;
}

/** The header of a blob chunk's start offset (`PUT …/blobs/:sha256`). */
export const OFFSET_HEADER = 'x-hq-offset';

/** `PUT /v1/standby/pushes/:push/blobs/:sha256` → 200. */
export interface ChunkReceived {
  readonly received: number;
  readonly complete: boolean;
}

/** `POST /v1/standby/pushes/:push/commit` → 200. */
export interface PushCommitted {
  readonly tier: string;
  readonly generation: string;
  readonly latest: string;
  readonly received: number;
  readonly linked: number;
}

/** `DELETE /v1/standby/pushes/:push` → 200. */
export interface PushAborted {
  readonly aborted: boolean;
}

/** One tier of a standby or survival store. */
export interface TierGenerations {
  readonly tier: Tier;
  readonly latest: string | null;
  readonly generations: readonly string[];
}

/** `GET /v1/standby` → 200. */
export interface StandbyStatus {
  readonly acceptedGeneration: number | null;
  readonly pushes: number;
  readonly tiers: readonly TierGenerations[];
}

// ---------------------------------------------------------------------------------------
// the arbiter's survival copies (member token)

/** `PUT /v1/survival/:tier/:generation/blobs/:sha256` → 200. */
export interface SurvivalBlobStored {
  readonly stored: true;
  readonly bytes: number;
}

/** `PUT /v1/survival/:tier/:generation` → 200: the generation is published. */
export interface SurvivalCommitted {
  readonly generation: string;
  readonly files: number;
}

/** `GET /v1/survival` → 200. */
export interface SurvivalList {
  readonly machines: readonly { readonly machine: Host; readonly tiers: readonly TierGenerations[] }[];
}
