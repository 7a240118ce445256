/**
 * The receiver's refusals: an entry of the protocol's replication catalog (`REPLICATION_ERRORS`
 * of @hq/protocol: stable codes callers match on, the HTTP status of the peer route) and a
 * one-line message.
 */
import { REPLICATION_ERRORS, type CatalogEntry, type ReplicationErrorName } from '@hq/protocol';

/** A refusal: the catalog entry and a one-line message (the entry's unless told). */
export interface Refusal {
  readonly ok: false;
  readonly error: CatalogEntry;
  readonly message: string;
  readonly extra?: { readonly [k: string]: unknown };
}

export function refuse(
  name: ReplicationErrorName,
  message?: string,
  extra?: { readonly [k: string]: unknown },
): Refusal {
  const error = REPLICATION_ERRORS[name];
  return extra === undefined
    ? { ok: false, error, message: message ?? error.message }
    : { ok: false, error, message: message ?? error.message, extra };
}
