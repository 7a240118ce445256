/**
 * The heartbeat's contract: `POST /v1/heartbeat`, what a candidate reports and what the arbiter answers, and the
 * agent's reading of the answer. Apart from the lease endpoints because both daemons build on it every cycle.
 */
import type { LeaseRefusal } from './errors.js';
import { fieldsOf } from './answer.js';
import type { Host } from './host.js';
import type { LeaseRecord } from './lease.js';

/** What the arbiter answers a heartbeat with, in the documented order. */
export const HEARTBEAT_OUTCOMES = Object.freeze(['renewed', 'standby', 'no-lease', 'renew-refused'] as const);

export type HeartbeatOutcome = (typeof HEARTBEAT_OUTCOMES)[number];

const OUTCOMES: ReadonlySet<unknown> = new Set(HEARTBEAT_OUTCOMES);

export function isHeartbeatOutcome(value: unknown): value is HeartbeatOutcome {
  return OUTCOMES.has(value);
}

/** A standby's finding about the holder, as it reports it. */
export interface ViewReport {
  readonly target: Host;
  readonly reachable: boolean;
  readonly ping: boolean;
  readonly health: boolean;
}

/** The last peer confirmation a standby reports having given (S2.1, S5). */
export interface ConfirmationReport {
  readonly holder: Host;
  readonly generation: number;
  /** Seconds since the agent gave it, on its monotonic clock (a lower bound of real time). */
  readonly ageSeconds: number;
}

/**
 * What an agent's last probe found of the confirmation path to one peer (`POST /v1/peer/confirm`
 * with `probe: true`): whether the peer would answer a confirmation request from it, and since when.
 */
export interface PeerPathReport {
  readonly peer: Host;
  readonly ok: boolean;
  /** One line: why the peer could not confirm this host (null when `ok`). */
  readonly problem: string | null;
  /** Seconds since the probes first found the path in this state, on the agent's monotonic clock. */
  readonly ageSeconds: number;
}

/** `POST /v1/heartbeat`. */
export interface HeartbeatRequest {
  readonly host: Host;
  readonly generation?: number;
  readonly seenGeneration?: number;
  readonly view?: ViewReport;
  readonly confirmation?: ConfirmationReport;
  /** The agent's cadence (S6: it owns it and reports it with every heartbeat). */
  readonly heartbeatSeconds?: number;
  readonly refreshSeconds?: number;
  readonly requestTimeoutSeconds?: number;
  /** Protocol 2: the agent's hq release (absent: hq 0.1.x, protocol 1). */
  readonly version?: string;
  /** Protocol 2: the confirmation path to each peer as the agent's probes found it (absent: not probed yet, or hq 0.1.x). */
  readonly peerPaths?: readonly PeerPathReport[];
}

/** A relation across the two sides that a report breaks (S6). */
export interface TimingProblem {
  /** The agent whose report broke it. */
  readonly host: Host;
  /** The arbiter's key and the agent's key of the pair. */
  readonly arbiterKey: string;
  readonly agentKey: string;
  /** One line naming both keys, both hosts and the numbers. */
  readonly message: string;
}

/** `POST /v1/heartbeat` → 200. */
export interface HeartbeatAnswer {
  readonly outcome: HeartbeatOutcome;
  readonly reason: LeaseRefusal | null;
  readonly lease: LeaseRecord;
  /** S2.3 hold of a renewal (arbiter time), or null. */
  readonly hold: number | null;
  /** Heartbeat again after this many seconds (the start wait needs this report), or null. */
  readonly reportInSeconds: number | null;
  /** The relations across the sides that this report breaks (empty when none). */
  readonly timingProblems: readonly TimingProblem[];
  /** The worst-case failover now, as every place prints it. */
  readonly failover: string;
  /** The candidates in promotion order (agents without configured peers find theirs here). */
  readonly candidates: readonly Host[];
  /** The generation this host is asked to acknowledge its step-down from (it is the displaced holder), or null. */
  readonly stepDown: number | null;
}

/**
 * A 200 heartbeat answer as the agent reads it: field by field, each taken when well formed
 * whatever the others are (null or empty when not), so one odd field costs only itself. The
 * outcome and the lease are left for the agent's own checks (`isHeartbeatOutcome`, the record's parser).
 */
export interface HeartbeatAnswerRead {
  readonly outcome: unknown;
  readonly lease: unknown;
  readonly hold: number | null;
  /** The messages of the timing problems. */
  readonly timingProblems: readonly string[];
  readonly failover: string | null;
  readonly reportInSeconds: number | null;
  readonly candidates: readonly string[] | null;
  readonly stepDown: number | null;
}

export function readHeartbeatAnswer(body: unknown): HeartbeatAnswerRead {
  const b = fieldsOf(body);
  const timingProblems = Array.isArray(b.timingProblems)
    ? b.timingProblems.map((p) => fieldsOf(p).message).filter((m): m is string => typeof m === 'string')
    : [];
  const { hold, reportInSeconds: report, candidates, stepDown } = b;
  return {
    outcome: b.outcome,
    lease: b.lease,
    hold: typeof hold === 'number' && Number.isFinite(hold) ? hold : null,
    timingProblems,
    failover: typeof b.failover === 'string' ? b.failover : null,
    reportInSeconds: typeof report === 'number' && Number.isFinite(report) && report >= 0 ? report : null,
    candidates:
      Array.isArray(candidates) && candidates.every((h): h is string => typeof h === 'string') ? candidates : null,
    stepDown: typeof stepDown === 'number' && Number.isSafeInteger(stepDown) && stepDown > 0 ? stepDown : null,
  };
}
