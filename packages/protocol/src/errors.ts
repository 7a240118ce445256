/**
 * Every error code hq answers with (docs/PROTOCOL.md: `{ "error": "<code>", "message": "<one
 * line>" }`). Each entry has a stable `code` (what callers match on), the HTTP status it maps
 * to, and a one-line message. Three groups, by who answers: `ERRORS` (every API of both
 * daemons), `REPLICATION_ERRORS` (the standby receiver and the arbiter's survival route) and
 * `STREAM_ERRORS` (the arbiter's event stream). A code appears in one group only; a group may
 * reuse another's entry (the replication routes answer `HQ_ERR_STALE_GENERATION` too).
 *
 * Decisions never throw for an expected refusal: they return `{ ok: false, reason }`, and the
 * shell maps the reason through `refusalError` or `registryError` below.
 */
export interface CatalogEntry {
  readonly code: string;
  readonly status: number;
  readonly message: string;
}

/** The body of every refusal. */
export interface ErrorBody {
  readonly error: string;
  readonly message: string;
}

function entry(code: string, status: number, message: string): CatalogEntry {
  return Object.freeze({ code, status, message });
}

export const ERRORS = Object.freeze({
  BAD_REQUEST: entry('HQ_ERR_BAD_REQUEST', 400, 'the request is malformed'),
  UNKNOWN_ROLE: entry('HQ_ERR_UNKNOWN_ROLE', 400, 'the role is not one of the configured roles'),
  UNAUTHORIZED: entry('HQ_ERR_UNAUTHORIZED', 401, 'a valid bearer token is required'),
  FORBIDDEN: entry('HQ_ERR_FORBIDDEN', 403, 'the token may not do this'),
  JOIN_REFUSED: entry('HQ_ERR_JOIN_REFUSED', 401, 'the join bundle is unknown, used, expired or not for this host'),
  WRONG_HOST: entry('HQ_ERR_WRONG_HOST', 403, 'a member token may only act for its own machine'),
  NOT_FOUND: entry('HQ_ERR_NOT_FOUND', 404, 'no such resource'),
  METHOD_NOT_ALLOWED: entry(
    'HQ_ERR_METHOD_NOT_ALLOWED',
    405,
    'the path does not answer this method (the Allow header lists those it does)',
  ),
  HELD: entry('HQ_ERR_HELD', 409, 'the lease is held by another host'),
  NOT_HOLDER: entry('HQ_ERR_NOT_HOLDER', 409, 'this host does not hold the lease'),
  STALE_GENERATION: entry('HQ_ERR_STALE_GENERATION', 409, 'the generation is older than the current one'),
  EXPIRED: entry('HQ_ERR_EXPIRED', 409, 'the lease is expired or released'),
  NOT_CANDIDATE: entry('HQ_ERR_NOT_CANDIDATE', 409, 'the host is not a candidate'),
  SAME_HOLDER: entry('HQ_ERR_SAME_HOLDER', 409, 'the host already holds the lease'),
  TARGET_SILENT: entry(
    'HQ_ERR_TARGET_SILENT',
    409,
    'the target has not heartbeat within its interval (force overrides)',
  ),
  GENERATION_JUMP: entry(
    'HQ_ERR_GENERATION_JUMP',
    409,
    'the reported generation lies further above the highest one granted or learned than any real history goes; an admin may accept it (hq lease accept)',
  ),
  GENERATION_CEILING: entry(
    'HQ_ERR_GENERATION_CEILING',
    409,
    'the next generation would be above the generation ceiling: nothing was granted',
  ),
  CONFLICT: entry('HQ_ERR_CONFLICT', 409, 'the request conflicts with the current state'),
  PRECONDITION: entry('HQ_ERR_PRECONDITION', 412, 'If-Match does not match the current revision'),
  TOO_LARGE: entry('HQ_ERR_TOO_LARGE', 413, 'the body is larger than 64 KiB'),
  UNSUPPORTED_MEDIA: entry('HQ_ERR_UNSUPPORTED_MEDIA', 415, 'the body must be application/json'),
  BAND_FULL: entry('HQ_ERR_BAND_FULL', 503, 'every port of the band is leased'),
  STORE_UNAVAILABLE: entry(
    'HQ_ERR_STORE_UNAVAILABLE',
    503,
    'the store (etcd) did not answer: nothing was decided; try again or another arbiter',
  ),
  NOT_ELECTED: entry(
    'HQ_ERR_NOT_ELECTED',
    503,
    'no arbiter is elected to decide right now; try again shortly or another arbiter',
  ),
  PROTOCOL_VERSION: entry(
    'HQ_ERR_PROTOCOL_VERSION',
    400,
    'the request speaks a protocol version this side does not serve (hq-protocol header)',
  ),
  INTERNAL: entry('HQ_ERR_INTERNAL', 500, 'internal error'),
} satisfies Record<string, CatalogEntry>);

export type ErrorName = keyof typeof ERRORS;

/** The standby receiver's push routes (agent peer listener) and the arbiter's survival route. */
export const REPLICATION_ERRORS = Object.freeze({
  BAD_MANIFEST: entry('HQ_ERR_BAD_MANIFEST', 400, 'the manifest or its SHA256SUMS is malformed or they disagree'),
  STALE_GENERATION: ERRORS.STALE_GENERATION,
  BAD_GENERATION: entry('HQ_ERR_BAD_GENERATION', 400, 'the lease generation is not a positive integer'),
  UNKNOWN_GENERATION: entry(
    'HQ_ERR_UNKNOWN_GENERATION',
    409,
    'the lease generation is higher than any this standby has seen from the arbiter or its peers',
  ),
  GENERATION_EXISTS: entry('HQ_ERR_GENERATION_EXISTS', 409, 'this generation was already accepted'),
  OLDER_SNAPSHOT: entry(
    'HQ_ERR_OLDER_SNAPSHOT',
    409,
    'a newer generation of this tier was accepted under the same lease generation',
  ),
  NO_PUSH: entry('HQ_ERR_NO_PUSH', 404, 'no such push (finished, aborted or expired)'),
  UNEXPECTED_BLOB: entry('HQ_ERR_UNEXPECTED_BLOB', 409, 'this push does not need that blob'),
  OFFSET: entry('HQ_ERR_BLOB_OFFSET', 409, 'the chunk does not start where the received part ends'),
  BLOB_SIZE: entry('HQ_ERR_BLOB_SIZE', 400, 'the blob is longer than its manifest entry'),
  BLOB_BUSY: entry('HQ_ERR_BLOB_BUSY', 409, 'another chunk of this blob is being received'),
  CHECKSUM: entry('HQ_ERR_CHECKSUM', 422, 'a file does not match its sha256'),
  INCOMPLETE: entry('HQ_ERR_PUSH_INCOMPLETE', 409, 'blobs are still missing'),
  UNKNOWN_BASE: entry('HQ_ERR_UNKNOWN_BASE', 409, 'the standby keeps no base generation or chunk list of that name'),
  TOO_MANY_PUSHES: entry('HQ_ERR_TOO_MANY_PUSHES', 503, 'too many pushes are open'),
  UNAUTHORIZED: ERRORS.UNAUTHORIZED,
  UNSUPPORTED_MEDIA: ERRORS.UNSUPPORTED_MEDIA,
  INTERNAL: ERRORS.INTERNAL,
} satisfies Record<string, CatalogEntry>);

export type ReplicationErrorName = keyof typeof REPLICATION_ERRORS;

/** `GET /v1/events/stream`. */
export const STREAM_ERRORS = Object.freeze({
  TOO_MANY_STREAMS: entry('HQ_ERR_TOO_MANY_STREAMS', 503, 'too many event streams are open; try again later'),
} satisfies Record<string, CatalogEntry>);

/** Every entry once, in group order: what the table test and the reference hold to. */
export const CATALOG: readonly CatalogEntry[] = Object.freeze([
  ...new Set([...Object.values(ERRORS), ...Object.values(REPLICATION_ERRORS), ...Object.values(STREAM_ERRORS)]),
]);

// ---------------------------------------------------------------------------------------
// refusal reasons → entries. Keys are closed sets of literals (never host names), so frozen
// objects are safe here, and a new reason without an entry is a compile error.

/** The reasons a lease decision refuses with (the `reason` of a 409 and of a refused heartbeat). */
export const LEASE_REFUSALS = Object.freeze([
  'held',
  'not-holder',
  'stale-generation',
  'expired',
  'not-candidate',
  'same-holder',
  'target-silent',
  'no-holder',
] as const);

export type LeaseRefusal = (typeof LEASE_REFUSALS)[number];

const LEASE_REFUSAL_ERRORS: { readonly [K in LeaseRefusal]: CatalogEntry } = Object.freeze({
  held: ERRORS.HELD,
  'not-holder': ERRORS.NOT_HOLDER,
  'stale-generation': ERRORS.STALE_GENERATION,
  expired: ERRORS.EXPIRED,
  'not-candidate': ERRORS.NOT_CANDIDATE,
  'same-holder': ERRORS.SAME_HOLDER,
  'target-silent': ERRORS.TARGET_SILENT,
  'no-holder': ERRORS.CONFLICT,
});

export function refusalError(reason: LeaseRefusal): CatalogEntry {
  return LEASE_REFUSAL_ERRORS[reason];
}

/** The reasons a registry decision (resources, port leases) refuses with. */
export type RegistryRefusal = 'wrong-host' | 'wrong-owner' | 'id-taken' | 'wrong-id' | 'not-found' | 'band-full';

const REGISTRY_REFUSAL_ERRORS: { readonly [K in RegistryRefusal]: CatalogEntry } = Object.freeze({
  'wrong-host': ERRORS.WRONG_HOST,
  'wrong-owner': ERRORS.WRONG_HOST,
  'id-taken': ERRORS.CONFLICT,
  'wrong-id': ERRORS.CONFLICT,
  'not-found': ERRORS.NOT_FOUND,
  'band-full': ERRORS.BAND_FULL,
});

export function registryError(reason: RegistryRefusal): CatalogEntry {
  return REGISTRY_REFUSAL_ERRORS[reason];
}
