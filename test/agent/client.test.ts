/**
 * `@hq/agent/client` with a manual clock and timers and a fake agent (its transport): a tenure's
 * signal aborts before the validity it was given ends when the agent falls silent, at once on a
 * loss the long poll reports, never while renewed answers keep coming; `fence()` answers once.
 */
import t from 'tap';
import type { FenceDecision } from '../../packages/protocol/src/fence.js';
import { fence, tenures, TenureEnded, type Transport } from '../../apps/agent/src/client/index.js';
import { FakeTime, flush } from '../registry/fake-time.js';

const RUN: FenceDecision = {
  run: true,
  reason: 'holder',
  generation: 4,
  holder: 'mbp',
  role: 'telegram-poller',
  validForSeconds: 10,
};
const LOST: FenceDecision = {
  run: false,
  reason: 'not-holder',
  generation: 5,
  holder: 'node-b',
  role: 'telegram-poller',
  validForSeconds: null,
};

/** An agent in memory: its decision, long polls answered when it changes or their wait ends, and a switch to fall silent. */
class FakeAgent {
  decision: FenceDecision = RUN;
  silent = false;
  plain = 0;
  polls = 0;
  private waiting: { seen: URLSearchParams; done: () => void }[] = [];
  constructor(private readonly time: FakeTime) {}

  /** The decision as a query made now sees it: validity counted from now (the agent renews). */
  private now(): FenceDecision {
    return this.decision;
  }

  private differs(q: URLSearchParams): boolean {
    return (
      q.get('run') !== String(this.decision.run) ||
      q.get('reason') !== this.decision.reason ||
      q.get('generation') !== String(this.decision.generation)
    );
  }

  set(d: FenceDecision): void {
    this.decision = d;
    for (const w of [...this.waiting]) if (this.differs(w.seen)) w.done();
  }

  /** Long polls answer 400, as an agent without them. */
  noLongPolls = false;

  readonly transport: Transport = (path, _timeout, signal) => {
    if (this.silent) return Promise.resolve(null);
    const q = new URL(path, 'http://agent').searchParams;
    if (!q.has('wait')) {
      this.plain++;
      return Promise.resolve({ status: 200, body: this.now() });
    }
    this.polls++;
    if (this.noLongPolls)
      return Promise.resolve({
        status: 400,
        body: { error: 'HQ_ERR_BAD_REQUEST', message: 'querystring must NOT have additional properties' },
      });
    if (this.differs(q)) return Promise.resolve({ status: 200, body: this.now() });
    return new Promise((resolve) => {
      const w = {
        seen: q,
        done: (gaveUp = false) => {
          this.waiting = this.waiting.filter((x) => x !== w);
          this.time.clear(h);
          resolve(this.silent || gaveUp ? null : { status: 200, body: this.now() });
        },
      };
      const h = this.time.set(() => w.done(), Number(q.get('wait')) * 1000);
      this.waiting.push(w);
      signal?.addEventListener('abort', () => w.done(true), { once: true });
    });
  };
}

async function firstTenure(time: FakeTime, agent: FakeAgent, opts: { stopBeforeSeconds?: number } = {}) {
  const it = tenures('telegram-poller', { transport: agent.transport, clock: time.clock, timers: time, ...opts });
  const next = it.next();
  await flush();
  const r = await next;
  if (r.done === true) throw new Error('no tenure');
  return { it, tenure: r.value };
}

t.test('a tenure carries the generation and holder of the answer', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  t.same(
    { generation: tenure.generation, holder: tenure.holder },
    { generation: 4, holder: 'mbp' },
    'generation 4, held by mbp',
  );
  t.equal(tenure.signal.aborted, false, 'its signal has not aborted');
  await it.return();
  t.equal(tenure.signal.aborted, true, 'ending the loop aborts it');
});

t.test(
  'the agent falls silent: the signal aborts stopBeforeSeconds before the validity of the last answer ends, not earlier',
  async (t) => {
    const time = new FakeTime();
    const agent = new FakeAgent(time);
    const { it, tenure } = await firstTenure(time, agent, { stopBeforeSeconds: 1 });
    agent.silent = true;
    await time.advance(8_999);
    t.equal(tenure.signal.aborted, false, 'still running 8.999 s into a 10 s validity');
    await time.advance(1);
    t.equal(tenure.signal.aborted, true, 'aborted at 9 s: 1 s before the validity ends');
    t.ok(
      tenure.signal.reason instanceof TenureEnded && tenure.signal.reason.why === 'validity',
      'the reason says the validity ran out',
    );
    await it.return();
  },
);

t.test('a loss the long poll reports aborts the signal at once, without waiting for a re-check', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  await time.advance(3_000);
  t.equal(tenure.signal.aborted, false, 'running at 3 s');
  const plainBefore = agent.plain;
  agent.set(LOST);
  await flush();
  t.equal(tenure.signal.aborted, true, 'aborted in the same instant the agent said not-holder');
  t.ok(tenure.signal.reason instanceof TenureEnded && tenure.signal.reason.why === 'lost', 'the reason says lost');
  t.equal(agent.plain, plainBefore + 1, 'one plain query confirmed the loss');
  await it.return();
});

t.test(
  'answers that renew the validity keep the tenure running past its first validity, with no polling storm',
  async (t) => {
    const time = new FakeTime();
    const agent = new FakeAgent(time);
    const { it, tenure } = await firstTenure(time, agent, { stopBeforeSeconds: 1 });
    await time.advance(60_000);
    t.equal(tenure.signal.aborted, false, 'still running after 60 s of 10 s validities renewed');
    t.ok(agent.plain + agent.polls < 60, `${agent.plain} plain queries and ${agent.polls} long polls in 60 s`);
    await it.return();
  },
);

t.test('a generation change under a run: true answer is a loss', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  agent.set({ ...RUN, generation: 6 });
  await flush();
  t.equal(tenure.signal.aborted, true, 'generation 6 is not the tenure of generation 4');
  await it.return();
});

t.test('after a loss the next tenure comes when this host may run again, with the new generation', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  agent.set(LOST);
  await flush();
  t.equal(tenure.signal.aborted, true, 'the first tenure ended');
  const next = it.next();
  await time.advance(5_000);
  let got: number | null = null;
  void next.then((r) => (got = r.done === true ? -1 : r.value.generation));
  await flush();
  t.equal(got, null, 'no tenure while another host holds');
  agent.set({ ...RUN, generation: 7 });
  await flush();
  t.equal(got, 7, 'the next tenure starts at generation 7 as soon as the agent says run');
  await it.return();
});

t.test('fence() answers once: the decision, or agent-unreachable', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  t.same(await fence('telegram-poller', { transport: agent.transport }), RUN, 'the agent’s decision');
  agent.silent = true;
  t.match(
    await fence('telegram-poller', { transport: agent.transport }),
    { run: false, reason: 'agent-unreachable', generation: null },
    'no answer: skip',
  );
  const bad: Transport = async () => ({ status: 400, body: { error: 'unknown-role', message: 'unknown role "x"' } });
  await t.rejects(
    fence('x', { transport: bad }),
    { name: 'UnknownRole', message: 'unknown role "x"' },
    'an unknown role is an error to fix',
  );
});

t.test('an agent without long polls: the tenure re-checks on its schedule, never in a tight loop', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  agent.noLongPolls = true;
  await time.advance(60_000);
  t.equal(tenure.signal.aborted, false, 'still running on plain re-checks');
  t.ok(agent.plain + agent.polls < 40, `${agent.plain} plain queries and ${agent.polls} refused long polls in 60 s`);
  await it.return();
});

t.test('ending the loop leaves no timer and no request behind (a program can exit)', async (t) => {
  const time = new FakeTime();
  const agent = new FakeAgent(time);
  const { it, tenure } = await firstTenure(time, agent);
  await time.advance(2_000);
  t.ok(time.pending().length > 0, 'while it runs: its abort timer and a long poll');
  await it.return();
  await flush();
  t.equal(tenure.signal.aborted, true, 'the tenure ended');
  t.same(time.pending(), [], 'no timer left');
  t.equal((agent as unknown as { waiting: unknown[] }).waiting.length, 0, 'no long poll left');
});
