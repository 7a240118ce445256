/**
 * One opener, one numbered migration list for every table of hq.db. A database made by an
 * earlier hq-arbiter (its DDL checked out from git into fixtures/, rows in every table) opens
 * with today's code without losing a row; a new file gets every table; a database from a newer
 * hq-arbiter is refused with one line and left untouched.
 */
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../../apps/arbiter/src/commands.js';
import { MIGRATIONS } from '../../../apps/arbiter/src/store/sqlite/migrations.js';
import { openDatabase, schemaVersion } from '../../../apps/arbiter/src/store/sqlite/database.js';
import { SqliteStore } from '../../../apps/arbiter/src/store/sqlite/lease.js';
import { SqliteRegistryStore } from '../../../apps/arbiter/src/store/sqlite/registry.js';
import { writeConfig } from '../child.js';

const FIXTURES = join(import.meta.dirname, 'fixtures');
const EVERY_TABLE = ['events', 'lease', 'meta', 'observers', 'port_leases', 'resources', 'sqlite_sequence', 'tokens'];
const NOW_MS = 1_800_000_000_000;
const SHA = (c: string): string => c.repeat(64);

type Row = Record<string, unknown>;

/**
 * Makes `{dir}/hq.db` as hq-arbiter 4279e35 left it at schema `version` (1 or 2), its DDL from
 * the fixtures (checked out from git), the registry's tables when a daemon had opened it, and
 * rows in every table.
 */
function makeOld(dir: string, version: 1 | 2, opts: { registry: boolean }): void {
  const db = new Database(join(dir, 'hq.db'));
  db.pragma('journal_mode = WAL');
  const ddl = (name: string): string => readFileSync(join(FIXTURES, `4279e35-${name}.sql`), 'utf8');
  db.exec(ddl('migration-1'));
  if (version === 2) db.exec(ddl('migration-2'));
  if (opts.registry) db.exec(ddl('registry'));
  db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?)").run(String(version));
  const v2 = version === 2;
  db.prepare(
    `INSERT INTO lease (name, holder, generation, revision, acquired_at, renewed_at, ttl_seconds, expires_at, released,
       not_before, floor_pending, dual_unreachable_streak, last_check_at, promoted_from, maintenance, maintenance_reason, floor)
     VALUES ('hq', 'mbp', 7, 12, 1000.5, 1900.25, 1500, 3400.25, 0, 1010, 0, 1, 1950, 'node-b', 1, 'disk swap', 6)`,
  ).run();
  if (v2) db.prepare("UPDATE lease SET safety_margin_seconds = 30 WHERE name = 'hq'").run();
  db.prepare(
    `INSERT INTO observers (observer, view_target, view_reachable, view_ping, view_health, view_at, conf_holder, conf_generation,
       conf_at, last_heartbeat_at, heartbeat_seconds) VALUES ('node-b', 'mbp', 1, 1, 0, 1940, 'mbp', 7, 1941, 1942, 10)`,
  ).run();
  db.prepare("INSERT INTO observers (observer, last_heartbeat_at) VALUES ('mbp', 1943)").run();
  if (v2)
    db.prepare("UPDATE observers SET refresh_seconds = 5, request_timeout_seconds = 2 WHERE observer = 'node-b'").run();
  const event = db.prepare('INSERT INTO events (at, category, event, host, data) VALUES (?, ?, ?, ?, ?)');
  event.run(1000.5, 'lease', 'acquired', 'mbp', JSON.stringify({ generation: 7 }));
  event.run(1500, 'control', 'swept-away', null, '{}');
  event.run(1900.25, 'lease', 'maintenance-on', 'mbp', JSON.stringify({ reason: 'disk swap', on: true }));
  db.prepare('DELETE FROM events WHERE id = 2').run(); // a sweep: ids are never reused (AUTOINCREMENT)
  const token = db.prepare('INSERT INTO tokens (machine, scope, sha256, created, revoked) VALUES (?, ?, ?, ?, ?)');
  token.run('cloud-vm', 'admin', SHA('a'), 900, null);
  token.run('mbp', 'member', SHA('b'), 901, 950);
  token.run('mbp', 'member', SHA('c'), 950, null);
  token.run('grafana', 'query', SHA('d'), 960, null);
  db.prepare("INSERT INTO meta (key, value) VALUES ('check_lock', ?)").run(
    JSON.stringify({ owner: 'old-daemon', until: NOW_MS + 60_000 }),
  );
  if (opts.registry) {
    db.prepare(
      `INSERT INTO resources VALUES ('m:mbp', 'mbp', 'machine', 'mbp', 'mbp', '{"os":"darwin","cores":10}', ?, 90000, ?, ?, ?)`,
    ).run(NOW_MS - 5000, NOW_MS - 60_000, NOW_MS - 5000, NOW_MS + 85_000);
    db.prepare(`INSERT INTO resources VALUES ('i:web', 'web', 'instance', 'mbp', 'mbp', '{}', ?, 90000, ?, ?, ?)`).run(
      NOW_MS - 1000,
      NOW_MS - 1000,
      NOW_MS - 1000,
      NOW_MS + 89_000,
    );
    db.prepare(`INSERT INTO port_leases VALUES (31450, ?, 'mbp', 'test', 600000, ?, ?, ?)`).run(
      'f'.repeat(32),
      NOW_MS - 1000,
      NOW_MS - 1000,
      NOW_MS + 599_000,
    );
  }
  db.close();
}

/** Every row of every table (but the version row), by table, in rowid order. */
function dump(path: string): Map<string, Row[]> {
  // Not readonly: a WAL database whose last connection closed has no -shm, which a readonly
  // connection cannot create. Reads only.
  const db = new Database(path);
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .pluck()
      .all() as string[];
    return new Map(
      tables.map((name) => [
        name,
        (db.prepare(`SELECT * FROM ${name} ORDER BY rowid`).all() as Row[]).filter((r) => r.key !== 'schema_version'),
      ]),
    );
  } finally {
    db.close();
  }
}

/** Each table's columns (name, type, not null, default, primary key) and its indexes. */
function schema(path: string): Map<string, unknown> {
  const db = new Database(path);
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .pluck()
      .all() as string[];
    return new Map(
      tables.map((name) => [
        name,
        {
          columns: db.prepare(`PRAGMA table_info(${name})`).all(),
          indexes: db
            .prepare(
              `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name`,
            )
            .pluck()
            .all(name),
        },
      ]),
    );
  } finally {
    db.close();
  }
}

function open(t: Test, dir: string): { store: SqliteStore; registry: SqliteRegistryStore } {
  const store = new SqliteStore({ dataDir: dir, ttlSeconds: 6 });
  const db = openDatabase({ path: store.path });
  t.teardown(() => {
    db.close();
    store.close();
  });
  return { store, registry: new SqliteRegistryStore(db) };
}

t.test('the migration list is numbered 1, 2, 3, … with a reason each', async (t) => {
  t.same(
    MIGRATIONS.map((m) => m.version),
    MIGRATIONS.map((_, i) => i + 1),
    'versions follow their place in the list',
  );
  t.ok(
    MIGRATIONS.every((m) => m.why.length > 0 && m.sql.trim().length > 0),
    'each says why and has SQL',
  );
});

t.test('a new file gets every table, the last schema version and the first lease row', async (t) => {
  const dir = join(t.testdir(), 'data');
  const { store } = open(t, dir);
  t.equal(store.createdNow, true, 'created now');
  const tables = [...dump(store.path).keys()];
  t.same(tables, EVERY_TABLE, 'every table of the lease store and the registry');
  const db = new Database(store.path);
  t.equal(schemaVersion(db), MIGRATIONS.length, `schema version ${MIGRATIONS.length}`);
  db.close();
  t.equal(store.read().lease.floorPending, true, 'the first lease row has the floor pending (S2.4)');
});

const OLD: ReadonlyArray<readonly [string, 1 | 2, { registry: boolean }]> = [
  ['a version 2 database made by a daemon (registry tables present)', 2, { registry: true }],
  ['a version 2 database made by hq-arbiter token before any daemon (no registry tables)', 2, { registry: false }],
  ['a version 1 database (before the margin and cadence columns)', 1, { registry: false }],
  ['a version 1 database a daemon of that time opened (registry tables present)', 1, { registry: true }],
];

for (const [name, version, opts] of OLD) {
  t.test(`${name} opens, migrates and keeps every row`, async (t) => {
    const dir = t.testdir();
    makeOld(dir, version, opts);
    const path = join(dir, 'hq.db');
    const before = dump(path);
    const { store, registry } = open(t, dir);
    t.equal(store.createdNow, false, 'an existing database is not created now (the floor is not pending)');

    const after = dump(path);
    t.same([...after.keys()], EVERY_TABLE, 'it now has every table');
    for (const [table, rows] of before) {
      const kept = (after.get(table) ?? []).map((r) =>
        Object.fromEntries(Object.keys(rows[0] ?? r).map((k) => [k, r[k]])),
      );
      t.same(kept, rows, `${table}: every row and column kept (${rows.length} rows)`);
    }
    const fresh = join(dir, 'fresh');
    new SqliteStore({ dataDir: fresh, ttlSeconds: 6 }).close();
    t.same(schema(path), schema(join(fresh, 'hq.db')), "the migrated schema equals a new database's");
    const db = new Database(path);
    t.equal(schemaVersion(db), MIGRATIONS.length, `schema version ${MIGRATIONS.length}`);
    db.close();

    const v2 = version === 2;
    const state = store.read();
    t.match(
      state.lease,
      {
        holder: 'mbp',
        generation: 7,
        revision: 12,
        acquiredAt: 1000.5,
        renewedAt: 1900.25,
        ttlSeconds: 1500,
        expiresAt: 3400.25,
        released: false,
        notBefore: 1010,
        floorPending: false,
        dualUnreachableStreak: 1,
        lastCheckAt: 1950,
        promotedFrom: 'node-b',
        maintenance: true,
        maintenanceReason: 'disk swap',
      },
      'the lease record reads back through the store',
    );
    t.equal(
      state.lease.safetyMarginSeconds,
      v2 ? 30 : 0,
      v2 ? 'with its margin' : 'the margin column added with its default, 0',
    );
    t.equal(state.floor, 6, 'the generation floor is kept (S1)');
    t.same(
      state.observers.get('node-b'),
      {
        view: { target: 'mbp', reachable: true, ping: true, health: false, at: 1940 },
        confirmation: { holder: 'mbp', generation: 7, at: 1941 },
        lastHeartbeatAt: 1942,
        heartbeatSeconds: 10,
        refreshSeconds: v2 ? 5 : null,
        requestTimeoutSeconds: v2 ? 2 : null,
      },
      "node-b's view, confirmation and cadence",
    );
    t.same(state.observers.get('mbp')?.lastHeartbeatAt, 1943, "mbp's heartbeat");

    t.same(
      store.listEvents(0, 10).map((e) => [e.id, e.event, e.data]),
      [
        [1, 'acquired', { generation: 7 }],
        [3, 'maintenance-on', { reason: 'disk swap', on: true }],
      ],
      'the events, with their ids',
    );
    t.same(
      store.appendEvents([{ at: 2000, category: 'control', event: 'migrated', host: null, data: {} }]).map((e) => e.id),
      [4],
      'a new event gets the next id, never a swept one',
    );

    t.same(
      store.listTokens().map((r) => [r.id, r.machine, r.scope, r.revoked]),
      [
        [1, 'cloud-vm', 'admin', null],
        [2, 'mbp', 'member', 950],
        [3, 'mbp', 'member', null],
        [4, 'grafana', 'query', null],
      ],
      'the tokens',
    );
    t.match(
      store.findToken(SHA('c')),
      { machine: 'mbp', scope: 'member', revoked: null },
      'a token is found by its hash',
    );
    t.equal(store.hasActiveAdmin(), true, 'the admin token still counts (no second admin.token is written)');
    t.equal(
      store.tryCheckLock('new-daemon', NOW_MS, NOW_MS + 60_000),
      false,
      'the earlier check lock is still held by its owner',
    );

    const resources = registry.listResources({}, NOW_MS);
    const leases = registry.listPortLeases(NOW_MS);
    if (opts.registry) {
      t.same(
        resources.map((r) => [r.id, r.kind, r.machine, Object.fromEntries(r.attrs)]),
        [
          ['i:web', 'instance', 'mbp', {}],
          ['m:mbp', 'machine', 'mbp', { os: 'darwin', cores: 10 }],
        ],
        'the resources',
      );
      t.same(
        leases.map((l) => [l.port, l.leaseId, l.machine]),
        [[31450, 'f'.repeat(32), 'mbp']],
        'the port lease (no port handed out twice after the upgrade)',
      );
      const next = registry.allocatePort({ machine: 'node-b', purpose: 'test', ttlMs: 60_000 }, 'e'.repeat(32), NOW_MS);
      t.match(next, { ok: true, lease: { port: 31451 } }, 'a new allocation skips the kept lease');
    } else {
      t.same([resources, leases], [[], []], 'the registry tables exist, empty');
    }
  });
}

t.test('reopening a current database changes nothing and takes no write lock', async (t) => {
  const dir = t.testdir();
  new SqliteStore({ dataDir: dir, ttlSeconds: 6 }).close();
  const path = join(dir, 'hq.db');
  const before = dump(path);
  const writer = new Database(path);
  t.teardown(() => writer.close());
  writer.prepare('BEGIN IMMEDIATE').run(); // another process holds the write lock
  const db = openDatabase({ path, busyTimeoutMs: 0 });
  db.close();
  writer.prepare('ROLLBACK').run();
  t.same(dump(path), before, 'same rows');
});

t.test('a database from a newer hq-arbiter is refused at start with one line and left untouched', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const dataDir = join(dir, 'var');
  new SqliteStore({ dataDir, ttlSeconds: 6 }).close();
  const path = join(dataDir, 'hq.db');
  const db = new Database(path);
  db.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(String(MIGRATIONS.length + 1));
  db.close();
  const before = dump(path);
  const line = `hq.db has schema version ${MIGRATIONS.length + 1}, newer than this hq-arbiter's ${MIGRATIONS.length}: it was made by a newer hq-arbiter; run that one, or restore a backup made by this one`;
  t.throws(() => new SqliteStore({ dataDir, ttlSeconds: 6 }), { message: line }, 'the store refuses it');
  t.throws(() => openDatabase({ path }), { message: line }, "and so does every connection (the registry's)");
  for (const args of [['serve'], ['check'], ['token', 'list']]) {
    let stderr = '';
    const code = await main([...args, '--config', config], { out: () => {}, err: (s) => (stderr += s) });
    t.equal(code, 1, `${args.join(' ')} exits 1`);
    t.equal(stderr, `hq-arbiter: ${line}\n`, `${args.join(' ')}: one line`);
  }
  t.same(dump(path), before, 'nothing was written');
});
