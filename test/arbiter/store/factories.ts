/**
 * The stores every store test runs against. Each test file loops over `STORE_FACTORIES`, so a
 * second backend is one more line here (its factory starting what it needs — an etcd member,
 * say — per test and stopping it at teardown).
 */
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SqliteStore } from '../../../apps/arbiter/src/store/sqlite.js';
import { openDatabase } from '../../../apps/arbiter/src/store/database.js';
import { SqliteRegistryStore } from '../../../apps/arbiter/src/registry/store.js';
import type { LeaseStore, RegistryStore } from '../../../apps/arbiter/src/store/store.js';
import type { Bands } from '../../../apps/arbiter/src/registry/decide.js';

export interface StoreFactory {
  readonly name: string;
  /** A store on new, empty data, closed at teardown. */
  lease(t: Test, opts?: { readonly ttlSeconds?: number }): LeaseStore;
  /** A second handle on `first`'s data, as another process (`hq-arbiter check`, `token`) opens it. */
  again(t: Test, first: LeaseStore): LeaseStore;
  /** A store opened on what `first.backup(to)` wrote. */
  fromBackup(t: Test, to: string): LeaseStore;
  /** Where `backup` may write, in a directory of this test's. */
  backupTarget(t: Test): string;
  /** A registry store on new, empty data, closed at teardown. */
  registry(t: Test, opts?: { readonly bands?: Bands }): RegistryStore;
}

/** A directory of its own per call (t.testdir() twice in one test would empty the first). */
function freshDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'hq-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const sqliteDirs = new WeakMap<LeaseStore, string>();

function openSqlite(t: Test, dataDir: string, ttlSeconds = 6): LeaseStore {
  const store = new SqliteStore({ dataDir, ttlSeconds });
  sqliteDirs.set(store, dataDir);
  t.teardown(() => store.close());
  return store;
}

const sqlite: StoreFactory = {
  name: 'sqlite',
  lease: (t, opts = {}) => openSqlite(t, freshDir(t), opts.ttlSeconds),
  again(t, first) {
    const dir = sqliteDirs.get(first);
    if (dir === undefined) throw new Error('again(): not a store of this factory');
    return openSqlite(t, dir);
  },
  // The copy is a database file named hq.db, so its directory opens as a dataDir.
  fromBackup: (t, to) => openSqlite(t, dirname(to)),
  backupTarget: (t) => join(freshDir(t), 'hq.db'),
  registry(t, opts = {}) {
    const db = openDatabase({ path: join(freshDir(t), 'hq.db') });
    t.teardown(() => db.close());
    return new SqliteRegistryStore(db, opts.bands === undefined ? {} : { bands: opts.bands });
  },
};

export const STORE_FACTORIES: readonly StoreFactory[] = [sqlite];
