/**
 * The storage seam. Everything the arbiter persists goes through `LeaseStore`; the SQLite
 * implementation is `SqliteStore`. A second backend (etcd, say) would implement this same
 * interface: `transact` must be one linearizable read-decide-write whose write is a
 * compare-and-swap on the lease revision (in etcd: a Txn comparing the key's ModRevision),
 * and `events` an append-only, ascending log.
 */
import type { ArbiterState, Category } from '@hq/lease-core';

export type Scope = 'admin' | 'member' | 'query';

export interface EventInput {
  readonly at: number;
  readonly category: Category | string;
  readonly event: string;
  readonly host: string | null;
  readonly data: { readonly [key: string]: string | number | boolean | null };
}

export interface EventRow extends EventInput {
  readonly id: number;
}

export interface TokenRow {
  readonly id: number;
  readonly machine: string;
  readonly scope: Scope;
  /** sha256 of the token, lowercase hex. The token itself is never stored. */
  readonly sha256: string;
  readonly created: number;
  readonly revoked: number | null;
}

/** What a decision hands back to `transact`: the next state, what to log, what to answer. */
export interface Decision<T> {
  readonly next: ArbiterState;
  readonly events: readonly EventInput[];
  readonly result: T;
}

export interface Committed<T> {
  /** The state as committed (the previous one when nothing changed). */
  readonly state: ArbiterState;
  readonly events: readonly EventRow[];
  readonly result: T;
}

/** One decision's outcome in a group commit. */
export type Outcome = { readonly ok: true; readonly committed: Committed<unknown> } | { readonly ok: false; readonly error: unknown };

export interface LeaseStore {
  /** True when this open created the database (file absent, empty, or wiped): S2.4. */
  readonly createdNow: boolean;
  read(): ArbiterState;
  /**
   * One atomic read → decide → write. `decide` is synchronous and pure; it may throw to abort
   * (nothing is written). The lease write is a compare-and-swap on the revision read.
   */
  transact<T>(decide: (state: ArbiterState) => Decision<T>): Committed<T>;
  /**
   * Group commit: several decisions in one transaction (one fsync), each deciding on the state
   * the one before it left, exactly as if they ran one after another. A decision that throws
   * is left out (its error is its outcome) and the next one sees the state without it. The
   * lease write is one compare-and-swap on the revision read at the start. An error of the
   * transaction itself (a failed commit) throws and nothing is written.
   */
  transactAll(decisions: readonly ((state: ArbiterState) => Decision<unknown>)[]): readonly Outcome[];
  appendEvents(events: readonly EventInput[]): readonly EventRow[];
  listEvents(after: number, limit: number): readonly EventRow[];
  /** The `after` that lists the newest `n` events (0 when there are fewer). */
  tailAfter(n: number): number;
  /** The `after` that lists the events at or after arbiter time `at` (the last id when none). */
  sinceAfter(at: number): number;
  /** Deletes events older than `olderThan`, then all but the newest `keep`; returns how many went. */
  sweepEvents(olderThan: number, keep: number): number;
  insertToken(machine: string, scope: Scope, sha256: string, created: number): void;
  findToken(sha256: string): TokenRow | undefined;
  /** Revokes `machine`'s active tokens of `scope` and inserts the new one, in one transaction; returns how many were revoked. */
  replaceToken(machine: string, scope: Scope, sha256: string, created: number): number;
  revokeTokens(machine: string, at: number): number;
  /** Revokes one active token of `machine` by id; 0 when there is none. */
  revokeToken(machine: string, id: number, at: number): number;
  listTokens(): readonly TokenRow[];
  hasActiveAdmin(): boolean;
  /**
   * A cross-process lock so that two checks (the daemon's and `hq-arbiter check`) never
   * overlap. Times are wall milliseconds; expiry only bounds how long a crashed owner blocks.
   */
  tryCheckLock(owner: string, nowMs: number, untilMs: number): boolean;
  releaseCheckLock(owner: string): void;
  backup(to: string): Promise<void>;
  close(): void;
}
