/**
 * Fleet registry and port leases: the pure decisions. No I/O, no clock: every
 * function takes `now` (epoch milliseconds, the arbiter's clock) and the rows it decides on,
 * and returns a discriminated union — an expected refusal is `{ ok: false, reason }`, never a
 * throw. `SqliteRegistryStore` calls these inside one `BEGIN IMMEDIATE` transaction.
 *
 * Guarantees (given that the store serialises every allocation):
 *  - A port is handed to at most one live lease: a port is free only when it has no row or its
 *    row expired (`expiresAt <= now`); an expired row is reused (replaced) by the new lease.
 *  - Only test-band ports are ever allocated; reserved ports never, even inside the band.
 *  - TTLs are clamped to 24 h: a crashed owner blocks a port (or leaves a ghost resource) for a
 *    day at most.
 *  - A lease is renewed or released only by its owner machine (403) presenting its id (409);
 *    an unknown or expired lease is 404. A resource is registered, renewed or deleted only by a
 *    token of its own machine (admin tokens act for any machine).
 *
 * Ids, the TTL bounds and every request and answer are the protocol's (`@hq/protocol`
 * registry.ts). Times in the registry are epoch milliseconds (the seeds' `ttlMs`, `observedAt`).
 */
import {
  MAX_TTL_MS,
  MIN_TTL_MS,
  type AttrValue,
  type PortRange,
  type RegistryRefusal,
  type ResourceKind,
} from '@hq/protocol';

export type { AttrValue, PortRange, ResourceKind };

export function clampTtl(ttlMs: number): number {
  return Math.min(MAX_TTL_MS, Math.max(MIN_TTL_MS, Math.floor(ttlMs)));
}

// ---------------------------------------------------------------------------------------
// bands

export interface Bands {
  /** Never allocated (the arbiter's, the agents' and the seeds' fixed ports). */
  readonly reserved: readonly number[];
  /** `POST /v1/leases/port` allocates from here, lowest first. */
  readonly test: PortRange;
  /** Kept for offline instances; never allocated by the lease endpoint. */
  readonly offline: PortRange;
}

export const DEFAULT_BANDS: Bands = Object.freeze({
  reserved: Object.freeze([31413, 31415, 31420]),
  test: Object.freeze({ from: 31450, to: 31499 }),
  offline: Object.freeze({ from: 31500, to: 31509 }),
});

function isPort(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;
}

/** Checks a band configuration; names the key and the rule. */
export function validateBands(b: Bands): { ok: true } | { ok: false; key: string; message: string } {
  for (const [key, r] of [
    ['test', b.test],
    ['offline', b.offline],
  ] as const) {
    if (!isPort(r.from) || !isPort(r.to))
      return { ok: false, key: `portBands.${key}`, message: `portBands.${key}: from and to must be ports 1–65535` };
    if (r.from > r.to)
      return {
        ok: false,
        key: `portBands.${key}`,
        message: `portBands.${key}: from (${r.from}) must not exceed to (${r.to})`,
      };
  }
  if (b.test.from <= b.offline.to && b.offline.from <= b.test.to) {
    return { ok: false, key: 'portBands.offline', message: 'portBands.offline: must not overlap the test band' };
  }
  for (const p of b.reserved)
    if (!isPort(p))
      return { ok: false, key: 'portBands.reserved', message: `portBands.reserved: ${String(p)} is not a port` };
  const free = b.test.to - b.test.from + 1 - b.reserved.filter((p) => p >= b.test.from && p <= b.test.to).length;
  if (free < 1)
    return {
      ok: false,
      key: 'portBands.reserved',
      message: 'portBands.reserved: leaves no allocatable port in the test band',
    };
  return { ok: true };
}

export function inBand(port: number, r: PortRange): boolean {
  return Number.isInteger(port) && port >= r.from && port <= r.to;
}

// ---------------------------------------------------------------------------------------
// port leases

export interface PortLeaseRow {
  readonly port: number;
  readonly leaseId: string;
  /** The owner: the machine the lease was allocated for. */
  readonly machine: string;
  readonly purpose: string;
  readonly ttlMs: number;
  readonly createdAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
}

export function isLive(row: { readonly expiresAt: number }, now: number): boolean {
  return row.expiresAt > now;
}

export interface AllocateInput {
  readonly bands: Bands;
  /** Every row in the test band (live or expired). */
  readonly rows: readonly PortLeaseRow[];
  readonly machine: string;
  readonly purpose: string;
  readonly ttlMs: number;
  /** Ports the caller's local bind probe rejected. */
  readonly excluded: readonly number[];
  /** The new lease's id (randomness is an input too). */
  readonly leaseId: string;
  readonly now: number;
}

export type AllocateResult =
  | { readonly ok: true; readonly lease: PortLeaseRow; readonly reused: PortLeaseRow | null }
  | { readonly ok: false; readonly reason: Extract<RegistryRefusal, 'band-full'>; readonly message: string };

/**
 * How many live test-band leases one machine may hold at once: half of the band's allocatable
 * ports, rounded up. A runaway loop or a stolen member token on one host then takes at most
 * half, and every other host still finds ports; half and not less, so that a one-host
 * installation still runs its parallel tests (25 of the default 50 ports), and a one-port band
 * is that port. The admin token may lease for any machine name, each name with its own share.
 */
export function hostShare(bands: Bands): number {
  const reserved = new Set(bands.reserved);
  let free = 0;
  for (let port = bands.test.from; port <= bands.test.to; port++) if (!reserved.has(port)) free++;
  return Math.max(1, Math.ceil(free / 2));
}

/**
 * 1. the machine may not hold more than its share of the band (`hostShare`; else 503);
 * 2. walk the band upwards, skipping reserved, excluded and live-leased ports (an excluded
 *    port outside the band changes nothing: such a port is never given anyway);
 * 3. the first port left is leased — replacing its expired row when it has one;
 * 4. none left: band full (503).
 */
export function decideAllocation(a: AllocateInput): AllocateResult {
  const { test } = a.bands;
  const share = hostShare(a.bands);
  const held = a.rows.filter((r) => r.machine === a.machine && isLive(r, a.now) && inBand(r.port, test)).length;
  if (held >= share) {
    return {
      ok: false,
      reason: 'band-full',
      message: `${a.machine} already holds ${held} port${held === 1 ? '' : 's'} of the test band ${test.from}–${test.to}, its share (half the band); release one first`,
    };
  }
  const reserved = new Set(a.bands.reserved);
  const excluded = new Set(a.excluded.filter((p) => inBand(p, test)));
  const byPort = new Map<number, PortLeaseRow>();
  for (const r of a.rows) byPort.set(r.port, r);
  const ttlMs = clampTtl(a.ttlMs);
  for (let port = test.from; port <= test.to; port++) {
    if (reserved.has(port) || excluded.has(port)) continue;
    const row = byPort.get(port);
    if (row !== undefined && isLive(row, a.now)) continue;
    const lease: PortLeaseRow = {
      port,
      leaseId: a.leaseId,
      machine: a.machine,
      purpose: a.purpose,
      ttlMs,
      createdAt: a.now,
      renewedAt: a.now,
      expiresAt: a.now + ttlMs,
    };
    return { ok: true, lease, reused: row ?? null };
  }
  const skipped = excluded.size > 0 ? ` (${excluded.size} excluded by the caller)` : '';
  return {
    ok: false,
    reason: 'band-full',
    message: `every port of the test band ${test.from}–${test.to} is leased${skipped}`,
  };
}

/** Who is asking: a member acts only for its own machine; an admin for any. */
export interface Actor {
  readonly machine: string;
  readonly admin: boolean;
}

export type LeaseAccess =
  | { readonly ok: true; readonly lease: PortLeaseRow }
  | {
      readonly ok: false;
      readonly reason: Extract<RegistryRefusal, 'not-found' | 'wrong-owner' | 'wrong-id'>;
      readonly message: string;
    };

/**
 * Renew and release: unknown or expired → 404; another machine's lease → 403 (checked before
 * the id, so a stranger learns nothing about ids); a different id → 409 (a newer lease of the
 * same owner, or a stale client).
 */
export function decideLeaseAccess(
  row: PortLeaseRow | undefined,
  port: number,
  leaseId: string,
  actor: Actor,
  now: number,
): LeaseAccess {
  if (row === undefined || !isLive(row, now))
    return { ok: false, reason: 'not-found', message: `no live lease on port ${port}` };
  if (!actor.admin && row.machine !== actor.machine) {
    return {
      ok: false,
      reason: 'wrong-owner',
      message: `the lease on port ${port} belongs to "${row.machine}", not "${actor.machine}"`,
    };
  }
  if (row.leaseId !== leaseId)
    return { ok: false, reason: 'wrong-id', message: `x-port-lease-id does not match the lease on port ${port}` };
  return { ok: true, lease: row };
}

export function renewedLease(row: PortLeaseRow, now: number): PortLeaseRow {
  return { ...row, renewedAt: now, expiresAt: now + row.ttlMs };
}

// ---------------------------------------------------------------------------------------
// resources

/** Attributes live in a Map in memory (never a plain object keyed by caller input). */
export type Attrs = ReadonlyMap<string, AttrValue>;

export interface ResourceRow {
  readonly id: string;
  readonly name: string;
  readonly kind: ResourceKind;
  readonly machine: string;
  /** The machine of the token that registered it. */
  readonly owner: string;
  readonly attrs: Attrs;
  /** The member's own clock reading when it took the attrs (informational only). */
  readonly observedAt: number;
  readonly ttlMs: number;
  readonly registeredAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
}

export interface RegisterInput {
  readonly id: string;
  readonly name: string;
  readonly kind: ResourceKind;
  readonly machine: string;
  readonly attrs: Attrs;
  readonly observedAt: number;
  readonly ttlMs: number;
}

export type ResourceResult =
  | { readonly ok: true; readonly resource: ResourceRow }
  | {
      readonly ok: false;
      readonly reason: Extract<RegistryRefusal, 'wrong-host' | 'id-taken' | 'not-found'>;
      readonly message: string;
    };

/**
 * 1. a member token registers only for its own machine (403);
 * 2. a live resource of another machine keeps its id (409); an expired one is taken over;
 * 3. otherwise the row is (re)written; re-registering a live resource keeps `registeredAt`.
 */
export function decideRegister(
  existing: ResourceRow | undefined,
  req: RegisterInput,
  actor: Actor,
  now: number,
): ResourceResult {
  if (!actor.admin && req.machine !== actor.machine) {
    return {
      ok: false,
      reason: 'wrong-host',
      message: `this member token belongs to "${actor.machine}", not "${req.machine}"`,
    };
  }
  const live = existing !== undefined && isLive(existing, now);
  if (live && existing.machine !== req.machine) {
    return { ok: false, reason: 'id-taken', message: `resource "${req.id}" is registered by "${existing.machine}"` };
  }
  const ttlMs = clampTtl(req.ttlMs);
  return {
    ok: true,
    resource: {
      id: req.id,
      name: req.name,
      kind: req.kind,
      machine: req.machine,
      owner: actor.machine,
      attrs: req.attrs,
      observedAt: req.observedAt,
      ttlMs,
      registeredAt: live ? existing.registeredAt : now,
      renewedAt: now,
      expiresAt: now + ttlMs,
    },
  };
}

function access(existing: ResourceRow | undefined, id: string, actor: Actor, now: number): ResourceResult {
  if (existing === undefined || !isLive(existing, now))
    return { ok: false, reason: 'not-found', message: `no live resource "${id}"` };
  if (!actor.admin && existing.machine !== actor.machine) {
    return {
      ok: false,
      reason: 'wrong-host',
      message: `resource "${id}" belongs to "${existing.machine}", not "${actor.machine}"`,
    };
  }
  return { ok: true, resource: existing };
}

/** Renews for another TTL; `attrs`, when given, replace the old ones (no merge). 404 once expired. */
export function decideResourceHeartbeat(
  existing: ResourceRow | undefined,
  id: string,
  attrs: Attrs | undefined,
  actor: Actor,
  now: number,
): ResourceResult {
  const a = access(existing, id, actor, now);
  if (!a.ok) return a;
  return {
    ok: true,
    resource: { ...a.resource, attrs: attrs ?? a.resource.attrs, renewedAt: now, expiresAt: now + a.resource.ttlMs },
  };
}

export function decideResourceDelete(
  existing: ResourceRow | undefined,
  id: string,
  actor: Actor,
  now: number,
): ResourceResult {
  return access(existing, id, actor, now);
}

/**
 * The bands from the config file's `portBands` (each part optional, defaults for the rest),
 * checked with `validateBands`: `{ ok: false, key, message }` names the key for the one-line
 * config error.
 */
export function bandsFromConfig(
  file: { readonly reserved?: readonly number[]; readonly test?: PortRange; readonly offline?: PortRange } | undefined,
): { ok: true; bands: Bands } | { ok: false; key: string; message: string } {
  const bands: Bands = {
    reserved: file?.reserved ?? DEFAULT_BANDS.reserved,
    test: file?.test ?? DEFAULT_BANDS.test,
    offline: file?.offline ?? DEFAULT_BANDS.offline,
  };
  const v = validateBands(bands);
  return v.ok ? { ok: true, bands } : v;
}
