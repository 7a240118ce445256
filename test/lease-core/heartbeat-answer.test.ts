/**
 * lease-core `heartbeatAnswer`: the heartbeat's whole answer, from the decision, the state it
 * writes and the boot it leaves, the report and the timing alone.
 */
import t from 'tap';
import {
  emptyLease,
  heartbeat,
  heartbeatAnswer,
  newBoot,
  recordOf,
  renewHold,
  stateFailover,
  reportedTiming,
  crossTiming,
} from '../../packages/lease-core/src/index.js';
import type {
  ArbiterSettings,
  ArbiterState,
  Boot,
  Context,
  LeaseTiming,
  Observer,
} from '../../packages/lease-core/src/index.js';

const S: ArbiterSettings = {
  arbiter: 'cloud-vm',
  candidates: ['mbp', 'node-b'],
  ttlSeconds: 100,
  safetyMarginSeconds: 10,
  promoteAfterChecks: 2,
  viewFreshSeconds: 50,
};
const TIMING: LeaseTiming = {
  ttlSeconds: 100,
  safetyMarginSeconds: 10,
  checkSeconds: 30,
  viewFreshSeconds: 50,
  promoteAfterChecks: 2,
  probeTimeoutSeconds: 5,
};
const NO_OBSERVER: Observer = {
  view: null,
  confirmation: null,
  lastHeartbeatAt: null,
  heartbeatSeconds: null,
  refreshSeconds: null,
  requestTimeoutSeconds: null,
};
const ctx = (now: number, boot: Boot = newBoot(0)): Context => ({ now, boot, settings: S });
const held = (): ArbiterState => ({
  lease: {
    ...emptyLease(100),
    holder: 'mbp',
    generation: 3,
    revision: 5,
    acquiredAt: 900,
    renewedAt: 950,
    expiresAt: 1050,
    notBefore: 900,
  },
  observers: new Map([['node-b', { ...NO_OBSERVER, heartbeatSeconds: 20 }]]),
  floor: 3,
});

/** The decision, and the whole answer the route derives from it after the commit. */
const answered = (state: ArbiterState, c: Context, body: Parameters<typeof heartbeat>[2]) => {
  const step = heartbeat(state, c, body);
  return { ...step, answer: heartbeatAnswer(step.answer, step.next, { ...c, boot: step.boot }, body, TIMING) };
};

t.test('the whole answer is the decision and what its state and boot imply', async (t) => {
  const c = ctx(1000);
  const body = { host: 'mbp', generation: 3, seenGeneration: 3, heartbeatSeconds: 10, requestTimeoutSeconds: 5 };
  const step = answered(held(), c, body);
  const bare = heartbeat(held(), c, body);
  t.same(step.next, bare.next, 'the same state as the bare decision');
  t.same(step.events, bare.events, 'the same events');
  const after = { ...c, boot: step.boot };
  t.same(
    step.answer,
    {
      ...bare.answer,
      lease: recordOf(step.next, after),
      hold: renewHold(after, step.boot, step.next),
      timingProblems: [],
      failover: stateFailover(step.next, S.candidates, TIMING).text,
      candidates: ['mbp', 'node-b'],
      stepDown: null,
    },
    'outcome, reason and report time as decided; the rest from the state written',
  );
  t.equal(step.answer.outcome, 'renewed', 'the holder renews');
  t.equal(step.answer.lease.renewedAt, 1000, 'the record is the one written, not the one read');
  t.match(step.answer.failover, /one heartbeat 20 s/, 'the failover counts the standby reported interval');
});

t.test('timing problems: the ones this report states, none for a non-candidate', async (t) => {
  const slow = { host: 'node-b', seenGeneration: 3, heartbeatSeconds: 60, requestTimeoutSeconds: 5 };
  const one = answered(held(), ctx(1000), slow).answer;
  t.equal(one.timingProblems.length, 1, 'a heartbeat slower than viewFreshSeconds is a problem');
  t.equal(one.timingProblems[0]?.agentKey, 'heartbeatCron', 'named by its key');
  const again = answered(held(), ctx(1001), slow).answer;
  t.equal(again.timingProblems, one.timingProblems, 'the same report shares one frozen array');
  const stranger = answered(held(), ctx(1000), { ...slow, host: 'laptop' }).answer;
  t.same(
    [stranger.outcome, stranger.reason, stranger.timingProblems],
    ['renew-refused', 'not-candidate', []],
    'a non-candidate is refused and has no timing problems',
  );
});

t.test('the record before the first grant shows the configured timing', async (t) => {
  const fresh: ArbiterState = { lease: emptyLease(0), observers: new Map(), floor: 0 };
  const r = recordOf(fresh, ctx(1000));
  t.same([r.ttlSeconds, r.safetyMarginSeconds], [100, 10], 'the configured ttl and margin');
});

t.test('the remembered problems and failovers stay bounded and right past their limits', async (t) => {
  for (let hb = 1; hb <= 300; hb++) {
    const problems = reportedTiming('cloud-vm', TIMING, 'mbp', { heartbeatSeconds: hb });
    if (hb % 50 === 0) t.same(problems, crossTiming('cloud-vm', TIMING, 'mbp', { heartbeatSeconds: hb }), `${hb} s`);
  }
  const base = held();
  for (let hb = 1; hb <= 100; hb++) {
    const observers = new Map([['node-b', { ...NO_OBSERVER, heartbeatSeconds: hb }]]);
    const f = stateFailover({ ...base, observers }, S.candidates, TIMING);
    if (hb % 25 === 0) t.equal(f.heartbeatSeconds, hb, `the failover of a ${hb} s standby`);
  }
});
