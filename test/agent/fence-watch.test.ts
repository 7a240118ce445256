/**
 * The fence's long poll on the agent's socket, `GET /v1/fence?role=R&wait=S&run=…&reason=…&generation=…`:
 * it answers at once when the decision differs from the one named, else when a commit changes it
 * or when the validity the decision rests on runs out (a timer at that boundary, no polling), else
 * when the wait ends; the listener's close answers it at once; malformed long polls are refused.
 * A real agent on a real socket against a fake arbiter; its clock and the long polls' timers are
 * the test's.
 */
import t, { type Test } from 'tap';
import { join } from 'node:path';
import type { Stamp } from '@hq/lease-core';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { listenSocket, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { nextBoundarySeconds } from '../../apps/agent/src/daemon/fence.js';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import { eventually, FakeTime, flush } from '../registry/fake-time.js';
import { agentSetup, shortDir } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

interface Answer {
  readonly status: number;
  readonly body: {
    run?: boolean;
    reason?: string;
    generation?: number;
    holder?: string | null;
    validForSeconds?: number | null;
    error?: string;
    message?: string;
  };
}

async function setup(t: Test, holder: string) {
  const dir = shortDir(t);
  const { arb, config } = await agentSetup(t, dir, { holder });
  const time = new FakeTime();
  const stamp = { wall: Date.now() / 1000, mono: 1000 };
  const clock = { now: (): Stamp => ({ ...stamp }) };
  const agent = await openAgent({ config, clock, log: silent, timers: time });
  const app = socketApp(agent, null);
  const socket = join(dir, 'run', 'a.sock');
  await listenSocket(app, socket, config.stateDir);
  let closed = false;
  t.teardown(async () => {
    await stopAgent(agent);
    if (!closed) await app.close();
  });
  const ask = async (path: string): Promise<Answer> => {
    const r = await callAgent(socket, 'GET', path, 10);
    if (r.kind !== 'answer') throw new Error(r.problem);
    return { status: r.status, body: r.body as Answer['body'] };
  };
  /** A long poll, and whether it has answered yet. */
  const poll = (path: string): { readonly answer: Promise<Answer>; answered(): boolean } => {
    let done = false;
    const answer = ask(path).then((a) => {
      done = true;
      return a;
    });
    return { answer, answered: () => done };
  };
  const close = async (): Promise<void> => {
    closed = true;
    await app.close();
  };
  return { arb, agent, time, stamp, ask, poll, close };
}

/** Until the agent holds `s`'s long poll (its way over the socket is real I/O, no timer of the test's). */
function parked(s: { agent: { fence: { waiting: number } } }): Promise<void> {
  return eventually('the long poll to wait', () => s.agent.fence.waiting === 1);
}

const waitPath = (d: { run: boolean; reason: string; generation: number }, wait = 30): string =>
  `/v1/fence?role=cron&wait=${wait}&run=${d.run}&reason=${d.reason}&generation=${d.generation}`;

t.test(
  'a decision other than the one named is answered at once; the same one waits for the change a commit makes',
  async (t) => {
    const s = await setup(t, 'node-b');
    await s.agent.link.heartbeat();
    const now = (await s.ask('/v1/fence?role=cron')).body;
    t.match(now, { run: false, reason: 'not-holder', holder: 'node-b' }, 'mbp is a standby');
    const stale = await s.ask(waitPath({ run: true, reason: 'holder', generation: 1 }));
    t.match(
      stale.body,
      { run: false, reason: 'not-holder' },
      'a caller that names run: true hears the standby decision at once',
    );
    const p = s.poll(waitPath({ run: false, reason: 'not-holder', generation: now.generation as number }));
    await parked(s);
    await flush();
    t.equal(p.answered(), false, 'the same decision: no answer yet');
    t.equal(s.agent.fence.waiting, 1, 'one long poll waits');
    t.same(s.time.pending(), [30_000], 'one timer only, its wait (no boundary ahead for a standby)');
    s.arb.generation = 2;
    await s.agent.link.heartbeat();
    const a = await p.answer;
    t.equal(a.body.generation, 2, 'the commit of generation 2 answers it, without the wait ending');
    t.equal(s.agent.fence.waiting, 0, 'nothing waits any more');
  },
);

t.test('with no change, the long poll answers when its wait ends, with the same decision', async (t) => {
  const s = await setup(t, 'node-b');
  await s.agent.link.heartbeat();
  const d = (await s.ask('/v1/fence?role=cron')).body;
  const p = s.poll(waitPath({ run: false, reason: 'not-holder', generation: d.generation as number }, 5));
  await parked(s);
  await s.time.advance(4_999);
  t.equal(s.agent.fence.waiting, 1, 'still waiting at 4.999 s');
  t.equal(p.answered(), false, 'not before 5 s');
  await s.time.advance(1);
  const a = await p.answer;
  t.match(a.body, { run: false, reason: 'not-holder' }, 'answered at 5 s with the unchanged decision');
});

t.test(
  'the holder’s long poll answers run: false when the validity runs out with no commit (a timer at the boundary)',
  async (t) => {
    const s = await setup(t, 'mbp');
    await s.agent.link.heartbeat();
    const d = (await s.ask('/v1/fence?role=cron')).body;
    t.match(d, { run: true, holder: 'mbp' }, 'mbp may run');
    const valid = d.validForSeconds as number;
    const p = s.poll(waitPath({ run: true, reason: d.reason as string, generation: d.generation as number }, 300));
    await parked(s);
    t.equal(s.time.pending().length, 2, 'two timers: the wait and the validity boundary');
    // The arbiter falls silent: no commit, only time passes.
    s.stamp.mono += valid + 0.01;
    s.stamp.wall += valid + 0.01;
    await s.time.advance(Math.ceil(valid * 1000) + 1);
    const a = await p.answer;
    t.equal(a.body.run, false, `answered run: false once the ${valid.toFixed(1)} s validity ended (${a.body.reason})`);
  },
);

t.test('the next boundary of a state: none for a standby, the validity left for a holder', async (t) => {
  const s = await setup(t, 'mbp');
  await s.agent.link.heartbeat();
  const d = (await s.ask('/v1/fence?role=cron')).body;
  const state = (s.agent as unknown as { store: { state: Parameters<typeof nextBoundarySeconds>[0] } }).store.state;
  const b = nextBoundarySeconds(state, { ...s.stamp });
  t.ok(
    b !== null && Math.abs(b - (d.validForSeconds as number)) < 0.01,
    `the boundary (${b}) is the validity left (${d.validForSeconds})`,
  );
});

t.test('closing the listener answers a waiting long poll at once', async (t) => {
  const s = await setup(t, 'node-b');
  await s.agent.link.heartbeat();
  const d = (await s.ask('/v1/fence?role=cron')).body;
  const p = s.poll(waitPath({ run: false, reason: 'not-holder', generation: d.generation as number }, 300));
  await parked(s);
  const t0 = Date.now();
  const closing = s.close();
  const a = await p.answer;
  const answeredMs = Date.now() - t0;
  await closing;
  const closedMs = Date.now() - t0;
  t.ok(
    closedMs < 2_000,
    `the listener closed in ${closedMs} ms (its connection is not left to the client's keep-alive)`,
  );
  t.match(a.body, { run: false, reason: 'not-holder' }, 'answered with the decision as it stands');
  t.ok(answeredMs < 2_000, `answered in ${answeredMs} ms, not after its 300 s wait`);
});

t.test('malformed long polls are refused with one line; an unknown role stays the unknown-role answer', async (t) => {
  const s = await setup(t, 'node-b');
  const cases: [string, RegExp][] = [
    ['/v1/fence?role=cron&wait=5', /wait, run, reason and generation together/],
    ['/v1/fence?role=cron&wait=301&run=true&reason=holder&generation=1', /wait must be at most 300 seconds/],
    ['/v1/fence?role=cron&wait=-1&run=true&reason=holder&generation=1', /wait/],
    ['/v1/fence?role=cron&wait=5&run=yes&reason=holder&generation=1', /run/],
    ['/v1/fence?role=cron&wait=5&run=true&reason=holder&generation=1.5', /generation/],
  ];
  for (const [path, message] of cases) {
    const r = await s.ask(path);
    t.equal(r.status, 400, `${path}: 400`);
    t.match(r.body.message ?? '', message, `${path}: says what to fix`);
  }
  const unknown = await s.ask('/v1/fence?role=nope&wait=5&run=true&reason=holder&generation=1');
  t.match(
    unknown,
    { status: 400, body: { error: 'HQ_ERR_UNKNOWN_ROLE' } },
    'an unknown role: the unknown-role error, at once',
  );
});
