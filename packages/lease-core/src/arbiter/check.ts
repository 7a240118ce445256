/** `check`: one probe of the holder, the only path to promotion (G5). */
import type { CheckAnswer, Host } from '@hq/protocol';
import { leaseEvent } from '../events.js';
import { type ArbiterState, type Context, type Step, NO_OBSERVER, lockDelayUntil, write, grant } from '../arbiter.js';

export interface Probe {
  readonly ping: boolean;
  readonly health: boolean;
}

/**
 * The first candidate in priority order (never the holder) whose view is about this holder,
 * taken during its tenure and fresher than `viewFreshSeconds`, says unreachable, and who
 * reports no confirmation of this holder within `viewFreshSeconds` (S5).
 */
export function promotee(state: ArbiterState, ctx: Context): Host | null {
  const { lease } = state;
  if (lease.holder === null) return null;
  const preferred = ctx.settings.standby ?? null;
  const order =
    preferred !== null && ctx.settings.candidates.includes(preferred)
      ? [preferred, ...ctx.settings.candidates.filter((c) => c !== preferred)]
      : ctx.settings.candidates;
  for (const candidate of order) {
    if (candidate === lease.holder) continue;
    const o = state.observers.get(candidate);
    if (o === undefined || o.view === null) continue;
    const v = o.view;
    if (v.target !== lease.holder || v.reachable) continue;
    if (ctx.now - v.at > ctx.settings.viewFreshSeconds) continue;
    // Evidence from an earlier life of the arbiter does not count (its clock may have jumped).
    if (v.at <= ctx.boot.startAt) continue;
    if (lease.acquiredAt !== null && v.at < lease.acquiredAt) continue;
    const c = o.confirmation;
    if (c !== null && c.holder === lease.holder && ctx.now - c.at <= ctx.settings.viewFreshSeconds) continue;
    return candidate;
  }
  return null;
}

/**
 * One check. 1. Without a holder there is nothing to probe. 2. The arbiter's own view is
 * recorded. 3. A reachable holder resets the streak. 4. An unreachable holder with an eligible
 * promotee extends it; without one the streak resets. 5. At `promoteAfterChecks`, outside
 * maintenance, the promotee is granted behind the old holder's lock-delay.
 */
export function check(state: ArbiterState, ctx: Context, probe: Probe | null): Step<CheckAnswer> {
  const { lease } = state;
  const { now, settings } = ctx;
  if (lease.holder === null || probe === null) {
    const next = write(lease, { lastCheckAt: now, dualUnreachableStreak: 0 });
    return {
      next: { ...state, lease: next },
      boot: ctx.boot,
      events: [
        leaseEvent('arbiter-check', lease.holder, { streak: 0, holder: lease.holder, probed: false }, 'control'),
      ],
      answer: {
        promoted: false,
        streak: 0,
        holder: lease.holder,
        generation: lease.generation,
        ping: false,
        health: false,
        promotee: null,
      },
    };
  }
  const holder = lease.holder;
  const reachable = probe.ping || probe.health;
  const observers = new Map(state.observers);
  const own = observers.get(settings.arbiter) ?? NO_OBSERVER;
  observers.set(settings.arbiter, {
    ...own,
    view: { target: holder, reachable, ping: probe.ping, health: probe.health, at: now },
  });
  const withView: ArbiterState = { ...state, observers };
  const candidate = reachable ? null : promotee(withView, ctx);
  const streak = candidate === null ? 0 : lease.dualUnreachableStreak + 1;
  const checkEvent = leaseEvent(
    'arbiter-check',
    holder,
    { streak, ping: probe.ping, health: probe.health, promotee: candidate },
    'control',
  );
  if (candidate !== null && streak >= settings.promoteAfterChecks && !lease.maintenance) {
    const next = grant(withView, ctx, ctx.boot, candidate, lockDelayUntil(withView, ctx, holder), holder);
    return {
      next: { ...withView, lease: { ...next, lastCheckAt: now } },
      boot: ctx.boot,
      events: [
        checkEvent,
        leaseEvent('promoted', candidate, {
          generation: next.generation,
          from: holder,
          notBefore: next.notBefore,
          streak,
        }),
      ],
      answer: {
        promoted: true,
        streak,
        holder: candidate,
        generation: next.generation,
        ping: probe.ping,
        health: probe.health,
        promotee: candidate,
      },
    };
  }
  const next = write(lease, { lastCheckAt: now, dualUnreachableStreak: streak });
  return {
    next: { ...withView, lease: next },
    boot: ctx.boot,
    events: [checkEvent],
    answer: {
      promoted: false,
      streak,
      holder,
      generation: lease.generation,
      ping: probe.ping,
      health: probe.health,
      promotee: candidate,
    },
  };
}
