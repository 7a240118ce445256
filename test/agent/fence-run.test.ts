/**
 * `hq fence run` with real child processes and real signals, against a fake agent socket whose
 * fence answer the test changes while the child runs.
 */
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
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
  t.match(v.stderr, /"event":"skipped","role":"cron","reason":"not-holder"/, '--verbose logs the skip as one JSON line');
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
  t.match(flag.stderr, /^hq fence run: unexpected argument "ls": put the command after --/, "CMD's own flags are not taken for unknown flags of ours");
  t.notOk(existsSync(join(dir, 'ran')), 'nothing ran');
});

t.test("the child's exit code is passed through and it gets HQ_GENERATION (also as ELANOUS_HQ_GENERATION), HQ_HOLDER and HQ_ROLE", async (t) => {
  const { dir, config } = await setup(t);
  const out = join(dir, 'env.json');
  const code = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({g: process.env.HQ_GENERATION, e: process.env.ELANOUS_HQ_GENERATION, h: process.env.HQ_HOLDER, r: process.env.HQ_ROLE, pgid: process.pid})); process.exit(7)`;
  const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', node, '-e', code]);
  t.equal(r.code, 7, "the supervisor exits with the child's code");
  const env = JSON.parse(readFileSync(out, 'utf8')) as { g: string; e: string; h: string; r: string };
  t.same({ g: env.g, h: env.h, r: env.r }, { g: '3', h: 'mbp', r: 'cron' }, 'the child sees the fence in its environment');
  t.equal(env.e, '3', "the old system's name carries the same generation, for jobs not yet changed");
});

t.test('a child killed by a signal gives 128 + the signal number', async (t) => {
  const { config } = await setup(t);
  const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', node, '-e', "process.kill(process.pid, 'SIGKILL')"]);
  t.equal(r.code, 128 + 9, 'a child that dies of SIGKILL (9) gives 137');
});

t.test('the command is executed without a shell', async (t) => {
  const { dir, config } = await setup(t);
  const r = await hq(['fence', 'run', '--role', 'cron', '--config', config, '--', 'echo', '$HOME;', 'touch', join(dir, 'pwned')]);
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
  const p = hq(['fence', 'run', '--role', 'cron', '--recheck', '0.3', '--grace', '3', '--config', config, '--', node, '-e', code]);
  while (!existsSync(started)) await sleep(50);
  agent.answer = { run: false, reason: 'not-holder', generation: 4, holder: 'node-b', validForSeconds: null };
  const r = await p;
  t.equal(r.code, 75, 'the supervisor exits 75 when it stopped the child');
  t.equal(readFileSync(marker, 'utf8'), 'TERM', 'the child got SIGTERM');
  t.equal(r.stderr, 'hq fence run: lost the fence for role cron (not-holder, generation 3): stopping CMD with SIGTERM, SIGKILL after 3 s\n', 'the loss is one line with its reason, without --verbose');
});

t.test('a change of generation counts as a loss even when the answer still says run', async (t) => {
  const { dir, config, agent } = await setup(t);
  const started = join(dir, 'started');
  const p = hq(['fence', 'run', '--role', 'cron', '--recheck', '0.3', '--config', config, '--', node, '-e', `require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`]);
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
  const p = hq(['fence', 'run', '--verbose', '--role', 'cron', '--recheck', '0.3', '--grace', '1', '--config', config, '--', node, '-e', code]);
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
  const p = hq(['fence', 'run', '--role', 'cron', '--recheck', '30', '--grace', '5', '--config', config, '--', node, '-e', code]);
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
  const p = hq(['fence', 'run', '--role', 'cron', '--recheck', '60', '--grace', '0.5', '--config', config, '--', node, '-e', `require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setTimeout(() => {}, 4000);`]);
  while (!existsSync(started)) await sleep(50);
  const before = agent.queries;
  const r = await p;
  t.equal(r.code, 0, 'the child ran to its end: every deadline re-check was answered with run');
  t.ok(agent.queries - before >= 2, `it re-checked ahead of the deadlines (${agent.queries - before} re-checks in 4 s with --recheck 60)`);
});

t.test('TERM sent to the supervisor is forwarded to the child, whose exit code is kept', async (t) => {
  const { dir, config } = await setup(t);
  const started = join(dir, 'started');
  const code = `process.on('SIGTERM', () => process.exit(3)); require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
  let pid = 0;
  const p = hq(['fence', 'run', '--verbose', '--role', 'cron', '--config', config, '--', node, '-e', code], { onSpawn: (n) => (pid = n) });
  while (!existsSync(started)) await sleep(50);
  process.kill(pid, 'SIGTERM');
  const r = await p;
  t.equal(r.code, 3, "the child's own code after a forwarded TERM");
  t.match(r.stderr, /signal-forwarded/, 'the forwarding is logged');
});

t.test('an unknown role exits 2 and a missing agent is a skip', async (t) => {
  const { dir, config, agent } = await setup(t);
  const bad = await hq(['fence', 'run', '--role', 'nope', '--config', config, '--', 'true']);
  t.equal(bad.code, 2, 'unknown role → 2');
  await agent.close();
  const down = await hq(['fence', 'run', '--role', 'cron', '--skip-exit', '5', '--config', config, '--', node, '-e', `require('fs').writeFileSync(${JSON.stringify(join(dir, 'x'))}, 'x')`]);
  t.equal(down.code, 5, 'no agent → skip');
  t.match(down.stderr, /^hq fence run: skip: the agent is not answering on .*; nothing runs without the agent\n$/, 'an unreachable agent is one line even without --verbose');
  t.notOk(existsSync(join(dir, 'x')), 'nothing ran without the agent');
});

t.test("a step-down's nudge that comes while the supervisor tells the agent its child is gone does not kill the supervisor", async (t) => {
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
});
