/**
 * The agent's layers import downward only, read from the compiled modules (what Node really
 * loads, `import()` included; type imports are gone): the daemon never reaches the CLI, nor
 * replication's sending side; replication (the library both use) reaches neither the CLI nor
 * the daemon; the shared modules at the top of src/ reach no layer above them.
 */
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from './helpers.js';

const DIST = join(ROOT, 'apps/agent/dist');

/** Every module `entry` loads, statically or through `import('…')`, inside apps/agent/dist (as paths relative to it). */
function reach(entry: string): Set<string> {
  const seen = new Set<string>();
  const walk = (file: string): void => {
    const rel = relative(DIST, file);
    if (seen.has(rel)) return;
    seen.add(rel);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])(\.[^'"]+)\1/gm)) {
      walk(resolve(dirname(file), m[2] as string));
    }
  };
  walk(join(DIST, entry));
  return seen;
}

const modules = (dir: string): string[] =>
  readdirSync(join(DIST, dir))
    .filter((f) => f.endsWith('.js'))
    .map((f) => (dir === '.' ? f : `${dir}/${f}`));

t.test('the compiled agent is there to read', async (t) => {
  t.ok(existsSync(join(DIST, 'daemon/main.js')), 'apps/agent/dist is built (npx tsc -b)');
});

t.test('the daemon never loads the CLI, nor the sending side of replication', async (t) => {
  const daemon = modules('daemon');
  t.ok(
    daemon.includes('daemon/main.js') && daemon.includes('daemon/fence.js'),
    `the daemon's modules are found (${daemon.length})`,
  );
  const all = new Set(daemon.flatMap((m) => [...reach(m)]));
  t.ok(
    all.has('replication/wire.js') && all.has('replication/receiver.js'),
    "the daemon's graph includes replication's receiving side (through import())",
  );
  t.same(
    [...all].filter((m) => m.startsWith('cli/')),
    [],
    'no module under cli/',
  );
  const sending = [
    'replication/snapshot.js',
    'replication/push.js',
    'replication/survival.js',
    'replication/survival-s3.js',
    'replication/promote.js',
    'replication/plan.js',
  ];
  t.same(
    [...all].filter((m) => sending.includes(m)),
    [],
    'no module of the sending side (snapshot, push, survival, survival-s3, promote, plan)',
  );
});

t.test('the fence answer loads nothing of the daemon but itself', async (t) => {
  t.same([...reach('daemon/fence.js')], ['daemon/fence.js'], 'fence.js imports only node:http and lease-core');
});

t.test('replication and the shared modules reach no layer above them', async (t) => {
  const entries = new Set(['daemon-cli.js', 'index.js']);
  const lower = [
    ...modules('replication'),
    ...modules('registry-client'),
    ...modules('.').filter((m) => !entries.has(m)),
  ];
  for (const m of lower) {
    const above = [...reach(m)].filter((r) => r.startsWith('cli/') || r.startsWith('daemon/'));
    t.same(above, [], `${m} reaches neither cli/ nor daemon/`);
  }
});

t.test(
  'the client (@hq/agent/client) loads nothing of the daemon, and of the CLI only its socket client',
  async (t) => {
    const all = [...reach('client/index.js')];
    t.same(
      all.filter((m) => m.startsWith('daemon/')),
      [],
      'no module under daemon/',
    );
    t.same(
      all.filter((m) => m.startsWith('cli/')),
      ['cli/local.js'],
      'cli/local.js only (the unix-socket request and the socket path)',
    );
  },
);
