/**
 * The arbiter's side of S6 at run time. The arbiter owns the lease timing; each agent reports
 * its cadence with every heartbeat, and the observers table keeps the last report. From that
 * one state everything here is derived — the cross-side problems (lease-core `crossTiming`) and
 * the worst-case failover (lease-core `failover`, the one function every place prints) — so the
 * heartbeat answer, the metrics, the status page, `hq lease status` and `hq doctor` can never
 * disagree. What changes is also said once, as an event (`timing-problem` / `timing-ok`).
 */
import {
  crossTiming,
  stateFailover,
  type ArbiterState,
  type Cadence,
  type DescribedFailover,
  type LeaseTiming,
  type Observer,
} from '@hq/lease-core';
import type { TimingProblem } from '@hq/protocol';
import type { ArbiterConfig } from './config.js';

/**
 * The config's lease timing, one object per config (a config is never changed in place): lease-core
 * computes the failover and a report's problems once per timing object.
 */
export function leaseTimingOf(config: ArbiterConfig): LeaseTiming {
  let t = TIMINGS.get(config);
  if (t === undefined) {
    t = Object.freeze({
      ttlSeconds: config.ttlSeconds,
      safetyMarginSeconds: config.safetyMarginSeconds,
      checkSeconds: config.checkSeconds,
      viewFreshSeconds: config.viewFreshSeconds,
      promoteAfterChecks: config.promoteAfterChecks,
      probeTimeoutSeconds: config.probeTimeoutSeconds,
    });
    TIMINGS.set(config, t);
  }
  return t;
}

const TIMINGS = new WeakMap<ArbiterConfig, LeaseTiming>();

/** The cadence an observer last reported (only what it sent). */
export function cadenceOf(o: Observer | undefined): Partial<Cadence> {
  const out: { -readonly [K in keyof Cadence]?: number } = {};
  if (o === undefined) return out;
  if (o.heartbeatSeconds !== null) out.heartbeatSeconds = o.heartbeatSeconds;
  if (o.refreshSeconds != null) out.refreshSeconds = o.refreshSeconds;
  if (o.requestTimeoutSeconds != null) out.requestTimeoutSeconds = o.requestTimeoutSeconds;
  return out;
}

/** Every cross-side problem of the candidates' last reports, in candidate order. */
export function timingProblems(config: ArbiterConfig, state: ArbiterState): TimingProblem[] {
  const t = leaseTimingOf(config);
  return config.candidates.flatMap((host) =>
    crossTiming(config.arbiter, t, host, cadenceOf(state.observers.get(host))),
  );
}

/** The worst-case failover now (lease-core `stateFailover`, with this config's timing). */
export function failoverOf(config: ArbiterConfig, state: ArbiterState): DescribedFailover {
  return stateFailover(state, config.candidates, leaseTimingOf(config));
}

/** An agent is silent once no heartbeat came for more than this many of its reported intervals. */
export const SILENT_AFTER_INTERVALS = 2;

/** True when `ageSeconds` since the last heartbeat is past `SILENT_AFTER_INTERVALS` of its interval. */
export function isSilent(ageSeconds: number, intervalSeconds: number): boolean {
  return ageSeconds > SILENT_AFTER_INTERVALS * intervalSeconds;
}

/** A problem set's key for `TimingNotes` (its messages), once per set `reportedTiming` made. */
const NOTE_KEYS = new WeakMap<readonly TimingProblem[], string>();

/** Remembers each host's last problem set, so a change is said once (event + warn log). */
export class TimingNotes {
  private readonly last = new Map<string, string>();

  /** The problems of `host` changed since the last call: the event to record, else null. */
  change(
    host: string,
    problems: readonly TimingProblem[],
  ): { event: 'timing-problem' | 'timing-ok'; data: Record<string, string | number | boolean | null> } | null {
    let key = NOTE_KEYS.get(problems);
    if (key === undefined) {
      key = problems.map((p) => p.message).join('\n');
      if (Object.isFrozen(problems)) NOTE_KEYS.set(problems, key);
    }
    const before = this.last.get(host);
    if (before === key || (before === undefined && key === '')) return null;
    this.last.set(host, key);
    if (key === '') return { event: 'timing-ok', data: {} };
    const first = problems[0] as TimingProblem;
    return {
      event: 'timing-problem',
      data: {
        count: problems.length,
        arbiterKey: first.arbiterKey,
        agentKey: first.agentKey,
        message: problems.map((p) => p.message).join('; '),
      },
    };
  }
}
