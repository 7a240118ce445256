/**
 * `hq-arbiter migrate --from sqlite:PATH --to etcd:URL[,URL…]`: an installation's state moves
 * from its SQLite file into a new etcd prefix, in the etcd store's own encoding (keys.ts), so
 * the etcd arbiters open it as if they had written it.
 *
 *  1. A consistent copy of the database: SQLite's online backup into a private temp directory
 *     (the daemon keeps serving meanwhile; the copy is one instant of it).
 *  2. Everything read from the copy: the lease record, the floor and the views; every token
 *     hash (revoked ones too: a revoked token stays refused); every event, with its id; the
 *     live resources and port leases.
 *  3. Written under the prefix, which must be empty, the state last (store.ts,
 *     `writeNewPrefix`): a migration cut short leaves no store behind, only keys to delete.
 *
 * S1 across the move: the state's floor is written as max(floor, generation), so no grant of
 * the etcd arbiters goes below a generation the SQLite arbiter granted up to the copy. A grant
 * the SQLite arbiter makes after the copy (it still serves) is not in it — the same case as a
 * restored backup: the first etcd arbiter's election is a takeover, i.e. a restart (S2.3: no
 * grant before the start wait), and every agent's heartbeat carries the generation it saw,
 * which raises the floor above that grant (SAFETY.md, S1). What must not happen is both stores
 * deciding at once: stop the SQLite arbiter before an etcd arbiter starts (the README says so).
 */
import { mkdtempSync, rmSync, statSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { ArbiterState } from '@hq/lease-core';
import { openDatabase, DATABASE_FILE } from '../sqlite/database.js';
import { SqliteStore } from '../sqlite/lease.js';
import { SqliteRegistryStore } from '../sqlite/registry.js';
import type { EtcdClient } from './client.js';
import { etcdKeys } from './keys.js';
import { encodeResource } from './registry.js';
import { encodeEvent, encodeState, writeNewPrefix, type PrefixKv } from './lease.js';

export interface MigrateSource {
  /** The SQLite database: its file, or the dataDir holding `hq.db`. */
  readonly path: string;
}

export interface MigrateReport {
  /** The SQLite file read. */
  readonly from: string;
  readonly prefix: string;
  readonly holder: string | null;
  readonly generation: number;
  /** The floor written: max(floor, generation). */
  readonly floor: number;
  readonly tokens: number;
  readonly events: number;
  readonly resources: number;
  readonly portLeases: number;
  /** Keys written under the prefix. */
  readonly keys: number;
}

/** The database file `path` names: the file itself, or `{path}/hq.db` for a directory. */
export function databaseFileOf(path: string): string {
  let st: Stats;
  try {
    st = statSync(path);
  } catch {
    throw new Error(
      `--from sqlite:${path}: no such file or directory (give the arbiter's dataDir or its ${DATABASE_FILE})`,
    );
  }
  const file = st.isDirectory() ? join(path, DATABASE_FILE) : path;
  try {
    if (!statSync(file).isFile()) throw new Error('not a file');
  } catch {
    throw new Error(
      `--from sqlite:${path}: no ${DATABASE_FILE} there (give the arbiter's dataDir or its ${DATABASE_FILE})`,
    );
  }
  return file;
}

const EVENT_PAGE = 1000;

/** What the copy holds, as the etcd store's keys (relative to the prefix). */
function snapshotKvs(
  state: ArbiterState,
  copy: SqliteStore,
  db: Database.Database,
  nowMs: number,
): { kvs: PrefixKv[]; report: Omit<MigrateReport, 'from' | 'prefix' | 'keys'> } {
  const keys = etcdKeys('');
  const kvs: PrefixKv[] = [];
  const floor = Math.max(state.floor, state.lease.generation);
  kvs.push({ key: keys.state, value: encodeState({ ...state, floor }) });

  const tokens = copy.listTokens();
  for (const row of tokens) kvs.push({ key: keys.token(row.sha256), value: JSON.stringify(row) });
  kvs.push({ key: keys.tokenSeq, value: String(Math.max(sequenceOf(db, 'tokens'), ...tokens.map((r) => r.id))) });

  let events = 0;
  let lastId = 0;
  for (;;) {
    const page = copy.listEvents(lastId, EVENT_PAGE);
    for (const e of page) kvs.push({ key: keys.event(e.id), value: encodeEvent(e) });
    events += page.length;
    const last = page[page.length - 1];
    if (last === undefined || page.length < EVENT_PAGE) break;
    lastId = last.id;
  }
  // The sequence, not the last event: ids handed out and swept since are never reused.
  kvs.push({ key: keys.eventSeq, value: String(Math.max(lastId, sequenceOf(db, 'events'))) });

  const registry = new SqliteRegistryStore(db, {});
  const resources = registry.listResources({}, nowMs);
  for (const r of resources) kvs.push({ key: keys.resource(r.id), value: encodeResource(r) });
  const leases = registry.listPortLeases(nowMs);
  for (const l of leases) kvs.push({ key: keys.port(l.port), value: JSON.stringify(l) });

  return {
    kvs,
    report: {
      holder: state.lease.holder,
      generation: state.lease.generation,
      floor,
      tokens: tokens.length,
      events,
      resources: resources.length,
      portLeases: leases.length,
    },
  };
}

/** The highest id SQLite ever handed out in `table` (AUTOINCREMENT keeps it after deletes). */
function sequenceOf(db: Database.Database, table: 'events' | 'tokens'): number {
  const row = db.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').get(table) as { seq: number } | undefined;
  return row?.seq ?? 0;
}

/**
 * Copies the database at `source` into `prefix` on `client`'s cluster (empty, else nothing is
 * written: `PrefixNotEmptyError`). `nowMs`: the wall clock, for which registry rows are live.
 */
export async function migrateSqliteToEtcd(
  source: MigrateSource,
  client: EtcdClient,
  prefix: string,
  nowMs: number,
): Promise<MigrateReport> {
  const from = databaseFileOf(source.path);
  const tmp = mkdtempSync(join(tmpdir(), 'hq-migrate-'));
  try {
    // 1. one instant of the database, while its daemon serves (better-sqlite3's online backup)
    // Read-only: the live file is neither migrated nor seeded by this command.
    const live = new Database(from, { readonly: true, fileMustExist: true });
    try {
      await live.backup(join(tmp, DATABASE_FILE));
    } finally {
      live.close();
    }
    // 2. read the copy
    const copy = new SqliteStore({ dataDir: tmp, ttlSeconds: 0 });
    const db = openDatabase({ path: copy.path });
    let snap: ReturnType<typeof snapshotKvs>;
    try {
      snap = snapshotKvs(copy.read(), copy, db, nowMs);
    } finally {
      db.close();
      copy.close();
    }
    // 3. write the prefix, the state last
    const written = await writeNewPrefix(client, prefix, snap.kvs);
    return { from, prefix: etcdKeys(prefix).prefix, keys: written, ...snap.report };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
