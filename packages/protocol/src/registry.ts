/**
 * The fleet registry and port leases. Times are epoch milliseconds (the seeds'
 * `ttlMs`, `observedAt`).
 *
 * Resource ids and lease purposes match `^[a-z0-9][a-z0-9-]{0,63}$` (the host name rule,
 * 64 characters so that an instance id can be `{host}-{service}-{n}`) and are never
 * `constructor` or `prototype`; `__proto__` is refused by the pattern. Lease ids are 32
 * lowercase hex digits (128 random bits).
 */
import type { Host } from './host.js';

const ID = '[a-z0-9][a-z0-9-]{0,63}';

export const RESOURCE_ID_PATTERN = new RegExp(`^${ID}$`);
/** The same rule as a JSON-schema pattern (reserved words excluded by a lookahead). */
export const RESOURCE_ID_SCHEMA_PATTERN = `^(?!(?:constructor|prototype)$)${ID}$`;
export const RESOURCE_ID_MAX_LENGTH = 64;

const RESERVED_IDS: ReadonlySet<string> = new Set(['constructor', 'prototype', '__proto__']);

export function isResourceId(value: unknown): value is string {
  return typeof value === 'string' && RESOURCE_ID_PATTERN.test(value) && !RESERVED_IDS.has(value);
}

export const LEASE_ID_SCHEMA_PATTERN = '^[0-9a-f]{32}$';
/** The header that carries a port lease's id on renew and release. */
export const PORT_LEASE_ID_HEADER = 'x-port-lease-id';

/** A day: the longest any lease or resource outlives its last renewal (longer TTLs are clamped). */
export const MAX_TTL_MS = 24 * 60 * 60 * 1000;
/** A second: shorter TTLs would expire between two requests of a healthy client (refused). */
export const MIN_TTL_MS = 1000;

export type ResourceKind = 'machine' | 'instance';
export type AttrValue = string | number | boolean | null | readonly (string | number)[];

/** `POST /v1/resources/register` (member). */
export interface RegisterRequest {
  readonly id: string;
  readonly name: string;
  readonly kind: ResourceKind;
  readonly machine: Host;
  readonly attrs: { readonly [key: string]: AttrValue };
  /** The member's own clock reading when it took the attrs (informational only). */
  readonly observedAt: number;
  readonly ttlMs: number;
}

/** `POST /v1/resources/:id/heartbeat` (member). */
export interface ResourceHeartbeatRequest {
  readonly attrs?: { readonly [key: string]: AttrValue };
}

/** `GET /v1/resources?kind=&machine=`. */
export interface ResourcesQuery {
  readonly kind?: ResourceKind;
  readonly machine?: Host;
}

/** One registered resource, as every registry answer shows it. */
export interface Resource {
  readonly id: string;
  readonly name: string;
  readonly kind: ResourceKind;
  readonly machine: Host;
  /** The machine of the token that registered it. */
  readonly owner: Host;
  readonly attrs: { readonly [key: string]: unknown };
  readonly observedAt: number;
  readonly ttlMs: number;
  readonly registeredAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
}

/** `GET /v1/resources` → 200. */
export interface ResourcesAnswer {
  readonly resources: readonly Resource[];
  readonly now: number;
}

/** `DELETE /v1/resources/:id` → 200. */
export interface ResourceDeleted {
  readonly ok: true;
  readonly id: string;
}

/** `POST /v1/leases/port` (member). */
export interface PortLeaseRequest {
  readonly machine: Host;
  readonly purpose: string;
  readonly ttlMs: number;
  /** Ports the caller's local bind probe rejected. */
  readonly excluded?: readonly number[];
}

/** `POST /v1/leases/port` and `POST /v1/leases/port/:port/heartbeat` → 200. */
export interface PortLeaseAnswer {
  readonly port: number;
  readonly leaseId: string;
  readonly expiresAt: number;
  readonly ttlMs: number;
}

/** `DELETE /v1/leases/port/:port` → 200. */
export interface PortReleased {
  readonly ok: true;
  readonly port: number;
}

export interface PortRange {
  readonly from: number;
  readonly to: number;
}

/** `GET /v1/leases/port` → 200. */
export interface PortLeasesAnswer {
  readonly leases: readonly {
    readonly port: number;
    readonly machine: Host;
    readonly purpose: string;
    readonly createdAt: number;
    readonly renewedAt: number;
    readonly expiresAt: number;
  }[];
  readonly bands: { readonly reserved: readonly number[]; readonly test: PortRange; readonly offline: PortRange };
  readonly now: number;
}
