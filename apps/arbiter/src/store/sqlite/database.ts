/**
 * The one place `hq.db` is opened. Every connection — the lease store's, the registry's, a
 * one-shot command's — comes from `openDatabase`: it makes the file owner-only, sets the
 * pragmas (each with its reason) and reads back the two safety rests on, then brings the schema
 * to the last version of the numbered list in `migrations.ts`.
 *
 * Invariants:
 *  - A connection that `openDatabase` returns is in WAL mode with synchronous=FULL, or it was
 *    not returned: an acknowledged write survives a power cut (S4), so a generation — the
 *    fencing token — and a port lease are never handed out twice.
 *  - Migrations run in one `BEGIN IMMEDIATE` transaction that reads the version under the write
 *    lock: two processes opening a new file at once run each migration once, and a crash leaves
 *    the database at the version before or after, never between.
 *  - A database made by a newer hq-arbiter (a higher version) is refused, never touched.
 */
import Database from 'better-sqlite3';
import { basename, dirname } from 'node:path';
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { MIGRATIONS } from './migrations.js';

/** The database's name in `dataDir`. */
export const DATABASE_FILE = 'hq.db';

/** A writer waits this long for another connection's write lock before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

export interface OpenOptions {
  readonly path: string;
  /** Milliseconds a writer waits for the lock before SQLITE_BUSY (default `BUSY_TIMEOUT_MS`). */
  readonly busyTimeoutMs?: number;
}

/** Opens (creating when absent) and migrates `path`; throws one line when it cannot be used. */
export function openDatabase(opts: OpenOptions): Database.Database {
  const dir = dirname(opts.path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // The directory holds the admin token and the database: owner only, also when it existed.
  if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  // Created 0600 before SQLite sees it ('a': never truncates, no race with another opener).
  closeSync(openSync(opts.path, 'a', 0o600));
  if ((statSync(opts.path).mode & 0o077) !== 0) chmodSync(opts.path, 0o600);
  const db = new Database(opts.path);
  try {
    // WAL: readers never block the writer, and a commit is one sequential append.
    db.pragma('journal_mode = WAL');
    // FULL: fsync the WAL on every commit — an acknowledged grant must survive a power cut,
    // or a generation (the fencing token) could be handed out twice (S1, S4).
    db.pragma('synchronous = FULL');
    // busy_timeout: `hq-arbiter check`/`token` in another process briefly hold the write lock.
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS}`);
    // foreign_keys: off by default in SQLite; on, so any future reference is enforced.
    db.pragma('foreign_keys = ON');
    const sync = db.pragma('synchronous', { simple: true });
    if (sync !== 2) throw new Error(`PRAGMA synchronous reads back ${String(sync)}, expected FULL (2)`);
    const mode = db.pragma('journal_mode', { simple: true });
    if (mode !== 'wal') throw new Error(`PRAGMA journal_mode reads back ${String(mode)}, expected wal`);
    migrate(db, basename(opts.path));
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/** How many migrations have run (0: an empty file). */
export function schemaVersion(db: Database.Database): number {
  const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").get() !== undefined;
  if (!hasMeta) return 0;
  const row = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string } | undefined;
  return Number(row?.value ?? 0);
}

function refuseNewer(version: number, name: string): void {
  if (version > MIGRATIONS.length) {
    throw new Error(
      `${name} has schema version ${version}, newer than this hq-arbiter's ${MIGRATIONS.length}: it was made by a newer hq-arbiter; run that one, or restore a backup made by this one`,
    );
  }
}

function migrate(db: Database.Database, name: string): void {
  // The common case, a current database, takes no write lock (the daemon may hold it).
  const seen = schemaVersion(db);
  refuseNewer(seen, name);
  if (seen === MIGRATIONS.length) return;
  db.transaction(() => {
    // Again under the write lock: another process may have migrated since.
    const version = schemaVersion(db);
    refuseNewer(version, name);
    for (const m of MIGRATIONS.slice(version)) db.exec(m.sql);
    if (version < MIGRATIONS.length) {
      db.prepare(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      ).run(String(MIGRATIONS.length));
    }
  }).immediate();
}
