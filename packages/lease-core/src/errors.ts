/**
 * The one error catalog. Every refusal hq reports over HTTP or the CLI has a stable `code`
 * (what callers match on), the HTTP status it maps to, and a one-line message. The decisions
 * in this package never throw for an expected refusal: they return `{ ok: false, reason }`
 * where `reason` is one of the `LeaseRefusal` values, and the shell maps it through here.
 */
export interface CatalogEntry {
  readonly code: string;
  readonly status: number;
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
  WRONG_HOST: entry('HQ_ERR_WRONG_HOST', 403, 'a member token may only act for its own machine'),
  NOT_FOUND: entry('HQ_ERR_NOT_FOUND', 404, 'no such resource'),
  HELD: entry('HQ_ERR_HELD', 409, 'the lease is held by another host'),
  NOT_HOLDER: entry('HQ_ERR_NOT_HOLDER', 409, 'this host does not hold the lease'),
  STALE_GENERATION: entry('HQ_ERR_STALE_GENERATION', 409, 'the generation is older than the current one'),
  EXPIRED: entry('HQ_ERR_EXPIRED', 409, 'the lease is expired or released'),
  NOT_CANDIDATE: entry('HQ_ERR_NOT_CANDIDATE', 409, 'the host is not a candidate'),
  SAME_HOLDER: entry('HQ_ERR_SAME_HOLDER', 409, 'the host already holds the lease'),
  TARGET_SILENT: entry('HQ_ERR_TARGET_SILENT', 409, 'the target has not heartbeat within its interval (force overrides)'),
  CONFLICT: entry('HQ_ERR_CONFLICT', 409, 'the request conflicts with the current state'),
  PRECONDITION: entry('HQ_ERR_PRECONDITION', 412, 'If-Match does not match the current revision'),
  TOO_LARGE: entry('HQ_ERR_TOO_LARGE', 413, 'the body is larger than 64 KiB'),
  UNSUPPORTED_MEDIA: entry('HQ_ERR_UNSUPPORTED_MEDIA', 415, 'the body must be application/json'),
  BAND_FULL: entry('HQ_ERR_BAND_FULL', 503, 'every port of the band is leased'),
  STORE_UNAVAILABLE: entry('HQ_ERR_STORE_UNAVAILABLE', 503, 'the store (etcd) did not answer: nothing was decided; try again or another arbiter'),
  NOT_ELECTED: entry('HQ_ERR_NOT_ELECTED', 503, 'no arbiter is elected to decide right now; try again shortly or another arbiter'),
  INTERNAL: entry('HQ_ERR_INTERNAL', 500, 'internal error'),
} satisfies Record<string, CatalogEntry>);

export type ErrorName = keyof typeof ERRORS;

/** The reasons a lease decision can refuse with, each mapped to its catalog entry. */
export type LeaseRefusal =
  | 'held'
  | 'not-holder'
  | 'stale-generation'
  | 'expired'
  | 'not-candidate'
  | 'same-holder'
  | 'target-silent'
  | 'no-holder';

// Keys are a closed set of literals (never host names), so a frozen object is safe here.
const REFUSALS: { readonly [K in LeaseRefusal]: CatalogEntry } = Object.freeze({
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
  return REFUSALS[reason];
}
