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
  describeFailover,
  failover,
  type ArbiterState,
  type Cadence,
  type Failover,
  type LeaseTiming,
  type Observer,
} from '@hq/lease-core';
import type { TimingProblem } from '@hq/protocol';
import type { ArbiterConfig } from './config.js';

export function leaseTimingOf(config: ArbiterConfig): LeaseTiming {
  return {
    ttlSeconds: config.ttlSeconds,
    safetyMarginSeconds: config.safetyMarginSeconds,
    checkSeconds: config.checkSeconds,
    viewFreshSeconds: config.viewFreshSeconds,
    promoteAfterChecks: config.promoteAfterChecks,
    probeTimeoutSeconds: config.probeTimeoutSeconds,
  };
}

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

/**
 * The worst-case failover now: the promotion path uses the slowest heartbeat interval a standby
 * (a candidate other than the holder) reported, since any of them may be the promotee.
 */
export function failoverOf(config: ArbiterConfig, state: ArbiterState): Failover & { readonly text: string } {
  let hb: number | null = null;
  for (const host of config.candidates) {
    if (host === state.lease.holder) continue;
    const s = state.observers.get(host)?.heartbeatSeconds ?? null;
    if (s !== null) hb = Math.max(hb ?? 0, s);
  }
  // A pure function of the config and `hb`: every heartbeat asks it twice (its answer and
  // `noteTiming`) with the same few values, so each is computed once per config.
  let known = FAILOVERS.get(config);
  if (known === undefined) {
    known = new Map();
    FAILOVERS.set(config, known);
  }
  let f = known.get(hb);
  if (f === undefined) {
    const bare = failover(leaseTimingOf(config), hb);
    f = Object.freeze({ ...bare, text: describeFailover(bare) });
    // Bounded: an agent could report many intervals over a long life; start again past a few.
    if (known.size >= FAILOVERS_PER_CONFIG) known.clear();
    known.set(hb, f);
  }
  return f;
}

/** The failovers computed so far, per config (a config is never changed in place) and reported interval. */
const FAILOVERS = new WeakMap<ArbiterConfig, Map<number | null, Failover & { readonly text: string }>>();
const FAILOVERS_PER_CONFIG = 64;

/** An agent is silent once no heartbeat came for more than this many of its reported intervals. */
export const SILENT_AFTER_INTERVALS = 2;

/** True when `ageSeconds` since the last heartbeat is past `SILENT_AFTER_INTERVALS` of its interval. */
export function isSilent(ageSeconds: number, intervalSeconds: number): boolean {
  return ageSeconds > SILENT_AFTER_INTERVALS * intervalSeconds;
}

/**
 * `crossTiming` of a candidate's report: a pure function of the config and the cadence the
 * report states, which is the same in nearly every report — so each is computed once per
 * config (every heartbeat asked it, building its messages again). The arrays are
 * frozen: shared by every answer that names them.
 */
export function reportedTiming(
  config: ArbiterConfig,
  timing: LeaseTiming,
  host: string,
  cadence: Partial<Cadence>,
): readonly TimingProblem[] {
  let known = REPORTED.get(config);
  if (known === undefined) {
    known = new Map();
    REPORTED.set(config, known);
  }
  const key = `${host}\n${cadence.heartbeatSeconds}\n${cadence.refreshSeconds}\n${cadence.requestTimeoutSeconds}`;
  let problems = known.get(key);
  if (problems === undefined) {
    problems = Object.freeze(crossTiming(config.arbiter, timing, host, cadence).map((p) => Object.freeze(p)));
    if (known.size >= REPORTED_PER_CONFIG) known.clear();
    known.set(key, problems);
  }
  return problems;
}

const REPORTED = new WeakMap<ArbiterConfig, Map<string, readonly TimingProblem[]>>();
const REPORTED_PER_CONFIG = 256;

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
