/**
 * Standby replication: the manifest and its reader — the one every side applies (the
 * agent building and receiving generations, the arbiter taking survival copies) — and the
 * bodies of the standby's and the survival route's push endpoints.
 */
import Type from 'typebox';
// typebox/schema: what Value.Check and Value.Errors call, without the rest of typebox/value
// (140 more modules for a daemon to load, docs/BENCH.md "Where the idle agent's memory goes").
import Schema from 'typebox/schema';
import {
  GENERATION_RE,
  INLINE_MAX_BYTES,
  MAX_PATH_LENGTH,
  SHA256_RE,
  TIERS,
  relPathProblem,
  type Manifest,
} from '../replication.js';
import { Host, Literals } from './common.js';

const Tier = Literals(TIERS);
const GenerationId = Type.String({ pattern: GENERATION_RE.source });
const Sha256 = Type.String({ pattern: SHA256_RE.source });

export const ManifestEntrySchema = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: MAX_PATH_LENGTH }),
    bytes: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    sha256: Sha256,
    kind: Type.Union([Type.Literal('sqlite'), Type.Literal('file')]),
    reused: Type.Boolean(),
  },
  { additionalProperties: false },
);

export const ManifestSchema = Type.Object(
  {
    generation: GenerationId,
    tier: Tier,
    createdAt: Type.String({ minLength: 1, maxLength: 64 }),
    source: Type.String({ maxLength: 4096 }),
    host: Host,
    leaseGeneration: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    holder: Type.Union([Host, Type.Null()]),
    entries: Type.Array(ManifestEntrySchema, { maxItems: 100_000 }),
  },
  { additionalProperties: false },
);

/** Checks a parsed manifest completely (schema, paths, duplicates, createdAt); a Manifest or the problem. */
export function checkManifest(v: unknown): Manifest | string {
  if (!Schema.Check(ManifestSchema, v)) {
    const first = Schema.Errors(ManifestSchema, v)[1][0];
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
    for (let i = 1; i < parts.length; i++)
      if (seen.has(parts.slice(0, i).join('/'))) return `manifest path ${JSON.stringify(p)} lies under a listed file`;
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

/** A refusal of the push routes: `{error, message}` and what else it tells (`missing` blobs). */
export const RefusalBody = Type.Object(
  { error: Type.String(), message: Type.String() },
  { additionalProperties: true },
);

export const PushBody = Type.Object({ manifest: Type.Unknown(), sums: Type.String() }, { additionalProperties: false });
/**
 * `POST /v1/standby/pushes`: `{manifest, sums}` (the full manifest), or `{base, manifest, changed,
 * removed}` (its differences from a base generation); `commit` and `inline` with either. One object, not a
 * union (Fastify's Ajv strips properties while trying the branches of one).
 */
export const StandbyPushBody = Type.Object(
  {
    manifest: Type.Unknown(),
    sums: Type.Optional(Type.String()),
    base: Type.Optional(GenerationId),
    changed: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 100_000 })),
    removed: Type.Optional(Type.Array(Type.String(), { maxItems: 100_000 })),
    commit: Type.Optional(Type.Boolean()),
    inline: Type.Optional(
      Type.Array(
        Type.Object(
          { sha256: Sha256, data: Type.String({ maxLength: Math.ceil(INLINE_MAX_BYTES / 3) * 4 }) },
          { additionalProperties: false },
        ),
        { maxItems: 1000 },
      ),
    ),
  },
  { additionalProperties: false },
);
export const BaseHeaders = Type.Object({ 'x-hq-base': Type.Optional(Sha256) });
export const PushParams = Type.Object(
  { push: Type.String({ pattern: '^[0-9a-f]{24}$' }) },
  { additionalProperties: false },
);
export const BlobParams = Type.Object(
  { push: Type.String({ pattern: '^[0-9a-f]{24}$' }), sha256: Sha256 },
  { additionalProperties: false },
);
export const OffsetHeaders = Type.Object({
  'x-hq-offset': Type.Optional(Type.String({ pattern: '^(0|[1-9][0-9]{0,15})$' })),
});
export const PushCommitted = Type.Object({
  tier: Type.String(),
  generation: Type.String(),
  latest: Type.String(),
  received: Type.Integer(),
  linked: Type.Integer(),
});
export const PushBegun = Type.Object({
  push: Type.String(),
  missing: Type.Array(Type.String()),
  have: Type.Integer(),
  chunked: Type.Optional(Type.Boolean()),
  committed: Type.Optional(PushCommitted),
});
export const RecipeAccepted = Type.Object({
  missing: Type.Array(Type.Tuple([Type.Integer(), Type.Integer()])),
  have: Type.Integer(),
});
export const ChunkBatchReceived = Type.Object({ received: Type.Integer() });
export const ChunkReceived = Type.Object({ received: Type.Integer(), complete: Type.Boolean() });

/** `PUT /v1/survival/:tier/:generation`. */
export const SurvivalParams = Type.Object({ tier: Tier, generation: GenerationId }, { additionalProperties: false });
/** `PUT /v1/survival/:tier/:generation/blobs/:sha256`. */
export const SurvivalBlobParams = Type.Object(
  { tier: Tier, generation: GenerationId, sha256: Sha256 },
  { additionalProperties: false },
);

/** `PUT /v1/survival/:tier/:generation/blobs/:sha256` → 200. */
export const SurvivalBlobStoredAnswer = Type.Object(
  { stored: Type.Literal(true), bytes: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
/** `PUT /v1/survival/:tier/:generation` → 200. */
export const SurvivalCommittedAnswer = Type.Object(
  { generation: GenerationId, files: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
