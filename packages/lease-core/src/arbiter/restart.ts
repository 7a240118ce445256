/** The arbiter's start: what a restart (or an etcd takeover) does to the record it finds. */
import type { Host } from '@hq/protocol';
import type { LeaseState, Observer } from '../record.js';
import type { ArbiterState, Context } from '../arbiter.js';

/**
 * Called once at start, before the first decision: the stored times come from the previous
 * life's clock, which may have jumped while the arbiter was down. Nothing of the previous life
 * can lie after the start, and its lease cannot outlive the start by more than one TTL, so
 * every stored time is clamped to that (a backward jump would otherwise stretch lock-delays
 * and keep old views fresh). Forward jumps need no repair: the start wait (S2.3) covers them.
 */
export function atRestart(state: ArbiterState, ctx: Context): ArbiterState {
  const start = ctx.boot.startAt;
  const ttl = ctx.settings.ttlSeconds;
  const cap = (t: number | null, limit: number): number | null => (t === null ? null : Math.min(t, limit));
  const l = state.lease;
  let lease: LeaseState = {
    ...l,
    acquiredAt: cap(l.acquiredAt, start),
    renewedAt: cap(l.renewedAt, start),
    lastCheckAt: cap(l.lastCheckAt, start),
    expiresAt: cap(l.expiresAt, start + ttl),
    notBefore: cap(l.notBefore, start + ttl + ctx.settings.safetyMarginSeconds),
  };
  const d = l.displaced ?? null;
  const floor = d === null ? null : cap(d.floor, start + ttl + ctx.settings.safetyMarginSeconds);
  if (d !== null && floor !== d.floor) lease = { ...lease, displaced: { ...d, floor } };
  const observers = new Map<Host, Observer>();
  for (const [name, o] of state.observers) {
    observers.set(name, {
      view: o.view === null ? null : { ...o.view, at: Math.min(o.view.at, start) },
      confirmation: o.confirmation === null ? null : { ...o.confirmation, at: Math.min(o.confirmation.at, start) },
      lastHeartbeatAt: cap(o.lastHeartbeatAt, start),
      heartbeatSeconds: o.heartbeatSeconds,
      refreshSeconds: o.refreshSeconds ?? null,
      requestTimeoutSeconds: o.requestTimeoutSeconds ?? null,
    });
  }
  const changed =
    lease.acquiredAt !== l.acquiredAt ||
    lease.renewedAt !== l.renewedAt ||
    lease.lastCheckAt !== l.lastCheckAt ||
    lease.expiresAt !== l.expiresAt ||
    lease.notBefore !== l.notBefore ||
    lease.displaced !== l.displaced;
  return { ...state, lease: changed ? { ...lease, revision: l.revision + 1 } : lease, observers };
}
