/**
 * S6 — the configuration cannot make S2 or L1 impossible.
 *
 * Safety never rests on these numbers (lock-delay makes a promoted host wait for the old
 * holder's validity to end whatever they are); they decide whether failover *can* happen and
 * how long it takes. `checkTiming` is the one place the relationships are written down; both
 * daemons call it at load and refuse to start with its one-line message.
 */

export interface Timing {
  /** Lease TTL, seconds. */
  readonly ttlSeconds: number;
  /** Seconds between heartbeats (the largest gap of `heartbeatCron`). */
  readonly heartbeatSeconds: number;
  /** Seconds between arbiter checks (the largest gap of `checkCron`). */
  readonly checkSeconds: number;
  readonly viewFreshSeconds: number;
  readonly probeTimeoutSeconds: number;
  /** The agent's cache refresh between heartbeats. */
  readonly refreshSeconds: number;
  readonly safetyMarginSeconds: number;
  readonly promoteAfterChecks: number;
}

/** The largest clock-rate error the margin must absorb over one TTL (S6: 1 %). */
export const MAX_DRIFT_RATE = 0.01;

/** The holder must renew this much faster than the TTL (S6: interval × 1.2 < ttl). */
export const RENEW_FACTOR = 1.2;

export type TimingResult =
  | { readonly ok: true; readonly failoverSeconds: number; readonly lockDelaySeconds: number }
  | { readonly ok: false; readonly key: string; readonly message: string };

function num(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

/**
 * Lock-delay after the holder's last renewal: its validity (ttl − margin, measured on its
 * clock) plus one margin for the arbiter's and the promotee's clocks — see `lockDelayUntil`.
 */
export function lockDelaySeconds(t: Pick<Timing, 'ttlSeconds' | 'safetyMarginSeconds'>): number {
  return t.ttlSeconds + t.safetyMarginSeconds;
}

/**
 * Worst-case failover (SPEC S6): the later of the promotion path (`promoteAfterChecks` checks
 * plus one heartbeat for the standby's view to be fresh) and the lock-delay, plus one cache
 * refresh for the promoted agent to hear of it.
 */
export function failoverSeconds(t: Timing): number {
  const promotion = t.promoteAfterChecks * t.checkSeconds + t.heartbeatSeconds;
  return Math.max(promotion, lockDelaySeconds(t)) + Math.min(t.refreshSeconds, t.heartbeatSeconds);
}

/** Checks every relationship of S6; the first broken one is reported with its numbers. */
export function checkTiming(t: Timing): TimingResult {
  const positive: ReadonlyArray<readonly [string, number]> = [
    ['ttlSeconds', t.ttlSeconds],
    ['heartbeatCron', t.heartbeatSeconds],
    ['checkCron', t.checkSeconds],
    ['viewFreshSeconds', t.viewFreshSeconds],
    ['probeTimeoutSeconds', t.probeTimeoutSeconds],
    ['refreshSeconds', t.refreshSeconds],
  ];
  for (const [key, value] of positive) {
    if (!Number.isFinite(value) || value <= 0) {
      return { ok: false, key, message: `${key} must be a positive number of seconds (got ${num(value)})` };
    }
  }
  if (!Number.isFinite(t.safetyMarginSeconds) || t.safetyMarginSeconds < 0) {
    return { ok: false, key: 'safetyMarginSeconds', message: `safetyMarginSeconds must be ≥ 0 (got ${num(t.safetyMarginSeconds)})` };
  }
  if (!Number.isSafeInteger(t.promoteAfterChecks) || t.promoteAfterChecks < 1) {
    return { ok: false, key: 'promoteAfterChecks', message: `promoteAfterChecks must be an integer ≥ 1 (got ${num(t.promoteAfterChecks)})` };
  }
  if (t.heartbeatSeconds * RENEW_FACTOR >= t.ttlSeconds) {
    return {
      ok: false,
      key: 'ttlSeconds',
      message: `ttlSeconds (${num(t.ttlSeconds)}) must exceed the heartbeat interval × ${RENEW_FACTOR} (${num(t.heartbeatSeconds)} × ${RENEW_FACTOR} = ${num(t.heartbeatSeconds * RENEW_FACTOR)}), or the holder cannot renew in time`,
    };
  }
  if (t.viewFreshSeconds < t.heartbeatSeconds) {
    return {
      ok: false,
      key: 'viewFreshSeconds',
      message: `viewFreshSeconds (${num(t.viewFreshSeconds)}) must cover at least one heartbeat interval (${num(t.heartbeatSeconds)}), or no view is ever fresh and failover never happens`,
    };
  }
  if (t.probeTimeoutSeconds >= t.checkSeconds) {
    return {
      ok: false,
      key: 'probeTimeoutSeconds',
      message: `probeTimeoutSeconds (${num(t.probeTimeoutSeconds)}) must be shorter than the check interval (${num(t.checkSeconds)}), or a check runs into the next one`,
    };
  }
  if (t.refreshSeconds >= t.ttlSeconds) {
    return {
      ok: false,
      key: 'refreshSeconds',
      message: `refreshSeconds (${num(t.refreshSeconds)}) must be shorter than ttlSeconds (${num(t.ttlSeconds)}), or a transfer reaches the agent too late`,
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
  return { ok: true, failoverSeconds: failoverSeconds(t), lockDelaySeconds: lockDelaySeconds(t) };
}
