/**
 * Standby replication end to end between two real agents: a real arbiter
 * and two real `hq-agent` processes on loopback whose configs carry a `replication` block; mbp
 * takes the lease and snapshots its application state (a SQLite database being written, a
 * config.json with an `hq` block and a telegram poller, a plain file, a secret) under
 * `hq fence run --role cron`; node-b's agent receives the push on its peer listener; node-b
 * verifies and promotes the copy; a snapshot on node-b is refused; after a forced failover (the
 * holder's agent SIGKILLed, node-b promoted to generation 2) a push from generation 1 is refused.
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Cluster, HQ_CLI, runNode, type HostName, type Run } from './harness.js';
import { writer } from '../replication/helpers.js';

/** The application state each host protects, outside the agent's state directory. */
function appDir(c: Cluster, h: HostName): string {
  return join(c.dir, `${h}-app`);
}

/** The plan of this test: a ledger, the app config, a plain file, and a secret marked survival (which the plan must refuse). */
const PLAN = {
  files: [
    { path: 'ledger.db', survival: true },
    { path: 'config.json' },
    { path: 'notes.txt', survival: true },
    { path: 'secrets/api.key', survival: true },
  ],
};

/** Adds a `replication` block to the harness's agent config of `h` (standby and outbox default to the agent's state dir). */
function addReplication(c: Cluster, h: HostName): void {
  const file = c.agentConfig(h);
  const cfg = JSON.parse(readFileSync(file, 'utf8')) as { [k: string]: unknown };
  // smallBytes well above what the writer can add while it runs, so the ledger stays in core.
  cfg['replication'] = {
    stateDir: appDir(c, h),
    plan: PLAN,
    smallBytes: 512 * 1024 * 1024,
    keep: { core: 4 },
    pollersOff: ['telegram'],
  };
  writeFileSync(file, JSON.stringify(cfg));
  mkdirSync(appDir(c, h), { recursive: true, mode: 0o700 });
}

/** `hq ARGS --config {h}.json` (the harness's `hq` would put --config after a `--`). */
function hq(c: Cluster, h: HostName, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return runNode([HQ_CLI, ...args, '--config', c.agentConfig(h)], env, 45_000);
}

/** `hq fence run --role cron -- hq standby snapshot --tier core --json`, as deploy/replication/hq-standby.sh runs it. */
function fencedSnapshot(c: Cluster, h: HostName): Promise<Run> {
  const cfg = c.agentConfig(h);
  return runNode(
    [
      HQ_CLI,
      'fence',
      'run',
      '--role',
      'cron',
      '--config',
      cfg,
      '--',
      process.execPath,
      HQ_CLI,
      'standby',
      'snapshot',
      '--tier',
      'core',
      '--json',
      '--config',
      cfg,
    ],
    {},
    45_000,
  );
}

function json<T>(r: Run, what: string): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(
      `${what} did not print JSON (exit ${r.code}; stdout ${r.stdout.trim()}; stderr ${r.stderr.trim()})`,
    );
  }
}

interface SnapshotSummary {
  generation: string;
  tier: string;
  files: number;
  leaseGeneration: number;
  holder: string | null;
  survival: number;
  pushed: { host: string; ok: boolean; kind?: string; error?: string | null; message?: string; sentBlobs?: number }[];
}

t.test(
  'a snapshot of the holder reaches the standby agent, verifies and promotes, and only the holder may push',
  async (t) => {
    const c = await Cluster.create();
    let ledgerWriter: ChildProcess | null = null;
    t.teardown(async () => {
      ledgerWriter?.kill('SIGKILL');
      await c.stopAll();
    });
    for (const h of ['mbp', 'node-b'] as const) addReplication(c, h);

    // mbp's application state: an app config, a plain file, a secret; the ledger comes with its writer below.
    const app = appDir(c, 'mbp');
    const appConfig = {
      name: 'demo',
      hq: { hostName: 'mbp', arbiterUrl: 'http://mbp.example:7700' },
      telegram: { enabled: true, chatId: 42, pollSeconds: 5 },
      features: ['ledger'],
    };
    writeFileSync(join(app, 'config.json'), `${JSON.stringify(appConfig, null, 2)}\n`);
    writeFileSync(join(app, 'notes.txt'), 'remember the milk\n');
    mkdirSync(join(app, 'secrets'), { mode: 0o700 });
    writeFileSync(join(app, 'secrets/api.key'), 'sk-not-a-real-key-0123456789\n', { mode: 0o600 });

    await c.startArbiter();
    await c.startAgents();
    const promoted = join(c.dir, 'promoted-node-b');
    let snap: SnapshotSummary | null = null;

    await t.test('mbp takes the lease and both hosts learn generation 1', async (t) => {
      const r = await hq(c, 'mbp', ['lease', 'acquire', '--wait', '20', '--json']);
      t.equal(r.code, 0, `acquire exits 0 (stderr: ${r.stderr.trim()})`);
      t.match(
        json(r, 'lease acquire'),
        { lease: { holder: 'mbp', generation: 1 } },
        'the arbiter names mbp the holder at generation 1',
      );
      await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 20_000, 'mbp may run cron');
      await c.waitFor(async () => (await c.fence('node-b'))?.generation === 1, 20_000, 'node-b knows generation 1');
      const roles = await Promise.all(
        (['mbp', 'node-b'] as const).map(
          async (h) => [h, await hq(c, h, ['standby', 'role', '--default-source', 'mbp', '--json'])] as const,
        ),
      );
      for (const [h, role] of roles) {
        t.equal(role.code, 0, `standby role exits 0 on ${h} (${role.stderr.trim()})`);
        t.match(
          json(role, 'standby role'),
          { role: 'fenced', reason: 'lease-exists', holder: 'mbp' },
          `${h} runs its snapshot fenced once a lease exists`,
        );
      }
    });

    await t.test('the plan takes the secret to the standby but never to a survival copy', async (t) => {
      // The writer keeps inserting until the snapshot is taken (it burns a CPU: stopped right after).
      ledgerWriter = await writer(join(app, 'ledger.db'));
      const r = await hq(c, 'mbp', ['standby', 'snapshot', '--tier', 'core', '--dry-run', '--json']);
      t.equal(r.code, 0, `the dry run exits 0 (${r.stderr.trim()})`);
      const plan = json<{
        items: number;
        survival: number;
        plan: { path: string; kind: string; survival: boolean; secret: boolean }[];
      }>(r, 'dry run');
      t.equal(plan.items, 4, 'four files are planned');
      const byPath = new Map(plan.plan.map((p) => [p.path, p]));
      t.match(
        byPath.get('ledger.db'),
        { kind: 'sqlite', survival: true, secret: false },
        'the ledger is recognised as SQLite and may survive',
      );
      t.match(
        byPath.get('secrets/api.key'),
        { kind: 'file', secret: true, survival: false },
        'the secret is planned, flagged secret, and kept off survival copies although the plan marks it survival',
      );
      t.match(
        byPath.get('config.json'),
        { survival: false, secret: false },
        'config.json is planned, not for survival',
      );
      t.equal(plan.survival, 2, 'exactly the ledger and the plain file may survive');
    });

    await t.test('the fenced snapshot on the holder is pushed to node-b', async (t) => {
      const r = await fencedSnapshot(c, 'mbp');
      t.equal(
        r.code,
        0,
        `hq fence run … hq standby snapshot exits 0 (stdout ${r.stdout.trim()}; stderr ${r.stderr.trim().slice(-600)})`,
      );
      ledgerWriter?.kill('SIGKILL');
      snap = json<SnapshotSummary>(r, 'fenced snapshot');
      t.equal(snap.tier, 'core', 'the core tier was built');
      t.equal(snap.files, 4, 'the generation holds the four planned files');
      t.equal(snap.leaseGeneration, 1, 'the snapshot runs under lease generation 1 (HQ_GENERATION from hq fence run)');
      t.equal(snap.holder, 'mbp', 'the snapshot names mbp the holder');
      t.equal(snap.survival, 2, 'the survival subset leaves the secret out');
      t.match(snap.pushed, [{ host: 'node-b', ok: true }], 'the push to node-b succeeded');
      t.ok((snap.pushed[0]?.sentBlobs ?? 0) >= 1, `node-b was sent the blobs it lacked (${snap.pushed[0]?.sentBlobs})`);
      const standby = join(c.stateDir('node-b'), 'standby');
      t.equal(
        readlinkSync(join(standby, 'core', 'latest')),
        snap.generation,
        "node-b's agent moved core/latest to the pushed generation",
      );
      t.equal(
        readFileSync(join(standby, 'accepted-generation'), 'utf8').trim(),
        '1',
        'node-b recorded lease generation 1 as accepted',
      );
      const copied = JSON.parse(readFileSync(join(standby, 'core', snap.generation, 'config.json'), 'utf8')) as {
        [k: string]: unknown;
      };
      t.notOk('hq' in copied, 'the host-local hq block never left mbp');
      t.same(copied['telegram'], appConfig.telegram, 'the rest of config.json travelled unchanged');
    });

    await t.test('hq standby verify on node-b finds the copy from mbp complete', async (t) => {
      const [r, text] = await Promise.all([
        hq(c, 'node-b', ['standby', 'verify', '--json']),
        hq(c, 'node-b', ['standby', 'verify', '--tier', 'core']),
      ]);
      t.equal(r.code, 0, `verify exits 0 (${r.stdout.trim()} ${r.stderr.trim()})`);
      const v = json<{
        ok: boolean;
        tiers: {
          tier: string;
          ok: boolean;
          generation: string;
          host: string;
          holder: string;
          leaseGeneration: number;
          entries: number;
          checked: number;
        }[];
      }>(r, 'verify');
      t.equal(v.ok, true, 'the standby copy verifies');
      t.equal(v.tiers.length, 1, 'only the core tier is present');
      t.match(
        v.tiers[0],
        {
          tier: 'core',
          ok: true,
          generation: snap?.generation,
          host: 'mbp',
          holder: 'mbp',
          leaseGeneration: 1,
          entries: 4,
          checked: 4,
        },
        'core/latest is the pushed generation, every file checked',
      );
      t.match(
        text.stdout,
        /^hq-standby verify core=\d{8}T\d{6}Z\(\d+m · mbp · ok 4\/4\) OK\n$/,
        'the one-line verdict says OK',
      );
    });

    await t.test('hq standby promote on node-b builds a usable state directory', async (t) => {
      const hqDir = join(c.dir, 'node-b-hq');
      mkdirSync(hqDir, { mode: 0o700 });
      writeFileSync(
        join(hqDir, 'config.json'),
        JSON.stringify({ hq: { hostName: 'node-b', arbiterUrl: 'http://node-b.example:7700' } }),
      );
      const r = await hq(c, 'node-b', [
        'standby',
        'promote',
        '--to',
        promoted,
        '--tiers',
        'core',
        '--hq-config',
        hqDir,
        '--json',
      ]);
      t.equal(r.code, 0, `promote exits 0 (${r.stdout.trim()} ${r.stderr.trim()})`);
      t.match(
        json(r, 'promote'),
        {
          to: promoted,
          tiers: { core: snap?.generation },
          files: 4,
          pollersOff: ['telegram'],
          hq: 'node-b',
          dryRun: false,
        },
        'the summary names the generation, the files and the host',
      );

      // Before the ledger is opened here (opening a WAL database makes its -wal and -shm).
      t.same(
        readdirSync(promoted).sort(),
        ['config.json', 'config.json.pre-promote', 'ledger.db', 'notes.txt', 'secrets'],
        'the promoted folder holds exactly the plan, no SQLite side file',
      );
      const db = new Database(join(promoted, 'ledger.db'), { readonly: true, fileMustExist: true });
      try {
        t.equal(
          db.pragma('integrity_check', { simple: true }),
          'ok',
          'the promoted ledger passes PRAGMA integrity_check',
        );
        const a = (db.prepare('SELECT count(*) AS n FROM a').get() as { n: number }).n;
        const b = (db.prepare('SELECT count(*) AS n FROM b').get() as { n: number }).n;
        const n = (db.prepare('SELECT n FROM counter WHERE k = 1').get() as { n: number }).n;
        t.ok(a >= 2000, `the promoted ledger has the rows written before the snapshot (${a})`);
        t.ok(
          a === b && b === n,
          `the copy is one consistent state although the writer kept writing (a=${a}, b=${b}, counter=${n})`,
        );
      } finally {
        db.close();
      }

      const cfg = JSON.parse(readFileSync(join(promoted, 'config.json'), 'utf8')) as {
        telegram: { enabled: boolean; chatId: number };
        hq: { hostName: string };
        name: string;
      };
      t.equal(cfg.telegram.enabled, false, 'the telegram poller is turned off');
      t.equal(cfg.telegram.chatId, 42, 'the poller keeps its settings');
      t.equal(cfg.hq.hostName, 'node-b', "node-b's own hq block is injected");
      t.equal(cfg.name, 'demo', 'the other keys are kept');
      t.ok(existsSync(join(promoted, 'config.json.pre-promote')), 'config.json.pre-promote exists');
      const pre = JSON.parse(readFileSync(join(promoted, 'config.json.pre-promote'), 'utf8')) as {
        [k: string]: unknown;
      };
      t.same(pre['telegram'], appConfig.telegram, 'the pre-promote copy is the config as it arrived (poller on)');
      t.notOk('hq' in pre, 'the pre-promote copy has no hq block (mbp never sent it)');

      t.equal(
        readFileSync(join(promoted, 'notes.txt'), 'utf8'),
        'remember the milk\n',
        'the plain file arrived byte for byte',
      );
      t.equal(
        readFileSync(join(promoted, 'secrets/api.key'), 'utf8'),
        'sk-not-a-real-key-0123456789\n',
        'the secret travelled to the standby host and was promoted (secrets stay within the host pair)',
      );
      t.equal(statSync(join(promoted, 'secrets/api.key')).mode & 0o777, 0o600, 'the promoted secret is 0600');
      t.equal(statSync(promoted).mode & 0o777, 0o700, 'the promoted folder is 0700');
    });

    await t.test('a snapshot on node-b, which does not hold the lease, is refused', async (t) => {
      const outbox = join(c.stateDir('node-b'), 'replication-out');
      const [direct, fenced] = await Promise.all([
        hq(c, 'node-b', ['standby', 'snapshot', '--tier', 'core', '--json']),
        fencedSnapshot(c, 'node-b'),
      ]);
      t.equal(direct.code, 1, `a direct snapshot on node-b exits 1 (${direct.stderr.trim()})`);
      t.match(
        direct.stderr,
        /mbp holds the lease, not this host \(node-b\); only the holder snapshots/,
        'the refusal names the holder',
      );
      t.equal(fenced.code, 0, `hq fence run skips on node-b with exit 0 (${fenced.stderr.trim().slice(-300)})`);
      t.equal(fenced.stdout, '', 'the fenced snapshot never started on node-b');
      t.notOk(existsSync(join(outbox, 'core')), 'node-b built no generation');
    });

    await t.test('after a forced failover a push from the old generation is refused', async (t) => {
      await c.kill('mbp', 'SIGKILL');
      await c.waitFor(
        async () => (await c.fence('node-b'))?.generation === 2,
        30_000,
        'node-b is promoted to generation 2',
      );
      const standby = join(c.stateDir('node-b'), 'standby');
      const before = readlinkSync(join(standby, 'core', 'latest'));
      // A snapshot still running under generation 1 on the old holder (what hq fence run gave it before the failover).
      const r = await hq(c, 'mbp', ['standby', 'snapshot', '--tier', 'core', '--json'], {
        HQ_GENERATION: '1',
        HQ_HOLDER: 'mbp',
      });
      t.equal(r.code, 1, `the stale snapshot exits 1, refused (${r.stderr.trim()})`);
      const s = json<SnapshotSummary>(r, 'stale snapshot');
      t.not(s.generation, snap?.generation, 'it is a new generation');
      t.match(
        s.pushed,
        [{ host: 'node-b', ok: false, kind: 'refused', error: 'HQ_ERR_STALE_GENERATION' }],
        'node-b refuses it as stale',
      );
      t.match(
        s.pushed[0]?.message ?? '',
        /lease generation 1 is lower than 2/,
        'the refusal says generation 1 is lower than 2',
      );
      t.equal(readlinkSync(join(standby, 'core', 'latest')), before, "node-b's core/latest did not move");
      t.notOk(existsSync(join(standby, 'core', s.generation)), 'the stale generation is not on node-b');
      const v = await hq(c, 'node-b', ['standby', 'verify', '--tier', 'core', '--json']);
      t.equal(v.code, 0, 'the standby copy still verifies');
    });
  },
);
