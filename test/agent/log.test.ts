/**
 * The agent's and the arbiter's log lines have one shape: `time` in epoch
 * milliseconds, `name`, `pid`, and `category`, `event`, `host` each exactly once. The raw JSON
 * text is checked, since JSON.parse keeps only the last of two equal keys.
 */
import t from 'tap';
import { agentLogger, componentLogger } from '../../apps/agent/src/daemon/log.js';
import { arbiterLogger } from '../../apps/arbiter/src/log.js';
import { cliLine } from '../../apps/agent/src/cli/log-line.js';

function sink(): { lines: string[]; write(s: string): void } {
  const lines: string[] = [];
  return { lines, write: (s: string) => void lines.push(...s.split('\n').filter((l) => l !== '')) };
}

function count(line: string, key: string): number {
  return line.split(`"${key}":`).length - 1;
}

t.test('an agent component line carries category, host and a numeric time exactly once', async (t) => {
  const out = sink();
  const root = agentLogger('mbp', out);
  const standby = componentLogger(root, 'mbp', 'standby', 'hq.standby');
  standby.info({ category: 'hq.standby', event: 'push-accepted', generation: 3 }, 'push accepted');
  standby.info({ event: 'no-category-given' }, 'defaults apply');
  componentLogger(root, 'mbp', 'agent').info({ category: 'hq.fence', event: 'allowed', host: 'node-b' }, 'allowed');
  root.info({ category: 'hq.lease', event: 'agent-started' }, 'agent started');
  t.equal(out.lines.length, 4, 'four lines were written');
  for (const line of out.lines) {
    t.equal(count(line, 'category'), 1, `exactly one "category" key: ${line}`);
    t.equal(count(line, 'host'), 1, `exactly one "host" key: ${line}`);
    t.equal(count(line, 'time'), 1, `exactly one "time" key: ${line}`);
    const o = JSON.parse(line) as Record<string, unknown>;
    t.type(o['time'], 'number', `time is epoch milliseconds, not an ISO string: ${line}`);
    t.ok(Math.abs((o['time'] as number) - Date.now()) < 60_000, 'and it is now');
    t.equal(o['name'], 'hq-agent', 'the daemon names itself');
    t.equal(o['pid'], process.pid, 'and its pid');
  }
  const [first, second, third] = out.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(
    first,
    { category: 'hq.standby', event: 'push-accepted', component: 'standby', host: 'mbp' },
    "the component's category and this host",
  );
  t.match(
    second,
    { category: 'hq.standby', event: 'no-category-given' },
    "a line without a category gets its component's",
  );
  t.match(third, { category: 'hq.fence', host: 'node-b' }, "a line's own category and host win over the defaults");
});

t.test('the arbiter writes the same shape', async (t) => {
  const agentOut = sink();
  const arbiterOut = sink();
  componentLogger(agentLogger('mbp', agentOut), 'mbp', 'agent').info(
    { category: 'hq.lease', event: 'renewed', host: 'mbp', generation: 2 },
    'renewed',
  );
  arbiterLogger(arbiterOut)
    .child({ component: 'lease' })
    .info({ category: 'hq.lease', event: 'renewed', host: 'mbp', generation: 2 }, 'renewed');
  const a = JSON.parse(agentOut.lines[0] as string) as Record<string, unknown>;
  const b = JSON.parse(arbiterOut.lines[0] as string) as Record<string, unknown>;
  t.same(Object.keys(a).sort(), Object.keys(b).sort(), `the same keys on both sides (${Object.keys(b).join(', ')})`);
  t.type(b['time'], 'number', "the arbiter's time is epoch milliseconds too");
  t.equal(count(arbiterOut.lines[0] as string, 'host'), 1, 'no second host from a hostname binding');
});

t.test("the CLI's own lines have the daemons' shape", async (t) => {
  const out = sink();
  agentLogger('mbp', out).info({ category: 'hq.fence', event: 'allowed' }, 'allowed');
  const daemon = JSON.parse(out.lines[0] as string) as Record<string, unknown>;
  const text = cliLine(
    'hq.fence',
    'lost',
    { role: 'cron', reason: 'not-holder', generation: 3 },
    'warn',
    1_796_000_000_123,
  );
  t.ok(text.endsWith('}\n') && text.split('\n').length === 2, 'one line');
  const line = text.trimEnd();
  for (const key of ['time', 'level', 'pid', 'name', 'category', 'event'])
    t.equal(count(line, key), 1, `exactly one "${key}" key: ${line}`);
  const o = JSON.parse(line) as Record<string, unknown>;
  t.equal(o['time'], 1_796_000_000_123, 'time is epoch milliseconds, as the daemons write it');
  t.type(daemon['time'], 'number');
  t.equal(o['level'], 40, 'a lost fence is a warning (pino level 40)');
  t.equal(
    JSON.parse(cliLine('hq.fence', 'allowed', {}, 'info', 1_796_000_000_123)).level,
    daemon['level'],
    'an ordinary line has the info level the daemon uses',
  );
  t.match(o, {
    pid: process.pid,
    name: 'hq',
    category: 'hq.fence',
    event: 'lost',
    role: 'cron',
    reason: 'not-holder',
    generation: 3,
  });
  const shared = ['level', 'time', 'pid', 'name', 'category', 'event'];
  t.same(
    shared.filter((k) => k in daemon),
    shared,
    'the daemon line has the same head keys',
  );
});
