/**
 * Moving from elanous HQ end to end, from files in the old layout as elanous wrote them: the
 * lease record on the arbiter host (mbp holding generation 7), and on each candidate the host
 * file without a trailing newline, seen-generation 7, local.json, a config.json with an hq block
 * and the telegram and discord pollers, and a crontab with the old heartbeat and a fenced job.
 * `hq-arbiter import elanous` on the arbiter, `hq import elanous` on both candidates, then the
 * real daemons: the first hq generation is above 7, a resource that stored generation 7 (the S7
 * guard) accepts the hq writer, a fenced job sees HQ_GENERATION and ELANOUS_HQ_GENERATION, and a
 * promotion of the standby copy turns both pollers off.
 */
import t from 'tap';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sqliteGuard } from '../../packages/lease-core/src/shell/sqlite-guard.js';
import { writeOldLayout } from '../agent/elanous-layout.js';
import { ARBITER_CLI, Cluster, HOSTS, HQ_CLI, runNode, type HostName, type Run } from './harness.js';

function json<T>(r: Run, what: string): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(
      `${what} did not print JSON (exit ${r.code}; stdout ${r.stdout.trim()}; stderr ${r.stderr.trim()})`,
    );
  }
}

const CRONTAB =
  '*/10 * * * * /usr/local/bin/elanous hq heartbeat\n*/5 * * * * elanous hq fence --role cron /usr/local/bin/job.sh\n';

t.test('three hosts move from elanous HQ to hq without a generation going backwards', async (t) => {
  const c = await Cluster.create();
  t.teardown(() => c.stopAll());
  const home = (h: string) => join(c.dir, `home-${h}`);
  const hqHome = (h: HostName) => join(home(h), '.hq');

  // The old layout on every host.
  mkdirSync(join(home('cloud-vm'), '.elanous-hq'), { recursive: true });
  const lease = join(home('cloud-vm'), '.elanous-hq', 'lease.json');
  // The old holder renewed a second ago; written again just before the import, so a slow machine
  // cannot let the old lease run out before the arbiter reads it.
  const writeLease = (): void => {
    const now = Date.now() / 1000;
    writeFileSync(
      lease,
      JSON.stringify({
        holder: 'mbp',
        generation: 7,
        acquiredAt: now - 600,
        renewedAt: now - 1,
        expiresAt: now + 5,
        ttlSeconds: 6,
        standby: 'node-b',
        views: {},
      }),
    );
  };
  writeLease();
  for (const h of HOSTS) {
    writeOldLayout(home(h), { host: h, seen: 7, ttlSeconds: 6 });
    writeFileSync(join(home(h), 'crontab'), CRONTAB);
  }

  await t.test('bad old files are refused with one line and change nothing', async (t) => {
    const truncated = join(c.dir, 'lease-truncated.json');
    writeFileSync(truncated, readFileSync(lease, 'utf8').slice(0, 40));
    const a = await runNode([ARBITER_CLI, 'import', 'elanous', '--lease', truncated, '--config', c.arbiterConfig]);
    t.equal(a.code, 1, 'the arbiter refuses a truncated record, exit 1');
    t.match(
      a.stderr,
      /^hq-arbiter: import elanous: .*lease-truncated\.json: is not complete JSON \(truncated\?\); nothing changed\n$/,
      'one line',
    );
    const bad: [string, string, RegExp][] = [
      ['.elanous-hq/host', 'mbp\r\n', /host has a CR LF \(Windows\) line end/],
      [
        '.elanous-hq/seen-generation',
        '-7\n',
        /seen-generation holds -7: a generation is an integer from 0 to 281474976710656/,
      ],
      [
        '.elanous/hq/local.json',
        '{"holder":"mbp","generation":7,"conf',
        /local\.json is not complete JSON \(truncated\?\)/,
      ],
    ];
    for (const [file, text, line] of bad) {
      const spoilt = join(c.dir, 'home-spoilt');
      writeOldLayout(spoilt, { host: 'mbp', seen: 7, ttlSeconds: 6 });
      writeFileSync(join(spoilt, file), text);
      const r = await runNode([HQ_CLI, 'import', 'elanous', '--crontab', join(home('mbp'), 'crontab')], {
        HOME: spoilt,
        HQ_CONFIG: '',
      });
      t.equal(r.code, 1, `${file}: exit 1`);
      t.match(r.stderr, line, `${file}: ${r.stderr.trim()}`);
      t.equal(r.stderr.split('\n').length, 2, `${file}: one line`);
      t.notOk(existsSync(join(spoilt, '.hq')), `${file}: nothing written`);
    }
  });

  let importedAt = 0;
  await t.test('the arbiter imports the old record: mbp keeps HQ at generation 8', async (t) => {
    writeLease();
    importedAt = Date.now() / 1000;
    const r = await runNode([
      ARBITER_CLI,
      'import',
      'elanous',
      '--lease',
      lease,
      '--json',
      '--config',
      c.arbiterConfig,
    ]);
    t.equal(r.code, 0, `the import exits 0 (${r.stderr.trim()})`);
    t.match(
      json(r, 'hq-arbiter import'),
      { ok: true, floor: 7, granted: { holder: 'mbp', generation: 8 } },
      'floor 7; mbp granted 8, behind the old validity',
    );
  });

  await t.test('each candidate imports its old files', async (t) => {
    for (const h of HOSTS) {
      const r = await runNode([HQ_CLI, 'import', 'elanous', '--crontab', join(home(h), 'crontab'), '--json'], {
        HOME: home(h),
        HQ_CONFIG: '',
      });
      t.equal(r.code, 0, `${h}: exit 0 (${r.stderr.trim()})`);
      const out = json<{
        host: string;
        seenGeneration: { carried: number };
        crontab: { lines: { action: string; replacement: string | null }[] };
        arbiter: Record<string, unknown>;
      }>(r, `${h} import`);
      t.equal(out.host, h, `${h}: the host file without a newline is read`);
      t.equal(out.seenGeneration.carried, 7, `${h}: seen generation 7 carried`);
      t.same(
        out.crontab.lines.map((l) => [l.action, l.replacement]),
        [
          ['remove', null],
          ['replace', '*/5 * * * * hq fence run --role cron -- /usr/local/bin/job.sh'],
        ],
        `${h}: the heartbeat goes, the fenced job becomes hq fence run`,
      );
      t.match(out.arbiter, { standby: 'node-b', ttlSeconds: 6 }, `${h}: the arbiter's keys are printed`);
      // What the operator adds: the wiring of this cluster (tokens, peers, URLs) to the imported config.
      const imported = JSON.parse(readFileSync(join(hqHome(h), 'agent.json'), 'utf8')) as Record<string, unknown>;
      const wiring = JSON.parse(readFileSync(c.agentConfig(h), 'utf8')) as Record<string, unknown>;
      writeFileSync(c.agentConfig(h), JSON.stringify({ ...imported, ...wiring, stateDir: hqHome(h) }));
      for (const f of ['token', 'peer-token']) copyFileSync(join(c.stateDir(h), f), join(hqHome(h), f));
    }
  });

  await c.startArbiter();
  for (const h of HOSTS) await c.startAgent(h);

  await t.test('acquire: the first hq generation is above every elanous one', async (t) => {
    const r = await runNode([HQ_CLI, 'lease', 'acquire', '--wait', '30', '--json', '--config', c.agentConfig('mbp')]);
    t.equal(r.code, 0, `acquire exits 0 (${r.stderr.trim()})`);
    const l = json<{ lease: { holder: string; generation: number } }>(r, 'lease acquire').lease;
    t.equal(l.holder, 'mbp', 'mbp holds HQ');
    t.ok(l.generation >= 8, `generation ${l.generation} ≥ 8`);
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 60_000, 'mbp may run cron');
    t.ok(
      Date.now() / 1000 >= importedAt + 6,
      'not before the old TTL after the import: a job under the old lease has ended',
    );
    const [a, b] = await Promise.all([c.fence('mbp'), c.fence('node-b')]);
    t.equal(a?.generation, l.generation, "mbp's fence is at the granted generation");
    t.match(b, { run: false, holder: 'mbp', generation: l.generation }, 'node-b is standby at the same generation');
  });

  await t.test('a fenced job sees both names, and a resource that stored generation 7 accepts it', async (t) => {
    const db = new Database(join(c.dir, 'ledger.db'));
    t.teardown(() => db.close());
    const guard = sqliteGuard(db);
    t.match(guard.accept('ledger', 7), { ok: true }, 'the resource stored elanous generation 7');
    const out = join(c.dir, 'job-env.json');
    const code = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({g: process.env.HQ_GENERATION, e: process.env.ELANOUS_HQ_GENERATION}))`;
    const r = await runNode([
      HQ_CLI,
      'fence',
      'run',
      '--role',
      'cron',
      '--config',
      c.agentConfig('mbp'),
      '--',
      process.execPath,
      '-e',
      code,
    ]);
    t.equal(r.code, 0, `the fenced job ran (${r.stderr.trim()})`);
    const env = JSON.parse(readFileSync(out, 'utf8')) as { g: string; e: string };
    t.ok(Number(env.g) >= 8, `HQ_GENERATION ${env.g}`);
    t.equal(env.e, env.g, 'ELANOUS_HQ_GENERATION is the same generation');
    t.match(
      db.transaction(() => guard.accept('ledger', Number(env.g)))(),
      { ok: true },
      'the guarded resource accepts the hq writer',
    );
    t.match(
      guard.accept('ledger', 7),
      { ok: false, reason: 'stale-generation' },
      'and from then on refuses the old generation',
    );
  });

  await t.test("a promotion of mbp's copy on node-b turns the old pollers off", async (t) => {
    const cfg = c.agentConfig('mbp');
    const snap = await runNode(
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
    t.equal(snap.code, 0, `the fenced snapshot exits 0 (${snap.stderr.trim().slice(-400)})`);
    t.match(json<{ pushed: unknown[] }>(snap, 'snapshot').pushed, [{ host: 'node-b', ok: true }], 'pushed to node-b');
    const to = join(c.dir, 'promoted');
    const p = await runNode(
      [HQ_CLI, 'standby', 'promote', '--to', to, '--tiers', 'core', '--config', c.agentConfig('node-b')],
      {},
      45_000,
    );
    t.equal(p.code, 0, `promote exits 0 (${p.stderr.trim()})`);
    t.match(p.stdout, /pollers-off=telegram,discord/, 'the promotion line names the pollers it turned off');
    const promoted = JSON.parse(readFileSync(join(to, 'config.json'), 'utf8')) as {
      telegram: { enabled: boolean };
      discord: { enabled: boolean };
    };
    t.equal(promoted.telegram.enabled, false, 'telegram is off');
    t.equal(promoted.discord.enabled, false, 'discord is off');
  });
});
