/**
 * S7 — the resource side checks the token. A write carrying generation g is accepted only when
 * g ≥ the highest generation this resource has accepted; accepting raises that mark. A write
 * from an old holder that kept running past its validity (a paused process, a partition) is
 * then refused by the resource itself, whatever the clocks said.
 */
export type GuardResult =
  | { readonly ok: true; readonly highest: number }
  | { readonly ok: false; readonly reason: 'stale-generation' | 'bad-generation'; readonly highest: number };

/** Parses a generation from a header or a file ("12", "12\n"); null when it is not one. */
export function parseGeneration(text: string | undefined | null): number | null {
  if (typeof text !== 'string') return null;
  const t = text.replace(/\r?\n$/, '');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : null;
}

/** The plain check: for HTTP headers (`X-HQ-Generation`), files, anything with a stored mark. */
export function checkGeneration(highest: number, incoming: unknown): GuardResult {
  if (typeof incoming !== 'number' || !Number.isSafeInteger(incoming) || incoming < 1) {
    return { ok: false, reason: 'bad-generation', highest };
  }
  if (incoming < highest) return { ok: false, reason: 'stale-generation', highest };
  return { ok: true, highest: incoming };
}

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
