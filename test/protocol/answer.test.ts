import t from 'tap';
import {
  eventsOf,
  fieldsOf,
  generationField,
  isAgentHeartbeatOutcome,
  isEventRecord,
  isGeneration,
  readHeartbeatAnswer,
  stringField,
} from '../../packages/protocol/src/index.js';

t.test('fieldsOf: an object gives its fields, anything else none', async (t) => {
  const body = { message: 'no', n: 1 };
  t.equal(fieldsOf(body), body, 'an object is read as it is');
  for (const v of [null, undefined, 'text', 3, ['message']])
    t.same(fieldsOf(v), {}, `${JSON.stringify(v) ?? 'undefined'} has no fields`);
  t.ok(Object.isFrozen(fieldsOf(null)), 'the empty fields cannot be written to');
});

t.test('stringField and generationField take a well-formed field only', async (t) => {
  t.equal(stringField({ message: 'no' }, 'message'), 'no');
  t.equal(stringField({ message: 7 }, 'message'), null, 'a number is not a string');
  t.equal(stringField(null, 'message'), null, 'no body, no field');
  t.equal(generationField({ generation: 0 }, 'generation'), 0, '0 is a generation (none seen)');
  t.equal(generationField({ generation: 12 }, 'generation'), 12);
  for (const g of [-1, 1.5, 2 ** 53, '3', null])
    t.equal(generationField({ generation: g }, 'generation'), null, `${JSON.stringify(g)} is not a generation`);
  t.equal(isGeneration(Number.MAX_SAFE_INTEGER), true, 'the largest safe integer is one');
});

t.test('readHeartbeatAnswer: a whole answer', async (t) => {
  const lease = { holder: 'mbp', generation: 3 };
  const a = readHeartbeatAnswer({
    outcome: 'renewed',
    lease,
    hold: 1700000000.5,
    timingProblems: [{ host: 'mbp', arbiterKey: 'ttlSeconds', agentKey: 'heartbeatSeconds', message: 'too slow' }],
    failover: 'worst case 90 s',
    reportInSeconds: 0,
    candidates: ['mbp', 'mini'],
    stepDown: 2,
  });
  t.same(a, {
    outcome: 'renewed',
    lease,
    hold: 1700000000.5,
    timingProblems: ['too slow'],
    failover: 'worst case 90 s',
    reportInSeconds: 0,
    candidates: ['mbp', 'mini'],
    stepDown: 2,
  });
});

t.test('readHeartbeatAnswer: each odd field costs only itself', async (t) => {
  const a = readHeartbeatAnswer({
    outcome: 'standby',
    hold: Number.POSITIVE_INFINITY,
    timingProblems: [{ message: 'kept' }, { message: 3 }, null, 'bare'],
    failover: 5,
    reportInSeconds: -1,
    candidates: ['mbp', 7],
    stepDown: 0,
  });
  t.same(a, {
    outcome: 'standby',
    lease: undefined,
    hold: null,
    timingProblems: ['kept'],
    failover: null,
    reportInSeconds: null,
    candidates: null,
    stepDown: null,
  });
  t.same(
    readHeartbeatAnswer({ reportInSeconds: Number.NaN, stepDown: 1.5, timingProblems: 'none', candidates: 'mbp' })
      .timingProblems,
    [],
    'problems that are not a list are none',
  );
  const b = readHeartbeatAnswer({ reportInSeconds: Number.NaN, stepDown: 1.5, hold: '1' });
  t.same(
    [b.reportInSeconds, b.stepDown, b.hold, b.candidates],
    [null, null, null, null],
    'NaN, a fraction and a string are refused',
  );
  t.same(
    readHeartbeatAnswer(null),
    {
      outcome: undefined,
      lease: undefined,
      hold: null,
      timingProblems: [],
      failover: null,
      reportInSeconds: null,
      candidates: null,
      stepDown: null,
    },
    'no body: nothing taken',
  );
});

t.test("isAgentHeartbeatOutcome: the arbiter's four outcomes and the agent's three", async (t) => {
  for (const o of ['renewed', 'standby', 'no-lease', 'renew-refused', 'unreachable', 'refused', 'invalid-answer'])
    t.ok(isAgentHeartbeatOutcome(o), o);
  for (const o of ['held', '', null, 1]) t.notOk(isAgentHeartbeatOutcome(o), `${JSON.stringify(o)} is no outcome`);
});

t.test('eventsOf keeps the rows that are events', async (t) => {
  const good = { id: 1, at: 1700000000, category: 'hq.lease', event: 'granted', host: 'mbp', data: {} };
  const noHost = { ...good, id: 2, host: null };
  t.same(eventsOf({ events: [good, noHost] }), [good, noHost]);
  const bad = [
    { ...good, id: 1.5 },
    { ...good, at: '1' },
    { ...good, category: 1 },
    { ...good, event: null },
    { ...good, host: 3 },
    { ...good, data: null },
    { ...good, data: 'x' },
    null,
  ];
  for (const b of bad) t.notOk(isEventRecord(b), `${JSON.stringify(b)} is not an event`);
  t.same(eventsOf({ events: bad }), [], 'every odd row is left out');
  t.same(eventsOf({ events: 'none' }), [], 'events that are not a list are none');
  t.same(eventsOf(null), [], 'no body, no events');
});
