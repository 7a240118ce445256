/**
 * SqliteStore — the lease side's seams (../store.ts: LeaseRecords, EventLog, TokenStore,
 * CheckLock, StoreAdmin) over the lease record, observers, events and tokens in one SQLite file
 * (`{dataDir}/hq.db`), through better-sqlite3. The file is opened and migrated by
 * `openDatabase` (database.ts), the one opener of every connection to it.
 *
 * Invariants:
 *  - Every mutation is one `BEGIN IMMEDIATE` transaction: the write lock is taken before the
 *    read, so no other writer (another request, `hq-arbiter check` in another process) can
 *    change the row between read and write. The lease write is still a compare-and-swap
 *    (`WHERE name = 'hq' AND revision = ?`, `changes === 1`): the fence is on the write itself.
 *  - An acknowledged write is durable: WAL with `synchronous=FULL` fsyncs the WAL on every
 *    commit (S4). The generation is a fencing token and must never be reissued after a crash.
 *  - Nothing async runs inside a transaction; probes happen before, hooks and metrics after.
 * The rows' columns are state-rows.ts.
 */
import type Database from 'better-sqlite3';
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import type { ArbiterState, Observer } from '@hq/lease-core';
import { emptyLease } from '@hq/lease-core';
import {
  CasError,
  type Committed,
  type Decision,
  type EventInput,
  type EventRow,
  type LeaseStore,
  type Outcome,
  type Scope,
  type TokenRow,
} from '../store.js';
import { DATABASE_FILE, openDatabase } from './database.js';
import { decideAll, leaseChanged, transactOne } from '../decide-all.js';
import {
  type EventDbRow,
  eventFromRow,
  leaseFromRow,
  leaseParams,
  type LeaseRow,
  observerFromRow,
  observerParams,
  type ObserverRow,
} from './state-rows.js';

export interface SqliteStoreOptions {
  readonly dataDir: string;
  /** The TTL written into the first lease row of a new database. */
  readonly ttlSeconds: number;
  /** Milliseconds a writer waits for the lock before SQLITE_BUSY. */
  readonly busyTimeoutMs?: number;
}

export class SqliteStore implements LeaseStore {
  readonly createdNow: boolean;
  readonly path: string;
  private readonly db: Database.Database;
  private readonly q: ReturnType<typeof prepare>;
  /**
   * The last state read or committed, and the `PRAGMA data_version` it belongs to. Every read
   * asks SQLite for the version (one page-cache look-up): another connection's commit —
   * `hq-arbiter check` or `token` in another process — changes it, and the cache is dropped.
   * This connection's own commits leave it unchanged, so `transact` refreshes the cache itself.
   */
  private cached: { readonly state: ArbiterState; readonly version: number } | null = null;
  /** Found tokens by hash, valid for one data_version; cleared by this connection's own token writes. */
  private tokens = new Map<string, TokenRow>();
  private tokensVersion = -1;

  constructor(opts: SqliteStoreOptions) {
    this.path = join(opts.dataDir, DATABASE_FILE);
    this.db = openDatabase({ path: this.path, busyTimeoutMs: opts.busyTimeoutMs });
    this.q = prepare(this.db);
    this.createdNow = this.seed(opts.ttlSeconds);
  }

  /**
   * Writes the first lease row when there is none; true when this open wrote it (the database
   * was created now — file absent, empty or wiped). S2.4: a database created at this start does
   * not know the generation floor yet, so the row says the floor is pending. A row is never
   * deleted, so a missing one can only mean a new database (or a damaged one: the pending floor
   * is then the safe reading too).
   */
  private seed(ttlSeconds: number): boolean {
    return this.q.insertLease.run(leaseParams({ ...emptyLease(ttlSeconds), floorPending: true }, 0)).changes === 1;
  }

  private dataVersion(): number {
    return this.q.dataVersion.get() as number;
  }

  read(): ArbiterState {
    const version = this.dataVersion();
    if (this.cached !== null && this.cached.version === version) return this.cached.state;
    const state = this.readFromDb();
    this.cached = { state, version };
    return state;
  }

  private readFromDb(): ArbiterState {
    const row = this.q.readLease.get() as LeaseRow | undefined;
    if (row === undefined) throw new Error('hq.db has no lease row');
    const observers = new Map<string, Observer>();
    for (const o of this.q.readObservers.all() as ObserverRow[]) observers.set(o.observer, observerFromRow(o));
    return { lease: leaseFromRow(row), observers, floor: row.floor };
  }

  transact<T>(decide: (state: ArbiterState) => Decision<T>): Committed<T> {
    // synchronous: SQLite's transactAll is
    return transactOne((d) => this.transactAll(d), decide) as Committed<T>;
  }

  transactAll(decisions: readonly ((state: ArbiterState) => Decision<unknown>)[]): readonly Outcome[] {
    // Nested in another transaction (a savepoint), the outer one may still roll back: only the
    // outermost commit may fill the cache.
    const outermost = !this.db.inTransaction;
    this.cached = null;
    let done: ReturnType<SqliteStore['run']>;
    try {
      done = this.run(decisions);
    } catch (err) {
      this.cached = null;
      throw err;
    }
    if (outermost) this.cached = { state: done.state, version: done.version };
    return done.outcomes;
  }

  private run(decisions: readonly ((state: ArbiterState) => Decision<unknown>)[]): {
    outcomes: Outcome[];
    state: ArbiterState;
    version: number;
  } {
    return this.db
      .transaction(() => {
        // Under the write lock no other connection can commit: this version is the one the
        // committed state belongs to.
        const version = this.dataVersion();
        const before = this.readFromDb();
        const { decided, state } = decideAll(before, decisions);
        if (leaseChanged(before, state) || state.floor !== before.floor) {
          // Only the floor moved: keep the revision, the CAS still fences the write.
          const info = this.q.writeLease.run({
            ...leaseParams(state.lease, state.floor),
            expected: before.lease.revision,
          });
          if (info.changes !== 1) throw new CasError();
        }
        if (state.observers !== before.observers) {
          for (const [name, o] of state.observers) {
            if (before.observers.get(name) !== o) this.q.upsertObserver.run(observerParams(name, o));
          }
        }
        const outcomes: Outcome[] = decided.map((d) =>
          d.ok
            ? { ok: true, committed: { state: d.state, events: this.insertEvents(d.events), result: d.result } }
            : { ok: false, error: d.error },
        );
        return { outcomes, state, version };
      })
      .immediate();
  }

  private insertEvents(events: readonly EventInput[]): EventRow[] {
    const rows: EventRow[] = [];
    for (const e of events) {
      const info = this.q.insertEvent.run(e.at, e.category, e.event, e.host, JSON.stringify(e.data));
      rows.push({ ...e, id: Number(info.lastInsertRowid) });
    }
    return rows;
  }

  appendEvents(events: readonly EventInput[]): readonly EventRow[] {
    if (events.length === 0) return [];
    return this.db.transaction(() => this.insertEvents(events)).immediate();
  }

  listEvents(after: number, limit: number): readonly EventRow[] {
    return (this.q.listEvents.all(after, limit) as EventDbRow[]).map(eventFromRow);
  }

  tailAfter(n: number): number {
    const row = this.q.nthNewestEvent.get(n - 1) as { id: number } | undefined;
    return row === undefined ? 0 : row.id - 1;
  }

  sinceAfter(at: number): number {
    const row = this.q.firstEventAt.get(at) as { id: number } | undefined;
    if (row !== undefined) return row.id - 1;
    return (this.q.lastEventId.get() as { id: number | null }).id ?? 0;
  }

  /** One short transaction; AUTOINCREMENT keeps ids from being reused after a sweep (SSE resumption). */
  sweepEvents(olderThan: number, keep: number): number {
    return this.db
      .transaction(() => {
        const byAge = this.q.sweepEventsByAge.run(olderThan).changes;
        const byCount = this.q.sweepEventsByCount.run(keep).changes;
        return byAge + byCount;
      })
      .immediate();
  }

  insertToken(machine: string, scope: Scope, sha256: string, created: number): void {
    this.tokens.clear();
    this.q.insertToken.run(machine, scope, sha256, created);
  }

  /** Found rows are cached for one data_version (a revocation by any process drops them); misses are not. */
  findToken(sha256: string): TokenRow | undefined {
    const version = this.dataVersion();
    if (version !== this.tokensVersion) {
      this.tokens.clear();
      this.tokensVersion = version;
    }
    const hit = this.tokens.get(sha256);
    if (hit !== undefined) return hit;
    const row = this.q.findToken.get(sha256) as TokenRow | undefined;
    if (row !== undefined && this.tokens.size < 1024) this.tokens.set(sha256, row);
    return row;
  }

  /** One transaction: revoke `machine`'s active `scope` tokens, then insert the new one. Returns how many were revoked. */
  replaceToken(machine: string, scope: Scope, sha256: string, created: number): number {
    this.tokens.clear();
    return this.db
      .transaction(() => {
        const n = this.q.revokeScopeTokens.run(created, machine, scope).changes;
        this.q.insertToken.run(machine, scope, sha256, created);
        return n;
      })
      .immediate();
  }

  revokeToken(machine: string, id: number, at: number): number {
    this.tokens.clear();
    return this.q.revokeTokenById.run(at, machine, id).changes;
  }

  revokeTokens(machine: string, at: number): number {
    this.tokens.clear();
    return this.q.revokeTokens.run(at, machine).changes;
  }

  listTokens(): readonly TokenRow[] {
    return this.q.listTokens.all() as TokenRow[];
  }

  hasActiveAdmin(): boolean {
    return this.q.activeAdmin.get() !== undefined;
  }

  tryCheckLock(owner: string, nowMs: number, untilMs: number): boolean {
    return this.db
      .transaction(() => {
        const row = this.q.readMeta.get('check_lock') as { value: string } | undefined;
        if (row !== undefined) {
          const held = JSON.parse(row.value) as { owner: string; until: number };
          if (held.owner !== owner && held.until > nowMs) return false;
        }
        this.q.writeMeta.run('check_lock', JSON.stringify({ owner, until: untilMs }));
        return true;
      })
      .immediate();
  }

  releaseCheckLock(owner: string): void {
    this.db
      .transaction(() => {
        const row = this.q.readMeta.get('check_lock') as { value: string } | undefined;
        if (row !== undefined && (JSON.parse(row.value) as { owner: string }).owner === owner)
          this.q.deleteMeta.run('check_lock');
      })
      .immediate();
  }

  async backup(to: string): Promise<void> {
    await this.db.backup(to);
    chmodSync(to, 0o600);
  }

  /** For tests and the CLI: PRAGMA integrity_check. */
  integrityCheck(): string {
    return String(this.db.pragma('integrity_check', { simple: true }));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/** Every statement, prepared once. */
function prepare(db: Database.Database) {
  return {
    readLease: db.prepare("SELECT * FROM lease WHERE name = 'hq'"),
    insertLease: db.prepare(
      `INSERT INTO lease (name, holder, generation, revision, acquired_at, renewed_at, ttl_seconds, safety_margin_seconds,
         expires_at, released, not_before, floor_pending, dual_unreachable_streak, last_check_at, promoted_from, maintenance,
         maintenance_reason, displaced, floor)
       VALUES ('hq', @holder, @generation, @revision, @acquired_at, @renewed_at, @ttl_seconds, @safety_margin_seconds,
         @expires_at, @released, @not_before, @floor_pending, @dual_unreachable_streak, @last_check_at, @promoted_from, @maintenance,
         @maintenance_reason, @displaced, @floor)
       ON CONFLICT (name) DO NOTHING`,
    ),
    dataVersion: db.prepare('PRAGMA data_version').pluck(),
    writeLease: db.prepare(
      `UPDATE lease SET holder = @holder, generation = @generation, revision = @revision, acquired_at = @acquired_at,
        renewed_at = @renewed_at, ttl_seconds = @ttl_seconds, safety_margin_seconds = @safety_margin_seconds,
        expires_at = @expires_at, released = @released,
        not_before = @not_before, floor_pending = @floor_pending, dual_unreachable_streak = @dual_unreachable_streak,
        last_check_at = @last_check_at, promoted_from = @promoted_from, maintenance = @maintenance,
        maintenance_reason = @maintenance_reason, displaced = @displaced, floor = @floor
       WHERE name = 'hq' AND revision = @expected`,
    ),
    readObservers: db.prepare('SELECT * FROM observers ORDER BY observer'),
    upsertObserver: db.prepare(
      `INSERT INTO observers (observer, view_target, view_reachable, view_ping, view_health, view_at,
         conf_holder, conf_generation, conf_at, last_heartbeat_at, heartbeat_seconds, refresh_seconds, request_timeout_seconds)
       VALUES (@observer, @view_target, @view_reachable, @view_ping, @view_health, @view_at,
         @conf_holder, @conf_generation, @conf_at, @last_heartbeat_at, @heartbeat_seconds, @refresh_seconds, @request_timeout_seconds)
       ON CONFLICT (observer) DO UPDATE SET view_target = excluded.view_target, view_reachable = excluded.view_reachable,
         view_ping = excluded.view_ping, view_health = excluded.view_health, view_at = excluded.view_at,
         conf_holder = excluded.conf_holder, conf_generation = excluded.conf_generation, conf_at = excluded.conf_at,
         last_heartbeat_at = excluded.last_heartbeat_at, heartbeat_seconds = excluded.heartbeat_seconds,
         refresh_seconds = excluded.refresh_seconds, request_timeout_seconds = excluded.request_timeout_seconds`,
    ),
    insertEvent: db.prepare('INSERT INTO events (at, category, event, host, data) VALUES (?, ?, ?, ?, ?)'),
    listEvents: db.prepare('SELECT * FROM events WHERE id > ? ORDER BY id ASC LIMIT ?'),
    nthNewestEvent: db.prepare('SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?'),
    firstEventAt: db.prepare('SELECT id FROM events WHERE at >= ? ORDER BY id ASC LIMIT 1'),
    lastEventId: db.prepare('SELECT max(id) AS id FROM events'),
    sweepEventsByAge: db.prepare('DELETE FROM events WHERE at < ?'),
    sweepEventsByCount: db.prepare(
      'DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)',
    ),
    insertToken: db.prepare('INSERT INTO tokens (machine, scope, sha256, created) VALUES (?, ?, ?, ?)'),
    findToken: db.prepare('SELECT * FROM tokens WHERE sha256 = ?'),
    revokeTokens: db.prepare('UPDATE tokens SET revoked = ? WHERE machine = ? AND revoked IS NULL'),
    revokeTokenById: db.prepare('UPDATE tokens SET revoked = ? WHERE machine = ? AND id = ? AND revoked IS NULL'),
    revokeScopeTokens: db.prepare('UPDATE tokens SET revoked = ? WHERE machine = ? AND scope = ? AND revoked IS NULL'),
    listTokens: db.prepare('SELECT * FROM tokens ORDER BY id'),
    activeAdmin: db.prepare("SELECT 1 FROM tokens WHERE scope = 'admin' AND revoked IS NULL LIMIT 1"),
    readMeta: db.prepare('SELECT value FROM meta WHERE key = ?'),
    writeMeta: db.prepare(
      'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
    deleteMeta: db.prepare('DELETE FROM meta WHERE key = ?'),
  };
}
