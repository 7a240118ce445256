/**
 * `release`: the holder gives the lease up, or hands it over to a named candidate that is not
 * silent.
 */
import type { Host, ReleaseRequest } from '@hq/protocol';
import type { LeaseEvent } from '../events.js';
import { leaseEvent } from '../events.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  type Verdict,
  NO_OBSERVER,
  isCandidate,
  allReported,
  startWaitUntil,
  write,
  noteReport,
  grant,
  ok,
  refuse,
} from '../arbiter.js';

/**
 * A handover or transfer target must be alive: heard from (a heartbeat) within its reported
 * interval × SILENCE_FACTOR + SILENCE_SLACK_SECONDS. The factor covers a missed cron tick's
 * jitter and a slow heartbeat; the slack, request latency. Too small refuses a healthy target
 * between two heartbeats; too large hands the lease to a host that just died.
 */
export const SILENCE_FACTOR = 1.5;
export const SILENCE_SLACK_SECONDS = 5;

export interface Silence {
  readonly lastHeartbeatAt: number | null;
  readonly heartbeatSeconds: number | null;
  /** How long a silence is tolerated; null when the target was never heard from. */
  readonly graceSeconds: number | null;
  readonly message: string;
}

/**
 * Null when `host` was heard from recently enough to receive the lease, else why not (with
 * when it was last heard). An agent that never reported its interval gets `viewFreshSeconds`
 * (the age beyond which the arbiter takes nothing an agent said as evidence).
 */
export function targetSilence(state: ArbiterState, ctx: Context, host: Host): Silence | null {
  const o = state.observers.get(host) ?? NO_OBSERVER;
  const last = o.lastHeartbeatAt;
  const interval = o.heartbeatSeconds;
  if (last === null) {
    return {
      lastHeartbeatAt: null,
      heartbeatSeconds: interval,
      graceSeconds: null,
      message: `${host} has never sent a heartbeat to this arbiter; start its agent, or force`,
    };
  }
  const grace = interval === null ? ctx.settings.viewFreshSeconds : interval * SILENCE_FACTOR + SILENCE_SLACK_SECONDS;
  const age = ctx.now - last;
  if (age <= grace) return null;
  const rule =
    interval === null
      ? `viewFreshSeconds ${ctx.settings.viewFreshSeconds} s`
      : `its heartbeat interval ${interval} s × ${SILENCE_FACTOR} + ${SILENCE_SLACK_SECONDS} s`;
  return {
    lastHeartbeatAt: last,
    heartbeatSeconds: interval,
    graceSeconds: grace,
    message: `${host} was last heard ${Math.round(age)} s ago (${new Date(last * 1000).toISOString()}), longer than ${rule}; is its agent running? force overrides`,
  };
}

/**
 * Release keeps the holder and marks the lease expired. With `handoverTo` the named candidate
 * is granted at once: no lock-delay from the old holder, which stepped down before asking
 * (the start wait of S2.3 still applies, as to every grant, and so does a lock-delay the old
 * holder's own grant was still waiting out).
 */
export function release(state0: ArbiterState, ctx: Context, input: ReleaseRequest): Step<Verdict> {
  const noted = noteReport(state0, ctx, ctx.boot, input.host, undefined, input.generation);
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder !== input.host) {
    return refuse(state, noted.boot, 'not-holder', 'release-refused', input.host, noted.events, {
      holder: lease.holder,
    });
  }
  if (input.generation !== undefined && input.generation !== lease.generation) {
    return refuse(state, noted.boot, 'stale-generation', 'release-refused', input.host, noted.events, {
      generation: lease.generation,
    });
  }
  if (input.handoverTo !== undefined) {
    if (!isCandidate(ctx.settings, input.handoverTo)) {
      return refuse(state, noted.boot, 'not-candidate', 'release-refused', input.host, noted.events, {
        handoverTo: input.handoverTo,
      });
    }
    if (input.handoverTo === input.host) {
      return refuse(state, noted.boot, 'same-holder', 'release-refused', input.host, noted.events);
    }
    const silent = input.force === true ? null : targetSilence(state, ctx, input.handoverTo);
    if (silent !== null) {
      return refuse(
        state,
        noted.boot,
        'target-silent',
        'release-refused',
        input.host,
        noted.events,
        silenceData(input.handoverTo, silent, 'handoverTo'),
      );
    }
    // The handing-over holder stepped down: no wait for it. But a lock-delay its own grant still
    // waited for protects the holder before it (a transfer just made to it), and stays.
    // G7: a holder that ran its generation hands over without the start wait once every
    // candidate reported nothing above it (the same proof as an acknowledgement's).
    const lifted =
      input.ran === true &&
      input.generation === lease.generation &&
      ctx.now < startWaitUntil(ctx, noted.boot) &&
      allReported(ctx, noted.boot) &&
      state.floor <= lease.generation;
    const next = grant(
      state,
      ctx,
      noted.boot,
      input.handoverTo,
      Math.max(ctx.now, lease.notBefore ?? -Infinity),
      input.host,
      lifted,
    );
    return ok({ ...state, lease: next }, noted.boot, [
      ...noted.events,
      leaseEvent('released', input.host, { generation: lease.generation, handoverTo: input.handoverTo }),
      leaseEvent('acquired', input.handoverTo, {
        generation: next.generation,
        notBefore: next.notBefore,
        from: input.host,
        via: 'handover',
        ...(lifted ? { startWaitLifted: true } : {}),
      }),
    ]);
  }
  if (lease.released) return ok(state, noted.boot, noted.events);
  return ok({ ...state, lease: write(lease, { released: true }) }, noted.boot, [
    ...noted.events,
    leaseEvent('released', input.host, { generation: lease.generation }),
  ]);
}

/** The refusal event's data for a silent target; `message` is what the HTTP answer says (also transfer's; not in the package's index). */
export function silenceData(target: Host, s: Silence, key: 'handoverTo' | 'to'): LeaseEvent['data'] {
  return {
    [key]: target,
    lastHeartbeatAt: s.lastHeartbeatAt,
    heartbeatSeconds: s.heartbeatSeconds,
    graceSeconds: s.graceSeconds,
    message: s.message,
  };
}
