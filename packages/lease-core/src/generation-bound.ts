/**
 * How far one report may raise the arbiter's generation floor, and the ceiling no grant crosses.
 *
 * A reported generation — an agent's seen generation, or the generation it renews, releases or
 * steps down from — is evidence from a member that may be broken or hostile. The arbiter raises
 * its floor to it (S1) and grants above the floor, so one report near 2^53 used to end the
 * fleet: the next grants left the safe integers, two holders got the same generation, and every
 * agent refused the record for good. The shell runs every decision's step through
 * `boundRefusal` before it is written:
 *
 *  B1  no step writes a generation above `ceiling` (the decision is refused, nothing is written);
 *  B2  no step raises the floor above `ceiling`, nor more than `maxJump` above `known`: the
 *      highest generation the arbiter granted or durably learned before the step (the record's
 *      generation and the stored floor). A refused step is not written at all, so its report
 *      counts for nothing: a floor pending after a lost database stays pending, and no grant of
 *      that life lets its holder run, until the report is accepted;
 *  B3  only an admin's explicit acceptance (`acceptGeneration`) raises the floor further, never
 *      to the ceiling itself (a floor there would leave nothing to grant).
 *
 * Why `maxJump` is 2^20 (1,048,576): above `known` lie only generations granted since the
 * arbiter's state was saved, which needs a restored backup or a lost database. One change of
 * holder is one generation, and a real fleet changes holder a few times a day; even a test fleet
 * failing over every 15 s for a year stays below 2^21. A lost database (known = 0) with agents
 * reporting any real history up to a million changes of holder therefore recovers by itself, as
 * before. The cost of a bound this wide: a hostile member can still raise the floor by one jump
 * per request, so reaching the ceiling takes it 2^28 accepted reports — hours of requests the
 * log and the metric show — where one request used to be enough. A real jump beyond the bound
 * (an installation older than a million changes of holder losing its database) waits for an
 * admin, who sees the refused report on the status page and in `hq doctor`.
 */
import { GENERATION_CEILING, type Host } from '@hq/protocol';
import type { ArbiterState, Context, Step } from './arbiter.js';
import { leaseEvent } from './events.js';

/** How far above the highest granted or learned generation one report may raise the floor. */
export const MAX_REPORT_JUMP = 2 ** 20;

export interface GenerationLimits {
  /** No generation above this is ever written. */
  readonly ceiling: number;
  /** No report raises the floor more than this above `knownGeneration`. */
  readonly maxJump: number;
}

export const GENERATION_LIMITS: GenerationLimits = Object.freeze({
  ceiling: GENERATION_CEILING,
  maxJump: MAX_REPORT_JUMP,
});

export type GenerationRefusal =
  /** A report would raise the floor to `reported`, above `limit` (= min(known + maxJump, ceiling)). */
  | { readonly kind: 'report-jump'; readonly reported: number; readonly known: number; readonly limit: number }
  /** The step would write `generation`, above the ceiling: no grant is made. */
  | { readonly kind: 'ceiling'; readonly generation: number; readonly ceiling: number };

/** The highest generation the arbiter granted or durably learned: what a report is measured against. */
export function knownGeneration(state: ArbiterState): number {
  return Math.max(state.lease.generation, state.floor);
}

/** The highest floor one report may set on `state`. */
export function reportLimit(state: ArbiterState, limits: GenerationLimits): number {
  return Math.min(knownGeneration(state) + limits.maxJump, limits.ceiling);
}

/** Null when the step from `before` to `next` keeps B1 and B2; else why not. */
export function boundRefusal(
  before: ArbiterState,
  next: ArbiterState,
  limits: GenerationLimits,
): GenerationRefusal | null {
  if (next.floor > before.floor) {
    const limit = reportLimit(before, limits);
    if (next.floor > limit) return { kind: 'report-jump', reported: next.floor, known: knownGeneration(before), limit };
  }
  const g = next.lease.generation;
  if (g > limits.ceiling && g > before.lease.generation)
    return { kind: 'ceiling', generation: g, ceiling: limits.ceiling };
  return null;
}

/** The one line a refusal is answered and logged with (`host`: whose report or grant it was). */
export function refusalLine(r: GenerationRefusal, host: Host | null): string {
  if (r.kind === 'ceiling') {
    return `nothing was granted: the next generation would be ${r.generation}, above the ceiling ${r.ceiling} that no real history reaches; the floor came from an accepted report (see the events)`;
  }
  const who = host === null ? 'a report' : `${host}'s report`;
  return `${who} of generation ${r.reported} is refused: it is more than ${r.limit - r.known} above ${r.known}, the highest generation this arbiter granted or learned, which no real history produces; if it is real, an admin accepts it with "hq lease accept ${r.reported}"`;
}

export type AcceptVerdict =
  | { readonly ok: true; readonly floor: number; readonly was: number }
  | { readonly ok: false; readonly reason: 'above-ceiling'; readonly ceiling: number };

/**
 * B3: an admin accepts `generation` as real (a refused report of an agent that did see it). The
 * floor rises to it and the next reports are measured from there; a record below it is raised by
 * the next report, as after a restored backup. Never lowers the floor; refused at or above the
 * ceiling. The caller must not run `boundRefusal`'s jump rule on this step.
 */
export function acceptGeneration(
  state: ArbiterState,
  ctx: Context,
  input: { readonly generation: number; readonly by: string | null },
  limits: GenerationLimits = GENERATION_LIMITS,
): Step<AcceptVerdict> {
  if (input.generation >= limits.ceiling) {
    const events = [
      leaseEvent(
        'generation-refused',
        null,
        { reason: 'above-ceiling', reported: input.generation, ceiling: limits.ceiling, via: 'accept' },
        'control',
      ),
    ];
    return {
      next: state,
      boot: ctx.boot,
      events,
      answer: { ok: false, reason: 'above-ceiling', ceiling: limits.ceiling },
    };
  }
  if (input.generation <= state.floor)
    return { next: state, boot: ctx.boot, events: [], answer: { ok: true, floor: state.floor, was: state.floor } };
  const events = [
    leaseEvent(
      'generation-accepted',
      null,
      { from: state.floor, to: input.generation, known: knownGeneration(state), by: input.by },
      'control',
    ),
  ];
  return {
    next: { ...state, floor: input.generation },
    boot: ctx.boot,
    events,
    answer: { ok: true, floor: input.generation, was: state.floor },
  };
}
