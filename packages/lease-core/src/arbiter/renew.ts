/** `renew`: the holder extends its validity. */
import type { RenewRequest } from '@hq/protocol';
import { leaseEvent } from '../events.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  type Verdict,
  noteReport,
  renewed,
  ok,
  refuse,
} from '../arbiter.js';

/** Renew only by the holder, at the record's generation, of an unreleased lease. */
export function renew(state0: ArbiterState, ctx: Context, input: RenewRequest): Step<Verdict> {
  const noted = noteReport(state0, ctx, ctx.boot, input.host, undefined, input.generation);
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder !== input.host) {
    return refuse(state, noted.boot, 'not-holder', 'renew-refused', input.host, noted.events, { holder: lease.holder });
  }
  if (input.generation !== lease.generation) {
    return refuse(state, noted.boot, 'stale-generation', 'renew-refused', input.host, noted.events, {
      generation: lease.generation,
      sent: input.generation,
    });
  }
  if (lease.released) {
    return refuse(state, noted.boot, 'expired', 'renew-refused', input.host, noted.events);
  }
  return ok({ ...state, lease: renewed(lease, ctx) }, noted.boot, [
    ...noted.events,
    leaseEvent('renewed', input.host, { generation: lease.generation }),
  ]);
}
