/**
 * `hq fence run --follow` as a command: its usage errors (exit 2, one line), an unknown role
 * while the agent is down (exit 2: the config says so), and a follower that waits for an agent
 * that is not there and ends 0 on SIGTERM.
 */
import t from 'tap';
import { hq, shortDir, sleep, writeConfig } from './helpers.js';

t.test('usage errors are one line and exit 2', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const cases: [string[], RegExp][] = [
    [['--restart', 'always'], /^hq fence run: --restart needs --follow\n$/],
    [
      ['--follow', '--restart', 'sometimes'],
      /^hq fence run: --restart must be one of on-failure, always, never \(got "sometimes"\)\n$/,
    ],
    [
      ['--follow', '--skip-exit', '3'],
      /^hq fence run: --skip-exit does not go with --follow: a follower waits instead of skipping\n$/,
    ],
  ];
  for (const [flags, line] of cases) {
    const r = await hq(['fence', 'run', '--role', 'cron', ...flags, '--config', config, '--', 'true']);
    t.equal(r.code, 2, `${flags.join(' ')}: exit 2`);
    t.match(r.stderr, line, `${flags.join(' ')}: one line saying what to fix`);
  }
});

t.test('an unknown role with the agent down is exit 2, from the config', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const r = await hq(['fence', 'run', '--follow', '--role', 'nope', '--config', config, '--', 'true']);
  t.equal(r.code, 2, 'exit 2');
  t.match(r.stderr, /unknown role "nope"/, 'it names the role');
});

t.test('with no agent the follower waits, and SIGTERM ends it with 0', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  let pid = 0;
  const run = hq(['fence', 'run', '--follow', '--role', 'cron', '--config', config, '--', 'true'], {
    onSpawn: (p) => (pid = p),
  });
  await sleep(2_500);
  process.kill(pid, 'SIGTERM');
  const r = await run;
  t.equal(r.code, 0, 'exit 0 on SIGTERM');
  t.match(
    r.stderr,
    /hq fence run: waiting: no agent socket at \S+agent\.sock \(ENOENT; socketPath from \S+\): the agent is not running/,
    'it said once that it waits for the agent',
  );
  t.ok(r.stderr.split('\n').filter((l) => l.includes('waiting')).length <= 2, 'without repeating it every retry');
});
