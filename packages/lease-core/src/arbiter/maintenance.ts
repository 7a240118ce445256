/** `setMaintenance`: the admin stops or resumes promotion. */
import type { MaintenanceRequest } from '@hq/protocol';
import { leaseEvent } from '../events.js';
import { type ArbiterState, type Context, type Step, type Verdict, write, ok } from '../arbiter.js';

export function setMaintenance(state: ArbiterState, ctx: Context, input: MaintenanceRequest): Step<Verdict> {
  const reason = input.enabled ? (input.reason ?? null) : null;
  const lease = write(state.lease, { maintenance: input.enabled, maintenanceReason: reason });
  return ok({ ...state, lease }, ctx.boot, [
    leaseEvent('maintenance', null, { enabled: input.enabled, reason }, 'control'),
  ]);
}
