/**
 * The one refusal style of every hq HTTP route (the arbiter's and both agent listeners): a
 * route, hook or plugin *throws* an `HttpError` made from a catalog entry of `@hq/protocol`
 * (`ERRORS`, `REPLICATION_ERRORS`, `STREAM_ERRORS`); the app's one error handler answers it with
 * the entry's status. The body is `{error, message}`, or — for a refusal that carries more (the
 * lease's 409 with the record, a replication refusal's detail, a run claim's reason) — the body
 * the refusal was made with, field for field as the contract shows it.
 */
import type { CatalogEntry } from '@hq/protocol';

/** A refusal's own body, when `{error, message}` is not all it says. */
export type RefusalBody = { readonly [k: string]: unknown };

export class HttpError extends Error {
  readonly statusCode: number;
  readonly code: string;
  /** The whole answer, when the refusal carries more than `{error, message}`; else null. */
  readonly body: RefusalBody | null;
  constructor(entry: CatalogEntry, message: string = entry.message, body: RefusalBody | null = null) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = entry.status;
    this.code = entry.code;
    this.body = body;
  }
}

/** The answer's body: the one the refusal carries, else `{error, message}` with `message` as `shape` writes it. */
export function refusalBody(err: HttpError, shape: (message: string) => string = (m) => m): RefusalBody {
  return err.body ?? { error: err.code, message: shape(err.message) };
}
