/**
 * The arbiter's lease API: the record, and the request and answer of each endpoint.
 * Times are Unix epoch seconds on the arbiter's clock.
 */
import type { LeaseRefusal } from './errors.js';
import { fieldsOf } from './answer.js';
import type { Host } from './host.js';

/**
 * The highest generation hq ever writes or accepts: 2^48. A generation moves by one per change
 * of holder; at a thousand changes a second it would take about 8,900 years to get here, so no
 * real history does. It stays 32 times below 2^53, so every sum the decisions make near it
 * (floor + 1, floor + the report bound) is still an exact integer. The arbiter refuses a grant
 * above it; agents and standbys refuse a record, a peer's claim or a push above it.
 */
export const GENERATION_CEILING = 2 ** 48;

/** One observer's latest finding about the holder (its "view"). */
export interface View {
  readonly target: Host;
  readonly reachable: boolean;
  readonly ping: boolean;
  readonly health: boolean;
  /** Arbiter time at which the arbiter received (or, for its own view, made) the finding. */
  readonly at: number;
}

/** `GET /v1/lease` → the record; also inside every lease answer. */
export interface LeaseRecord {
  readonly name: 'hq';
  readonly holder: Host | null;
  readonly generation: number;
  readonly revision: number;
  readonly acquiredAt: number | null;
  readonly renewedAt: number | null;
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
  readonly expiresAt: number | null;
  readonly expired: boolean;
  /** True after a release: the holder stepped down (expired is then true too). */
  readonly released: boolean;
  readonly notBefore: number | null;
  readonly views: { readonly [observer: string]: View };
  readonly dualUnreachableStreak: number;
  readonly lastCheckAt: number | null;
  readonly promotedFrom: Host | null;
  readonly maintenance: boolean;
  readonly floorPending: boolean;
  /** The holder the current grant displaced, and its step-down acknowledgement; null when none. */
  readonly displaced: DisplacedHolder | null;
  /**
   * Which wait holds the holder back before it may run, until when and why; null when none.
   * Absent from an arbiter of hq 0.1 (read it as unknown, not as "no wait").
   */
  readonly wait?: LeaseWait | null;
  readonly now: number;
}

/**
 * What can hold a granted holder back: the old holder's lock-delay (its last possible validity),
 * the arbiter's start wait (a validity of its previous life may still run), a pending floor (a
 * new database waits for every candidate's seen generation), or a peer confirmation the new
 * holder itself gave the old one while the arbiter was unreachable (its agent waits that out).
 */
export const LEASE_WAITS = Object.freeze(['lock-delay', 'start-wait', 'floor-pending', 'confirmation'] as const);

export type LeaseWaitKind = (typeof LEASE_WAITS)[number];

/** The record's `wait`: the arbiter's own account of what the holder waits for. */
export interface LeaseWait {
  readonly kind: LeaseWaitKind;
  /** Arbiter time it ends by itself; null when it ends only on reports (`floor-pending`). */
  readonly until: number | null;
  /** The host whose validity it waits out (the displaced holder, or the one confirmed); null when none. */
  readonly host: Host | null;
  /** Candidates that have not yet reported, since the arbiter started, in a request that counts. */
  readonly unreported: Host[];
  /** One sentence for an operator: which wait, until when, why, and what ends it sooner. */
  readonly text: string;
}

/**
 * The holder a grant displaced, whose validity the grant's lock-delay waits for. Its agent steps
 * down (persisted, fenced children gone) and acknowledges (`POST /v1/lease/stepped-down`); the
 * arbiter then ends the lock-delay at once and sets `acknowledgedAt` and `savedSeconds`.
 */
export interface DisplacedHolder {
  readonly host: Host;
  readonly generation: number;
  /** Arbiter time the acknowledgement was accepted; null before. */
  readonly acknowledgedAt: number | null;
  /** How much of the lock-delay it ended, seconds; null before. */
  readonly savedSeconds: number | null;
}

/** `POST /v1/lease/acquire`. */
export interface AcquireRequest {
  readonly host: Host;
  readonly seenGeneration?: number;
  /** The sender's request timeout (the `hq` CLI sends its own), for S2.3's counting. */
  readonly requestTimeoutSeconds?: number;
}

/** `POST /v1/lease/renew`. */
export interface RenewRequest {
  readonly host: Host;
  readonly generation: number;
}

/** `POST /v1/lease/release`. */
export interface ReleaseRequest {
  readonly host: Host;
  readonly generation?: number;
  readonly handoverTo?: Host;
  /** Hand over even to a target not heard from within its heartbeat interval. */
  readonly force?: boolean;
  /** With `handoverTo`: this holder ran the generation it hands over (as in `StepDownAck`). */
  readonly ran?: boolean;
}

/** `POST /v1/lease/transfer` (admin). */
export interface TransferRequest {
  readonly to: Host;
  readonly force?: boolean;
}

/** `POST /v1/lease/stepped-down` (member): "generation g stepped down, no fenced child alive". */
export interface StepDownAck {
  /** The displaced holder (a member token may only name its own machine). */
  readonly host: Host;
  /** The generation it stepped down from. */
  readonly generation: number;
  /** The revision of the record in which it saw that it lost the lease. */
  readonly revision: number;
  /**
   * This agent ran the generation (its lock-delay and every wait of its own were over), in the
   * life that acknowledges: the wait before it — the holder before it — is over too.
   */
  readonly ran?: boolean;
}

/**
 * Why an acknowledgement changed nothing: no grant displaced this host, it held another
 * generation, it had not seen the displacing grant, it was accepted already, the lock-delay is
 * over, or the lock-delay waits for more than this holder (the one before it, the start wait, a
 * pending floor).
 */
export const STEP_DOWN_REFUSALS = Object.freeze([
  'not-previous-holder',
  'wrong-generation',
  'stale-revision',
  'duplicate',
  'late',
  'other-wait',
] as const);

export type StepDownRefusal = (typeof STEP_DOWN_REFUSALS)[number];

/** `POST /v1/lease/stepped-down` → 200, accepted or not (a refusal is no error: there is nothing to retry). */
export interface StepDownAckAnswer {
  readonly accepted: boolean;
  readonly reason: StepDownRefusal | null;
  /** Seconds of lock-delay the acknowledgement ended; null when refused. */
  readonly savedSeconds: number | null;
  readonly lease: LeaseRecord;
}

/** `PUT /v1/maintenance` (admin). */
export interface MaintenanceRequest {
  readonly enabled: boolean;
  readonly reason?: string;
}

/** 200 of every lease mutation. `hold` (S2.3, arbiter time) only on acquire and renew. */
export interface LeaseGranted {
  readonly ok: true;
  readonly lease: LeaseRecord;
  readonly hold?: number | null;
}

/** 409 of every lease mutation. */
export interface LeaseConflict {
  readonly ok: false;
  readonly reason: LeaseRefusal;
  readonly lease: LeaseRecord;
  readonly error: string;
  readonly message: string;
}

/**
 * When the record's holder may run, in arbiter time: from `from` (its lock-delay or the start
 * wait, `notBefore`; now when that has passed) until `until` (`expiresAt`). A grant behind a wait
 * counts its validity from the wait's end, so `expiresAt − now` can exceed the TTL; what the
 * holder may run for is `validSeconds` (`until − max(now, from)`), never more than the TTL the
 * grant or renewal gave. Null when no host may run on this record (no holder, released,
 * expired, the floor pending: the validity then starts only once it is complete).
 */
export interface RunWindow {
  readonly from: number;
  readonly until: number;
  /** Seconds until it may run (0: it may now). */
  readonly startsInSeconds: number;
  /** Seconds it may run from then (or from now), at most the TTL. */
  readonly validSeconds: number;
}

export function runWindow(
  r: Pick<LeaseRecord, 'holder' | 'released' | 'expired' | 'expiresAt' | 'notBefore' | 'floorPending' | 'now'>,
): RunWindow | null {
  if (r.holder === null || r.released || r.expired || r.expiresAt === null || r.floorPending) return null;
  const from = Math.max(r.now, r.notBefore ?? r.now);
  if (from >= r.expiresAt) return null;
  return { from, until: r.expiresAt, startsInSeconds: from - r.now, validSeconds: r.expiresAt - from };
}

// ---------------------------------------------------------------------------------------
// the heartbeat

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

// ---------------------------------------------------------------------------------------
// the rest

/** `POST /v1/check` (admin) → 200. */
export interface CheckAnswer {
  readonly promoted: boolean;
  readonly streak: number;
  readonly holder: Host | null;
  readonly generation: number;
  readonly ping: boolean;
  readonly health: boolean;
  readonly promotee: Host | null;
  /** Why no check ran (maintenance, no holder, …); absent when one did. */
  readonly skipped?: string;
}

/** `GET /v1/primary` on the arbiter and on every agent. */
export interface PrimaryAnswer {
  readonly known: boolean;
  readonly holder: Host | null;
  readonly generation: number;
}

/** `GET /v1/health` on the arbiter and on every agent's peer listener. */
export interface HealthAnswer<Role extends 'arbiter' | 'agent' = 'arbiter' | 'agent'> {
  readonly status: 'ok';
  readonly role: Role;
  readonly host: Host;
  readonly version: string;
  /** The arbiter's store (absent on an agent). */
  readonly store?: 'sqlite' | 'etcd';
  /** Store etcd only: the election and the members. */
  readonly arbiters?: ArbitersView;
}

/** Store etcd: which arbiter decides, and the etcd members as this arbiter last saw them. */
export interface ArbitersView {
  /** This arbiter is the elected one and decides. */
  readonly elected: boolean;
  /** The elected arbiter's URL (null: none known). */
  readonly leader: string | null;
  /** This arbiter's advertised URL. */
  readonly self: string;
  /** Seconds this arbiter's term stays valid by its own clock (0 when not elected). */
  readonly termSeconds: number;
  readonly etcd: {
    /** A majority of the members answered with a raft leader. */
    readonly healthy: boolean;
    readonly members: ReadonlyArray<{
      readonly endpoint: string;
      readonly ok: boolean;
      readonly leader?: string | null;
      readonly version?: string;
      readonly error?: string;
      readonly dbSizeBytes?: number;
    }>;
    /** How close etcd is to its space quota (absent until a member answered). */
    readonly space?: EtcdSpace;
    /** The elected arbiter's compaction of etcd's history. */
    readonly compaction?: { readonly intervalSeconds: number; readonly revision: number | null };
  };
}

/** How close etcd is to its space quota: the largest member's database file against the quota. */
export interface EtcdSpace {
  readonly dbSizeBytes: number;
  /** Of it, in use (the rest is freed by compaction and given back by a defragmentation). */
  readonly dbSizeInUseBytes: number;
  readonly quotaBytes: number;
  /** `members`: a member said its quota (etcd 3.6 on); `config`: `store.quotaBackendBytes`. */
  readonly quotaFrom: 'members' | 'config';
  /** dbSizeBytes / quotaBytes. */
  readonly usedRatio: number;
  /** A member raised NOSPACE: etcd refuses every write. */
  readonly alarm: boolean;
  readonly level: 'ok' | 'warn' | 'bad';
  /** One line with what to do, null at level ok. */
  readonly warning: string | null;
}

/** `GET /v1/events?after=&limit=&tail=&since=`: digits only (no coercion), ranges checked by the route. */
export interface EventsQuery {
  readonly after?: string;
  readonly limit?: string;
  /** The newest N events (1–1000), oldest first. */
  readonly tail?: string;
  /** Events at or after this arbiter time (epoch seconds, may be fractional). */
  readonly since?: string;
}

/** One row of the event log (`GET /v1/events`, and each `data:` line of `GET /v1/events/stream`). */
export interface EventRecord {
  readonly id: number;
  readonly at: number;
  readonly category: string;
  readonly event: string;
  readonly host: Host | null;
  readonly data: { readonly [key: string]: unknown };
}

/** `GET /v1/events` → 200. */
export interface EventsAnswer {
  readonly events: readonly EventRecord[];
}

export function isEventRecord(v: unknown): v is EventRecord {
  const e = fieldsOf(v);
  return (
    Number.isSafeInteger(e.id) &&
    typeof e.at === 'number' &&
    typeof e.category === 'string' &&
    typeof e.event === 'string' &&
    (e.host === null || typeof e.host === 'string') &&
    typeof e.data === 'object' &&
    e.data !== null
  );
}

/** The events of a `GET /v1/events` answer; a row that is not an event is left out. */
export function eventsOf(body: unknown): EventRecord[] {
  const events = fieldsOf(body).events;
  return Array.isArray(events) ? events.filter(isEventRecord) : [];
}
