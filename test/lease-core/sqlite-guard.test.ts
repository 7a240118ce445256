import t, { type Test } from 'tap';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sqliteGuard, type SqliteLike } from '../../packages/lease-core/src/shell/sqlite-guard.js';

function open(t: Test): Database.Database {
  const db = new Database(join(t.testdir(), 'resource.db'));
  db.pragma('journal_mode = WAL');
  t.teardown(() => db.close());
  return db;
}

t.test('sqliteGuard on a real database: raise, equal, lower', async (t) => {
  const db = open(t);
  const guard = sqliteGuard(db);
  t.equal(guard.highest('ledger'), 0, 'an unknown resource has accepted nothing');
  t.same(guard.accept('ledger', 3), { ok: true, highest: 3 }, 'the first write is accepted');
  t.equal(guard.highest('ledger'), 3, 'the mark is stored');
  t.same(guard.accept('ledger', 3), { ok: true, highest: 3 }, 'an equal generation is accepted');
  t.same(guard.accept('ledger', 5), { ok: true, highest: 5 }, 'a higher generation raises the mark');
  t.same(
    guard.accept('ledger', 4),
    { ok: false, reason: 'stale-generation', highest: 5 },
    'a lower generation is refused',
  );
  t.same(guard.accept('ledger', '6'), { ok: false, reason: 'bad-generation', highest: 5 }, 'a string is refused');
  t.equal(guard.highest('ledger'), 5, 'a refusal leaves the mark alone');
  t.same(guard.accept('replica', 1), { ok: true, highest: 1 }, 'resources have separate marks');
  const rows = db.prepare('SELECT resource, generation FROM hq_fence ORDER BY resource').all();
  t.same(
    rows,
    [
      { resource: 'ledger', generation: 5 },
      { resource: 'replica', generation: 1 },
    ],
    'the default table holds one row per resource',
  );
});

t.test('sqliteGuard survives a reopen and a second guard on the same table', async (t) => {
  const dir = t.testdir();
  const file = join(dir, 'r.db');
  const a = new Database(file);
  sqliteGuard(a, 'marks').accept('x', 9);
  a.close();
  const b = new Database(file);
  t.teardown(() => b.close());
  const guard = sqliteGuard(b, 'marks');
  t.equal(guard.highest('x'), 9, 'the mark is durable');
  t.same(
    guard.accept('x', 8),
    { ok: false, reason: 'stale-generation', highest: 9 },
    'and still fences after a restart',
  );
});

t.test("sqliteGuard works inside the caller's transaction and a refusal rolls the caller's write back", async (t) => {
  const db = open(t);
  db.exec('CREATE TABLE entries (id INTEGER PRIMARY KEY, text TEXT NOT NULL)');
  const guard = sqliteGuard(db);
  const insert = db.prepare('INSERT INTO entries (text) VALUES (?)');
  const write = db.transaction((generation: number, text: string) => {
    insert.run(text); // the caller's write, before the guard: a refusal must undo it
    const verdict = guard.accept('ledger', generation);
    if (!verdict.ok) throw new Error(verdict.reason);
    return verdict.highest;
  });
  t.equal(write.immediate(2, 'from generation 2'), 2, 'the write of generation 2 commits');
  t.throws(() => write.immediate(1, 'from the old holder'), /stale-generation/, 'the old holder is refused');
  t.equal(write(3, 'from generation 3'), 3, 'a newer holder commits (deferred transaction)');
  const texts = db.prepare('SELECT text FROM entries ORDER BY id').pluck().all();
  t.same(
    texts,
    ['from generation 2', 'from generation 3'],
    "the refused write was rolled back with the caller's transaction",
  );
  t.equal(guard.highest('ledger'), 3, 'the mark only moved with committed writes');
  t.equal(db.inTransaction, false, 'no transaction is left open');
});

t.test(
  'a mark raised by another connection between the read and the write is refused by the write itself',
  async (t) => {
    const file = join(t.testdir(), 'race.db');
    const db = new Database(file);
    const other = new Database(file);
    t.teardown(() => {
      db.close();
      other.close();
    });
    sqliteGuard(db).accept('ledger', 5);
    // Wrap the database so that, right after the guard reads the mark (outside any transaction),
    // another writer raises it: the conditional UPSERT must then change nothing.
    let race = false;
    const racing: SqliteLike = {
      exec: (sql) => db.exec(sql),
      prepare(sql) {
        const stmt = db.prepare(sql);
        return {
          run: (...params: unknown[]) => stmt.run(...params),
          get: (...params: unknown[]) => {
            const row = stmt.get(...params);
            if (race) {
              race = false;
              other.prepare('UPDATE hq_fence SET generation = 9 WHERE resource = ?').run('ledger');
            }
            return row;
          },
        };
      },
    };
    const guard = sqliteGuard(racing);
    race = true;
    t.same(
      guard.accept('ledger', 7),
      { ok: false, reason: 'stale-generation', highest: 9 },
      'refused with the mark the other writer set',
    );
    t.equal(guard.highest('ledger'), 9, 'the mark was not lowered to 7');
  },
);

const badTables: ReadonlyArray<readonly [string, string]> = [
  ['a table name with a space is refused', 'hq fence'],
  ['a table name with SQL in it is refused', 'x; DROP TABLE y'],
  ['a table name starting with a digit is refused', '1table'],
  ['an empty table name is refused', ''],
  ['a table name of 64 characters is refused', 'a'.repeat(64)],
];

for (const [name, table] of badTables) {
  t.test(name, async (t) => {
    const db = open(t);
    t.throws(() => sqliteGuard(db, table), TypeError, `sqliteGuard(db, ${JSON.stringify(table)}) throws a TypeError`);
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
    t.same(tables, [], 'nothing was created');
  });
}

t.test('a table name of 63 characters is accepted', async (t) => {
  const db = open(t);
  const guard = sqliteGuard(db, `_${'a'.repeat(62)}`);
  t.same(guard.accept('r', 1), { ok: true, highest: 1 }, 'works with the longest name');
});
