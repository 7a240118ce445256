/**
 * The stores every store test runs against: SQLite in a temp dir, and etcd on one real member
 * (test/etcd/members.ts, started once per test file, each store on a prefix of its own; skipped
 * with the reason when there is no etcd here, a failure under CI=true). Each test file runs its
 * tests per factory through `forEachStore`.
 */
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SqliteStore } from '../../../apps/arbiter/src/store/sqlite/lease.js';
import { openDatabase } from '../../../apps/arbiter/src/store/sqlite/database.js';
import { SqliteRegistryStore } from '../../../apps/arbiter/src/store/sqlite/registry.js';
import type { LeaseStore } from '../../../apps/arbiter/src/store/store.js';
import type { RegistryStore } from '../../../apps/arbiter/src/registry/store.js';
import type { Bands } from '../../../apps/arbiter/src/registry/decide.js';
import { EtcdClient, type Txn, type TxnResult } from '../../../apps/arbiter/src/store/etcd/client.js';
import { EtcdStore } from '../../../apps/arbiter/src/store/etcd/lease.js';
import { EtcdRegistryStore } from '../../../apps/arbiter/src/store/etcd/registry.js';
import { etcdMembers, type EtcdCluster } from '../../etcd/members.js';

export interface StoreFactory {
  readonly name: string;
  /** `commitAll` is one transaction for the group (a write's own earlier calls are undone with it); else one commit per write. */
  readonly groupsCommits: boolean;
  /**
   * Starts what the stores need for the tests under `t` (an etcd member, say), stopped at its
   * teardown; false when it cannot run here (skipped with the reason; a failure under CI=true).
   */
  start(t: Test): Promise<boolean>;
  /** A store on new, empty data, closed at teardown. */
  lease(t: Test, opts?: { readonly ttlSeconds?: number }): Promise<LeaseStore>;
  /** A second handle on `first`'s data, as another process (`hq-arbiter check`, `token`) opens it. */
  again(t: Test, first: LeaseStore): Promise<LeaseStore>;
  /** A store opened on what `first.backup(to)` wrote. */
  fromBackup(t: Test, to: string): Promise<LeaseStore>;
  /** Where `backup` may write, in a directory of this test's. */
  backupTarget(t: Test): string;
  /** A registry store on new, empty data, closed at teardown. */
  registry(t: Test, opts?: { readonly bands?: Bands }): Promise<RegistryStore>;
  /**
   * Called from inside a `decide` of `store`: `write` (on a handle of the same data) commits
   * after that transaction's read and before its write, so the write must lose its CAS.
   */
  interleave(store: LeaseStore, write: (same: LeaseStore) => unknown): void;
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
  groupsCommits: true,
  start: async () => true,
  lease: async (t, opts = {}) => openSqlite(t, freshDir(t), opts.ttlSeconds),
  async again(t, first) {
    const dir = sqliteDirs.get(first);
    if (dir === undefined) throw new Error('again(): not a store of this factory');
    return openSqlite(t, dir);
  },
  // The copy is a database file named hq.db, so its directory opens as a dataDir.
  fromBackup: async (t, to) => openSqlite(t, dirname(to)),
  backupTarget: (t) => join(freshDir(t), 'hq.db'),
  async registry(t, opts = {}) {
    const db = openDatabase({ path: join(freshDir(t), 'hq.db') });
    t.teardown(() => db.close());
    return new SqliteRegistryStore(db, opts.bands === undefined ? {} : { bands: opts.bands });
  },
  // SQLite holds the write lock from the read on: only the same connection can write in
  // between (a savepoint, synchronously, inside the decision).
  interleave: (store, write) => void write(store),
};

/** The etcd client of each etcd store here: `interleave` holds its next write back. */
class HeldClient extends EtcdClient {
  held: Promise<unknown> | null = null;
  override async txn(t: Txn): Promise<TxnResult> {
    const writes = [...t.success, ...(t.failure ?? [])].some((o) => o.type !== 'range');
    if (writes && this.held !== null) {
      const held = this.held;
      this.held = null;
      await held;
    }
    return super.txn(t);
  }
}

/** One member for the tests of one file (each store on a prefix of its own). */
let members: EtcdCluster | null = null;
const etcdOf = new WeakMap<object, { client: HeldClient; prefix: string }>();
let prefixes = 0;

function etcdClient(t: Test): HeldClient {
  if (members === null) throw new Error('the etcd factory was not started');
  const client = new HeldClient({ endpoints: members.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 3000 });
  t.teardown(() => client.close());
  return client;
}

async function openEtcd(t: Test, prefix: string, ttlSeconds = 6): Promise<LeaseStore> {
  const client = etcdClient(t);
  const store = await EtcdStore.open({ client, prefix, ttlSeconds });
  etcdOf.set(store, { client, prefix });
  return store;
}

const newPrefix = (): string => `/hq-test-${process.pid}-${++prefixes}`;

const etcd: StoreFactory = {
  name: 'etcd',
  groupsCommits: false,
  async start(t) {
    members = await etcdMembers(t, { size: 1 });
    return members !== null;
  },
  lease: (t, opts = {}) => openEtcd(t, newPrefix(), opts.ttlSeconds),
  async again(t, first) {
    const e = etcdOf.get(first);
    if (e === undefined) throw new Error('again(): not a store of this factory');
    return openEtcd(t, e.prefix);
  },
  async fromBackup(t, to) {
    const prefix = newPrefix();
    const client = etcdClient(t);
    await EtcdStore.restore(client, prefix, to);
    return openEtcd(t, prefix);
  },
  backupTarget: (t) => join(freshDir(t), 'hq-etcd-backup.json'),
  async registry(t, opts = {}) {
    return new EtcdRegistryStore({
      client: etcdClient(t),
      prefix: newPrefix(),
      ...(opts.bands === undefined ? {} : { bands: opts.bands }),
    });
  },
  interleave(store, write) {
    const e = etcdOf.get(store);
    if (e === undefined) throw new Error('interleave(): not a store of this factory');
    e.client.held = Promise.resolve(write(store));
  },
};

export const STORE_FACTORIES: readonly StoreFactory[] = [sqlite, etcd];

/**
 * One tap subtest per factory, named after it; a factory whose tool is missing skips with the
 * reason (fails under CI=true).
 */
export function forEachStore(t: Test, body: (factory: StoreFactory, t: Test) => Promise<void>): void {
  for (const factory of STORE_FACTORIES) {
    void t.test(factory.name, async (t) => {
      if (!(await factory.start(t))) return;
      await body(factory, t);
    });
  }
}
