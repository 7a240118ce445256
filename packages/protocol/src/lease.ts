/**
 * The arbiter's lease API: the record, and the request and answer of each endpoint.
 * Times are Unix epoch seconds on the arbiter's clock.
 */
import type { LeaseRefusal } from './errors.js';
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

export * from './arbiter-answers.js';
export * from './heartbeat.js';
