import t from 'tap';
import { copyFileSync, existsSync, lstatSync, readFileSync, readdirSync, statSync, symlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  buildSnapshot,
  survivalSubset,
  stripHostLocal,
  SnapshotError,
} from '../../apps/agent/src/replication/snapshot.js';
import { planTier } from '../../apps/agent/src/replication/plan.js';
import {
  DEFAULT_PLAN,
  REPLICATION_DEFAULTS,
  resolveReplication,
  validateReplication,
} from '../../apps/agent/src/replication/config.js';
// The class the app code gets (the built package), so instanceof holds.
import { ConfigError } from '@hq/runtime/config-file';
import { sha256File } from '../../apps/agent/src/replication/manifest.js';
import {
  DEFAULT_SECRET_PATTERNS,
  generationId,
  isSecretPath,
  parseSums,
  sumsDisagreement,
} from '../../packages/protocol/src/index.js';
import { parseManifest } from '../../packages/protocol/src/schemas/index.js';
import { config, ROOT, tmp, write, writer } from './helpers.js';

const T0 = Date.parse('2026-12-01T07:00:00.000Z');
const lease = { generation: 3, holder: 'mbp' };

function manifestOf(dir: string) {
  const m = parseManifest(readFileSync(join(dir, 'MANIFEST.json'), 'utf8'));
  if (typeof m === 'string') throw new Error(m);
  return m;
}

t.test(
  'a SQLite database written during every snapshot is copied consistently and passes integrity_check',
  async (t) => {
    const base = tmp(t);
    const cfg = config(base, { plan: { files: [{ path: 'ledger.db' }] } });
    write(cfg.stateDir, 'placeholder', '');
    const db = join(cfg.stateDir, 'ledger.db');
    const child = await writer(db);
    t.teardown(() => void child.kill('SIGKILL'));
    const counts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const snap = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 + i * 1000 });
      const entry = snap.manifest.entries.find((e) => e.path === 'ledger.db');
      t.ok(entry, `snapshot ${i} lists the database`);
      t.equal(entry?.kind, 'sqlite', `snapshot ${i} took the database through the backup API`);
      t.equal(entry?.reused, false, `snapshot ${i} copied the changing database again`);
      // Open a copy: opening the generation's own file could add side files to it.
      const probe = join(base, `probe-${i}.db`);
      copyFileSync(join(snap.dir, 'ledger.db'), probe);
      const c = new Database(probe, { readonly: false });
      t.equal(c.pragma('integrity_check', { simple: true }), 'ok', `snapshot ${i} passes integrity_check`);
      const a = (c.prepare('SELECT count(*) AS n FROM a').get() as { n: number }).n;
      const b = (c.prepare('SELECT count(*) AS n FROM b').get() as { n: number }).n;
      const n = (c.prepare('SELECT n FROM counter').get() as { n: number }).n;
      c.close();
      t.equal(a, n, `snapshot ${i}: every row of a belongs to a committed transaction`);
      t.equal(b, n, `snapshot ${i}: every row of b belongs to a committed transaction`);
      counts.push(n);
      t.notOk(
        readdirSync(snap.dir).some((f) => /-(wal|shm|journal)$/.test(f)),
        `snapshot ${i} holds no SQLite side files`,
      );
      t.equal(lstatSync(join(snap.dir, 'ledger.db')).mode & 0o777, 0o600, `snapshot ${i} wrote the copy 0600`);
    }
    t.ok(
      counts.every((n) => n >= 2000),
      'every copy holds at least the rows written before the first snapshot',
    );
    t.ok((counts[4] as number) > (counts[0] as number), 'the writer kept writing while the snapshots ran');
  },
);

t.test(
  'the manifest names generation, tier, createdAt, source, host, lease and every entry, and SHA256SUMS agrees',
  async (t) => {
    const base = tmp(t);
    const cfg = config(base, {
      plan: { files: [{ path: 'a.txt' }, { path: 'config.json' }], dirs: [{ path: 'decisions', survival: true }] },
    });
    write(cfg.stateDir, 'a.txt', 'alpha\n');
    write(cfg.stateDir, 'config.json', JSON.stringify({ hq: { hostName: 'mbp' }, telegram: { enabled: true } }));
    write(cfg.stateDir, 'decisions/2026/one.md', 'decided\n');
    const snap = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 + 123 });
    const m = manifestOf(snap.dir);
    t.equal(m.generation, '20261201T070000Z', 'the generation id is YYYYMMDDTHHMMSSZ of the one clock reading');
    t.equal(m.createdAt, '2026-12-01T07:00:00.123Z', 'createdAt comes from the same clock reading');
    t.equal(snap.dir.endsWith(`/core/${m.generation}`), true, 'the folder is named after the generation');
    t.equal(m.tier, 'core', 'the tier is recorded');
    t.equal(m.source, cfg.stateDir, 'the source folder is recorded');
    t.equal(m.host, 'mbp', 'the host is recorded');
    t.equal(m.leaseGeneration, 3, 'the lease generation is recorded');
    t.equal(m.holder, 'mbp', 'the holder is recorded');
    t.same(
      m.entries.map((e) => e.path),
      ['a.txt', 'config.json', 'decisions/2026/one.md'],
      'one entry per planned file, sorted',
    );
    const sums = parseSums(readFileSync(join(snap.dir, 'SHA256SUMS'), 'utf8'));
    t.ok(sums.ok, 'SHA256SUMS is well formed');
    if (sums.ok) t.equal(sumsDisagreement(m, sums.sums), null, 'SHA256SUMS agrees with the manifest');
    for (const e of m.entries) {
      const h = await sha256File(join(snap.dir, e.path));
      t.equal(h.sha256, e.sha256, `${e.path} matches its digest`);
      t.equal(h.bytes, e.bytes, `${e.path} matches its size`);
    }
    t.equal(readFileSync(join(snap.dir, 'a.txt'), 'utf8'), 'alpha\n', 'a plain file is copied byte for byte');
    t.equal(statSync(snap.dir).mode & 0o777, 0o700, 'the generation folder is 0700');
    t.equal(statSync(join(snap.dir, 'MANIFEST.json')).mode & 0o777, 0o600, 'MANIFEST.json is 0600');
  },
);

t.test('config.json loses its host-local keys, and unparsable text is copied as is', async (t) => {
  t.equal(stripHostLocal('{"hq":{"hostName":"mbp"},"x":1}', ['hq']), '{\n  "x": 1\n}\n', 'the hq block is removed');
  t.equal(stripHostLocal('{"x":1}', ['hq']), '{"x":1}', 'a config without host-local keys keeps its exact text');
  t.equal(stripHostLocal('{not json', ['hq']), '{not json', 'unparsable text is copied as is');
  t.equal(stripHostLocal('[1,2]', ['hq']), '[1,2]', 'a JSON array is copied as is');
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'config.json' }] } });
  write(cfg.stateDir, 'config.json', JSON.stringify({ hq: { hostName: 'mbp' }, discord: { enabled: true } }));
  const snap = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 });
  const copied = JSON.parse(readFileSync(join(snap.dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  t.notOk('hq' in copied, 'the snapshot of config.json has no hq block');
  t.same(copied['discord'], { enabled: true }, 'the other keys are kept');
});

t.test('side files, .tmp, .lock, symlinks and linked directories are never planned', async (t) => {
  const base = tmp(t);
  const cfg = config(base, {
    plan: { files: [{ path: 'x.db-wal' }, { path: 'linked.txt' }], dirs: [{ path: 'd' }, { path: 'ld' }] },
  });
  write(cfg.stateDir, 'd/keep.txt', 'k');
  for (const f of ['d/x.db-wal', 'd/x.db-shm', 'd/x.db-journal', 'd/y.tmp', 'd/z.lock', 'x.db-wal'])
    write(cfg.stateDir, f, 'junk');
  write(base, 'outside.txt', 'outside');
  symlinkSync(join(base, 'outside.txt'), join(cfg.stateDir, 'd/link.txt'));
  symlinkSync(join(base, 'outside.txt'), join(cfg.stateDir, 'linked.txt'));
  symlinkSync(join(cfg.stateDir, 'd'), join(cfg.stateDir, 'ld'));
  const plan = await planTier(cfg, 'core');
  t.same(
    plan.items.map((i) => i.path),
    ['d/keep.txt'],
    'only the regular file is planned',
  );
  const skipped = new Map(plan.skipped.map((s) => [s.path, s.why] as const));
  t.equal(skipped.get('d/link.txt'), 'symlink', 'a symlink inside a directory is skipped');
  t.equal(skipped.get('linked.txt'), 'symlink', 'a listed file that is a symlink is skipped');
  t.equal(skipped.get('ld'), 'symlink', 'a listed directory that is a symlink is skipped whole');
  t.equal(skipped.get('d/y.tmp'), 'side-file', 'a .tmp file is skipped');
  t.equal(skipped.get('d/z.lock'), 'side-file', 'a .lock file is skipped');
  t.equal(skipped.get('d/x.db-wal'), 'side-file', 'a -wal file is skipped');
  t.equal(skipped.get('x.db-wal'), 'side-file', 'a listed -wal file is skipped');
});

t.test('core takes canonical files up to smallBytes, big the larger ones, obs the observation files', async (t) => {
  const base = tmp(t);
  const cfg = config(base, {
    smallBytes: 1000,
    plan: { files: [{ path: 'small.bin' }, { path: 'large.bin' }], obs: [{ path: 'logs/logs.db' }] },
  });
  write(cfg.stateDir, 'small.bin', Buffer.alloc(1000, 1));
  write(cfg.stateDir, 'large.bin', Buffer.alloc(1001, 2));
  const logs = new Database(write(cfg.stateDir, 'logs/logs.db', ''));
  logs.exec('CREATE TABLE l (x)');
  logs.close();
  t.same(
    (await planTier(cfg, 'core')).items.map((i) => i.path),
    ['small.bin'],
    'a file of exactly smallBytes is core',
  );
  t.same(
    (await planTier(cfg, 'big')).items.map((i) => i.path),
    ['large.bin'],
    'a larger file is big',
  );
  const obs = await planTier(cfg, 'obs');
  t.same(
    obs.items.map((i) => i.path),
    ['logs/logs.db'],
    'observation files are obs',
  );
  t.equal(obs.items[0]?.kind, 'sqlite', 'a file with the SQLite header is SQLite');
});

t.test('an unchanged file is reused from the previous generation and a changed one is copied again', async (t) => {
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'still.db' }, { path: 'moving.db' }, { path: 'plain.txt' }] } });
  for (const name of ['still.db', 'moving.db']) {
    const d = new Database(write(cfg.stateDir, name, ''));
    d.pragma('journal_mode = WAL');
    d.exec('CREATE TABLE x (v)');
    d.prepare('INSERT INTO x VALUES (?)').run(name);
    d.close();
  }
  write(cfg.stateDir, 'plain.txt', 'same\n');
  const first = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0, stableMs: 0 });
  t.equal(first.reused, 0, 'the first generation copies everything');
  await new Promise((r) => setTimeout(r, 20));
  const d = new Database(join(cfg.stateDir, 'moving.db'));
  d.prepare('INSERT INTO x VALUES (?)').run('more');
  d.close();
  const second = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 + 1000, stableMs: 0 });
  const by = new Map(second.manifest.entries.map((e) => [e.path, e] as const));
  t.equal(by.get('still.db')?.reused, true, 'the unchanged database is reused');
  t.equal(by.get('plain.txt')?.reused, true, 'the unchanged plain file is reused');
  t.equal(by.get('moving.db')?.reused, false, 'the changed database is copied again');
  t.equal(
    statSync(join(second.dir, 'still.db')).ino,
    statSync(join(first.dir, 'still.db')).ino,
    'a reused file is a hard link to the previous copy',
  );
  t.equal(
    by.get('still.db')?.sha256,
    first.manifest.entries.find((e) => e.path === 'still.db')?.sha256,
    'a reused entry keeps its digest',
  );
  const third = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 + 2000 });
  t.equal(third.reused, 0, 'a file changed within the stability window is never reused');
});

t.test('two snapshots of a tier within one second are refused and leave nothing half-built', async (t) => {
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'a.txt' }] } });
  write(cfg.stateDir, 'a.txt', 'a');
  await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 });
  await t.rejects(
    buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 + 500 }),
    SnapshotError,
    'the second snapshot in the same second is refused',
  );
  t.same(
    readdirSync(join(cfg.outboxDir, 'core')).filter((n) => n.startsWith('.building')),
    [],
    'no building folder is left behind',
  );
  t.equal(generationId(T0 + 999), generationId(T0), 'the generation id has a resolution of one second');
});

t.test('secrets are never in the survival subset, checked twice', async (t) => {
  const base = tmp(t);
  const secrets = [
    'vault/secrets/api.txt',
    'vault/secret.json',
    'vault/backup-key',
    'vault/acp-token',
    'vault/auth.json',
    'vault/apple.p8',
    'vault/cert.pem',
    'vault/id.key',
    'vault/prod.env',
    'vault/github-token.txt',
    'vault/Credentials.json',
    'vault/db-password',
    'vault/session-store.json',
  ];
  const cfg = config(base, { plan: { dirs: [{ path: 'vault', survival: true }] } });
  for (const s of secrets) write(cfg.stateDir, s, 'shh');
  write(cfg.stateDir, 'vault/decision.md', 'fine');
  const snap = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => T0 });
  t.same(snap.survival, ['vault/decision.md'], 'only the non-secret file is in the survival subset');
  for (const s of secrets) t.ok(isSecretPath(s, cfg.secretPatterns), `${s} is a secret`);
  t.ok(
    snap.manifest.entries.some((e) => e.path === 'vault/auth.json'),
    'secrets still go host to host in the standby push',
  );
  // The second check holds even when a plan claims a secret may survive.
  const forged = {
    tier: 'core' as const,
    skipped: [],
    items: snap.manifest.entries.map((e) => ({
      path: e.path,
      abs: '',
      kind: e.kind,
      bytes: e.bytes,
      survival: true,
      secret: false,
    })),
  };
  const subset = survivalSubset(snap.manifest, forged, (p) => isSecretPath(p, cfg.secretPatterns));
  t.same(
    subset.map((e) => e.path),
    ['vault/decision.md'],
    'the second check removes secrets a plan let through',
  );
  t.notOk(existsSync(join(cfg.outboxDir, 'survival')), 'no survival copy is written locally');
});

// ---------------------------------------------------------------------------------------
// the replication block and its defaults

const example = JSON.parse(readFileSync(join(ROOT, 'deploy/replication/example-plan.json'), 'utf8')) as {
  replication: Record<string, unknown>;
};

t.test("the shipped example (the old system's configuration) validates and mirrors the defaults", async (t) => {
  const c = resolveReplication(validateReplication(example.replication), '/var/lib/hq');
  t.same(c.pollersOff, ['telegram', 'discord'], "the example turns the old system's two pollers off");
  t.same(DEFAULT_PLAN, { files: [], dirs: [], obs: [] }, 'the built-in plan is empty: the example is not a default');
  t.same(
    example.replication['secretPatterns'],
    DEFAULT_SECRET_PATTERNS,
    'the example secret patterns are the defaults',
  );
  t.same(example.replication['keep'], REPLICATION_DEFAULTS.keep, 'the example keeps the default counts');
  t.same(example.replication['cron'], REPLICATION_DEFAULTS.cron, 'the example cron is the default cron');
  t.equal(c.stateDir, join(homedir(), '.elanous'), 'a ~ path is expanded');
  t.equal(c.smallBytes, 20 * 1024 * 1024, 'smallBytes is 20 MiB');
  t.equal(c.files.length, 9, 'nine canonical files');
  t.equal(c.dirs.length, 10, 'ten canonical directories');
  t.equal(c.obs.length, 2, 'two observation files');
});

t.test('defaults fill every key of a minimal block; relative folders live in the agent state dir', async (t) => {
  const c = resolveReplication(validateReplication({ stateDir: '/srv/app' }), '/var/lib/hq');
  t.equal(c.standbyDir, '/var/lib/hq/standby', 'standbyDir defaults to {agent stateDir}/standby');
  t.equal(c.outboxDir, '/var/lib/hq/replication-out', 'outboxDir defaults to {agent stateDir}/replication-out');
  t.same(c.keep, { core: 36, big: 8, obs: 8 }, 'keep defaults to core 36, big 8, obs 8');
  t.same(
    c.cron,
    { core: '*/10 * * * *', big: '15 */6 * * *', obs: '45 */6 * * *' },
    'core every 10 minutes, big and obs four times a day',
  );
  t.same(c.hostLocalKeys, ['hq'], 'the host-local key is hq');
  t.equal(c.pushTo, null, 'pushTo defaults to every peer');
  t.same(
    [c.files, c.dirs, c.obs],
    [[], [], []],
    'there is no built-in plan: nothing is protected until the plan says so',
  );
  t.same(c.pollersOff, [], 'no poller is turned off unless configured');
  const src =
    readFileSync(join(ROOT, 'apps/agent/src/replication/config.ts'), 'utf8') +
    readFileSync(join(ROOT, 'apps/agent/src/replication/promote.ts'), 'utf8');
  for (const name of ['conatus', 'elanous', "'telegram'", "'discord'"])
    t.notOk(src.includes(name), `no ${name} in the replication code`);
});

const refusals: readonly [string, unknown, string][] = [
  ['a block without stateDir', {}, 'replication'],
  ['an unknown key', { stateDir: '/a', extra: 1 }, 'replication.extra'],
  ['a keep of zero', { stateDir: '/a', keep: { core: 0 } }, 'replication.keep.core'],
  ['a keep given as text', { stateDir: '/a', keep: { big: '8' } }, 'replication.keep.big'],
  ['a bad cron', { stateDir: '/a', cron: { core: 'every ten minutes' } }, 'replication.cron.core'],
  [
    'a plan path that climbs out',
    { stateDir: '/a', plan: { files: [{ path: '../etc/passwd' }] } },
    'replication.plan.files.0.path',
  ],
  ['an absolute plan path', { stateDir: '/a', plan: { dirs: [{ path: '/etc' }] } }, 'replication.plan.dirs.0.path'],
  [
    'a plan path listed twice',
    { stateDir: '/a', plan: { files: [{ path: 'x' }, { path: 'x' }] } },
    'replication.plan.files.1.path',
  ],
  [
    'a match on a file',
    { stateDir: '/a', plan: { files: [{ path: 'x', match: 'y' }] } },
    'replication.plan.files.0.match',
  ],
  [
    'a secret pattern that is not a regular expression',
    { stateDir: '/a', secretPatterns: ['('] },
    'replication.secretPatterns.0',
  ],
  [
    'a standby folder inside the state it protects',
    { stateDir: '/a', standbyDir: '/a/standby' },
    'replication.standbyDir',
  ],
  ['an outbox that contains the state', { stateDir: '/a/b', outboxDir: '/a' }, 'replication.outboxDir'],
  ['a pushTo that is not a host', { stateDir: '/a', pushTo: ['Node B'] }, 'replication.pushTo.0'],
  ['a pushTo that is a reserved name', { stateDir: '/a', pushTo: ['mbp', 'constructor'] }, 'replication.pushTo.1'],
  ['a pollersOff that is not a list', { stateDir: '/a', pollersOff: 'telegram' }, 'replication.pollersOff'],
  ['a pollersOff entry that is not text', { stateDir: '/a', pollersOff: ['telegram', 3] }, 'replication.pollersOff.1'],
  [
    'a pollersOff entry that is not a key path',
    { stateDir: '/a', pollersOff: ['telegram', 'bots..discord'] },
    'replication.pollersOff.1',
  ],
  [
    'a pollersOff entry that reaches a prototype',
    { stateDir: '/a', pollersOff: ['__proto__.enabled'] },
    'replication.pollersOff.0',
  ],
  [
    'a pollersOff entry under a host-local key',
    { stateDir: '/a', pollersOff: ['hq.poller'] },
    'replication.pollersOff.0',
  ],
  [
    'a pollersOff entry listed twice',
    { stateDir: '/a', pollersOff: ['discord', 'discord'] },
    'replication.pollersOff.1',
  ],
];

for (const [name, block, key] of refusals) {
  t.test(`the config refuses ${name}, naming ${key}`, async (t) => {
    let err: unknown = null;
    try {
      resolveReplication(validateReplication(block), '/var/lib/hq');
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof ConfigError, 'a ConfigError is thrown');
    t.equal((err as ConfigError).key, key, `the key is ${key}`);
    t.match((err as Error).message, new RegExp(`^${key.replace(/\./g, '\\.')}`), 'the one line starts with the key');
  });
}
