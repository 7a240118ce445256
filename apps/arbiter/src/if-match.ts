/**
 * The lease API's conditional writes: what an `If-Match` header asks for, and the answer when it
 * no longer holds. HTTP's part of the compare-and-swap; the arbiter shell checks it before and
 * after it decides.
 */

/** A lost compare-and-swap: an answer (412), not a fault, so it carries no stack trace. */
export class PreconditionFailed extends Error {
  readonly revision: number;
  constructor(revision: number) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`If-Match does not match the current revision ${revision}`);
    Error.stackTraceLimit = limit;
    this.revision = revision;
    this.name = 'PreconditionFailed';
  }
}

/**
 * True when no tag of `If-Match` can match `revision` or any later one: every tag is a
 * revision below it (revisions only rise), none is `*`. Such a request loses whatever is
 * decided before it, so it can be refused without waiting for the write lock.
 */
export function ifMatchStale(header: string, revision: number): boolean {
  for (const part of header.split(',')) {
    const m = /^(?:W\/)?"?(\d{1,16})"?$/.exec(part.trim());
    if (m === null || Number(m[1]) >= revision) return false;
  }
  return true;
}

/** `If-Match: "<revision>"` (also `W/"n"`, a bare n, a list, or `*`). */
export function ifMatchAccepts(header: string, revision: number): boolean {
  for (const part of header.split(',')) {
    const tag = part.trim();
    if (tag === '*') return true;
    const m = /^(?:W\/)?"?(\d{1,16})"?$/.exec(tag);
    if (m !== null && Number(m[1]) === revision) return true;
  }
  return false;
}
