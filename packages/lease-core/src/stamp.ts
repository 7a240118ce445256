/**
 * Readings of the two clocks and the one rule for the time between them (A1): the larger of
 * the monotonic and the wall difference, so neither a suspended machine (monotonic stops) nor a
 * wall clock stepped back can make a validity last longer. A subpath of its own
 * (`@hq/lease-core/stamp`): `hq fence run` measures with it without loading the decisions.
 */

/** One reading of both clocks, in seconds. */
export interface Stamp {
  readonly wall: number;
  readonly mono: number;
}

/** Elapsed time between two readings: the larger of the two clocks (A1). */
export function elapsed(from: Stamp, to: Stamp): number {
  return Math.max(to.mono - from.mono, to.wall - from.wall);
}
