/**
 * `hq fence run` with real child processes and real signals, against a fake agent socket whose
 * fence answer the test changes while the child runs.
 */
import t from 'tap';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { FakeAgent, hq, shortDir, sleep, writeConfig } from './helpers.js';

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  t.teardown(() => agent.close());
  return { dir, config, agent };
}

const node = process.execPath;

t.test('a skip answer does not run the command and exits 0, or the --skip-exit code', async (t) => {
  const { dir, config, agent } = await setup(t);
  agent.answer = { run: false, reason: 'not-holder', generation: 3, holder: 'node-b', validForSeconds: null };
  const marker = join(dir, 'ran');
  const child = ['--', node, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
  const a = await hq(['fence', 'run', '--role', 'cron', '--config', config, ...child]);
  t.equal(a.code, 0, 'a skip exits 0 by default');
  const b = await hq(['fence', 'run', '--role', 'cron', '--skip-exit', '9', '--config', config, ...child]);
  t.equal(b.code, 9, 'a skip exits with --skip-exit');
  t.notOk(existsSync(marker), 'the command never ran');
  t.equal(a.stderr, '', 'a skip prints nothing (a crontab line must not mail every standby)');
  t.equal(a.stdout, '', 'and nothing on stdout either');
  const v = await hq(['fence', 'run', '--verbose', '--role', 'cron', '--config', config, ...child]);
  t.equal(v.code, 0, '--verbose changes no exit code');
  t.match(
    v.stderr,
    /"event":"skipped","role":"cron","reason":"not-holder"/,
    '--verbose logs the skip as one JSON line',
  );
});

t.test('a normal run prints nothing; --verbose shows allowed', async (t) => {
  const { config } = await setup(t);
  const quiet = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', node, '-e', '']);
  t.equal(quiet.code, 0, 'the child ran and exited 0');
  t.equal(quiet.stderr, '', 'nothing on stderr for a normal run');
  const loud = await hq(['fence', 'run', '--verbose', '--role', 'cron', '--config', config, '--', node, '-e', '']);
  t.match(loud.stderr, /"event":"allowed","role":"cron","generation":3,"holder":"mbp"/, '--verbose logs the decision');
});

t.test('the CMD without -- gets one line saying where the -- goes', async (t) => {
  const { dir, config } = await setup(t);
  const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, 'echo', 'hi', "it's"]);
  t.equal(r.code, 2, 'a usage error, exit 2');
  t.equal(
    r.stderr,
    `hq fence run: unexpected argument "echo": put the command after -- (hq fence run --role cron --config ${config} -- echo hi 'it'\\''s')\n`,
    'one line with the corrected command, quoted for a shell',
  );
  const flag = await hq(['fence', 'run', '--role', 'cron', '--config', config, 'ls', '--all']);
  t.match(
    flag.stderr,
    /^hq fence run: unexpected argument "ls": put the command after --/,
    "CMD's own flags are not taken for unknown flags of ours",
  );
  t.notOk(existsSync(join(dir, 'ran')), 'nothing ran');
});

t.test(
  "the child's exit code is passed through and it gets HQ_GENERATION (also as ELANOUS_HQ_GENERATION), HQ_HOLDER and HQ_ROLE",
  async (t) => {
    const { dir, config } = await setup(t);
    const out = join(dir, 'env.json');
    const code = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({g: process.env.HQ_GENERATION, e: process.env.ELANOUS_HQ_GENERATION, h: process.env.HQ_HOLDER, r: process.env.HQ_ROLE, pgid: process.pid})); process.exit(7)`;
    const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', node, '-e', code]);
    t.equal(r.code, 7, "the supervisor exits with the child's code");
    const env = JSON.parse(readFileSync(out, 'utf8')) as { g: string; e: string; h: string; r: string };
    t.same(
      { g: env.g, h: env.h, r: env.r },
      { g: '3', h: 'mbp', r: 'cron' },
      'the child sees the fence in its environment',
    );
    t.equal(env.e, '3', "the old system's name carries the same generation, for jobs not yet changed");
  },
);

t.test('a child killed by a signal gives 128 + the signal number', async (t) => {
  const { config } = await setup(t);
  const r = await hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--config',
    config,
    '--',
    node,
    '-e',
    "process.kill(process.pid, 'SIGKILL')",
  ]);
  t.equal(r.code, 128 + 9, 'a child that dies of SIGKILL (9) gives 137');
});

t.test('the command is executed without a shell', async (t) => {
  const { dir, config } = await setup(t);
  const r = await hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--config',
    config,
    '--',
    'echo',
    '$HOME;',
    'touch',
    join(dir, 'pwned'),
  ]);
  t.equal(r.code, 0, 'echo ran');
  t.notOk(existsSync(join(dir, 'pwned')), 'shell syntax in arguments is not interpreted');
});

t.test('a missing command exits 127', async (t) => {
  const { config } = await setup(t);
  const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', '/nonexistent/command']);
  t.equal(r.code, 127, 'ENOENT gives 127');
  t.equal(r.stderr, 'hq fence run: cannot start "/nonexistent/command": ENOENT\n', 'one line naming the command');
});

t.test('losing the fence sends SIGTERM to the child and exits 75', async (t) => {
  const { dir, config, agent } = await setup(t);
  const marker = join(dir, 'term');
  const started = join(dir, 'started');
  const code = `process.on('SIGTERM', () => { require('fs').writeFileSync(${JSON.stringify(marker)}, 'TERM'); process.exit(0); });
    require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
  const p = hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--recheck',
    '0.3',
    '--grace',
    '3',
    '--config',
    config,
    '--',
    node,
    '-e',
    code,
  ]);
  while (!existsSync(started)) await sleep(50);
  agent.answer = { run: false, reason: 'not-holder', generation: 4, holder: 'node-b', validForSeconds: null };
  const r = await p;
  t.equal(r.code, 75, 'the supervisor exits 75 when it stopped the child');
  t.equal(readFileSync(marker, 'utf8'), 'TERM', 'the child got SIGTERM');
  t.equal(
    r.stderr,
    'hq fence run: lost the fence for role cron (not-holder, generation 3): stopping CMD with SIGTERM, SIGKILL after 3 s\n',
    'the loss is one line with its reason, without --verbose',
  );
});

t.test('a change of generation counts as a loss even when the answer still says run', async (t) => {
  const { dir, config, agent } = await setup(t);
  const started = join(dir, 'started');
  const p = hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--recheck',
    '0.3',
    '--config',
    config,
    '--',
    node,
    '-e',
    `require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`,
  ]);
  while (!existsSync(started)) await sleep(50);
  agent.answer = { ...agent.answer, generation: 5 };
  const r = await p;
  t.equal(r.code, 75, 'a new generation stops the child');
  t.match(r.stderr, /generation-changed/, 'the reason is generation-changed');
});

t.test('a child that ignores SIGTERM gets SIGKILL after the grace', async (t) => {
  const { dir, config, agent } = await setup(t);
  const started = join(dir, 'started');
  const code = `process.on('SIGTERM', () => {}); require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
  const p = hq([
    'fence',
    'run',
    '--verbose',
    '--role',
    'cron',
    '--recheck',
    '0.3',
    '--grace',
    '1',
    '--config',
    config,
    '--',
    node,
    '-e',
    code,
  ]);
  while (!existsSync(started)) await sleep(50);
  const lostAt = Date.now();
  agent.answer = { run: false, reason: 'no-quorum-expired', generation: 3, holder: 'mbp', validForSeconds: null };
  const r = await p;
  const ms = Date.now() - lostAt;
  t.equal(r.code, 75, 'exit 75');
  t.match(r.stderr, /"event":"killed"/, 'SIGKILL was needed');
  t.ok(ms >= 900, `the grace was given (${ms} ms)`);
  t.ok(ms < 4000, `but not much more (${ms} ms)`);
});

t.test('the child is gone before the validity ends when the agent stops answering', async (t) => {
  const { dir, config, agent } = await setup(t);
  agent.answer = { run: true, reason: 'holder', generation: 3, holder: 'mbp', validForSeconds: 4 };
  const started = join(dir, 'started');
  const code = `process.on('SIGTERM', () => {}); require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
  const p = hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--recheck',
    '30',
    '--grace',
    '5',
    '--config',
    config,
    '--',
    node,
    '-e',
    code,
  ]);
  while (!existsSync(started)) await sleep(20);
  // The query came before the child started, so its 4 s validity ends before t0 + 4 s.
  const t0 = Date.now();
  await agent.close();
  const r = await p;
  const ms = Date.now() - t0;
  t.equal(r.code, 75, 'exit 75');
  t.ok(ms < 4000, `the child was killed within the 4 s validity, grace shortened to fit (${ms} ms after it started)`);
  t.match(r.stderr, /agent-unreachable/, 'the reason is agent-unreachable');
});

t.test('the supervisor re-checks before the validity ends, not only every --recheck seconds', async (t) => {
  const { dir, config, agent } = await setup(t);
  agent.answer = { run: true, reason: 'holder', generation: 3, holder: 'mbp', validForSeconds: 3 };
  const started = join(dir, 'started');
  const p = hq([
    'fence',
    'run',
    '--role',
    'cron',
    '--recheck',
    '60',
    '--grace',
    '0.5',
    '--config',
    config,
    '--',
    node,
    '-e',
    `require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setTimeout(() => {}, 4000);`,
  ]);
  while (!existsSync(started)) await sleep(50);
  const before = agent.queries;
  const r = await p;
  t.equal(r.code, 0, 'the child ran to its end: every deadline re-check was answered with run');
  t.ok(
    agent.queries - before >= 2,
    `it re-checked ahead of the deadlines (${agent.queries - before} re-checks in 4 s with --recheck 60)`,
  );
});

t.test('TERM sent to the supervisor is forwarded to the child, whose exit code is kept', async (t) => {
  const { dir, config } = await setup(t);
  const started = join(dir, 'started');
  const code = `process.on('SIGTERM', () => process.exit(3)); require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
  let pid = 0;
  const p = hq(['fence', 'run', '--verbose', '--role', 'cron', '--config', config, '--', node, '-e', code], {
    onSpawn: (n) => (pid = n),
  });
  while (!existsSync(started)) await sleep(50);
  process.kill(pid, 'SIGTERM');
  const r = await p;
  t.equal(r.code, 3, "the child's own code after a forwarded TERM");
  t.match(r.stderr, /signal-forwarded/, 'the forwarding is logged');
});

t.test(
  'an unknown role exits 2; an agent that cannot be asked is not a skip: its own exit code, the cause named',
  async (t) => {
    const { dir, config, agent } = await setup(t);
    const bad = await hq(['fence', 'run', '--role', 'nope', '--config', config, '--', 'true']);
    t.equal(bad.code, 2, 'unknown role → 2');
    await agent.close();
    const marker = join(dir, 'x');
    const cmd = ['--', node, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
    const down = await hq(['fence', 'run', '--role', 'cron', '--skip-exit', '5', '--config', config, ...cmd]);
    t.equal(down.code, 69, 'no agent → 69 (EX_UNAVAILABLE), not the skip code: cron and systemd see a failure');
    t.match(
      down.stderr,
      /^hq fence run: could not ask the agent: no agent socket at \S+agent\.sock \(ENOENT; socketPath from \S+agent\.json\): the agent is not running, or it listens on another socketPath; CMD was not run \(exit 69\)\n$/,
      'one line naming the cause, even without --verbose',
    );
    const zero = await hq(['fence', 'run', '--role', 'cron', '--unreachable-exit', '0', '--config', config, ...cmd]);
    t.equal(zero.code, 0, '--unreachable-exit overrides it');
    t.notOk(existsSync(marker), 'nothing ran without the agent');
    mkdirSync(join(dir, 'c2'));
    const refused = await hq([
      'fence',
      'check',
      '--role',
      'cron',
      '--config',
      writeConfig(join(dir, 'c2'), { socketPath: join(dir, 'c2', 'none.sock') }),
    ]);
    t.match(refused.stderr, /could not ask the agent: no agent socket at/, 'fence check names the cause too');
  },
);

t.test(
  "as a user outside the socket's group, or who may not read the config, the cause is the permission (EACCES)",
  async (t) => {
    if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
      t.skip('needs root to run hq as another user (nobody)');
      return;
    }
    const { dir, config } = await setup(t);
    chmodSync(dir, 0o755);
    chmodSync(config, 0o644);
    chmodSync(join(dir, 'agent.sock'), 0o600);
    const asNobody = (args: string[]) => hq(args, { uid: 65534, gid: 65534, env: { HOME: dir, USER: 'nobody' } });
    const sock = await asNobody(['fence', 'run', '--role', 'cron', '--config', config, '--', 'true']);
    t.equal(sock.code, 69, `a socket it may not open: exit 69 (${sock.stderr.trim()})`);
    t.match(
      sock.stderr,
      /this user may not use the agent's socket \S+ \(EACCES\): add nobody to its group/,
      'says it is the permission, not that the agent is down',
    );
    const check = await asNobody(['fence', 'check', '--role', 'cron', '--config', config]);
    t.equal(check.code, 1, `hq fence check as that user: 1, the skip (${check.stderr.trim()})`);
    t.match(
      check.stderr,
      /^hq fence check: skip: could not ask the agent: this user may not use the agent's socket \S+ \(EACCES\): add nobody to its group/,
      'naming the permission too',
    );
    chmodSync(config, 0o600);
    const conf = await asNobody(['fence', 'run', '--role', 'cron', '--config', config, '--', 'true']);
    t.equal(conf.code, 2, 'an unreadable config is a config error (exit 2)');
    t.match(
      conf.stderr,
      /config file \S+agent\.json cannot be read by this user \(EACCES/,
      'named as unreadable, not as missing',
    );
    t.notMatch(conf.stderr, /does not exist/, 'never "does not exist"');
  },
);

t.test(
  'hq fence check that cannot ask the agent exits 1 (skip), and its one line names the cause as hq fence run does',
  async (t) => {
    const dir = shortDir(t);
    const lines = (r: { stderr: string }): string[] => r.stderr.split('\n').filter((l) => l !== '');
    // No socket at all.
    const config = writeConfig(dir);
    const none = await hq(['fence', 'check', '--role', 'cron', '--config', config]);
    t.equal(none.code, 1, 'no socket: 1, the skip (hq fence run would exit 69)');
    t.match(
      lines(none),
      [
        /^hq fence check: skip: could not ask the agent: no agent socket at \S+agent\.sock \(ENOENT; socketPath from \S+agent\.json\): the agent is not running/,
      ],
      'one line: no socket, and which config named it',
    );
    // A socket file nothing listens on: an agent killed without cleaning up.
    const sock = join(dir, 'agent.sock');
    const child = spawn(
      process.execPath,
      ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => console.log('up'))`],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    await new Promise<void>((r) => child.stdout.once('data', () => r()));
    child.kill('SIGKILL');
    await new Promise<void>((r) => child.once('exit', () => r()));
    t.ok(existsSync(sock), 'the dead listener left its socket file');
    const stale = await hq(['fence', 'check', '--role', 'cron', '--config', config]);
    t.equal(stale.code, 1, 'nothing listening: 1');
    t.match(
      lines(stale),
      [
        /^hq fence check: skip: could not ask the agent: nothing listens on \S+agent\.sock \(ECONNREFUSED\): the agent stopped; start it$/,
      ],
      'one line: nothing listens',
    );
    // No config file anywhere: the default socket, said to be the default.
    const home = join(dir, 'home');
    mkdirSync(home);
    const noConfig = await hq(['fence', 'check', '--role', 'cron'], { env: { HOME: home, HQ_CONFIG: '' } });
    t.equal(noConfig.code, 1, 'no config: 1');
    t.match(
      lines(noConfig),
      [
        /could not ask the agent: no agent socket at \S+ \(ENOENT; no config file was found, so the default socketPath is used\)/,
      ],
      'one line: no config file was found',
    );
    const json = await hq(['fence', 'check', '--role', 'cron', '--json', '--config', config]);
    t.match(
      JSON.parse(json.stdout),
      { run: false, reason: 'agent-unreachable' },
      "--json says it could not ask, not another host's turn",
    );
  },
);

t.test(
  "a step-down's nudge that comes while the supervisor tells the agent its child is gone does not kill the supervisor",
  async (t) => {
    const { config, agent } = await setup(t);
    agent.runs = {
      supervisors: [],
      // The agent steps down just as the run ends: it still knows the run, so it nudges (SIGUSR2).
      onDone: async (pid) => {
        process.kill(pid, 'SIGUSR2');
        await sleep(200);
      },
    };
    const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', node, '-e', 'process.exit(7)']);
    t.equal(agent.runs.supervisors.length, 1, 'the run was registered');
    t.equal(r.code, 7, `the child's exit code, not 140 (128 + SIGUSR2) (${r.stderr.trim()})`);
  },
);

t.test('the lost line rounds the grace to a tenth of a second', async (t) => {
  const { quietLine } = await import('../../apps/agent/src/cli/fence.js');
  const line = quietLine('lost', {
    role: 'cron',
    reason: 'not-holder',
    generation: 4,
    graceSeconds: 3.7407857796102917,
  });
  t.equal(
    line,
    'hq fence run: lost the fence for role cron (not-holder, generation 4): stopping CMD with SIGTERM, SIGKILL after 3.7 s\n',
    '3.7 s, not 3.7407857796102917 s',
  );
});
