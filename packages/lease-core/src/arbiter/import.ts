/**
 * `importOld`: the old system's (elanous HQ) lease record taken over once, behind its holder's
 * validity.
 */
import type { Host } from '@hq/protocol';
import type { LeaseEvent } from '../events.js';
import { leaseEvent } from '../events.js';
import { type ArbiterState, type Context, type Step, isCandidate, noteReport, grant } from '../arbiter.js';

/** The old system's lease record, as the shell read it; times are arbiter epoch seconds. */
export interface OldLease {
  readonly holder: Host | null;
  readonly generation: number;
  /** The end of its holder's validity as the record says it; null when the record does not say. */
  readonly expiresAt: number | null;
  /** The old TTL: a renewal racing the import may extend the old validity by this much. */
  readonly ttlSeconds: number;
  readonly released: boolean;
}

export type ImportAnswer =
  | {
      readonly ok: true;
      readonly floor: number;
      readonly granted: { readonly holder: Host; readonly generation: number; readonly notBefore: number } | null;
    }
  | {
      readonly ok: false;
      readonly reason: 'already-granted' | 'not-candidate';
      readonly holder: Host | null;
      readonly generation: number;
    };

/**
 * Takes over from the old system, on a new installation only.
 * 1. An installation that already granted is refused: its generations are hq's own.
 * 2. The old generation raises the floor as an agent's report does (S1), reported by the
 *    arbiter's own name so that it counts as no candidate's report for S2.3/S2.4.
 * 3. A live old holder keeps HQ: it is granted the next generation, above every old one, behind
 *    a lock-delay that outlasts the old validity — the record's end, or a renewal racing the
 *    import (now + the old TTL), plus one margin — so a job still running under the old lease
 *    ends before the first hq one may start. It must be a candidate.
 * 4. No live old holder: the floor alone; the operator acquires afresh.
 */
export function importOld(state0: ArbiterState, ctx: Context, old: OldLease): Step<ImportAnswer> {
  const current = state0.lease;
  if (current.generation > 0) {
    return {
      next: state0,
      boot: ctx.boot,
      events: [],
      answer: { ok: false, reason: 'already-granted', holder: current.holder, generation: current.generation },
    };
  }
  const live = old.holder !== null && !old.released && (old.expiresAt === null || old.expiresAt > ctx.now);
  if (live && !isCandidate(ctx.settings, old.holder as Host)) {
    return {
      next: state0,
      boot: ctx.boot,
      events: [],
      answer: { ok: false, reason: 'not-candidate', holder: old.holder, generation: old.generation },
    };
  }
  const noted = noteReport(state0, ctx, ctx.boot, ctx.settings.arbiter, old.generation, undefined);
  const state = noted.state;
  const imported = (granted: { holder: Host; generation: number; notBefore: number } | null): LeaseEvent =>
    leaseEvent(
      'imported',
      old.holder,
      {
        from: 'elanous',
        oldGeneration: old.generation,
        floor: state.floor,
        granted: granted?.generation ?? null,
        notBefore: granted?.notBefore ?? null,
      },
      'control',
    );
  if (!live) {
    return {
      next: state,
      boot: noted.boot,
      events: [...noted.events, imported(null)],
      answer: { ok: true, floor: state.floor, granted: null },
    };
  }
  const holder = old.holder as Host;
  const oldValidity = Math.max(old.expiresAt ?? -Infinity, ctx.now + old.ttlSeconds);
  const lease = grant(state, ctx, noted.boot, holder, oldValidity + ctx.settings.safetyMarginSeconds, null);
  const granted = { holder, generation: lease.generation, notBefore: lease.notBefore as number };
  return {
    next: { ...state, lease },
    boot: noted.boot,
    events: [
      ...noted.events,
      imported(granted),
      leaseEvent('acquired', holder, {
        generation: lease.generation,
        notBefore: lease.notBefore,
        from: null,
        via: 'import',
      }),
    ],
    answer: { ok: true, floor: state.floor, granted },
  };
}
