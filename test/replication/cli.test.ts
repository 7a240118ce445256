/**
 * snapshot → push → verify → promote with the real `hq standby` commands, between two real peer
 * servers (Fastify + replicationPeerRoutes on 127.0.0.1): mbp holds generation 3 and copies to
 * node-b; node-b promotes, takes over at generation 4 and copies back; mbp, back from a pause
 * at generation 3, is refused. Then the role decisions (lease-core `replicationRole` through
 * `decideRole`) as a table, `hq standby role` against a stand-in arbiter, and usage errors.
 */
import t from 'tap';
import { chmodSync, existsSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { standbyCommand } from '../../apps/agent/src/cli/standby.js';
import Fastify from 'fastify';
import { readdirSync } from 'node:fs';
import { survivalRoutes } from '../../apps/arbiter/src/routes/survival.js';
import { FileSurvivalStore } from '../../apps/arbiter/src/store/sqlite/survival.js';
import { decideRole, leaseOf, parseDefaultSource } from '../../apps/agent/src/replication/role.js';
import { peer, tmp, TOKEN, write, answerRefusals } from './helpers.js';

interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

async function hq(argv: string[], env: NodeJS.ProcessEnv = {}, now?: () => number): Promise<Out> {
  let stdout = '';
  let stderr = '';
  const code = await standbyCommand(argv, {
    stdout: (s) => {
      stdout += s;
    },
    stderr: (s) => {
      stderr += s;
    },
    env: { ...env, HQ_CONFIG: '' },
    ...(now === undefined ? {} : { now }),
  });
  return { code, stdout, stderr };
}

const T0 = Date.parse('2026-12-01T07:00:00.000Z');

t.test(
  'snapshot, push, verify and promote work end to end between two agents, and back after a failover',
  async (t) => {
    const base = tmp(t);
    let nodeBSeen = 3;
    const a = await peer(t, join(base, 'mbp', 'standby'));
    const b = await peer(t, join(base, 'node-b', 'standby'), undefined, () => nodeBSeen);
    const plan = {
      files: [{ path: 'config.json' }, { path: 'ledger.db', survival: true }, { path: 'big.bin' }],
      dirs: [{ path: 'decisions', survival: true }],
      obs: [{ path: 'logs/logs.db' }],
    };
    const agentConfig = (host: string, other: string, url: string, stateDir: string) => {
      const dir = join(base, host);
      const hqDir = join(dir, 'hq');
      write(hqDir, 'peer-token', `${TOKEN}\n`);
      chmodSync(join(hqDir, 'peer-token'), 0o600);
      const file = join(dir, 'agent.json');
      writeFileSync(
        file,
        JSON.stringify({
          hostName: host,
          stateDir: hqDir,
          arbiterUrl: 'http://127.0.0.1:9',
          tailscaleBin: '',
          peers: { [other]: url },
          replication: {
            stateDir,
            standbyDir: join(dir, 'standby'),
            outboxDir: join(dir, 'outbox'),
            smallBytes: 100_000,
            plan,
            pollersOff: ['telegram', 'discord'],
          },
        }),
      );
      return file;
    };
    const appA = join(base, 'mbp', 'app');
    const appB = join(base, 'node-b', 'app-promoted');
    const cfgA = agentConfig('mbp', 'node-b', b.url, appA);
    const cfgB = agentConfig('node-b', 'mbp', a.url, appB);
    write(
      appA,
      'config.json',
      JSON.stringify({ hq: { hostName: 'mbp' }, telegram: { enabled: true }, discord: { enabled: true } }),
    );
    write(appA, 'decisions/first.md', 'we decided\n');
    write(appA, 'big.bin', Buffer.alloc(150_000, 5));
    const db = new Database(join(appA, 'ledger.db'));
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE entries (id INTEGER PRIMARY KEY, text TEXT)');
    db.prepare('INSERT INTO entries (text) VALUES (?)').run('one');
    const hqB = write(
      join(base, 'node-b', 'hqcfg'),
      'config.json',
      JSON.stringify({ hq: { hostName: 'node-b', arbiter: 'cloud-vm' } }),
    );

    // 1. mbp (holder, generation 3) snapshots core and big and pushes them to node-b.
    const asHolderA = { HQ_GENERATION: '3', HQ_HOLDER: 'mbp', HQ_ROLE: 'cron' };
    const plan1 = await hq(['snapshot', '--tier', 'core', '--config', cfgA, '--dry-run', '--json'], asHolderA);
    t.equal(plan1.code, 0, 'a dry run exits 0');
    const planned = JSON.parse(plan1.stdout) as { items: number; survival: number };
    t.equal(planned.items, 3, 'the core plan has config.json, ledger.db and the decision');
    t.equal(planned.survival, 2, 'two of them may survive');
    t.notOk(existsSync(join(base, 'mbp', 'outbox')), 'a dry run writes nothing');
    const core1 = await hq(['snapshot', '--tier', 'core', '--config', cfgA, '--json'], asHolderA, () => T0);
    t.equal(core1.code, 0, `the core snapshot exits 0 (${core1.stderr})`);
    const c1 = JSON.parse(core1.stdout) as {
      generation: string;
      pushed: { host: string; ok: boolean; sentBlobs: number }[];
      leaseGeneration: number;
    };
    t.same(
      c1.pushed.map((p) => [p.host, p.ok]),
      [['node-b', true]],
      'it was pushed to node-b',
    );
    t.equal(c1.leaseGeneration, 3, 'under lease generation 3');
    const big1 = await hq(['snapshot', '--tier', 'big', '--config', cfgA], asHolderA, () => T0 + 1000);
    t.equal(big1.code, 0, `the big snapshot exits 0 (${big1.stderr})`);
    t.match(
      big1.stdout,
      /^standby big 20261201T070001Z: 1 files \(0 reused\) · 0\.[12] MB · push node-b ok \(1 blobs, 0\.15 MB\) · survival - · [0-9.]+s\n$/,
      'the text summary is one line',
    );

    // 2. A change to the ledger: the next core push sends only the database.
    db.prepare('INSERT INTO entries (text) VALUES (?)').run('two');
    const core2 = await hq(['snapshot', '--tier', 'core', '--config', cfgA, '--json'], asHolderA, () => T0 + 2000);
    const c2 = JSON.parse(core2.stdout) as { generation: string; pushed: { sentBlobs: number }[] };
    t.equal(core2.code, 0, 'the second core snapshot exits 0');
    t.equal(c2.pushed[0]?.sentBlobs, 1, 'only the changed database travels');
    db.close();

    // 3. node-b verifies what it holds.
    const v = await hq(['verify', '--config', cfgB]);
    t.equal(v.code, 0, `verify exits 0 (${v.stdout})`);
    t.match(
      v.stdout,
      new RegExp(
        `^hq-standby verify core=${c2.generation}\\(\\d+m · mbp · ok 3/3\\) big=20261201T070001Z\\(\\d+m · mbp · ok 1/1\\) OK\\n$`,
      ),
      'verify prints the one-line verdict',
    );
    const vj = await hq(['verify', '--config', cfgB, '--tier', 'core', '--json']);
    t.equal((JSON.parse(vj.stdout) as { ok: boolean }).ok, true, 'verify --json says ok');

    // 4. node-b promotes into a new state directory.
    const dry = await hq(['promote', '--config', cfgB, '--to', appB, '--hq-config', hqB, '--dry-run']);
    t.equal(dry.code, 0, 'the promotion dry run exits 0');
    t.notOk(existsSync(appB), 'the dry run creates nothing');
    const pr = await hq(['promote', '--config', cfgB, '--to', appB, '--hq-config', hqB, '--json']);
    t.equal(pr.code, 0, `promote exits 0 (${pr.stderr})`);
    const summary = JSON.parse(pr.stdout) as { tiers: Record<string, string>; files: number; hq: string };
    t.same(
      summary.tiers,
      { core: c2.generation, big: '20261201T070001Z' },
      'the promoted generations are the verified ones',
    );
    t.equal(summary.hq, 'node-b', 'the promoted state names node-b');
    const promotedDb = new Database(join(appB, 'ledger.db'), { readonly: true });
    t.same(
      promotedDb.prepare('SELECT text FROM entries ORDER BY id').all(),
      [{ text: 'one' }, { text: 'two' }],
      'the promoted ledger holds every committed row',
    );
    t.equal(promotedDb.pragma('integrity_check', { simple: true }), 'ok', 'and passes integrity_check');
    promotedDb.close();
    const promotedCfg = JSON.parse(readFileSync(join(appB, 'config.json'), 'utf8')) as Record<
      string,
      { enabled?: boolean; hostName?: string }
    >;
    t.equal(promotedCfg['telegram']?.enabled, false, 'the telegram poller is off');
    t.equal(promotedCfg['discord']?.enabled, false, 'the discord poller is off');
    t.equal(promotedCfg['hq']?.hostName, 'node-b', "node-b's own hq block is in place");
    t.same(
      (JSON.parse(pr.stdout) as { pollersOff: string[] }).pollersOff,
      ['telegram', 'discord'],
      'the JSON summary names the keys turned off (replication.pollersOff)',
    );
    const again = await hq(['promote', '--config', cfgB, '--to', appB, '--hq-config', hqB]);
    t.equal(again.code, 1, 'promoting onto an existing DIR exits 1');
    t.match(again.stderr, /^promotion refused: .*already exists\n$/, 'with one line saying why');

    // 5. Failover: node-b holds generation 4 and copies its promoted state back to mbp.
    nodeBSeen = 4;
    write(appB, 'decisions/second.md', 'decided on node-b\n');
    const back = await hq(
      ['snapshot', '--tier', 'core', '--config', cfgB, '--json'],
      { HQ_GENERATION: '4', HQ_HOLDER: 'node-b' },
      () => T0 + 3000,
    );
    t.equal(back.code, 0, `node-b's snapshot exits 0 (${back.stderr})`);
    t.equal(
      readlinkSync(join(base, 'mbp', 'standby', 'core', 'latest')),
      '20261201T070003Z',
      "mbp's standby now holds node-b's copy",
    );
    const backCfg = JSON.parse(
      readFileSync(join(base, 'mbp', 'standby', 'core', '20261201T070003Z', 'config.json'), 'utf8'),
    ) as Record<string, unknown>;
    t.notOk('hq' in backCfg, "node-b's host-local hq block did not travel");

    // 6. mbp, back from a pause and still believing in generation 3, is refused by node-b.
    write(appA, 'decisions/stale.md', 'written by the old holder\n');
    const stale = await hq(['snapshot', '--tier', 'core', '--config', cfgA, '--json'], asHolderA, () => T0 + 4000);
    t.equal(stale.code, 1, 'the stale push exits 1 (refused)');
    const s = JSON.parse(stale.stdout) as { pushed: { ok: boolean; error: string }[] };
    t.equal(s.pushed[0]?.error, 'HQ_ERR_STALE_GENERATION', 'node-b refuses it as a stale generation');
    t.equal(
      readlinkSync(join(base, 'node-b', 'standby', 'core', 'latest')),
      c2.generation,
      "node-b's latest did not move",
    );
    const wrongHolder = await hq(['snapshot', '--tier', 'core', '--config', cfgA], {
      HQ_GENERATION: '4',
      HQ_HOLDER: 'node-b',
    });
    t.equal(wrongHolder.code, 1, 'a snapshot on a host that is not the holder exits 1');
    t.match(wrongHolder.stderr, /only the holder snapshots/, 'and says only the holder snapshots');
  },
);

t.test('the survival subset reaches the arbiter without a single secret, and a stale one is refused', async (t) => {
  const base = tmp(t);
  const member = 'd'.repeat(64);
  const dataDir = join(base, 'arbiter-data');
  const arb = answerRefusals(Fastify({ logger: false, bodyLimit: 64 * 1024 }));
  await arb.register(survivalRoutes, {
    store: new FileSurvivalStore(dataDir),
    authorize: (raw) => (raw.includes(`Bearer ${member}`) ? { machine: 'mbp' } : null),
  });
  const arbUrl = await arb.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => arb.close());
  const app = join(base, 'app');
  const hqDir = join(base, 'hq');
  write(hqDir, 'token', `${member}\n`);
  chmodSync(join(hqDir, 'token'), 0o600);
  const file = join(base, 'agent.json');
  writeFileSync(
    file,
    JSON.stringify({
      hostName: 'mbp',
      stateDir: hqDir,
      arbiterUrl: arbUrl,
      tailscaleBin: '',
      replication: {
        stateDir: app,
        standbyDir: join(base, 'standby'),
        outboxDir: join(base, 'outbox'),
        plan: { files: [{ path: 'config.json' }], dirs: [{ path: 'decisions', survival: true }] },
      },
    }),
  );
  write(app, 'config.json', '{}');
  write(app, 'decisions/keep.md', 'keep\n');
  for (const secret of [
    'decisions/api-token.txt',
    'decisions/auth.json',
    'decisions/deploy.pem',
    'decisions/secrets/x.md',
    'decisions/.env',
  ])
    write(app, secret, 'shh');
  const r = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
    () => T0,
  );
  t.equal(r.code, 0, `the snapshot with a survival copy exits 0 (${r.stderr}${r.stdout})`);
  const out = JSON.parse(r.stdout) as { survivalCopy: { ok: boolean; files: number }; files: number };
  t.equal(out.files, 7, 'the standby generation holds every planned file, secrets included');
  t.same(out.survivalCopy, { ok: true, files: 1, sentBytes: 5 }, 'one file went to the arbiter');
  const kept = join(dataDir, 'survival', 'mbp', 'core', '20261201T070000Z');
  t.same(readdirSync(join(kept, 'decisions')).sort(), ['keep.md'], 'the arbiter holds the survival file and no secret');
  t.notOk(existsSync(join(kept, 'config.json')), 'an item not marked survival stays off the arbiter');
  t.equal(
    readlinkSync(join(dataDir, 'survival', 'mbp', 'core', 'latest')),
    '20261201T070000Z',
    'the arbiter moved its latest',
  );
  const forged = await fetch(`${arbUrl}/v1/survival/core/20261201T070009Z`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${member}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      manifest: {
        generation: '20261201T070009Z',
        tier: 'core',
        createdAt: '2026-12-01T07:00:09.000Z',
        source: app,
        host: 'mbp',
        leaseGeneration: 3,
        holder: 'mbp',
        entries: [{ path: 'decisions/auth.json', bytes: 3, sha256: 'a'.repeat(64), kind: 'file', reused: false }],
      },
      sums: `${'a'.repeat(64)}  decisions/auth.json\n`,
    }),
  });
  t.equal(forged.status, 400, 'the arbiter refuses a secret even when an agent sends one');
  t.match(
    ((await forged.json()) as { message: string }).message,
    /decisions\/auth\.json is a secret/,
    'a well-formed manifest: the secret check is what refuses it',
  );
  const sloppy = await fetch(`${arbUrl}/v1/survival/core/20261201T070009Z`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${member}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      manifest: { generation: '20261201T070009Z', tier: 'core', leaseGeneration: 3, holder: 'mbp', entries: [] },
      sums: '',
    }),
  });
  t.same(
    [sloppy.status, ((await sloppy.json()) as { message: string }).message.startsWith('manifest ')],
    [400, true],
    "a manifest the agent's reader refuses is refused by the arbiter too",
  );
  write(app, 'decisions/keep.md', 'keep 2\n');
  const r4 = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { HQ_GENERATION: '4', HQ_HOLDER: 'mbp' },
    () => T0 + 1000,
  );
  t.equal(r4.code, 0, 'a copy from generation 4 is accepted');
  write(app, 'decisions/keep.md', 'keep 3 from the old holder\n');
  const r3 = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
    () => T0 + 2000,
  );
  t.equal(r3.code, 1, 'a survival copy from generation 3 after 4 exits 1');
  t.equal(
    (JSON.parse(r3.stdout) as { survivalCopy: { error: string } }).survivalCopy.error,
    'HQ_ERR_STALE_GENERATION',
    'the arbiter refuses it as stale',
  );
  const none = await fetch(`${arbUrl}/v1/survival/core/20261201T070009Z`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  t.equal(none.status, 401, 'a survival write without the member token is 401');
  const list = (await (await fetch(`${arbUrl}/v1/survival`)).json()) as {
    machines: { machine: string; tiers: { tier: string; latest: string | null }[] }[];
  };
  t.equal(list.machines[0]?.tiers[0]?.latest, '20261201T070001Z', 'the listing shows the latest survival generation');
});

t.test('hq standby role answers from the arbiter record and the seen generation', async (t) => {
  const base = tmp(t);
  let record: unknown = { name: 'hq', holder: 'node-b', generation: 4, revision: 9 };
  const arbiter = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(req.url === '/v1/lease' ? record : {}));
  });
  await new Promise<void>((r) => arbiter.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => void arbiter.close());
  const port = (arbiter.address() as { port: number }).port;
  const cfg = (arbiterUrl: string, hostName = 'mbp') => {
    const file = join(base, `${hostName}-${arbiterUrl.length}.json`);
    writeFileSync(file, JSON.stringify({ hostName, stateDir: join(base, hostName), arbiterUrl, tailscaleBin: '' }));
    return file;
  };
  const live = cfg(`http://127.0.0.1:${port}`);
  const r1 = await hq(['role', '--default-source', 'mbp', '--config', live, '--json']);
  t.equal(r1.code, 0, 'role exits 0');
  t.same(
    JSON.parse(r1.stdout),
    {
      host: 'mbp',
      defaultSource: ['mbp'],
      role: 'fenced',
      reason: 'lease-exists',
      holder: 'node-b',
      generation: 4,
      seenGeneration: 0,
    },
    'a lease exists: fenced',
  );
  record = { name: 'hq', holder: null, generation: 0, revision: 1 };
  const r2 = await hq(['role', '--default-source', 'mbp,macbookprom5', '--config', live]);
  t.equal(r2.stdout, 'direct\n', 'before the first lease the default source copies directly');
  const r3 = await hq(['role', '--default-source', 'mbp', '--config', cfg(`http://127.0.0.1:${port}`, 'node-b')]);
  t.equal(r3.stdout, 'skip\n', 'before the first lease another host skips');
  write(join(base, 'mbp'), 'seen-generation', '5\n');
  chmodSync(join(base, 'mbp', 'seen-generation'), 0o600);
  const r4 = await hq(['role', '--default-source', 'mbp', '--config', live, '--json']);
  t.equal(
    (JSON.parse(r4.stdout) as { reason: string }).reason,
    'no-lease-after-seen',
    'no lease after a seen generation skips',
  );
  const down = cfg('http://127.0.0.1:9');
  const r5 = await hq(['role', '--default-source', 'mbp', '--config', down, '--json']);
  t.equal(
    (JSON.parse(r5.stdout) as { role: string; reason: string }).reason,
    'lease-unreadable',
    'an unreachable arbiter is an unreadable lease',
  );
  t.equal(
    (JSON.parse(r5.stdout) as { role: string }).role,
    'fenced',
    'and runs the copy fenced: the fence decides from the cache during an outage',
  );
});

t.test('usage and configuration errors exit 2 with one line', async (t) => {
  const base = tmp(t);
  const plain = join(base, 'agent.json');
  writeFileSync(plain, JSON.stringify({ hostName: 'mbp', stateDir: join(base, 'hq') }));
  const bad = join(base, 'bad.json');
  writeFileSync(
    bad,
    JSON.stringify({ hostName: 'mbp', replication: { stateDir: join(base, 'x'), keep: { core: 0 } } }),
  );
  const noPlan = join(base, 'noplan.json');
  writeFileSync(
    noPlan,
    JSON.stringify({ hostName: 'mbp', stateDir: join(base, 'hq'), replication: { stateDir: join(base, 'x') } }),
  );
  const badPollers = join(base, 'badpollers.json');
  writeFileSync(
    badPollers,
    JSON.stringify({
      hostName: 'mbp',
      stateDir: join(base, 'hq'),
      replication: { stateDir: join(base, 'x'), pollersOff: ['telegram', 'a..b'] },
    }),
  );
  const cases: [string, string[], RegExp][] = [
    ['an unknown subcommand', ['explode'], /unknown command "standby explode"/],
    [
      'a replication block without a plan',
      ['snapshot', '--tier', 'core', '--config', noPlan, '--no-push'],
      /replication\.plan: lists nothing to protect/,
    ],
    [
      'a bad pollersOff',
      ['promote', '--to', join(base, 'p'), '--config', badPollers],
      /replication\.pollersOff\.1: "a\.\.b" is not a key path/,
    ],
    ['a missing --tier', ['snapshot', '--config', plain], /--tier is required/],
    ['a bad --tier', ['snapshot', '--tier', 'all', '--config', plain], /--tier must be one of core, big, obs/],
    [
      'a config without a replication block',
      ['snapshot', '--tier', 'core', '--config', plain],
      /has no replication block/,
    ],
    ['an invalid replication block', ['verify', '--config', bad], /replication\.keep\.core/],
    [
      'a bad --tiers list',
      ['promote', '--to', join(base, 'x'), '--standby', base, '--tiers', 'core,core'],
      /--tiers must be/,
    ],
    ['a missing --default-source', ['role', '--config', plain], /--default-source is required/],
  ];
  for (const [name, argv, msg] of cases) {
    const r = await hq(argv);
    t.equal(r.code, 2, `${name} exits 2`);
    t.match(r.stderr, msg, `${name} says so`);
    t.equal(r.stderr.split('\n').length, 2, `${name} is one line`);
  }
  const help = await hq(['promote', '--help']);
  t.equal(help.code, 0, '--help exits 0');
  t.match(help.stdout, /--hq-config F/, 'the help lists the flags');
});

// ---------------------------------------------------------------------------------------
// role decisions

type Lease = { holder: string | null; generation: number } | null;

const table: readonly [string, string, readonly string[], Lease, number, string, string][] = [
  [
    'a lease held by this host runs the copy fenced',
    'mbp',
    ['mbp'],
    { holder: 'mbp', generation: 3 },
    3,
    'fenced',
    'lease-exists',
  ],
  [
    'a lease held by the other host runs the copy fenced (the fence skips it)',
    'mbp',
    ['mbp'],
    { holder: 'node-b', generation: 4 },
    4,
    'fenced',
    'lease-exists',
  ],
  [
    'a released lease (no holder, generation 5) still runs fenced',
    'node-b',
    ['mbp'],
    { holder: null, generation: 5 },
    5,
    'fenced',
    'lease-exists',
  ],
  [
    'an unreadable lease (arbiter outage) runs fenced: the fence decides from its cache',
    'mbp',
    ['mbp'],
    null,
    0,
    'fenced',
    'lease-unreadable',
  ],
  [
    'an unreadable lease runs fenced after a generation was seen too (the holder keeps replicating)',
    'mbp',
    ['mbp'],
    null,
    7,
    'fenced',
    'lease-unreadable',
  ],
  [
    'no lease yet on the default source copies directly',
    'mbp',
    ['mbp'],
    { holder: null, generation: 0 },
    0,
    'direct',
    'no-lease-default-source',
  ],
  [
    'no lease yet on an alias of the default source copies directly',
    'macbookprom5',
    ['mbp', 'macbookprom5'],
    { holder: null, generation: 0 },
    0,
    'direct',
    'no-lease-default-source',
  ],
  [
    'no lease yet on another host skips',
    'node-b',
    ['mbp', 'macbookprom5'],
    { holder: null, generation: 0 },
    0,
    'skip',
    'no-lease-not-default',
  ],
  [
    'no lease after a generation was seen skips (a wiped arbiter must not turn the old source back on)',
    'mbp',
    ['mbp'],
    { holder: null, generation: 0 },
    4,
    'skip',
    'no-lease-after-seen',
  ],
  [
    'names are compared exactly: no case folding',
    'mbp',
    ['MBP'],
    { holder: null, generation: 0 },
    0,
    'skip',
    'no-lease-not-default',
  ],
];

for (const [name, host, defaultSource, lease, seen, role, reason] of table) {
  t.test(name, async (t) => {
    const a = decideRole({ host, defaultSource, lease, seenGeneration: seen });
    t.equal(a.role, role, `the role is ${role}`);
    t.equal(a.reason, reason, `the reason is ${reason}`);
    t.equal(a.host, host, 'the answer names this host');
    t.equal(a.holder, lease?.holder ?? null, 'the answer carries the holder it saw');
  });
}

t.test('--default-source takes a host and its aliases, and nothing else', async (t) => {
  t.same(parseDefaultSource('mbp'), ['mbp'], 'one host');
  t.same(parseDefaultSource('mbp,macbookprom5'), ['mbp', 'macbookprom5'], 'a host and an alias');
  t.type(parseDefaultSource(''), 'string', 'an empty value is refused');
  t.type(parseDefaultSource('mbp,'), 'string', 'an empty alias is refused');
  t.type(parseDefaultSource('MBP'), 'string', 'an upper-case name is not a host');
  t.type(parseDefaultSource('constructor'), 'string', 'constructor is never a host');
});

t.test("the arbiter's record is read strictly; anything odd is an unreadable lease", async (t) => {
  t.same(
    leaseOf({ holder: 'mbp', generation: 3, revision: 9 }),
    { holder: 'mbp', generation: 3 },
    'a record gives holder and generation',
  );
  t.same(
    leaseOf({ holder: null, generation: 0 }),
    { holder: null, generation: 0 },
    'a never-granted record reads as no lease',
  );
  t.equal(leaseOf({ holder: 'mbp', generation: '3' }), null, 'a generation as text is unreadable');
  t.equal(leaseOf({ holder: 'Not A Host', generation: 3 }), null, 'a holder that is not a host is unreadable');
  t.equal(leaseOf({ holder: 'mbp', generation: -1 }), null, 'a negative generation is unreadable');
  t.equal(leaseOf(null), null, 'no body is unreadable');
});
