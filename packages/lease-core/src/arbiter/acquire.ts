/** `acquire`: a candidate asks for the lease. */
import type { AcquireRequest } from '@hq/protocol';
import { isExpired } from '../record.js';
import { leaseEvent } from '../events.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  type Verdict,
  isCandidate,
  lockDelayUntil,
  noteReport,
  grant,
  renewed,
  ok,
  refuse,
} from '../arbiter.js';

/**
 * 1. Only a candidate may acquire. 2. Its seen generation raises the floor (S1).
 * 3. The recorded holder re-acquiring an unreleased lease renews it (even past expiry).
 * 4. A live lease of another host is refused (`held`). 5. Otherwise a grant, behind the old
 *    holder's lock-delay and the start wait.
 */
export function acquire(state0: ArbiterState, ctx: Context, input: AcquireRequest): Step<Verdict> {
  if (!isCandidate(ctx.settings, input.host)) {
    return refuse(state0, ctx.boot, 'not-candidate', 'acquire-refused', input.host, []);
  }
  const noted = noteReport(
    state0,
    ctx,
    ctx.boot,
    input.host,
    input.seenGeneration,
    undefined,
    input.requestTimeoutSeconds,
  );
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder === input.host && !lease.released) {
    const next = { ...state, lease: renewed(lease, ctx) };
    return ok(next, noted.boot, [
      ...noted.events,
      leaseEvent('renewed', input.host, { generation: lease.generation, via: 'acquire' }),
    ]);
  }
  if (lease.holder !== null && lease.holder !== input.host && !isExpired(lease, ctx.now)) {
    return refuse(state, noted.boot, 'held', 'acquire-refused', input.host, noted.events, { holder: lease.holder });
  }
  const previous = lease.holder === input.host ? null : lease.holder;
  const lease2 = grant(state, ctx, noted.boot, input.host, lockDelayUntil(state, ctx, previous), previous);
  return ok({ ...state, lease: lease2 }, noted.boot, [
    ...noted.events,
    leaseEvent('acquired', input.host, { generation: lease2.generation, notBefore: lease2.notBefore, from: previous }),
  ]);
}
