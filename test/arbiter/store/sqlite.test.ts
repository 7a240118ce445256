/**
 * What only the SQLite store does beyond its seams (those are the factory-driven tests beside
 * this file): the file's modes and pragmas, "created now" for an absent, empty or wiped file,
 * and a cache that never holds a write its outer transaction rolled back.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteStore } from '../../../apps/arbiter/src/store/sqlite/lease.js';
import { CasError } from '../../../apps/arbiter/src/store/store.js';
import { MIGRATIONS } from '../../../apps/arbiter/src/store/sqlite/migrations.js';
import type { ArbiterState } from '@hq/lease-core';

const bump = (s: ArbiterState, generation: number) => ({
  next: { ...s, lease: { ...s.lease, generation, revision: s.lease.revision + 1 } },
  events: [],
  result: null,
});

t.test(
  'the database opens with WAL, synchronous FULL, foreign keys, 0600/0700 modes and the last schema version',
  async (t) => {
    const dir = join(t.testdir(), 'data');
    const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
    t.teardown(() => store.close());
    t.equal(statSync(dir).mode & 0o777, 0o700, 'data dir 0700');
    t.equal(statSync(join(dir, 'hq.db')).mode & 0o777, 0o600, 'hq.db 0600');
    const db = new Database(join(dir, 'hq.db'));
    t.teardown(() => db.close());
    t.equal(db.pragma('journal_mode', { simple: true }), 'wal', 'WAL');
    t.equal(
      (db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string }).value,
      String(MIGRATIONS.length),
      `schema version ${MIGRATIONS.length}`,
    );
    const own = (store as unknown as { db: Database.Database }).db;
    t.equal(own.pragma('synchronous', { simple: true }), 2, 'synchronous FULL on the store connection');
    t.equal(own.pragma('foreign_keys', { simple: true }), 1, 'foreign keys on');
    t.equal(store.integrityCheck(), 'ok', 'integrity ok');
  },
);

t.test('an existing directory or file with loose modes is made owner-only', async (t) => {
  const dir = t.testdir({ 'hq.db': '' });
  const { chmodSync } = await import('node:fs');
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'hq.db'), 0o644);
  new SqliteStore({ dataDir: dir, ttlSeconds: 6 }).close();
  t.equal(statSync(dir).mode & 0o777, 0o700, 'dir 0700');
  t.equal(statSync(join(dir, 'hq.db')).mode & 0o777, 0o600, 'file 0600');
});

t.test('an existing database is not created now; a wiped one is', async (t) => {
  const dir = t.testdir();
  const first = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.equal(first.createdNow, true, 'an absent file is created now');
  first.close();
  const again = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.equal(again.createdNow, false, 'reopened: not created now');
  again.close();
  for (const f of ['hq.db', 'hq.db-wal', 'hq.db-shm']) rmSync(join(dir, f), { force: true });
  writeFileSync(join(dir, 'hq.db'), '');
  const wiped = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.equal(wiped.createdNow, true, 'an empty file counts as created now');
  t.equal(wiped.read().lease.floorPending, true, 'with a pending floor');
  wiped.close();
});

t.test('a write rolled back with its outer transaction (a savepoint) is never cached', async (t) => {
  const dir = t.testdir();
  const a = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.teardown(() => a.close());
  a.transact((s) => bump(s, 6));
  t.throws(
    () =>
      a.transact((outer) => {
        a.transact((inner) => bump(inner, 7));
        return bump(outer, 8);
      }),
    CasError,
    'the outer write loses its compare-and-swap',
  );
  const raw = new Database(join(dir, 'hq.db'));
  t.teardown(() => raw.close());
  const onDisk = raw.prepare("SELECT generation, revision FROM lease WHERE name = 'hq'").get() as {
    generation: number;
    revision: number;
  };
  t.same(onDisk, { generation: 6, revision: 1 }, 'the nested write rolled back with its outer transaction');
  t.match(a.read().lease, onDisk, 'and the cache says what the disk says');
});

t.test(
  'the displaced holder survives a reopen (migration 4); a column that does not read is taken as none',
  async (t) => {
    const dir = t.testdir();
    const displaced = {
      host: 'mbp',
      generation: 3,
      revision: 7,
      floor: null,
      acknowledgedAt: 1005.5,
      savedSeconds: 55,
    };
    const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
    store.transact((s) => ({
      next: { ...s, lease: { ...s.lease, holder: 'node-b', generation: 4, revision: s.lease.revision + 1, displaced } },
      events: [],
      result: null,
    }));
    store.close();
    const again = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
    t.same(again.read().lease.displaced, displaced, 'read back as written');
    again.close();
    const db = new Database(join(dir, 'hq.db'));
    for (const bad of ['{', '{"host":"mbp"}', '[1]', 'null']) {
      db.prepare("UPDATE lease SET displaced = ? WHERE name = 'hq'").run(bad);
      const s = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
      t.equal(s.read().lease.displaced, null, `${bad}: none (no acknowledgement can end a lock-delay early)`);
      s.close();
    }
    db.close();
  },
);
