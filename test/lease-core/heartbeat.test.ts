/**
 * The agent's heartbeat, decided in lease-core: whom a standby probes, what the heartbeat
 * reports (H1, H2), and whether the holder then asks its peers (H3).
 */
import t from 'tap';
import {
  arbiterDown,
  asksPeers,
  confirmationToReport,
  heartbeatContent,
  heartbeatProbe,
  initialAgent,
  onArbiterAnswer,
  onConfirmRequest,
  reportWanted,
  stepDown,
} from '../../packages/lease-core/src/index.js';
import type {
  AgentSettings,
  AgentState,
  ArbiterAnswer,
  ArbiterExchange,
  RecordSummary,
  Stamp,
} from '../../packages/lease-core/src/index.js';

const A: AgentSettings = { host: 'mbp', requestTimeoutSeconds: 1, failOpenRoles: [] };
const B: AgentSettings = { ...A, host: 'node-b' };
const at = (mono: number): Stamp => ({ mono, wall: mono + 1_700_000_000 });
const T = 5000; // arbiter time: the agent only uses differences within one answer
const rec = (patch: Partial<RecordSummary> = {}): RecordSummary => ({
  holder: 'mbp',
  generation: 3,
  revision: 9,
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  expired: false,
  released: false,
  notBefore: T,
  floorPending: false,
  displaced: null,
  now: T,
  ...patch,
});
const fresh = (s: AgentSettings = A): AgentState => initialAgent(s, at(0), 0, null);
const told = (s: AgentSettings, answer: ArbiterAnswer): AgentState =>
  onArbiterAnswer(fresh(s), answer, at(10), at(10.1), s).state;
/** mbp renewed at generation 3. */
const holding = (patch: Partial<RecordSummary> = {}): AgentState =>
  told(A, { record: rec(patch), confirms: true, hold: null });
/** node-b, told that mbp holds generation 3. */
const standby = (patch: Partial<RecordSummary> = {}): AgentState =>
  told(B, { record: rec(patch), confirms: false, hold: null });
const CADENCE = { heartbeatSeconds: 600, refreshSeconds: 60, requestTimeoutSeconds: 5 };
const VIEW = { target: 'mbp', reachable: true, ping: true, health: false };

t.test(
  'heartbeatProbe: a standby probes the known holder; the holder and a host without a holder probe nobody',
  async (t) => {
    t.equal(heartbeatProbe(standby()), 'mbp', 'a standby probes the holder it knows');
    t.equal(heartbeatProbe(holding()), null, 'the holder does not probe itself');
    t.equal(heartbeatProbe(fresh(B)), null, 'no record: nobody to probe');
    t.equal(heartbeatProbe(standby({ holder: null })), null, 'a record without a holder: nobody to probe');
  },
);

t.test(
  'confirmationToReport: the confirmation whose wait runs, else the one remembered, aged on the monotonic clock (H2)',
  async (t) => {
    const gave = onConfirmRequest(standby(), { host: 'mbp', generation: 3 }, at(20), B).state;
    t.same(
      confirmationToReport(gave, null, at(25)),
      { holder: 'mbp', generation: 3, ageSeconds: 5 },
      'a confirmation whose wait runs, aged from when it was given',
    );
    t.same(
      confirmationToReport(gave, { holder: 'mbp', generation: 2, atMono: 1 }, at(25)),
      { holder: 'mbp', generation: 3, ageSeconds: 5 },
      'the running one wins over the one remembered',
    );
    t.same(
      confirmationToReport(standby(), { holder: 'mbp', generation: 2, atMono: 1 }, at(25)),
      { holder: 'mbp', generation: 2, ageSeconds: 24 },
      'else the one remembered',
    );
    t.same(
      confirmationToReport(gave, null, at(19)),
      { holder: 'mbp', generation: 3, ageSeconds: 0 },
      'an age is never negative',
    );
    t.same(
      confirmationToReport(standby(), { holder: 'mbp', generation: 2, atMono: 30 }, at(25)),
      { holder: 'mbp', generation: 2, ageSeconds: 0 },
      'nor for one remembered',
    );
    t.equal(confirmationToReport(standby(), null, at(25)), null, 'none given: none reported');
  },
);

t.test('heartbeatContent: the holder reports its generation, a standby its view and confirmation (H1)', async (t) => {
  const confirmation = { holder: 'mbp', generation: 3, ageSeconds: 2 };
  t.same(
    heartbeatContent(holding(), CADENCE, VIEW, confirmation),
    { host: 'mbp', seenGeneration: 3, ...CADENCE, generation: 3 },
    'the holder: the generation it renews, nothing it saw of others',
  );
  t.same(
    heartbeatContent(standby(), CADENCE, VIEW, confirmation),
    { host: 'node-b', seenGeneration: 3, ...CADENCE, view: VIEW, confirmation },
    'a standby: its view and its confirmation',
  );
  t.same(
    heartbeatContent(standby(), CADENCE, null, null),
    { host: 'node-b', seenGeneration: 3, ...CADENCE },
    'a standby that probed nobody and confirmed nothing: no view, no confirmation',
  );
  t.same(
    heartbeatContent(fresh(B), CADENCE, null, null),
    { host: 'node-b', seenGeneration: 0, ...CADENCE },
    'a host without a record: never a generation',
  );
  t.same(
    Object.keys(heartbeatContent(standby(), CADENCE, VIEW, confirmation)),
    ['host', 'seenGeneration', 'heartbeatSeconds', 'refreshSeconds', 'requestTimeoutSeconds', 'view', 'confirmation'],
    'in the order the body is written',
  );
});

t.test(
  'arbiterDown: no answer or a 5xx is the arbiter failing; any other refusal, an invalid or a real answer is not',
  async (t) => {
    const cases: [string, ArbiterExchange, boolean][] = [
      ['no answer', { kind: 'no-answer' }, true],
      ['a 500', { kind: 'refused', status: 500 }, true],
      ['a 503', { kind: 'refused', status: 503 }, true],
      ['a 499', { kind: 'refused', status: 499 }, false],
      ['a 401', { kind: 'refused', status: 401 }, false],
      ['an invalid answer', { kind: 'invalid' }, false],
      ['an answer', { kind: 'answered', answer: { record: rec(), confirms: true, hold: null } }, false],
    ];
    for (const [name, exchange, down] of cases)
      t.equal(arbiterDown(exchange), down, `${name}: ${down ? 'down' : 'not down'}`);
  },
);

t.test(
  'asksPeers: the holder asks its peers after a failed arbiter or a held renewal, never for a pending floor (H3)',
  async (t) => {
    const held = holding();
    const noAnswer: ArbiterExchange = { kind: 'no-answer' };
    const renewed = (hold: number | null, confirms = true): ArbiterExchange => ({
      kind: 'answered',
      answer: { record: rec(), confirms, hold },
    });
    t.equal(asksPeers(held, noAnswer), true, 'arbiter unreachable: ask');
    t.equal(asksPeers(held, { kind: 'refused', status: 502 }), true, 'a 5xx: ask');
    t.equal(asksPeers(held, { kind: 'refused', status: 409 }), false, 'a 4xx refusal: no');
    t.equal(asksPeers(held, { kind: 'invalid' }), false, 'an invalid answer: no');
    t.equal(asksPeers(held, renewed(T + 2)), true, 'a renewal behind the start wait (hold after the record time): ask');
    t.equal(asksPeers(held, renewed(T)), false, 'a hold that is already over: no');
    t.equal(asksPeers(held, renewed(null)), false, 'a plain renewal: no');
    t.equal(asksPeers(held, renewed(T + 2, false)), false, 'an answer that does not confirm: no');
    // The issue: node-b adopted a pending grant's generation through the confirm request and its
    // report raised the floor above the grant that produced it (generation 1 became 2, then 4).
    t.equal(asksPeers(holding({ floorPending: true }), noAnswer), false, 'a record whose floor is pending: never');
    t.equal(asksPeers(standby(), noAnswer), false, 'a standby does not ask');
    t.equal(asksPeers(holding({ released: true }), noAnswer), false, 'a released lease: no');
    t.equal(asksPeers(stepDown(held), noAnswer), false, 'after a step-down: no');
    t.equal(asksPeers(fresh(), noAnswer), false, 'no record: no');
    t.equal(asksPeers({ ...held, stale: true }, noAnswer), false, 'a stale record: no');
  },
);

t.test(
  'reportWanted: a record read between heartbeats asks for one when the arbiter waits for this host',
  async (t) => {
    const wait = (kind: string, unreported: string[]) => ({ kind, until: 1, host: null, unreported, text: '' });
    const displaced = (host: string, acknowledgedAt: number | null) => ({
      host,
      generation: 3,
      acknowledgedAt,
      savedSeconds: null,
    });
    t.equal(reportWanted({ wait: wait('start-wait', ['mbp', 'node-b']) }, 'mbp'), true, 'named among the unreported');
    t.equal(
      reportWanted({ wait: wait('floor-pending', ['node-b']) }, 'mbp'),
      false,
      'another host’s report is not this one’s',
    );
    t.equal(
      reportWanted({ wait: wait('start-wait', []), displaced: displaced('mbp', null) }, 'mbp'),
      true,
      'every report in, only the displaced holder’s acknowledgement missing',
    );
    t.equal(
      reportWanted({ wait: wait('start-wait', ['node-b']), displaced: displaced('mbp', null) }, 'mbp'),
      false,
      'not while a report is missing: its acknowledgement would not count yet',
    );
    t.equal(
      reportWanted({ wait: wait('start-wait', []), displaced: displaced('mbp', 5) }, 'mbp'),
      false,
      'an acknowledgement already accepted',
    );
    t.equal(
      reportWanted({ wait: wait('lock-delay', []), displaced: displaced('mbp', null) }, 'mbp'),
      false,
      'a lock-delay: the acknowledgement comes with the step-down itself',
    );
    t.equal(reportWanted({ wait: null, displaced: displaced('mbp', null) }, 'mbp'), false, 'no wait');
    t.equal(reportWanted({ notBefore: 1 }, 'mbp'), false, 'an arbiter that says no wait (hq 0.1)');
    t.equal(reportWanted(null, 'mbp'), false, 'no record');
  },
);
