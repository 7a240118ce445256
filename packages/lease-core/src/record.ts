/**
 * The lease record and the small value types every decision shares.
 *
 * Times in the record are Unix epoch seconds on the *arbiter's* clock. Agents never compare
 * them with their own clocks: they only use differences of two arbiter times taken from one
 * answer (`notBefore - now`), measured afterwards on their own monotonic clock.
 */
import {
  GENERATION_CEILING,
  isHost,
  type DisplacedHolder,
  type Host,
  type LeaseRecord,
  type LeaseWait,
  type View,
} from '@hq/protocol';

/**
 * The last peer confirmation an observer reports having given (S2.1, S5): the holder it
 * confirmed, at which generation, and when, as arbiter time (receive time minus the age the
 * observer measured on its own monotonic clock, so the estimate can only be late, never early).
 */
export interface Confirmation {
  readonly holder: Host;
  readonly generation: number;
  readonly at: number;
}

/** What the arbiter stores about one observer besides its view. */
export interface Observer {
  readonly view: View | null;
  readonly confirmation: Confirmation | null;
  /** Arbiter time of the observer's last heartbeat. */
  readonly lastHeartbeatAt: number | null;
  /** The heartbeat interval the agent reported, seconds (S6: a view can be fresh). */
  readonly heartbeatSeconds: number | null;
  /** The rest of the cadence it reported (S6: the arbiter checks the pairs across the sides). */
  readonly refreshSeconds?: number | null;
  readonly requestTimeoutSeconds?: number | null;
}

/**
 * The holder a grant displaced, whose validity the grant's lock-delay waits for. Its
 * agent, once it has persisted "stepped down from `generation`" and seen its fenced children gone,
 * acknowledges; the arbiter then ends the lock-delay at once — down to `floor`, never below it.
 */
export interface Displaced {
  readonly host: Host;
  /** The generation it held: the one an acknowledgement must name. */
  readonly generation: number;
  /** The revision of the displacing grant: an acknowledgement names it or a later one (it saw the grant). */
  readonly revision: number;
  /**
   * What an acknowledgement cannot end: the displaced holder's own lock-delay (`notBefore` of its
   * grant), which waits for the holder before it. Null when its grant had none.
   */
  readonly floor: number | null;
  /** Arbiter time the acknowledgement was accepted; null before. */
  readonly acknowledgedAt: number | null;
  /** How much of the lock-delay the acknowledgement ended, seconds; null before. */
  readonly savedSeconds: number | null;
}

/** The stored lease row: everything but views, which live per observer. */
export interface LeaseState {
  readonly holder: Host | null;
  /** The fencing token: +1 on every change of holder, 0 = never granted. */
  readonly generation: number;
  /** +1 on every write of the record: the compare-and-swap token and the ETag. */
  readonly revision: number;
  readonly acquiredAt: number | null;
  readonly renewedAt: number | null;
  readonly ttlSeconds: number;
  /** The arbiter's margin when it last wrote the grant or renewal: agents shave it off validity (S6). */
  readonly safetyMarginSeconds: number;
  readonly expiresAt: number | null;
  /** Set by release: the holder stepped down; the record stays, marked expired. */
  readonly released: boolean;
  /** Lock-delay: the holder may not run before this arbiter time. */
  readonly notBefore: number | null;
  /**
   * S2.4: the database was created by this arbiter and not every candidate has yet reported
   * its seen generation; the holder stays behind lock-delay and its generation may be raised.
   */
  readonly floorPending: boolean;
  readonly dualUnreachableStreak: number;
  readonly lastCheckAt: number | null;
  readonly promotedFrom: Host | null;
  readonly maintenance: boolean;
  readonly maintenanceReason: string | null;
  /** Set by every grant that displaced a holder; absent in a row written before 0.2.0 (= null). */
  readonly displaced?: Displaced | null;
}

export function emptyLease(ttlSeconds: number, safetyMarginSeconds = 0): LeaseState {
  return {
    holder: null,
    generation: 0,
    revision: 0,
    acquiredAt: null,
    renewedAt: null,
    ttlSeconds,
    safetyMarginSeconds,
    expiresAt: null,
    released: false,
    notBefore: null,
    floorPending: false,
    dualUnreachableStreak: 0,
    lastCheckAt: null,
    promotedFrom: null,
    maintenance: false,
    maintenanceReason: null,
    displaced: null,
  };
}

/** A lease with no holder, a released one, or one past `expiresAt` is expired. */
export function isExpired(lease: LeaseState, now: number): boolean {
  if (lease.holder === null) return true;
  if (lease.released) return true;
  return lease.expiresAt === null || now >= lease.expiresAt;
}

/**
 * Builds the API record (`wait`: `leaseWait` of the same state, which needs the arbiter's life). `views` is written with `Object.defineProperty` onto a null-prototype
 * object, so an observer name can never reach `Object.prototype` (names are validated anyway).
 */
export function toRecord(
  lease: LeaseState,
  observers: ReadonlyMap<Host, Observer>,
  now: number,
  wait: LeaseWait | null = null,
): LeaseRecord {
  const views = Object.create(null) as Record<string, View>;
  for (const [name, observer] of observers) {
    if (observer.view !== null) {
      Object.defineProperty(views, name, { value: observer.view, enumerable: true, writable: false });
    }
  }
  return {
    name: 'hq',
    holder: lease.holder,
    generation: lease.generation,
    revision: lease.revision,
    acquiredAt: lease.acquiredAt,
    renewedAt: lease.renewedAt,
    ttlSeconds: lease.ttlSeconds,
    safetyMarginSeconds: lease.safetyMarginSeconds,
    expiresAt: lease.expiresAt,
    expired: isExpired(lease, now),
    released: lease.released,
    notBefore: lease.notBefore,
    views,
    dualUnreachableStreak: lease.dualUnreachableStreak,
    lastCheckAt: lease.lastCheckAt,
    promotedFrom: lease.promotedFrom,
    maintenance: lease.maintenance,
    floorPending: lease.floorPending,
    displaced: publicDisplaced(lease.displaced ?? null),
    now,
    // After `now`: the route's serializer writes optional fields last, and the fast path's bytes match it.
    wait,
  };
}

function publicDisplaced(d: Displaced | null): DisplacedHolder | null {
  return d === null
    ? null
    : { host: d.host, generation: d.generation, acknowledgedAt: d.acknowledgedAt, savedSeconds: d.savedSeconds };
}

export function isGeneration(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

export function isTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/**
 * What an agent needs from an arbiter answer. `parseRecord` accepts the API record (extra
 * fields ignored) and checks every field it uses, so a garbled or hostile answer is refused
 * as a whole instead of half-adopted.
 */
export interface RecordSummary {
  readonly holder: Host | null;
  readonly generation: number;
  readonly revision: number;
  readonly ttlSeconds: number;
  /** The arbiter's margin: the agent's validity is `ttl − margin` from the send time (S6). */
  readonly safetyMarginSeconds: number;
  readonly expired: boolean;
  readonly released: boolean;
  readonly notBefore: number | null;
  readonly floorPending: boolean;
  /** The displaced holder; `acknowledgedAt` set once its step-down ended the lock-delay. */
  readonly displaced: {
    readonly host: Host;
    readonly generation: number;
    readonly acknowledgedAt: number | null;
  } | null;
  readonly now: number;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

export function parseRecord(input: unknown): Parsed<RecordSummary> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, problem: 'record must be an object' };
  }
  const r = input as { [k: string]: unknown };
  const holder = r['holder'];
  if (holder !== null && !isHost(holder)) return { ok: false, problem: 'record.holder must be a host or null' };
  if (!isGeneration(r['generation'])) return { ok: false, problem: 'record.generation must be a safe integer ≥ 0' };
  // No real history gets there, and no arbiter of this version writes one: a record above it
  // comes from a broken or hostile arbiter, and adopting it would end every later grant.
  if (r['generation'] > GENERATION_CEILING)
    return {
      ok: false,
      problem: `record.generation ${r['generation']} is above the generation ceiling ${GENERATION_CEILING}`,
    };
  if (!isGeneration(r['revision'])) return { ok: false, problem: 'record.revision must be a safe integer ≥ 0' };
  const ttl = r['ttlSeconds'];
  if (!isTime(ttl) || ttl <= 0) return { ok: false, problem: 'record.ttlSeconds must be a positive number' };
  const margin = r['safetyMarginSeconds'];
  if (!isTime(margin) || margin < 0 || margin >= ttl) {
    return { ok: false, problem: 'record.safetyMarginSeconds must be a number ≥ 0 and below ttlSeconds' };
  }
  if (typeof r['expired'] !== 'boolean') return { ok: false, problem: 'record.expired must be a boolean' };
  const notBefore = r['notBefore'];
  if (notBefore !== null && !isTime(notBefore))
    return { ok: false, problem: 'record.notBefore must be a time or null' };
  const released = r['released'] ?? false;
  if (typeof released !== 'boolean') return { ok: false, problem: 'record.released must be a boolean' };
  const floorPending = r['floorPending'] ?? false;
  if (typeof floorPending !== 'boolean') return { ok: false, problem: 'record.floorPending must be a boolean' };
  const displaced = parseDisplaced(r['displaced'] ?? null);
  if (displaced === undefined)
    return { ok: false, problem: 'record.displaced must be {host, generation, acknowledgedAt} or null' };
  if (!isTime(r['now'])) return { ok: false, problem: 'record.now must be a time' };
  if (holder === null && r['generation'] !== 0 && r['expired'] !== true) {
    return { ok: false, problem: 'record without holder must be expired' };
  }
  return {
    ok: true,
    value: {
      holder,
      generation: r['generation'],
      revision: r['revision'],
      ttlSeconds: ttl,
      safetyMarginSeconds: margin,
      expired: r['expired'],
      released,
      notBefore,
      floorPending,
      displaced,
      now: r['now'],
    },
  };
}

/** The record's `displaced`, or undefined when it is malformed. */
function parseDisplaced(input: unknown): RecordSummary['displaced'] | undefined {
  if (input === null) return null;
  if (typeof input !== 'object' || Array.isArray(input)) return undefined;
  const d = input as { [k: string]: unknown };
  const at = d['acknowledgedAt'];
  if (!isHost(d['host']) || !isGeneration(d['generation']) || (at !== null && !isTime(at))) return undefined;
  return { host: d['host'], generation: d['generation'], acknowledgedAt: at };
}
