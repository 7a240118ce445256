/**
 * S7 — the resource side checks the token. A write carrying generation g is accepted only when
 * g ≥ the highest generation this resource has accepted; accepting raises that mark. A write
 * from an old holder that kept running past its validity (a paused process, a partition) is
 * then refused by the resource itself, whatever the clocks said.
 *
 * This module is the decision only. The SQLite helper that stores the mark in a table of the
 * resource's own database (DDL, statements) is the shell subpath `@hq/lease-core/sqlite-guard`,
 * outside this package's pure root.
 */
export type GuardResult =
  | { readonly ok: true; readonly highest: number }
  | { readonly ok: false; readonly reason: 'stale-generation' | 'bad-generation'; readonly highest: number };

/** Parses a generation from a header or a file ("12", "12\n"); null when it is not one. */
export function parseGeneration(text: string | undefined | null): number | null {
  if (typeof text !== 'string') return null;
  const t = text.replace(/\r?\n$/, '');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : null;
}

/** The plain check: for HTTP headers (`X-HQ-Generation`), files, anything with a stored mark. */
export function checkGeneration(highest: number, incoming: unknown): GuardResult {
  if (typeof incoming !== 'number' || !Number.isSafeInteger(incoming) || incoming < 1) {
    return { ok: false, reason: 'bad-generation', highest };
  }
  if (incoming < highest) return { ok: false, reason: 'stale-generation', highest };
  return { ok: true, highest: incoming };
}
