/**
 * The arbiter's side of a heartbeat: the holder renews, a standby reports its view and the
 * confirmation it gave.
 */
import type { HeartbeatAnswer, HeartbeatRequest, LeaseRefusal, TimingProblem, View } from '@hq/protocol';
import type { Confirmation } from '../record.js';
import { leaseEvent } from '../events.js';
import { reportedTiming, stateFailover, type LeaseTiming } from '../timing.js';
import { recordOf } from '../wait.js';
import { stepDownAsked } from './step-down.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  NO_OBSERVER,
  isCandidate,
  reportDue,
  write,
  noteReport,
  renewed,
  renewHold,
} from '../arbiter.js';

/** What `heartbeat` decides of the answer; `heartbeatAnswer` derives the rest after the commit. */
export type HeartbeatDecision = Pick<HeartbeatAnswer, 'outcome' | 'reason' | 'reportInSeconds'>;

/**
 * 1. Only candidates heartbeat. 2. The report raises the floor. 3. The observer's view,
 * confirmation and heartbeat time are recorded. 4. The holder renews (an unreleased lease at
 * its generation, also past expiry: an arbiter outage must not end the lease, L2); anyone else
 * is a standby, or sees no lease.
 */
export function heartbeat(state0: ArbiterState, ctx: Context, input: HeartbeatRequest): Step<HeartbeatDecision> {
  if (!isCandidate(ctx.settings, input.host)) {
    const events = [leaseEvent('renew-refused', input.host, { reason: 'not-candidate' })];
    return {
      next: state0,
      boot: ctx.boot,
      events,
      answer: { outcome: 'renew-refused', reason: 'not-candidate', reportInSeconds: null },
    };
  }
  const noted = noteReport(
    state0,
    ctx,
    ctx.boot,
    input.host,
    input.seenGeneration,
    input.generation,
    input.requestTimeoutSeconds,
  );
  const before = noted.state.observers.get(input.host) ?? NO_OBSERVER;
  const view: View | null = input.view === undefined ? before.view : { ...input.view, at: ctx.now };
  const confirmation: Confirmation | null =
    input.confirmation === undefined
      ? before.confirmation
      : {
          holder: input.confirmation.holder,
          generation: input.confirmation.generation,
          at: ctx.now - Math.max(0, input.confirmation.ageSeconds),
        };
  const observers = new Map(noted.state.observers);
  observers.set(input.host, {
    view,
    confirmation,
    lastHeartbeatAt: ctx.now,
    heartbeatSeconds: input.heartbeatSeconds ?? before.heartbeatSeconds,
    refreshSeconds: input.refreshSeconds ?? before.refreshSeconds ?? null,
    requestTimeoutSeconds: input.requestTimeoutSeconds ?? before.requestTimeoutSeconds ?? null,
  });
  // Recording the view is a write of the record too: its revision (the ETag) moves with it.
  const state: ArbiterState = { ...noted.state, observers, lease: write(noted.state.lease, {}) };
  const lease = state.lease;
  const events = [...noted.events];
  const reportInSeconds = reportDue(ctx, noted.boot, state, input.host, input.requestTimeoutSeconds);
  if (lease.holder === input.host) {
    let reason: LeaseRefusal | null = null;
    if (lease.released) reason = 'expired';
    else if (input.generation !== undefined && input.generation !== lease.generation) reason = 'stale-generation';
    if (reason !== null) {
      events.push(leaseEvent('renew-refused', input.host, { reason, generation: lease.generation }));
      return { next: state, boot: noted.boot, events, answer: { outcome: 'renew-refused', reason, reportInSeconds } };
    }
    events.push(leaseEvent('renewed', input.host, { generation: lease.generation, via: 'heartbeat' }));
    return {
      next: { ...state, lease: renewed(noted.state.lease, ctx) },
      boot: noted.boot,
      events,
      answer: { outcome: 'renewed', reason: null, reportInSeconds },
    };
  }
  if (lease.holder === null) {
    events.push(leaseEvent('no-lease', input.host, {}));
    return { next: state, boot: noted.boot, events, answer: { outcome: 'no-lease', reason: null, reportInSeconds } };
  }
  events.push(
    leaseEvent('standby', input.host, {
      holder: lease.holder,
      generation: lease.generation,
      reachable: view?.reachable ?? null,
    }),
  );
  return { next: state, boot: noted.boot, events, answer: { outcome: 'standby', reason: null, reportInSeconds } };
}

const NO_PROBLEMS: readonly TimingProblem[] = Object.freeze([]);

/**
 * The heartbeat's whole answer (`HeartbeatAnswer` of @hq/protocol), of what the commit confirmed:
 * the decision, the state written and the context after it (its boot) — the record, the hold, the
 * cross-side problems of the cadence this very report states, the worst-case failover, the
 * candidates, and whether this host is the displaced holder whose acknowledgement is awaited.
 * Derived after the commit, so none of it runs inside the write transaction.
 */
export function heartbeatAnswer(
  decided: HeartbeatDecision,
  state: ArbiterState,
  after: Context,
  input: HeartbeatRequest,
  timing: LeaseTiming,
): HeartbeatAnswer {
  const { arbiter, candidates } = after.settings;
  return {
    outcome: decided.outcome,
    reason: decided.reason,
    lease: recordOf(state, after),
    hold: renewHold(after, after.boot, state),
    reportInSeconds: decided.reportInSeconds,
    timingProblems: isCandidate(after.settings, input.host)
      ? reportedTiming(arbiter, timing, input.host, input)
      : NO_PROBLEMS,
    failover: stateFailover(state, candidates, timing).text,
    candidates,
    stepDown: stepDownAsked(state, after, input.host),
  };
}
