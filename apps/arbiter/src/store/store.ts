/**
 * The storage seams. The rest of the arbiter knows storage only through these interfaces, one
 * per concern, each with the guarantee a backend must keep (apps/arbiter/README.md, "The
 * storage seams", says the same in prose). The lease side's seams are here; the registry's
 * (../registry/store.ts) and the survival copies' (../survival/store.ts) live with their feature.
 * Each backend implements all three, mirrored: sqlite/{lease,registry,survival}.ts and
 * etcd/{lease,registry,survival}.ts; the store tests in test/arbiter/store/ run against every
 * factory in `STORE_FACTORIES`.
 *
 * Every method returns an `Awaitable`: a value now or a promise of it, and every caller awaits
 * it. Why not promises throughout: better-sqlite3 is synchronous and a SQLite decision, its
 * write and its events are one synchronous transaction (nothing async inside one, STYLE 9), so
 * `SqliteStore` keeps plain return values — its transactions, the group commit's batches and
 * the one-shot commands stay exactly as fast as before — while `EtcdStore`, over the network,
 * returns promises. A caller written against the seam works with both; a caller that holds a
 * `SqliteStore` itself (its tests, `hq-arbiter token`) may still call it synchronously.
 */
import type { ArbiterState, Category } from '@hq/lease-core';
import type { Awaitable } from '../awaitable.js';

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

/** A lost compare-and-swap: the lease record moved between the read and the write. Nothing was written. */
export class CasError extends Error {
  constructor() {
    super('the lease row changed under the transaction (compare-and-swap failed)');
    this.name = 'CasError';
  }
}

/**
 * A decision or write refused because this arbiter is not (or no longer) the elected one
 * (store etcd): nothing was written; the request is answered 503 and goes to another arbiter.
 */
export class NotElectedError extends Error {
  constructor() {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super('this arbiter is not the elected one (its term ended or has not begun): nothing was written');
    Error.stackTraceLimit = limit;
    this.name = 'NotElectedError';
  }
}

/** One decision's outcome in a group commit. */
export type Outcome =
  | { readonly ok: true; readonly committed: Committed<unknown> }
  | { readonly ok: false; readonly error: unknown };

/**
 * The lease record, the floor and the observers' views: the state every lease decision reads
 * and writes, only ever through a compare-and-swap on the record's revision.
 */
export interface LeaseRecords {
  /** True when this open created the state (nothing stored before, or wiped): S2.4, the floor is pending. */
  readonly createdNow: boolean;
  /** The last committed state (this process's commits and, at once, every other writer's). Never decide on it: decide in `transact`. */
  read(): Awaitable<ArbiterState>;
  /**
   * One atomic read → decide → write. `decide` is synchronous and pure; it may throw to abort
   * (nothing is written). The lease write is a compare-and-swap on the revision read: when the
   * record moved under it, `CasError` and nothing is written. A lease change must raise the
   * revision (else nothing is written and it throws); the floor may move alone.
   */
  transact<T>(decide: (state: ArbiterState) => Decision<T>): Awaitable<Committed<T>>;
  /**
   * Group commit: several decisions in one transaction (one fsync), each deciding on the state
   * the one before it left, exactly as if they ran one after another. A decision that throws
   * is left out (its error is its outcome) and the next one sees the state without it. The
   * lease write is one compare-and-swap on the revision read at the start. An error of the
   * transaction itself (a failed commit, a lost CAS) throws and nothing is written.
   */
  transactAll(
    decisions: readonly ((state: ArbiterState) => Decision<unknown>)[],
    tokens?: ConfirmTokens,
  ): Awaitable<readonly Outcome[]>;
}

/**
 * `transactAll`'s `tokens` (a store with `TokenStore.knownToken` only): the sha256 of every token
 * a request of the group was let in on from memory. The group's commit confirms them — the
 * tokens' keys are read with the state it decides on, or compared in its write — so a token
 * revoked before the commit fails its request as a fresh read would have: when one changed,
 * nothing is written, the store holds its row as it is now, and `CasError`; the batch is decided
 * again, and a decision whose token is no longer valid refuses itself (401).
 */
export type ConfirmTokens = readonly string[];

/**
 * The event log: append-only, ids ascending and never reused (an SSE client resuming after id N
 * misses nothing), bounded by `sweepEvents`. Events a decision returns are written with its
 * state, in its transaction (`LeaseRecords.transact`); these are for the rest.
 */
export interface EventLog {
  appendEvents(events: readonly EventInput[]): Awaitable<readonly EventRow[]>;
  /** Ascending ids above `after`, at most `limit`. */
  listEvents(after: number, limit: number): Awaitable<readonly EventRow[]>;
  /** The `after` that lists the newest `n` events (0 when there are fewer). */
  tailAfter(n: number): Awaitable<number>;
  /** The `after` that lists the events at or after arbiter time `at` (the last id when none). */
  sinceAfter(at: number): Awaitable<number>;
  /** Deletes events older than `olderThan`, then all but the newest `keep`; returns how many went. */
  sweepEvents(olderThan: number, keep: number): Awaitable<number>;
}

/**
 * Token hashes (sha256; a token itself is never stored). A revocation, by any process, is
 * effective from the next `findToken` on.
 */
export interface TokenStore {
  insertToken(machine: string, scope: Scope, sha256: string, created: number): Awaitable<void>;
  findToken(sha256: string): Awaitable<TokenRow | undefined>;
  /**
   * Optional (store etcd): the row as this store last read it, from memory, for a request whose
   * decision's commit confirms it (`transactAll`'s `tokens`, `ConfirmTokens`) — never for any
   * other request. Undefined when it has not read it. A store without it: every request reads.
   */
  knownToken?(sha256: string): TokenRow | undefined;
  /** Revokes `machine`'s active tokens of `scope` and inserts the new one, atomically; returns how many were revoked. */
  replaceToken(machine: string, scope: Scope, sha256: string, created: number): Awaitable<number>;
  revokeTokens(machine: string, at: number): Awaitable<number>;
  /** Revokes one active token of `machine` by id; 0 when there is none. */
  revokeToken(machine: string, id: number, at: number): Awaitable<number>;
  /** Every token, revoked ones included, by id. */
  listTokens(): Awaitable<readonly TokenRow[]>;
  hasActiveAdmin(): Awaitable<boolean>;
}

/**
 * A cross-process lock so that two checks (the daemon's and `hq-arbiter check`) never overlap.
 * Times are wall milliseconds; expiry only bounds how long a crashed owner blocks. Safety never
 * rests on it (every check's write is still a CAS); it only keeps two probes from racing.
 */
export interface CheckLock {
  /** Takes the lock, or renews it for its owner, until `untilMs`; false while another owner holds it. */
  tryCheckLock(owner: string, nowMs: number, untilMs: number): Awaitable<boolean>;
  /** Releases it when `owner` holds it; otherwise does nothing. */
  releaseCheckLock(owner: string): Awaitable<void>;
}

/** Operations on the store as a whole. */
export interface StoreAdmin {
  /** A consistent copy of everything the store holds, at `to` (owner-only), while it serves. */
  backup(to: string): Promise<void>;
  close(): Awaitable<void>;
}

/** Everything of the lease side one backend provides. */
export interface LeaseStore extends LeaseRecords, EventLog, TokenStore, CheckLock, StoreAdmin {}
