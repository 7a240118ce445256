/**
 * S6 — the configuration cannot make S2 or L1 impossible, and every setting has one owner.
 *
 * The arbiter owns the lease timing (`ttlSeconds`, `safetyMarginSeconds`, `viewFreshSeconds`,
 * `promoteAfterChecks`, `checkCron`); an agent owns its cadence (`heartbeatCron`,
 * `refreshSeconds`, `probeTimeoutSeconds`, `requestTimeoutSeconds`). Neither checks the other's
 * keys against a default it assumed:
 *  - `checkLeaseTiming` — the arbiter's own relations, at its load (refused: exit 2);
 *  - `checkCadence` — an agent's own relations, at its load (refused: exit 2);
 *  - `crossTiming` — the relations that span both, checked by the arbiter on every report with
 *    the cadence the agent sent and its own timing; a broken one is a problem report naming both
 *    keys, both hosts and the numbers, never a refusal (the lease keeps working as well as the
 *    numbers allow, and every place an operator looks says so).
 * Agents learn `ttlSeconds` and `safetyMarginSeconds` from the record. Safety never rests on
 * these numbers: lock-delay makes a promoted host wait for the old holder's validity whatever
 * they are; they decide whether failover *can* happen and how long it takes.
 */
import type { Host, TimingProblem } from '@hq/protocol';
import type { ArbiterState } from './arbiter.js';

/** The lease timing, owned by the arbiter. */
export interface LeaseTiming {
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
  /** Seconds between arbiter checks (the largest gap of `checkCron`). */
  readonly checkSeconds: number;
  readonly viewFreshSeconds: number;
  readonly promoteAfterChecks: number;
  /** The arbiter's own probe timeout. */
  readonly probeTimeoutSeconds: number;
}

/** An agent's cadence, owned by that agent and reported with every heartbeat. */
export interface Cadence {
  /** Seconds between heartbeats (the largest gap of `heartbeatCron`). */
  readonly heartbeatSeconds: number;
  readonly refreshSeconds: number;
  readonly probeTimeoutSeconds: number;
  readonly requestTimeoutSeconds: number;
}

/** Both sides at once (the simulator, the benches and the example configs' test). */
export type Timing = LeaseTiming & Cadence;

/** The largest clock-rate error the margin must absorb over one TTL (S6: 1 %). */
export const MAX_DRIFT_RATE = 0.01;

/** The holder renews this many times per validity, whatever its cron says (S6). */
export const RENEWALS_PER_VALIDITY = 3;

export type TimingResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly key: string; readonly message: string };

function num(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

function positive(pairs: ReadonlyArray<readonly [string, number]>): TimingResult {
  for (const [key, value] of pairs) {
    if (!Number.isFinite(value) || value <= 0)
      return { ok: false, key, message: `${key} must be a positive number of seconds (got ${num(value)})` };
  }
  return { ok: true };
}

/** The arbiter's own relations (checked at its load). */
export function checkLeaseTiming(t: LeaseTiming): TimingResult {
  const p = positive([
    ['ttlSeconds', t.ttlSeconds],
    ['checkCron', t.checkSeconds],
    ['viewFreshSeconds', t.viewFreshSeconds],
    ['probeTimeoutSeconds', t.probeTimeoutSeconds],
  ]);
  if (!p.ok) return p;
  if (!Number.isFinite(t.safetyMarginSeconds) || t.safetyMarginSeconds < 0) {
    return {
      ok: false,
      key: 'safetyMarginSeconds',
      message: `safetyMarginSeconds must be ≥ 0 (got ${num(t.safetyMarginSeconds)})`,
    };
  }
  if (!Number.isSafeInteger(t.promoteAfterChecks) || t.promoteAfterChecks < 1) {
    return {
      ok: false,
      key: 'promoteAfterChecks',
      message: `promoteAfterChecks must be an integer ≥ 1 (got ${num(t.promoteAfterChecks)})`,
    };
  }
  if (t.probeTimeoutSeconds >= t.checkSeconds) {
    return {
      ok: false,
      key: 'probeTimeoutSeconds',
      message: `probeTimeoutSeconds (${num(t.probeTimeoutSeconds)}) must be shorter than the check interval of checkCron (${num(t.checkSeconds)}), or a check runs into the next one`,
    };
  }
  if (t.safetyMarginSeconds < t.ttlSeconds * MAX_DRIFT_RATE) {
    return {
      ok: false,
      key: 'safetyMarginSeconds',
      message: `safetyMarginSeconds (${num(t.safetyMarginSeconds)}) must cover ${MAX_DRIFT_RATE * 100}% clock-rate drift of ttlSeconds (${num(t.ttlSeconds)} × ${MAX_DRIFT_RATE} = ${num(t.ttlSeconds * MAX_DRIFT_RATE)})`,
    };
  }
  if (t.safetyMarginSeconds >= t.ttlSeconds / 2) {
    return {
      ok: false,
      key: 'safetyMarginSeconds',
      message: `safetyMarginSeconds (${num(t.safetyMarginSeconds)}) must be less than half of ttlSeconds (${num(t.ttlSeconds)}), or the holder's validity (ttl − margin) is too short to renew within`,
    };
  }
  return { ok: true };
}

/** An agent's own relations (checked at its load). */
export function checkCadence(c: Cadence): TimingResult {
  const p = positive([
    ['heartbeatCron', c.heartbeatSeconds],
    ['refreshSeconds', c.refreshSeconds],
    ['probeTimeoutSeconds', c.probeTimeoutSeconds],
    ['requestTimeoutSeconds', c.requestTimeoutSeconds],
  ]);
  if (!p.ok) return p;
  if (c.probeTimeoutSeconds >= c.heartbeatSeconds) {
    return {
      ok: false,
      key: 'probeTimeoutSeconds',
      message: `probeTimeoutSeconds (${num(c.probeTimeoutSeconds)}) must be shorter than the heartbeat interval of heartbeatCron (${num(c.heartbeatSeconds)}), or a heartbeat runs into the next one`,
    };
  }
  return { ok: true };
}

/**
 * The relations across the two sides, for one agent's report (`cadence` as far as it sent it):
 *  1. its views can be fresh: `viewFreshSeconds` covers its heartbeat interval, else a view it
 *     reports is stale before the next one and the arbiter never promotes it (L1 impossible);
 *  2. its refresh is shorter than the TTL, else a transfer or promotion reaches it late;
 *  3. its request timeout is shorter than the validity `ttl − margin`, else an answer it still
 *     accepts may come when the validity it grants is already over.
 */
export function crossTiming(arbiter: string, t: LeaseTiming, host: string, cadence: Partial<Cadence>): TimingProblem[] {
  const out: TimingProblem[] = [];
  const problem = (arbiterKey: string, agentKey: string, message: string): void => {
    out.push({ host, arbiterKey, agentKey, message });
  };
  const { heartbeatSeconds: hb, refreshSeconds: refresh, requestTimeoutSeconds: rt } = cadence;
  if (hb !== undefined && t.viewFreshSeconds < hb) {
    problem(
      'viewFreshSeconds',
      'heartbeatCron',
      `viewFreshSeconds (${num(t.viewFreshSeconds)} s, arbiter ${arbiter}) must cover the heartbeat interval of heartbeatCron on ${host} (${num(hb)} s): its views go stale before the next one, so ${host} can never be promoted`,
    );
  }
  if (refresh !== undefined && refresh >= t.ttlSeconds) {
    problem(
      'ttlSeconds',
      'refreshSeconds',
      `refreshSeconds (${num(refresh)} s on ${host}) must be shorter than ttlSeconds (${num(t.ttlSeconds)} s, arbiter ${arbiter}): a transfer or promotion reaches ${host} too late`,
    );
  }
  const validity = t.ttlSeconds - t.safetyMarginSeconds;
  if (rt !== undefined && rt >= validity) {
    problem(
      'ttlSeconds',
      'requestTimeoutSeconds',
      `requestTimeoutSeconds (${num(rt)} s on ${host}) must be shorter than the validity ttlSeconds − safetyMarginSeconds (${num(t.ttlSeconds)} − ${num(t.safetyMarginSeconds)} = ${num(validity)} s, arbiter ${arbiter})`,
    );
  }
  return out;
}

/** Both sides together: the arbiter's relations, the agent's, then the cross ones. */
export function checkTiming(t: Timing): TimingResult {
  const lease = checkLeaseTiming(t);
  if (!lease.ok) return lease;
  const cadence = checkCadence(t);
  if (!cadence.ok) return cadence;
  const [cross] = crossTiming('arbiter', t, 'agent', t);
  return cross === undefined ? { ok: true } : { ok: false, key: cross.agentKey, message: cross.message };
}

/**
 * Lock-delay after the holder's last renewal: its validity (ttl − margin, measured on its
 * clock) plus one margin for the arbiter's and the promotee's clocks — see `lockDelayUntil`.
 */
export function lockDelaySeconds(t: Pick<LeaseTiming, 'ttlSeconds' | 'safetyMarginSeconds'>): number {
  return t.ttlSeconds + t.safetyMarginSeconds;
}

/** What the worst-case failover is made of, and the result (S6: one function, every place prints it). */
export interface Failover {
  readonly seconds: number;
  readonly promoteAfterChecks: number;
  readonly checkSeconds: number;
  /** The promotee's heartbeat interval as it reported it; null while no standby has reported. */
  readonly heartbeatSeconds: number | null;
  readonly promotionSeconds: number;
  readonly lockDelaySeconds: number;
}

/**
 * Worst-case failover: the later of the promotion path (`promoteAfterChecks` checks plus one
 * heartbeat of the promotee for its view to be fresh) and the lock-delay. `heartbeatSeconds`
 * is the slowest reporting standby's interval (null: none reported yet, counted as 0).
 */
export function failover(
  t: Pick<LeaseTiming, 'ttlSeconds' | 'safetyMarginSeconds' | 'checkSeconds' | 'promoteAfterChecks'>,
  heartbeatSeconds: number | null,
): Failover {
  const promotionSeconds = t.promoteAfterChecks * t.checkSeconds + (heartbeatSeconds ?? 0);
  const lockDelay = lockDelaySeconds(t);
  return {
    seconds: Math.max(promotionSeconds, lockDelay),
    promoteAfterChecks: t.promoteAfterChecks,
    checkSeconds: t.checkSeconds,
    heartbeatSeconds,
    promotionSeconds,
    lockDelaySeconds: lockDelay,
  };
}

/** Seconds as a person reads them: `7 s`, `10 min`, `25.5 min`, `2 h`, `365 d`. */
export function humanSeconds(s: number): string {
  const r = (n: number): string => String(Math.round(n * 10) / 10);
  if (s < 120) return `${r(s)} s`;
  if (s < 7200) return `${r(s / 60)} min`;
  if (s < 172_800) return `${r(s / 3600)} h`;
  return `${r(s / 86_400)} d`;
}

/** The one sentence every place prints (log, status page, `hq lease status`, `hq doctor`). */
export function describeFailover(f: Failover): string {
  const hb =
    f.heartbeatSeconds === null
      ? 'one standby heartbeat (not reported yet)'
      : `one heartbeat ${humanSeconds(f.heartbeatSeconds)}`;
  return (
    `${humanSeconds(f.seconds)} worst case: the later of ${f.promoteAfterChecks} checks × ${humanSeconds(f.checkSeconds)} + ${hb}` +
    ` = ${humanSeconds(f.promotionSeconds)}, and lock-delay ${humanSeconds(f.lockDelaySeconds)}`
  );
}

/**
 * `crossTiming` of one report. A pure function of the timing and the cadence the report states,
 * which is the same in nearly every heartbeat: each is computed once per timing (the arrays are
 * frozen, shared by every answer that names them).
 */
export function reportedTiming(
  arbiter: string,
  t: LeaseTiming,
  host: string,
  cadence: Partial<Cadence>,
): readonly TimingProblem[] {
  let known = REPORTED.get(t);
  if (known === undefined) {
    known = new Map();
    REPORTED.set(t, known);
  }
  const key = `${arbiter}\n${host}\n${cadence.heartbeatSeconds}\n${cadence.refreshSeconds}\n${cadence.requestTimeoutSeconds}`;
  let problems = known.get(key);
  if (problems === undefined) {
    problems = Object.freeze(crossTiming(arbiter, t, host, cadence).map((p) => Object.freeze(p)));
    // Bounded: agents could report many cadences over a long life; start again past a few hundred.
    if (known.size >= REPORTED_PER_TIMING) known.clear();
    known.set(key, problems);
  }
  return problems;
}

const REPORTED = new WeakMap<LeaseTiming, Map<string, readonly TimingProblem[]>>();
const REPORTED_PER_TIMING = 256;

/** A failover with the sentence every place prints. */
export type DescribedFailover = Failover & { readonly text: string };

/**
 * The worst-case failover of a state: the promotion path uses the slowest heartbeat interval a
 * standby (a candidate other than the holder) reported, since any of them may be the promotee.
 */
export function stateFailover(state: ArbiterState, candidates: readonly Host[], t: LeaseTiming): DescribedFailover {
  let hb: number | null = null;
  for (const host of candidates) {
    if (host === state.lease.holder) continue;
    const s = state.observers.get(host)?.heartbeatSeconds ?? null;
    if (s !== null) hb = Math.max(hb ?? 0, s);
  }
  // A pure function of the timing and `hb`, asked on every heartbeat with the same few values:
  // each is computed once per timing.
  let known = FAILOVERS.get(t);
  if (known === undefined) {
    known = new Map();
    FAILOVERS.set(t, known);
  }
  let f = known.get(hb);
  if (f === undefined) {
    const bare = failover(t, hb);
    f = Object.freeze({ ...bare, text: describeFailover(bare) });
    if (known.size >= FAILOVERS_PER_TIMING) known.clear();
    known.set(hb, f);
  }
  return f;
}

const FAILOVERS = new WeakMap<LeaseTiming, Map<number | null, DescribedFailover>>();
const FAILOVERS_PER_TIMING = 64;

/**
 * How often an agent that knows of no holder (none learned yet, or the record says released)
 * reads the lease: a lease read is one cheap GET, and the standby then learns of the first grant
 * within seconds instead of at its next refresh (a minute at the defaults) — without any new
 * message from the holder's side to its peers, which would need its own auth and retries.
 */
export const NO_HOLDER_REFRESH_SECONDS = 2;

/** Seconds until an agent's next lease read: `refreshSeconds`, sooner while it knows of no holder. */
export function refreshEverySeconds(
  known: { readonly holder: string | null; readonly released: boolean } | null,
  refreshSeconds: number,
): number {
  const noHolder = known === null || known.holder === null || known.released;
  return noHolder ? Math.min(refreshSeconds, NO_HOLDER_REFRESH_SECONDS) : refreshSeconds;
}

/**
 * How often the holder renews (S6): on its cron, but never less often than
 * `RENEWALS_PER_VALIDITY` times per validity of the lease it holds, so a long cron cannot let a
 * held lease lapse.
 */
export function renewEverySeconds(ttlSeconds: number, safetyMarginSeconds: number, heartbeatSeconds: number): number {
  return Math.min(heartbeatSeconds, (ttlSeconds - safetyMarginSeconds) / RENEWALS_PER_VALIDITY);
}
