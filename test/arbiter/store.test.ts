import t from 'tap';
import Database from 'better-sqlite3';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { emptyLease } from '@hq/lease-core';
import { CasError, SqliteStore } from '../../apps/arbiter/src/store/sqlite.js';
import { authenticate, ensureAdminToken, sha256Hex } from '../../apps/arbiter/src/auth.js';
import { steadyClock } from '../../packages/runtime/src/clock.js';

t.test('the database opens with WAL, synchronous FULL, foreign keys, 0600/0700 modes and a schema version', async (t) => {
  const dir = join(t.testdir(), 'data');
  const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.teardown(() => store.close());
  t.equal(store.createdNow, true, 'a new file is created now');
  t.equal(statSync(dir).mode & 0o777, 0o700, 'data dir 0700');
  t.equal(statSync(join(dir, 'hq.db')).mode & 0o777, 0o600, 'hq.db 0600');
  const db = new Database(join(dir, 'hq.db'), { readonly: true });
  t.equal(db.pragma('journal_mode', { simple: true }), 'wal', 'WAL');
  t.equal((db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string }).value, '2', 'schema version 2 (the record carries the margin, observers their cadence)');
  db.close();
  const state = store.read();
  t.same(state.lease, { ...emptyLease(6), floorPending: true }, 'the first lease row has floorPending');
  t.equal(state.floor, 0, 'floor 0');
  t.equal(store.integrityCheck(), 'ok', 'integrity ok');
});

t.test('an existing database is not created now; a wiped one is', async (t) => {
  const dir = t.testdir();
  new SqliteStore({ dataDir: dir, ttlSeconds: 6 }).close();
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

t.test('transact writes lease, floor, observers and events in one transaction and detects a lost compare-and-swap', async (t) => {
  const store = new SqliteStore({ dataDir: t.testdir(), ttlSeconds: 6 });
  t.teardown(() => store.close());
  const c = store.transact((s) => {
    const observers = new Map(s.observers);
    observers.set('node-b', { view: { target: 'mbp', reachable: false, ping: false, health: true, at: 5 }, confirmation: { holder: 'mbp', generation: 2, at: 4 }, lastHeartbeatAt: 5, heartbeatSeconds: 1 });
    return {
      next: { lease: { ...s.lease, holder: 'mbp', generation: 3, revision: s.lease.revision + 1 }, observers, floor: 2 },
      events: [{ at: 5, category: 'hq.lease', event: 'acquired', host: 'mbp', data: { generation: 3 } }],
      result: 'done',
    };
  });
  t.equal(c.result, 'done', 'the result comes back');
  t.equal(c.events[0]?.id, 1, 'the event got an id');
  const s = store.read();
  t.match(s.lease, { holder: 'mbp', generation: 3, revision: 1 }, 'lease written');
  t.equal(s.floor, 2, 'floor written');
  t.same(s.observers.get('node-b'), { view: { target: 'mbp', reachable: false, ping: false, health: true, at: 5 }, confirmation: { holder: 'mbp', generation: 2, at: 4 }, lastHeartbeatAt: 5, heartbeatSeconds: 1 }, 'observer round-trips');
  t.same(store.listEvents(0, 10).map((e) => e.event), ['acquired'], 'event row');

  t.throws(
    () =>
      store.transact((outer) => {
        // Someone else writes the row between our read and our write: the CAS must notice.
        store.transact((inner) => ({ next: { ...inner, lease: { ...inner.lease, revision: inner.lease.revision + 1 } }, events: [], result: null }));
        return { next: { ...outer, lease: { ...outer.lease, generation: 9, revision: outer.lease.revision + 1 } }, events: [{ at: 6, category: 'x', event: 'y', host: null, data: {} }], result: null };
      }),
    CasError,
    'a stale revision throws CasError',
  );
  t.equal(store.read().lease.generation, 3, 'nothing of the failed transaction was written');
  t.equal(store.listEvents(0, 10).length, 1, 'not even its events');
  t.throws(() => store.transact((s) => ({ next: { ...s, lease: { ...s.lease, generation: 4 } }, events: [], result: null })), /revision/, 'a change without a new revision is refused');
});

t.test('the first start writes an admin token file 0600, replaces a stale one, and keeps it once an admin exists', async (t) => {
  const dir = t.testdir({ 'admin.token': 'stale\n' });
  const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.teardown(() => store.close());
  const path = ensureAdminToken(store, dir, 'cloud-vm', 1);
  t.equal(path, join(dir, 'admin.token'), 'written to dataDir/admin.token');
  t.equal(statSync(path!).mode & 0o777, 0o600, 'mode 0600');
  const token = readFileSync(path!, 'utf8');
  t.match(token, /^[0-9a-f]{64}\n$/, 'the stale file was replaced by a 64-hex token');
  const auth = authenticate(store, ['Authorization', `Bearer ${token.trim()}`]);
  t.same(auth, { ok: true, principal: { machine: 'cloud-vm', scope: 'admin' } }, 'the token authenticates as admin');
  t.equal(store.findToken(sha256Hex(token.trim()))?.scope, 'admin', 'stored as its sha256');
  t.equal(ensureAdminToken(store, dir, 'cloud-vm', 2), null, 'not issued again while an admin token exists');
});

t.test('the system clock is wall at start plus monotonic elapsed', async (t) => {
  const clock = steadyClock();
  const a = clock.now();
  t.ok(Math.abs(a - Date.now() / 1000) < 1, 'close to the wall clock at start');
  const b = clock.now();
  t.ok(b >= a, 'never goes backwards');
});

t.test('the state cache: another connection\'s commit is seen at once, and a rolled-back nested write is not cached', async (t) => {
  const dir = t.testdir();
  const a = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  const b = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.teardown(() => {
    a.close();
    b.close();
  });
  const bump = (s: ReturnType<SqliteStore['read']>, generation: number) => ({ next: { ...s, lease: { ...s.lease, generation, revision: s.lease.revision + 1 } }, events: [], result: null });
  t.equal(a.read().lease.generation, 0, 'read once: now cached');
  b.transact((s) => bump(s, 5));
  t.equal(a.read().lease.generation, 5, 'a commit of another connection (another process: check, token) drops the cache');
  a.transact((s) => bump(s, 6));
  t.equal(b.read().lease.generation, 6, 'and the other way round');
  t.equal(a.read().lease.generation, 6, 'the own commit refreshed the own cache');
  t.throws(() =>
    a.transact((outer) => {
      a.transact((inner) => bump(inner, 7));
      return bump(outer, 8);
    }),
  CasError);
  const raw = new Database(join(dir, 'hq.db'), { readonly: true });
  t.teardown(() => raw.close());
  const onDisk = raw.prepare("SELECT generation, revision FROM lease WHERE name = 'hq'").get() as { generation: number; revision: number };
  t.same(onDisk, { generation: 6, revision: 2 }, 'the nested write rolled back with its outer transaction');
  t.match(a.read().lease, onDisk, 'and the cache says what the disk says');

  const token = 'ab'.repeat(32);
  a.insertToken('mbp', 'member', sha256Hex(token), 1);
  t.equal(authenticate(a, ['Authorization', `Bearer ${token}`]).ok, true, 'a token authenticates (and is now cached)');
  t.equal(b.revokeTokens('mbp', 2), 1, 'revoked by another connection');
  t.same(authenticate(a, ['Authorization', `Bearer ${token}`]), { ok: false, status: 401, message: 'the token is not valid' }, 'the revocation is effective on the next request');
});

t.test('transactAll: one transaction, each decision on the state the one before left; a throwing one is left out', async (t) => {
  const store = new SqliteStore({ dataDir: t.testdir(), ttlSeconds: 6 });
  t.teardown(() => store.close());
  const seen: number[] = [];
  const step = (n: number) => (s: ReturnType<SqliteStore['read']>) => {
    seen.push(s.lease.revision);
    return { next: { ...s, lease: { ...s.lease, generation: n, revision: s.lease.revision + 1 } }, events: [{ at: n, category: 'hq.lease', event: `e${n}`, host: null, data: {} }], result: n };
  };
  const boom = new Error('refused');
  const out = store.transactAll([step(1), () => { throw boom; }, step(3)]);
  t.same(seen, [0, 1], 'the third decided on the first one\'s state');
  t.match(out[0], { ok: true, committed: { result: 1, state: { lease: { generation: 1, revision: 1 } } } }, 'first committed');
  t.same(out[1], { ok: false, error: boom }, 'the second carries its error');
  t.match(out[2], { ok: true, committed: { result: 3, state: { lease: { generation: 3, revision: 2 } } } }, 'third committed');
  t.same(store.listEvents(0, 10).map((e) => [e.id, e.event]), [[1, 'e1'], [2, 'e3']], 'events of the committed ones, in order');
  t.match(store.read().lease, { generation: 3, revision: 2 }, 'the last state is the stored one');
  t.throws(() => store.transactAll([step(4), (s) => ({ next: { ...s, lease: { ...s.lease, generation: 9 } }, events: [], result: null })]), /revision/, 'a change without a new revision fails the whole transaction');
  t.match(store.read().lease, { generation: 3, revision: 2 }, 'and nothing of it was written');
  t.equal(store.listEvents(0, 10).length, 2, 'not even the first one\'s event');
});

t.test('the event log: tailAfter and sinceAfter find where to start, sweepEvents bounds age and count without reusing ids', async (t) => {
  const dir = t.testdir();
  const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  t.teardown(() => store.close());
  t.equal(store.tailAfter(20), 0, 'an empty log: the tail starts at 0');
  t.equal(store.sinceAfter(100), 0, 'an empty log: since starts at 0');
  store.appendEvents(Array.from({ length: 10 }, (_, i) => ({ at: 1000 + i * 10, category: 'control', event: `e${i + 1}`, host: null, data: {} })));
  t.same(store.listEvents(store.tailAfter(3), 3).map((e) => e.id), [8, 9, 10], 'the tail of 3 is the newest three, oldest first');
  t.equal(store.tailAfter(50), 0, 'a tail longer than the log starts at 0');
  t.same(store.listEvents(store.sinceAfter(1035), 100).map((e) => e.id), [5, 6, 7, 8, 9, 10], 'since 1035 starts at the first event at or after it');
  t.same(store.listEvents(store.sinceAfter(1040), 100).map((e) => e.id), [5, 6, 7, 8, 9, 10], 'an event exactly at T is included');
  t.equal(store.sinceAfter(5000), 10, 'since after the newest event starts after it (nothing yet)');
  t.equal(store.sweepEvents(1020, 1000), 2, 'two events older than 1020 are swept');
  t.same(store.listEvents(0, 100).map((e) => e.id), [3, 4, 5, 6, 7, 8, 9, 10], 'the rest stays');
  t.equal(store.sweepEvents(0, 5), 3, 'the count bound keeps the newest five');
  t.same(store.listEvents(0, 100).map((e) => e.id), [6, 7, 8, 9, 10], 'the newest five');
  t.equal(store.sweepEvents(1e12, 5), 5, 'everything older than the cut goes');
  const [next] = store.appendEvents([{ at: 2000, category: 'control', event: 'after-sweep', host: null, data: {} }]);
  t.equal(next?.id, 11, 'ids are never reused after a sweep (an SSE client resuming at 10 misses nothing)');
});
