/**
 * SqliteRegistryStore — the registry seam (`RegistryStore`, ../store.ts) over resources
 * and port leases in the arbiter's SQLite file, beside the lease record (own tables, same file
 * `{dataDir}/hq.db`, same numbered migration list: the connection comes from `openDatabase`
 * in ./database.ts, which has migrated it).
 *
 * Invariants:
 *  - Every write is one `BEGIN IMMEDIATE` transaction: the write lock is taken before the
 *    rows are read, so two allocations — in this process or in another one opened on the same
 *    file — are serialised, and the decision (`decide.ts`) always sees every committed lease.
 *    This is what makes "no port is handed to two live leases" hold across processes.
 *  - Nothing async and no clock inside a transaction: `now` (epoch ms) and the new lease id
 *    are parameters; logs and metrics happen after commit, in the caller.
 *  - Several writes may share one transaction (`commitAll`, used by the routes' group
 *    commit): each write is then a SAVEPOINT inside the outer `BEGIN IMMEDIATE`, decided on
 *    every row committed before it and on the writes before it in the same group. An answer is
 *    still only sent after the COMMIT that made it durable; one fsync covers the whole group.
 *  - Expired rows are never returned as live. They are overwritten on reuse and swept by
 *    `sweep(now)`; readers filter on `expires_at > now`, so a missing sweep changes nothing.
 */
import type Database from 'better-sqlite3';
import {
  DEFAULT_BANDS,
  decideAllocation,
  decideLeaseAccess,
  decideRegister,
  decideResourceDelete,
  decideResourceHeartbeat,
  renewedLease,
  validateBands,
  type Actor,
  type AllocateResult,
  type Attrs,
  type Bands,
  type LeaseAccess,
  type PortLeaseRow,
  type RegisterInput,
  type ResourceKind,
  type ResourceResult,
  type ResourceRow,
} from '../../registry/decide.js';
import {
  attrsFromJson,
  attrsToObject,
  type AllocateRequest,
  type RegistryStore,
  type ResourceFilter,
  type WriteOutcome,
} from '../../registry/store.js';
import { isPromise, type Awaitable } from '../../awaitable.js';

interface ResourceDbRow {
  id: string;
  name: string;
  kind: ResourceKind;
  machine: string;
  owner: string;
  attrs: string;
  observed_at: number;
  ttl_ms: number;
  registered_at: number;
  renewed_at: number;
  expires_at: number;
}

interface LeaseDbRow {
  port: number;
  lease_id: string;
  machine: string;
  purpose: string;
  ttl_ms: number;
  created_at: number;
  renewed_at: number;
  expires_at: number;
}

function resourceFromRow(r: ResourceDbRow): ResourceRow {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    machine: r.machine,
    owner: r.owner,
    attrs: attrsFromJson(r.attrs),
    observedAt: r.observed_at,
    ttlMs: r.ttl_ms,
    registeredAt: r.registered_at,
    renewedAt: r.renewed_at,
    expiresAt: r.expires_at,
  };
}

function resourceParams(r: ResourceRow): ResourceDbRow {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    machine: r.machine,
    owner: r.owner,
    attrs: JSON.stringify(attrsToObject(r.attrs)),
    observed_at: r.observedAt,
    ttl_ms: r.ttlMs,
    registered_at: r.registeredAt,
    renewed_at: r.renewedAt,
    expires_at: r.expiresAt,
  };
}

function leaseFromRow(r: LeaseDbRow): PortLeaseRow {
  return {
    port: r.port,
    leaseId: r.lease_id,
    machine: r.machine,
    purpose: r.purpose,
    ttlMs: r.ttl_ms,
    createdAt: r.created_at,
    renewedAt: r.renewed_at,
    expiresAt: r.expires_at,
  };
}

function leaseParams(l: PortLeaseRow): LeaseDbRow {
  return {
    port: l.port,
    lease_id: l.leaseId,
    machine: l.machine,
    purpose: l.purpose,
    ttl_ms: l.ttlMs,
    created_at: l.createdAt,
    renewed_at: l.renewedAt,
    expires_at: l.expiresAt,
  };
}

export interface RegistryStoreOptions {
  readonly bands?: Bands;
}

export class SqliteRegistryStore implements RegistryStore {
  readonly bands: Bands;
  private readonly db: Database.Database;
  private readonly q: ReturnType<typeof prepare>;

  constructor(db: Database.Database, opts: RegistryStoreOptions = {}) {
    this.bands = opts.bands ?? DEFAULT_BANDS;
    const v = validateBands(this.bands);
    if (!v.ok) throw new Error(v.message);
    this.db = db;
    this.q = prepare(db);
  }

  // -------------------------------------------------------------------------------------
  // resources

  register(req: RegisterInput, actor: Actor, now: number): ResourceResult {
    return this.db
      .transaction((): ResourceResult => {
        const existing = this.getResource(req.id);
        const d = decideRegister(existing, req, actor, now);
        if (d.ok) this.q.upsertResource.run(resourceParams(d.resource));
        return d;
      })
      .immediate();
  }

  heartbeatResource(id: string, attrs: Attrs | undefined, actor: Actor, now: number): ResourceResult {
    return this.db
      .transaction((): ResourceResult => {
        const d = decideResourceHeartbeat(this.getResource(id), id, attrs, actor, now);
        // Only the columns a heartbeat changes: the (kind, machine) index is left alone.
        if (d.ok)
          this.q.renewResource.run(
            JSON.stringify(attrsToObject(d.resource.attrs)),
            d.resource.renewedAt,
            d.resource.expiresAt,
            id,
          );
        return d;
      })
      .immediate();
  }

  deleteResource(id: string, actor: Actor, now: number): ResourceResult {
    return this.db
      .transaction((): ResourceResult => {
        const d = decideResourceDelete(this.getResource(id), id, actor, now);
        if (d.ok) this.q.deleteResource.run(id);
        return d;
      })
      .immediate();
  }

  /** Live resources only, ordered by id. */
  listResources(filter: ResourceFilter, now: number): ResourceRow[] {
    const rows = this.q.listResources.all({
      now,
      kind: filter.kind ?? null,
      machine: filter.machine ?? null,
    }) as ResourceDbRow[];
    return rows.map(resourceFromRow);
  }

  private getResource(id: string): ResourceRow | undefined {
    const r = this.q.getResource.get(id) as ResourceDbRow | undefined;
    return r === undefined ? undefined : resourceFromRow(r);
  }

  // -------------------------------------------------------------------------------------
  // port leases

  /** One immediate transaction: read the band's rows, decide, write the lease. */
  allocatePort(req: AllocateRequest, leaseId: string, now: number): AllocateResult {
    return this.db
      .transaction((): AllocateResult => {
        const { test } = this.bands;
        const rows = (this.q.leasesInRange.all(test.from, test.to) as LeaseDbRow[]).map(leaseFromRow);
        const d = decideAllocation({
          bands: this.bands,
          rows,
          machine: req.machine,
          purpose: req.purpose,
          ttlMs: req.ttlMs,
          excluded: req.excluded ?? [],
          leaseId,
          now,
        });
        if (d.ok) {
          // The port is the primary key: an expired row is replaced, a live one can never be
          // (the decision skipped it), and the upsert guards that once more on the write.
          const info = this.q.upsertLease.run({ ...leaseParams(d.lease), now });
          if (info.changes !== 1) throw new Error(`port ${d.lease.port} was leased under the transaction`);
        }
        return d;
      })
      .immediate();
  }

  renewPort(port: number, leaseId: string, actor: Actor, now: number): LeaseAccess {
    return this.db
      .transaction((): LeaseAccess => {
        const d = decideLeaseAccess(this.getLease(port), port, leaseId, actor, now);
        if (!d.ok) return d;
        const next = renewedLease(d.lease, now);
        this.q.renewLease.run(next.renewedAt, next.expiresAt, port, leaseId);
        return { ok: true, lease: next };
      })
      .immediate();
  }

  releasePort(port: number, leaseId: string, actor: Actor, now: number): LeaseAccess {
    return this.db
      .transaction((): LeaseAccess => {
        const d = decideLeaseAccess(this.getLease(port), port, leaseId, actor, now);
        if (d.ok) this.q.deleteLease.run(port, leaseId);
        return d;
      })
      .immediate();
  }

  /** Live leases, by port. */
  listPortLeases(now: number): PortLeaseRow[] {
    return (this.q.liveLeases.all(now) as LeaseDbRow[]).map(leaseFromRow);
  }

  private getLease(port: number): PortLeaseRow | undefined {
    const r = this.q.getLease.get(port) as LeaseDbRow | undefined;
    return r === undefined ? undefined : leaseFromRow(r);
  }

  /**
   * Runs `writes` — each a call of one of this store's write methods — in one `BEGIN IMMEDIATE`
   * transaction, each write its own savepoint: one commit (one fsync under synchronous=FULL) for
   * all. A write that throws rolls back to its own savepoint only and its error is its outcome;
   * if the COMMIT throws, nothing of the group is written.
   */
  commitAll<T>(writes: readonly (() => Awaitable<T>)[]): readonly WriteOutcome<T>[] {
    return this.db
      .transaction(() =>
        writes.map((write): WriteOutcome<T> => {
          try {
            // Nested, a transaction is a savepoint: whatever `write` wrote is undone if it throws.
            const value = this.db.transaction(write)();
            if (isPromise(value))
              throw new Error('a SQLite registry write returned a promise (a write of another store?)');
            return { ok: true, value };
          } catch (error) {
            return { ok: false, error };
          }
        }),
      )
      .immediate();
  }

  /** Deletes rows that expired before `olderThan` (housekeeping; correctness never needs it). */
  sweep(olderThan: number): { resources: number; leases: number } {
    return this.db
      .transaction(() => ({
        resources: this.q.sweepResources.run(olderThan).changes,
        leases: this.q.sweepLeases.run(olderThan).changes,
      }))
      .immediate();
  }
}

/** Every statement, prepared once. */
function prepare(db: Database.Database) {
  return {
    getResource: db.prepare('SELECT * FROM resources WHERE id = ?'),
    upsertResource: db.prepare(
      `INSERT INTO resources VALUES (@id, @name, @kind, @machine, @owner, @attrs, @observed_at, @ttl_ms, @registered_at,
         @renewed_at, @expires_at)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, kind = excluded.kind, machine = excluded.machine,
         owner = excluded.owner, attrs = excluded.attrs, observed_at = excluded.observed_at, ttl_ms = excluded.ttl_ms,
         registered_at = excluded.registered_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at`,
    ),
    renewResource: db.prepare('UPDATE resources SET attrs = ?, renewed_at = ?, expires_at = ? WHERE id = ?'),
    deleteResource: db.prepare('DELETE FROM resources WHERE id = ?'),
    listResources: db.prepare(
      `SELECT * FROM resources WHERE expires_at > @now AND (@kind IS NULL OR kind = @kind)
         AND (@machine IS NULL OR machine = @machine) ORDER BY id`,
    ),
    leasesInRange: db.prepare('SELECT * FROM port_leases WHERE port BETWEEN ? AND ? ORDER BY port'),
    getLease: db.prepare('SELECT * FROM port_leases WHERE port = ?'),
    // Replaces a row only when it has expired: the write itself refuses a live lease.
    upsertLease: db.prepare(
      `INSERT INTO port_leases VALUES (@port, @lease_id, @machine, @purpose, @ttl_ms, @created_at, @renewed_at, @expires_at)
       ON CONFLICT (port) DO UPDATE SET lease_id = excluded.lease_id, machine = excluded.machine, purpose = excluded.purpose,
         ttl_ms = excluded.ttl_ms, created_at = excluded.created_at, renewed_at = excluded.renewed_at,
         expires_at = excluded.expires_at
       WHERE port_leases.expires_at <= @now`,
    ),
    renewLease: db.prepare('UPDATE port_leases SET renewed_at = ?, expires_at = ? WHERE port = ? AND lease_id = ?'),
    deleteLease: db.prepare('DELETE FROM port_leases WHERE port = ? AND lease_id = ?'),
    liveLeases: db.prepare('SELECT * FROM port_leases WHERE expires_at > ? ORDER BY port'),
    sweepResources: db.prepare('DELETE FROM resources WHERE expires_at <= ?'),
    sweepLeases: db.prepare('DELETE FROM port_leases WHERE expires_at <= ?'),
  };
}
