/**
 * Mutants: the real decision set with one safety mechanism removed. Each must be caught by
 * the simulator (a violation of S1 or S2); they live here, never in shipped code.
 */
import * as core from '../../../packages/lease-core/src/index.js';
import type { ArbiterState } from '../../../packages/lease-core/src/index.js';
import type { Decisions } from './world.js';
import { REAL } from './world.js';

/** Lock-delay removed: a new holder may start the moment it is granted. */
export const noLockDelay: Decisions = {
  ...REAL,
  arbiterStep: (step, before, ctx) => {
    const l = step.next.lease;
    if (l.holder === null || l.holder === before.lease.holder) return step;
    return { ...step, next: { ...step.next, lease: { ...l, notBefore: ctx.now } } };
  },
};

/** Validity measured from the receive time of the answer instead of the send time. */
export const validityFromReceive: Decisions = { ...REAL, sentStamp: (_sent, received) => received };

/** Elapsed on the monotonic clock alone (it stops while a laptop sleeps). */
export const monotonicOnly: Decisions = { ...REAL, agentStamp: (s) => ({ wall: s.mono, mono: s.mono }) };

/** Elapsed and waits on the wall clock alone (it jumps). */
export const wallOnly: Decisions = { ...REAL, agentStamp: (s) => ({ wall: s.wall, mono: s.wall }) };

/** The arbiter never hears of standby confirmations (no term in lock-delay, none in S5). */
export const noConfirmationReport: Decisions = {
  ...REAL,
  core: { ...core, heartbeat: (s, c, input) => core.heartbeat(s, c, { ...input, confirmation: undefined }) },
};

/** The standby's fence ignores the confirmations it gave (no wait of its own; it still reports them). */
export const noStandbyWait: Decisions = {
  ...REAL,
  core: { ...core, fence: (s, role, now, settings) => core.fence({ ...s, gave: null }, role, now, settings) },
};

/**
 * Both halves of the confirmation term gone — the arbiter's (lock-delay and S5) and the
 * standby's own wait: the mutant the issue names. Each half alone is enough in this model,
 * which `simulation-mutants.test.ts` shows too.
 */
export const noConfirmationTerm: Decisions = {
  ...REAL,
  core: { ...noConfirmationReport.core, fence: noStandbyWait.core.fence },
};

function floorless(state: ArbiterState): ArbiterState {
  return state.floor === 0 ? state : { ...state, floor: 0 };
}

/** No generation floor: reported generations are ignored. */
export const noFloor: Decisions = {
  ...REAL,
  core: {
    ...core,
    heartbeat: (s, c, i) => core.heartbeat(floorless(s), c, { ...i, seenGeneration: 0, generation: undefined }),
    acquire: (s, c, i) => core.acquire(floorless(s), c, { host: i.host, seenGeneration: 0 }),
  },
  arbiterStep: (step) => ({ ...step, next: floorless(step.next) }),
};

/** The step-down acknowledged before it is persisted: the old state answers the fence meanwhile. */
export const ackBeforePersist: Decisions = { ...REAL, stepDownOrder: 'ack-before-persist' };

/** The step-down acknowledged before the fenced children are gone. */
export const ackBeforeGone: Decisions = { ...REAL, stepDownOrder: 'ack-before-gone' };

/**
 * The arbiter accepts an acknowledgement from the displaced host whatever generation it names:
 * the binding to g removed, and with it the binding to the revision (an old acknowledgement names
 * an old revision too, so either binding alone refuses a replayed one; without both, it lands).
 */
export const ackAnyGeneration: Decisions = {
  ...REAL,
  core: {
    ...core,
    steppedDown: (s, c, i) => {
      const d = s.lease.displaced ?? null;
      return core.steppedDown(
        s,
        c,
        d === null ? i : { ...i, generation: d.generation, revision: Math.max(i.revision, d.revision) },
      );
    },
  },
};

export const MUTANTS: ReadonlyArray<readonly [string, Decisions]> = [
  ['no lock-delay', noLockDelay],
  ['validity from the receive time', validityFromReceive],
  ['monotonic-only elapsed', monotonicOnly],
  ['wall-only elapsed', wallOnly],
  ['no standby-confirmation term in lock-delay', noConfirmationTerm],
  ['no generation floor', noFloor],
  ['the step-down acknowledged before it is persisted', ackBeforePersist],
  ['the step-down acknowledged before the children are gone', ackBeforeGone],
  ['an acknowledgement accepted for another generation', ackAnyGeneration],
];
