/**
 * The sender side's events: `hq standby snapshot|promote|role` and `hq primary` report
 * `hq.standby` and `control` events to the local agent (`POST /v1/events`), which logs them as
 * its own pino lines; with the agent down the commands answer exactly as before, without delay.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import { AGENT_CLI, FakeArbiter, hq, shortDir, sleep, writeConfig } from '../agent/helpers.js';

function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => done(port));
    });
  });
}

type Line = { [k: string]: unknown };

/** A real hq-agent; its stdout (pino JSON) collected line by line. */
class AgentProcess {
  readonly lines: Line[] = [];
  private child: ChildProcess;
  private buf = '';
  constructor(config: string) {
    this.child = spawn(process.execPath, [AGENT_CLI, '--config', config], {
      env: { ...process.env, HQ_CONFIG: '', NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (c: Buffer) => {
      this.buf += c.toString();
      const parts = this.buf.split('\n');
      this.buf = parts.pop() ?? '';
      for (const p of parts) if (p.trim() !== '') this.lines.push(JSON.parse(p) as Line);
    });
  }
  async waitFor(match: (l: Line) => boolean, ms = 10_000): Promise<Line | undefined> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const l = this.lines.find(match);
      if (l !== undefined) return l;
      await sleep(25);
    }
    return undefined;
  }
  stop(): Promise<void> {
    return new Promise((done) => {
      if (this.child.exitCode !== null) return done();
      this.child.once('close', () => done());
      this.child.kill('SIGTERM');
    });
  }
}

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const dir = shortDir(t);
  const arbiter = new FakeArbiter();
  await arbiter.listen();
  t.teardown(() => arbiter.close());
  const state = join(dir, 'state');
  mkdirSync(state, { mode: 0o700 });
  writeFileSync(join(state, 'token'), `${'c'.repeat(64)}\n`, { mode: 0o600 });
  chmodSync(join(state, 'token'), 0o600);
  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'config.json'), JSON.stringify({ hq: { hostName: 'mbp' }, telegram: { enabled: true } }));
  const port = await freePort();
  const config = writeConfig(dir, {
    arbiterUrl: arbiter.url,
    heartbeatCron: '*/10 * * * *',
    listen: { host: '127.0.0.1', port },
    replication: {
      stateDir: app,
      standbyDir: join(dir, 'standby'),
      outboxDir: join(dir, 'outbox'),
      plan: { files: [{ path: 'config.json' }] },
    },
  });
  return { dir, config, socket: join(dir, 'agent.sock') };
}

const reported = (category: string, event: string) => (l: Line) =>
  l['category'] === category && l['event'] === event && l['via'] === 'cli';

t.test('the standby CLI and hq primary report their events to the running agent, which logs them', async (t) => {
  const { dir, config } = await setup(t);
  const agent = new AgentProcess(config);
  t.teardown(() => agent.stop());
  t.ok(await agent.waitFor((l) => l['event'] === 'agent-started'), 'the agent started');

  const snap = await hq(['standby', 'snapshot', '--tier', 'core', '--no-push', '--config', config, '--json']);
  t.equal(snap.code, 0, `the snapshot exits 0 (${snap.stderr})`);
  const gen = (JSON.parse(snap.stdout) as { generation: string }).generation;
  const stripped = await agent.waitFor(reported('hq.standby', 'config-host-local-stripped'));
  t.match(
    stripped,
    { host: 'mbp', tier: 'core', generation: gen, keys: 'hq', msg: 'config-host-local-stripped' },
    'config-host-local-stripped names the tier, generation and keys',
  );
  const built = await agent.waitFor(reported('hq.standby', 'generation'));
  t.match(
    built,
    { tier: 'core', generation: gen, files: 1, leaseGeneration: 1, holder: 'mbp', pushedTo: '', exitCode: 0 },
    'generation carries the snapshot and its outcome',
  );

  const refused = await hq(['standby', 'snapshot', '--tier', 'core', '--no-push', '--config', config], {
    env: { HQ_GENERATION: '7', HQ_HOLDER: 'node-b' },
  });
  t.equal(refused.code, 1, 'a snapshot by a non-holder exits 1');
  t.match(
    await agent.waitFor(reported('hq.standby', 'failed')),
    { tier: 'core', problem: /HQ_HOLDER is node-b, not this host/ },
    'failed carries the problem',
  );

  const pr = await hq(['standby', 'promote', '--config', config, '--to', join(dir, 'promoted')]);
  t.equal(pr.code, 1, 'a promotion with nothing verified exits 1');
  t.match(
    await agent.waitFor(reported('hq.standby', 'promote-refused')),
    { to: join(dir, 'promoted'), tiers: 'core,big', problem: /./ },
    'promote-refused carries the reason',
  );

  const role = await hq(['standby', 'role', '--default-source', 'mbp', '--config', config]);
  t.equal(role.code, 0, 'role exits 0');
  t.match(
    await agent.waitFor(reported('hq.standby', 'role')),
    { role: role.stdout.trim(), defaultSource: 'mbp', holder: 'mbp', generation: 1 },
    'role carries the answer',
  );

  const primary = await hq(['primary', '--config', config]);
  t.equal(primary.code, 0, `hq primary exits 0 (${primary.stderr})`);
  t.match(
    await agent.waitFor(reported('control', 'primary-resolved')),
    { holder: 'mbp', generation: 1, source: 'local:mbp', asked: 1, usable: 1 },
    'primary-resolved carries the winner',
  );
});

t.test('the agent logs only the closed list of events, with flat data that cannot forge a field', async (t) => {
  const { config, socket } = await setup(t);
  const agent = new AgentProcess(config);
  t.teardown(() => agent.stop());
  t.ok(await agent.waitFor((l) => l['event'] === 'agent-started'), 'the agent started');
  const cases: [string, unknown, RegExp][] = [
    ['an event outside the list', { category: 'hq.standby', event: 'acquired', data: {} }, /event/],
    ['a standby event under control', { category: 'control', event: 'role', data: {} }, /event|category/],
    ['an unknown category', { category: 'hq.lease', event: 'generation' }, /category|event/],
    ['nested data', { category: 'hq.standby', event: 'role', data: { role: { x: 1 } } }, /data/],
    [
      'a key the line sets itself',
      { category: 'hq.standby', event: 'role', data: { level: 60 } },
      /^data\.level is a field the log line sets itself; rename it$/,
    ],
    ['an extra top-level key', { category: 'hq.standby', event: 'role', host: 'node-b' }, /./],
  ];
  for (const [name, body, message] of cases) {
    const r = await callAgent(socket, 'POST', '/v1/events', 2, body);
    t.equal(r.kind === 'answer' ? r.status : 0, 400, `${name}: 400`);
    t.match(
      r.kind === 'answer' ? r.body : null,
      { error: 'HQ_ERR_BAD_REQUEST', message },
      `${name}: one line naming what to fix`,
    );
  }
  const ok = await callAgent(socket, 'POST', '/v1/events', 2, {
    category: 'hq.standby',
    event: 'role',
    data: { role: 'skip' },
  });
  t.same(ok.kind === 'answer' ? [ok.status, ok.body] : null, [200, { ok: true }], 'a valid report is taken');
  t.match(await agent.waitFor(reported('hq.standby', 'role')), { role: 'skip', host: 'mbp' }, 'and logged');
  t.equal(agent.lines.filter((l) => l['via'] === 'cli').length, 1, 'nothing refused was logged');
});

t.test('with the agent down the commands answer as before, at once', async (t) => {
  const { config } = await setup(t);
  const role = await hq(['standby', 'role', '--default-source', 'mbp', '--config', config]);
  t.equal(role.code, 0, 'role still exits 0');
  t.match(role.stdout, /^(direct|fenced|skip)\n$/, 'and prints only its answer');
  t.equal(role.stderr, '', 'nothing about the missing agent');
  const snap = await hq(['standby', 'snapshot', '--tier', 'core', '--no-push', '--config', config]);
  t.equal(snap.code, 0, `a first snapshot before any lease still exits 0 (${snap.stderr})`);
  t.match(snap.stdout, /^standby core \d{8}T\d{6}Z: 1 files/, 'with its usual line');
  t.ok(snap.ms < 10_000, 'and no wait for the agent');
});
