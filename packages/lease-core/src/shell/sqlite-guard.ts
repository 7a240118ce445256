/**
 * `@hq/lease-core/sqlite-guard` — the S7 guard for a resource kept in SQLite: the mark lives in
 * a table of the resource's own database (not the arbiter's), checked and raised inside the
 * writer's own transaction. This is shell code (it creates a table and runs statements through
 * the handle it is given), the only file of lease-core that is not a decision: the resource side
 * imports its guard from this package, and @hq/runtime, which depends on lease-core, cannot hold
 * a helper that lease-core exports. The decision it applies is the root's `checkGeneration`. It
 * imports no driver: any better-sqlite3-like handle works.
 */
import { checkGeneration, type GuardResult } from '../guard.js';

/** The subset of a better-sqlite3 `Database` the guard needs (duck-typed: no import). */
export interface SqliteLike {
  prepare(sql: string): {
    run(...params: unknown[]): { changes: number | bigint };
    get(...params: unknown[]): unknown;
  };
  exec(sql: string): unknown;
}

export interface SqliteGuard {
  /**
   * Checks and records `generation` for `resource` inside the caller's open transaction:
   * call it first in the writer's `db.transaction(fn)` and throw (rolling back) when it
   * refuses. Two writers racing are serialized by SQLite's write lock.
   */
  accept(resource: string, generation: unknown): GuardResult;
  highest(resource: string): number;
}

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Creates the mark table when missing (the resource's database, so no migration list of hq's owns it). */
export function sqliteGuard(db: SqliteLike, table = 'hq_fence'): SqliteGuard {
  if (!TABLE.test(table)) throw new TypeError(`table must match ${TABLE.source}`);
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (resource TEXT PRIMARY KEY, generation INTEGER NOT NULL) STRICT`);
  const read = db.prepare(`SELECT generation FROM ${table} WHERE resource = ?`);
  // The condition is part of the write: the row is only raised, never lowered (UPSERT ... WHERE).
  const raise = db.prepare(
    `INSERT INTO ${table} (resource, generation) VALUES (?, ?)
     ON CONFLICT (resource) DO UPDATE SET generation = excluded.generation WHERE excluded.generation >= ${table}.generation`,
  );
  const highest = (resource: string): number => {
    const row = read.get(resource) as { generation: number | bigint } | undefined;
    // Number(): a handle with defaultSafeIntegers(true) returns bigint.
    return row === undefined ? 0 : Number(row.generation);
  };
  return {
    highest,
    accept(resource, generation) {
      const mark = highest(resource);
      const verdict = checkGeneration(mark, generation);
      if (!verdict.ok) return verdict;
      const changes = Number(raise.run(resource, generation).changes);
      return changes === 1 ? verdict : { ok: false, reason: 'stale-generation', highest: highest(resource) };
    },
  };
}
