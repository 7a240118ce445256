/** `transfer`: the admin moves the lease to another candidate (forced, behind lock-delay). */
import type { TransferRequest } from '@hq/protocol';
import { isExpired } from '../record.js';
import { leaseEvent } from '../events.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  type Verdict,
  isCandidate,
  lockDelayUntil,
  grant,
  ok,
  refuse,
} from '../arbiter.js';
import { targetSilence, silenceData } from './release.js';

/**
 * Forced failover: `to` gets generation + 1 behind the old holder's lock-delay. A target not
 * heard from within its heartbeat interval is refused (`target-silent`) unless `force`.
 */
export function transfer(state: ArbiterState, ctx: Context, input: TransferRequest): Step<Verdict> {
  const lease = state.lease;
  if (!isCandidate(ctx.settings, input.to)) {
    return refuse(state, ctx.boot, 'not-candidate', 'acquire-refused', input.to, [], { via: 'transfer' });
  }
  if (lease.holder === input.to && !isExpired(lease, ctx.now)) {
    return refuse(state, ctx.boot, 'same-holder', 'acquire-refused', input.to, [], { via: 'transfer' });
  }
  const silent = input.force === true ? null : targetSilence(state, ctx, input.to);
  if (silent !== null) {
    return refuse(state, ctx.boot, 'target-silent', 'acquire-refused', input.to, [], {
      via: 'transfer',
      ...silenceData(input.to, silent, 'to'),
    });
  }
  const from = lease.holder === input.to ? null : lease.holder;
  const next = grant(state, ctx, ctx.boot, input.to, lockDelayUntil(state, ctx, from), from);
  return ok({ ...state, lease: next }, ctx.boot, [
    leaseEvent('promoted', input.to, { generation: next.generation, from, notBefore: next.notBefore, via: 'transfer' }),
  ]);
}
