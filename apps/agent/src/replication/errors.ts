/**
 * The replication error catalog (the shape of lease-core's `ERRORS`): stable codes callers match
 * on, the HTTP status of the peer route, a one-line message.
 */
import { ERRORS, type CatalogEntry } from '@hq/lease-core';

function entry(code: string, status: number, message: string): CatalogEntry {
  return Object.freeze({ code, status, message });
}

export const REPLICATION_ERRORS = Object.freeze({
  BAD_MANIFEST: entry('HQ_ERR_BAD_MANIFEST', 400, 'the manifest or its SHA256SUMS is malformed or they disagree'),
  STALE_GENERATION: ERRORS.STALE_GENERATION,
  BAD_GENERATION: entry('HQ_ERR_BAD_GENERATION', 400, 'the lease generation is not a positive integer'),
  GENERATION_EXISTS: entry('HQ_ERR_GENERATION_EXISTS', 409, 'this generation was already accepted'),
  OLDER_SNAPSHOT: entry('HQ_ERR_OLDER_SNAPSHOT', 409, 'a newer generation of this tier was accepted under the same lease generation'),
  NO_PUSH: entry('HQ_ERR_NO_PUSH', 404, 'no such push (finished, aborted or expired)'),
  UNEXPECTED_BLOB: entry('HQ_ERR_UNEXPECTED_BLOB', 409, 'this push does not need that blob'),
  OFFSET: entry('HQ_ERR_BLOB_OFFSET', 409, 'the chunk does not start where the received part ends'),
  BLOB_SIZE: entry('HQ_ERR_BLOB_SIZE', 400, 'the blob is longer than its manifest entry'),
  BLOB_BUSY: entry('HQ_ERR_BLOB_BUSY', 409, 'another chunk of this blob is being received'),
  CHECKSUM: entry('HQ_ERR_CHECKSUM', 422, 'a file does not match its sha256'),
  INCOMPLETE: entry('HQ_ERR_PUSH_INCOMPLETE', 409, 'blobs are still missing'),
  TOO_MANY_PUSHES: entry('HQ_ERR_TOO_MANY_PUSHES', 503, 'too many pushes are open'),
  UNAUTHORIZED: ERRORS.UNAUTHORIZED,
  INTERNAL: ERRORS.INTERNAL,
} satisfies Record<string, CatalogEntry>);

export type ReplicationErrorName = keyof typeof REPLICATION_ERRORS;

/** A refusal: the catalog entry and a one-line message (the entry's unless told). */
export interface Refusal {
  readonly ok: false;
  readonly error: CatalogEntry;
  readonly message: string;
  readonly extra?: { readonly [k: string]: unknown };
}

export function refuse(name: ReplicationErrorName, message?: string, extra?: { readonly [k: string]: unknown }): Refusal {
  const error = REPLICATION_ERRORS[name];
  return extra === undefined ? { ok: false, error, message: message ?? error.message } : { ok: false, error, message: message ?? error.message, extra };
}
