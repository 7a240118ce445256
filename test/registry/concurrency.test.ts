/**
 * Concurrent port allocation with real processes: four workers, each with its own SQLite
 * connection to one hq.db, allocate at the same instant. No port may ever be handed to two
 * live leases.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { SqliteRegistryStore } from '../../apps/arbiter/src/store/sqlite/registry.js';
import { openDatabase } from '../../apps/arbiter/src/store/sqlite/database.js';
import { childEnv } from '../arbiter/child.js';

const WORKER = resolve(import.meta.dirname, 'fixtures/allocate-worker.ts');

interface Line {
  machine: string;
  ok: boolean;
  reason?: string;
  port?: number;
  leaseId?: string;
  from?: number;
  to?: number;
  released?: boolean;
}

function worker(
  dbPath: string,
  machine: string,
  mode: 'grab' | 'churn',
  count: number,
  startAt: number,
): Promise<Line[]> {
  return new Promise((done, fail) => {
    const p = spawn(
      process.execPath,
      ['--import', 'tsx', WORKER, dbPath, machine, mode, String(count), String(startAt)],
      { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), 40_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return fail(new Error(`worker ${machine} exited ${code}: ${err}`));
      done(
        out
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Line),
      );
    });
  });
}

function freshDb(dir: string): string {
  const path = join(dir, 'hq.db');
  openDatabase({ path }).close(); // made and migrated once, before the workers race
  return path;
}

const MACHINES = ['w1', 'w2', 'w3', 'w4'];

t.test('four processes allocating 20 ports each get 50 distinct ports and 30 band-full refusals', async (t) => {
  const dbPath = freshDb(t.testdir());
  const startAt = Date.now() + 1500;
  const results = (await Promise.all(MACHINES.map((m) => worker(dbPath, m, 'grab', 20, startAt)))).flat();
  const granted = results.filter((r) => r.ok);
  const ports = granted.map((r) => r.port as number);
  t.equal(results.length, 80, 'every allocation answered');
  t.equal(granted.length, 50, 'exactly the 50 ports of the test band were granted');
  t.equal(new Set(ports).size, ports.length, 'no port was granted twice');
  t.same(
    [...ports].sort((a, b) => a - b),
    Array.from({ length: 50 }, (_, i) => 31450 + i),
    'the grants are exactly 31450–31499',
  );
  t.ok(
    results.filter((r) => !r.ok).every((r) => r.reason === 'band-full'),
    'every refusal is band-full',
  );
  t.ok(new Set(granted.map((r) => r.machine)).size > 1, 'more than one worker got ports (they really raced)');
  const db = openDatabase({ path: dbPath });
  const store = new SqliteRegistryStore(db);
  const live = store.listPortLeases(Date.now());
  db.close();
  t.equal(live.length, 50, 'the database holds 50 live leases');
  const byPort = new Map(granted.map((r) => [r.port, r]));
  t.ok(
    live.every((l) => byPort.get(l.port)?.leaseId === l.leaseId && byPort.get(l.port)?.machine === l.machine),
    'each stored lease is the one its worker was told about',
  );
});

t.test('four processes churning allocate/release never hold the same port at the same time', async (t) => {
  const dbPath = freshDb(t.testdir());
  const startAt = Date.now() + 1500;
  const results = (await Promise.all(MACHINES.map((m) => worker(dbPath, m, 'churn', 60, startAt)))).flat();
  const holds = results.filter((r) => r.ok);
  t.equal(holds.length, 240, 'every round got a port (4 holders never fill a 50-port band)');
  t.ok(
    holds.every((h) => h.released === true),
    'every hold was released by its owner with its id',
  );
  const byPort = new Map<number, Line[]>();
  for (const h of holds) byPort.set(h.port as number, [...(byPort.get(h.port as number) ?? []), h]);
  let overlaps = 0;
  for (const list of byPort.values()) {
    list.sort((a, b) => (a.from as number) - (b.from as number));
    for (let i = 1; i < list.length; i++) if ((list[i] as Line).from! < (list[i - 1] as Line).to!) overlaps++;
  }
  t.equal(overlaps, 0, 'no two holds of one port overlap in time');
  t.ok(
    [...byPort.keys()].every((p) => p >= 31450 && p <= 31453),
    'with every lease released at once, only the lowest four ports are ever needed',
  );
  t.ok((byPort.get(31450)?.length ?? 0) > 1, 'the lowest port was reused across rounds');
});
