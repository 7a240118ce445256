/**
 * The registry's storage seam: what a backend (store/sqlite/registry.ts, store/etcd/registry.ts)
 * provides to the routes, the group commit and the metrics. It lives with the registry, so the
 * backends depend on the registry's rows and decisions and the registry never on a backend.
 */
import type { Awaitable } from '../awaitable.js';
import type {
  Actor,
  AllocateResult,
  AttrValue,
  Attrs,
  Bands,
  LeaseAccess,
  PortLeaseRow,
  RegisterInput,
  ResourceKind,
  ResourceResult,
  ResourceRow,
} from './decide.js';

/** One write's outcome in a registry group (`RegistryStore.commitAll`). */
export type WriteOutcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown };

export interface AllocateRequest {
  readonly machine: string;
  readonly purpose: string;
  readonly ttlMs: number;
  readonly excluded?: readonly number[];
}

export interface ResourceFilter {
  readonly kind?: ResourceKind;
  readonly machine?: string;
}

/**
 * The registry: resources and port leases, times in epoch ms passed in (no clock
 * inside). Each write reads, decides (registry/decide.ts) and writes atomically, serialised
 * with every other write to the same rows — in this process or another: no port is ever held
 * by two live leases. Expired rows are never returned as live; `sweep` only reclaims space.
 */
export interface RegistryStore {
  readonly bands: Bands;
  register(req: RegisterInput, actor: Actor, now: number): Awaitable<ResourceResult>;
  heartbeatResource(id: string, attrs: Attrs | undefined, actor: Actor, now: number): Awaitable<ResourceResult>;
  deleteResource(id: string, actor: Actor, now: number): Awaitable<ResourceResult>;
  /** Live resources only, ordered by id. */
  listResources(filter: ResourceFilter, now: number): Awaitable<ResourceRow[]>;
  /** The lowest free test port for `req`, as one atomic read → decide → write. */
  allocatePort(req: AllocateRequest, leaseId: string, now: number): Awaitable<AllocateResult>;
  renewPort(port: number, leaseId: string, actor: Actor, now: number): Awaitable<LeaseAccess>;
  releasePort(port: number, leaseId: string, actor: Actor, now: number): Awaitable<LeaseAccess>;
  /** Live leases, by port. */
  listPortLeases(now: number): Awaitable<PortLeaseRow[]>;
  /**
   * Runs `writes` — each one call of one of this store's writes above — as one commit where the
   * backend can (SQLite: one transaction, each write a savepoint; one fsync for the group), else
   * as one commit per write, in order. Either way: each write is decided on every write before
   * it (committed, or earlier in the group); a write that throws is undone alone and its error
   * is its outcome; the outcomes come back only once the writes are durable; and when the
   * group's commit fails, it throws and the writes it held fail with it. Group commit
   * (registry/group-commit.ts) relies on nothing more.
   */
  commitAll<T>(writes: readonly (() => Awaitable<T>)[]): Awaitable<readonly WriteOutcome<T>[]>;
  /** Deletes rows that expired before `olderThan` (housekeeping; correctness never needs it). */
  sweep(olderThan: number): Awaitable<{ resources: number; leases: number }>;
}

/** JSON → Map; keys go into a Map, never onto a plain object's prototype chain. */
export function attrsFromJson(text: string): Attrs {
  const parsed = JSON.parse(text) as unknown;
  const m = new Map<string, AttrValue>();
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
    for (const [k, v] of Object.entries(parsed)) m.set(k, v as AttrValue);
  }
  return m;
}

/** Map → a null-prototype object for JSON (no key can reach Object.prototype). */
export function attrsToObject(attrs: Attrs): { [key: string]: AttrValue } {
  const o = Object.create(null) as { [key: string]: AttrValue };
  for (const [k, v] of attrs) o[k] = v;
  return o;
}
