import t from 'tap';
import fc from 'fast-check';
import {
  asksPeers,
  acknowledged,
  unvouched,
  acquire,
  check,
  emptyLease,
  heartbeat,
  newBoot,
  parseRecord,
  renewHold,
  toRecord,
  transfer,
  elapsed,
  fence,
  initialAgent,
  isFailOpen,
  onArbiterAnswer,
  onArbiterFailure,
  onConfirmRequest,
  onPeerResults,
  persisted,
  queryFence,
  releaseSent,
  resume,
  settle,
  stepDown,
} from '../../packages/lease-core/src/index.js';
import type {
  AgentSettings,
  AgentState,
  ArbiterAnswer,
  ArbiterSettings,
  ArbiterState,
  Grant,
  Persisted,
  RecordSummary,
  Stamp,
} from '../../packages/lease-core/src/index.js';
import {
  DEFAULT_ROLES,
  FENCE_REASONS,
  GENERATION_CEILING,
  NEVER_FAIL_OPEN,
  type FenceReason,
} from '../../packages/protocol/src/index.js';

// ttl 6, margin 1: a grant is valid for 5 s from its send stamp; requests time out after 1 s.
// The lease timing (ttl 6, margin 1) is the arbiter's: it comes with every record (A6).
const A: AgentSettings = { host: 'mbp', requestTimeoutSeconds: 1, failOpenRoles: ['telegram-poller', NEVER_FAIL_OPEN] };
const B: AgentSettings = { ...A, host: 'node-b' };
const W = 1_700_000_000; // wall = mono + W unless a test moves a clock
const at = (mono: number, wall: number = mono + W): Stamp => ({ mono, wall });

// Arbiter times are on another clock entirely: the agent only uses differences of one answer.
const T = 5000;
function rec(patch: Partial<RecordSummary> = {}): RecordSummary {
  return {
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
  };
}
const confirming = (patch: Partial<RecordSummary> = {}, hold: number | null = null): ArbiterAnswer => ({
  record: rec(patch),
  confirms: true,
  hold,
});
const telling = (patch: Partial<RecordSummary> = {}): ArbiterAnswer => ({
  record: rec(patch),
  confirms: false,
  hold: null,
});

const fresh = (settings: AgentSettings = A, seen = 0, p: Persisted | null = null): AgentState =>
  initialAgent(settings, at(0), seen, p);

/** mbp after one confirming answer sent at mono 10 and received at 10.2: valid until 15 (send + 5). */
function holding(patch: Partial<RecordSummary> = {}, settings: AgentSettings = A): AgentState {
  return onArbiterAnswer(fresh(settings), confirming(patch), at(10), at(10.2), settings).state;
}

const decide = (s: AgentState, now: Stamp, role = 'cron', settings: AgentSettings = A) => fence(s, role, now, settings);
const reason = (s: AgentState, now: Stamp, role = 'cron', settings: AgentSettings = A): [boolean, FenceReason] => {
  const d = decide(s, now, role, settings);
  return [d.run, d.reason];
};

// ---------------------------------------------------------------------------------------

t.test('elapsed is the larger of the two clocks (A1)', async (t) => {
  const cases: ReadonlyArray<readonly [string, Stamp, Stamp, number]> = [
    ['both clocks agree', at(0), at(3), 3],
    ['a sleep (mono frozen) counts the wall', at(0), at(0.5, W + 100), 100],
    ['a backward wall jump counts the mono', at(0), at(3, W - 50), 3],
    ['a forward wall jump counts the wall', at(0), at(1, W + 60), 60],
  ];
  for (const [name, from, to, expected] of cases) t.equal(elapsed(from, to), expected, name);
});

t.test('roles: ledger-cli is never fail-open, the defaults are the documented ones', async (t) => {
  t.equal(NEVER_FAIL_OPEN, 'ledger-cli', 'the never fail-open role');
  t.same([...DEFAULT_ROLES], ['telegram-poller', 'cron', 'release-run', 'git-push', 'ledger-cli'], 'default roles');
  t.ok(Object.isFrozen(DEFAULT_ROLES), 'frozen');
  t.equal(isFailOpen(A, 'telegram-poller'), true, 'a listed role is fail-open');
  t.equal(isFailOpen(A, 'ledger-cli'), false, 'ledger-cli is not, even when listed');
  t.equal(isFailOpen(A, 'cron'), false, 'an unlisted role is not');
});

// ---------------------------------------------------------------------------------------
// start

t.test('initialAgent', async (t) => {
  t.test('a clean start has no guard, no record and no validity (A5)', async (t) => {
    const s = fresh(A, 4);
    t.match(
      s,
      {
        host: 'mbp',
        seen: 4,
        known: null,
        current: null,
        pending: null,
        startGuardUntilMono: null,
        arbiterOk: false,
        stale: false,
        gave: null,
        steppedDown: 0,
      },
      'state',
    );
    t.equal(s.waitUntilMono, -Infinity, 'no wait');
    t.same(reason(s, at(1)), [false, 'no-lease-after-seen'], 'a host that saw a generation says no-lease-after-seen');
    t.same(reason(fresh(), at(1)), [false, 'no-lease'], 'a host that never saw one says no-lease');
  });
  const base: Persisted = {
    holder: 'mbp',
    generation: 7,
    confirmedAt: W,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    gaveConfirmation: null,
    lockDelayPending: false,
  };
  const guards: ReadonlyArray<readonly [string, Persisted | null, number | null]> = [
    ['no local.json: no start guard', null, null],
    ['local.json without flags: no start guard', base, null],
    [
      'a confirmation on record guards ttl + margin after the start (S2.2)',
      { ...base, gaveConfirmation: { holder: 'node-b', generation: 7, at: W } },
      7,
    ],
    [
      'a pending lock-delay on record guards ttl + margin after the start (S2.2)',
      { ...base, lockDelayPending: true },
      7,
    ],
    ['a longer persisted ttl lengthens the guard', { ...base, lockDelayPending: true, ttlSeconds: 20 }, 21],
    [
      'a longer persisted margin lengthens it too (the record values, A6)',
      { ...base, lockDelayPending: true, safetyMarginSeconds: 2.5 },
      8.5,
    ],
    [
      'no lease timing on record: guarded until a record states one (A6)',
      { ...base, lockDelayPending: true, ttlSeconds: 0 },
      Infinity,
    ],
  ];
  for (const [name, p, guard] of guards) {
    t.test(name, async (t) => {
      const s = initialAgent(A, at(100), 2, p);
      t.equal(s.startGuardUntilMono, guard === null ? null : 100 + guard, 'start guard, on mono from the start');
      t.equal(s.seen, p === null ? 2 : 7, 'the seen generation is the higher of the file and local.json (A3)');
    });
  }
  t.test('with a start guard nothing runs before it ends, then the guard is dropped', async (t) => {
    const s0 = initialAgent(A, at(0), 3, { ...base, generation: 3, lockDelayPending: true });
    const s = onArbiterAnswer(s0, confirming(), at(1), at(1.1), A).state;
    t.same(reason(s, at(2)), [false, 'lock-delay'], 'a fresh grant does not run during the guard');
    t.same(reason(s, at(2), 'telegram-poller'), [false, 'lock-delay'], 'not even a fail-open role');
    const later = onArbiterAnswer(s, confirming(), at(7), at(7.1), A).state;
    t.same(reason(later, at(7.2)), [true, 'holder'], 'after ttl + margin it runs');
    t.equal(settle(s, at(7)).startGuardUntilMono, null, 'settle drops the spent guard');
    t.equal(persisted(s, at(2)).lockDelayPending, true, 'the guard is persisted as a pending lock-delay');
  });
});

// ---------------------------------------------------------------------------------------
// arbiter answers

t.test('onArbiterAnswer', async (t) => {
  t.test('a confirming answer starts a validity from the send time', async (t) => {
    const step = onArbiterAnswer(fresh(), confirming(), at(10), at(10.2), A);
    const g: Grant = {
      generation: 3,
      sent: at(10),
      seconds: 5,
      startMono: 10.2,
      earliestMono: 10.2,
      source: 'arbiter',
    };
    t.same(step.state.current, g, 'ttl − margin from the send stamp, starting at receipt');
    t.same(
      step.state.known,
      {
        holder: 'mbp',
        generation: 3,
        expired: false,
        released: false,
        floorPending: false,
        ttlSeconds: 6,
        safetyMarginSeconds: 1,
      },
      'known',
    );
    t.equal(step.state.seen, 3, 'seen adopted');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['generation-adopted', { from: 0, to: 3, via: 'arbiter' }]],
      'adoption event',
    );
    const d = decide(step.state, at(11));
    t.same([d.run, d.reason, d.generation, d.holder, d.role], [true, 'holder', 3, 'mbp', 'cron'], 'runs as holder');
    t.equal(d.validForSeconds, 4, 'validity left: 5 − 1');
    t.same(reason(step.state, at(14.999)), [true, 'holder'], 'just before the end');
    t.same(reason(step.state, at(15)), [false, 'no-quorum-expired'], 'at send + ttl − margin it stops');
  });
  t.test('an answer at the same generation does not repeat the adoption event', async (t) => {
    const step = onArbiterAnswer(holding(), confirming(), at(11), at(11.1), A);
    t.same(step.events, [], 'no event');
    t.equal(step.state.current?.sent.mono, 11, 'the grant moves to the newer send time');
  });
  t.test('a late answer is ignored (after the request timeout)', async (t) => {
    const s = holding();
    const step = onArbiterAnswer(s, confirming({ generation: 9 }), at(11), at(12.01), A);
    t.equal(step.state.seen, 3, 'nothing adopted');
    t.equal(step.state.current, s.current, 'the grant is untouched');
    t.equal(step.state.arbiterOk, false, 'the arbiter counts as unreachable');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['arbiter-unreachable', { reason: 'late-answer' }]],
      'event',
    );
    t.same(reason(step.state, at(12.1)), [true, 'within-ttl'], 'the old validity keeps running as within-ttl');
  });
  t.test('an answer exactly at the timeout is accepted', async (t) => {
    t.equal(onArbiterAnswer(fresh(), confirming(), at(10), at(11), A).state.current?.generation, 3, 'accepted');
  });
  t.test('lateness is measured with max(mono, wall): a forward wall jump makes an answer late', async (t) => {
    const step = onArbiterAnswer(fresh(), confirming(), at(10), at(10.1, W + 30), A);
    t.equal(step.state.current, null, 'ignored');
  });
  t.test('a record older than the seen generation is refused (stale-generation, A3)', async (t) => {
    const s = holding();
    const step = onArbiterAnswer({ ...s, seen: 5 }, confirming(), at(11), at(11.1), A);
    t.match(
      step.state,
      { stale: true, arbiterOk: true, current: null, pending: null, seen: 5 },
      'refused, grants dropped, seen kept',
    );
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['stale-generation', { generation: 3, seen: 5 }]],
      'event',
    );
    t.same(
      reason(step.state, at(11.2), 'telegram-poller'),
      [false, 'stale-generation'],
      'nothing runs, not even fail-open',
    );
    const back = onArbiterAnswer(step.state, confirming({ generation: 6 }), at(12), at(12.1), A).state;
    t.same([back.stale, back.seen], [false, 6], 'a newer record clears it');
    t.same(reason(back, at(12.2)), [true, 'holder'], 'and runs');
  });
  t.test('a new tenure drops every grant: a new generation for the same holder', async (t) => {
    const step = onArbiterAnswer(holding(), telling({ generation: 4 }), at(11), at(11.1), A);
    t.equal(step.state.current, null, 'dropped');
    t.equal(step.state.seen, 4, 'adopted');
    t.same(reason(step.state, at(11.2)), [false, 'no-quorum-expired'], 'no validity for generation 4 yet');
  });
  t.test('another holder drops every grant', async (t) => {
    const step = onArbiterAnswer(holding(), telling({ holder: 'node-b', generation: 4 }), at(11), at(11.1), A);
    t.equal(step.state.current, null, 'dropped');
    t.same(
      reason(step.state, at(11.2), 'telegram-poller'),
      [false, 'not-holder'],
      'not-holder, and no fail-open for a standby',
    );
  });
  t.test('the same tenure, not confirming, keeps the grant', async (t) => {
    const step = onArbiterAnswer(holding(), telling({ expired: true }), at(11), at(11.1), A);
    t.same(step.state.current?.sent, at(10), 'kept');
    t.same(
      step.events.map((e) => e.event),
      ['expired-seen'],
      'the expiry is told once',
    );
    t.same(onArbiterAnswer(step.state, telling({ expired: true }), at(12), at(12.1), A).events, [], 'not twice');
  });
  t.test('a released record drops the grant and confirms nothing', async (t) => {
    const step = onArbiterAnswer(holding(), confirming({ released: true, expired: true }), at(11), at(11.1), A);
    t.same([step.state.current, step.state.pending], [null, null], 'dropped');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['expired-seen', { holder: 'mbp', generation: 3, released: true }]],
      'event',
    );
    const standbySees = onArbiterAnswer(standby(), telling({ expired: true }), at(11), at(11.1), B);
    t.same(
      standbySees.events.map((e) => [e.event, e.data]),
      [['expired-seen', { holder: 'mbp', generation: 3, released: false }]],
      "the standby logs the holder's expiry too",
    );
    t.same(
      onArbiterAnswer(standbySees.state, telling({ expired: true }), at(12), at(12.1), B).events,
      [],
      'once per tenure',
    );
    t.same(
      reason(step.state, at(11.2), 'telegram-poller'),
      [false, 'no-lease-after-seen'],
      'released: no lease, no fail-open',
    );
  });
  t.test('a released record at generation 0 says no-lease', async (t) => {
    const s = onArbiterAnswer(
      fresh(),
      telling({ generation: 0, released: true, expired: true }),
      at(1),
      at(1.1),
      A,
    ).state;
    t.same(reason(s, at(1.2)), [false, 'no-lease'], 'never seen');
  });
  t.test('a record without holder says no-lease, or no-lease-after-seen', async (t) => {
    const none = onArbiterAnswer(
      fresh(),
      telling({ holder: null, generation: 0, notBefore: null }),
      at(1),
      at(1.1),
      A,
    ).state;
    t.same(reason(none, at(1.2)), [false, 'no-lease'], 'never granted');
    const after = onArbiterAnswer(
      fresh(A, 2),
      telling({ holder: null, generation: 2, expired: true }),
      at(1),
      at(1.1),
      A,
    ).state;
    t.same(reason(after, at(1.2)), [false, 'no-lease-after-seen'], 'granted before');
  });
  t.test('a confirming answer for another holder grants nothing', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({ holder: 'node-b' }), at(1), at(1.1), A).state;
    t.same([s.current, s.pending], [null, null], 'no grant');
  });
  t.test('lock-delay is notBefore − now measured on mono from receipt (A2)', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({ notBefore: T + 3 }), at(10), at(10.5), A).state;
    t.equal(s.waitUntilMono, 13.5, 'receive + 3');
    t.same(
      s.pending,
      { generation: 3, sent: at(10), seconds: 5, startMono: 13.5, earliestMono: 10.5, source: 'arbiter' },
      'the grant waits',
    );
    t.equal(s.current, null, 'nothing runs now');
    t.same(reason(s, at(13.4)), [false, 'lock-delay'], 'before the end of the lock-delay');
    t.same(reason(s, at(13.4, W + 1000)), [false, 'lock-delay'], 'a forward wall jump does not end it early');
    t.same(reason(s, at(13.5)), [true, 'holder'], 'then it runs on the pending grant');
    t.equal(settle(s, at(13.5)).current, s.pending, 'settle folds the pending grant into current');
    t.same(reason(s, at(13.6, W + 1000)), [false, 'no-quorum-expired'], 'after a forward jump the validity is spent');
    t.same(reason(s, at(13.2), 'telegram-poller'), [false, 'lock-delay'], 'fail-open roles wait too');
  });
  t.test('a sleep lengthens the lock-delay (mono stops, the wait does not end)', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({ notBefore: T + 3 }), at(10), at(10.5), A).state;
    t.same(reason(s, at(11, W + 500)), [false, 'lock-delay'], 'mono 11 after 500 s of wall: still waiting');
  });
  t.test('a notBefore in the past or missing means no wait', async (t) => {
    t.equal(
      onArbiterAnswer(fresh(), confirming({ notBefore: T - 50 }), at(10), at(10.5), A).state.waitUntilMono,
      10.5,
      'past',
    );
    t.equal(
      onArbiterAnswer(fresh(), confirming({ notBefore: null }), at(10), at(10.5), A).state.waitUntilMono,
      10.5,
      'missing',
    );
  });
  t.test('a lock-delay longer than the validity: the first grant is spent, a later renewal runs', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({ notBefore: T + 7 }), at(10), at(10), A).state;
    t.same(
      reason(s, at(17)),
      [false, 'no-quorum-expired'],
      'at the end of the wait the first grant (valid until 15) is spent',
    );
    const r = onArbiterAnswer(s, confirming({ notBefore: T + 7, now: T + 6 }), at(16), at(16), A).state;
    t.equal(r.waitUntilMono, 17, 'the wait never shortens within a tenure');
    t.same(reason(r, at(16.5)), [false, 'lock-delay'], 'still waiting');
    t.same(reason(r, at(17)), [true, 'holder'], 'runs at the end of the wait');
  });
  t.test('floorPending is an infinite wait (S2.4)', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({ floorPending: true, generation: 1 }), at(10), at(10.1), A).state;
    t.equal(s.waitUntilMono, Infinity, 'infinite');
    t.equal(s.seen, 0, 'a pending generation is not adopted as seen: it may still be raised');
    t.equal(s.known?.generation, 1, 'but it is known');
    t.equal(s.pending?.startMono, Infinity, 'the grant never starts');
    t.same(reason(s, at(1e9)), [false, 'lock-delay'], 'lock-delay however long');
    t.equal(persisted(s, at(11)).lockDelayPending, true, 'persisted as a pending lock-delay');
    const done = onArbiterAnswer(s, confirming({ generation: 1, notBefore: T + 2 }), at(20), at(20.1), A).state;
    t.equal(done.waitUntilMono, 22.1, 'a complete floor at the same tenure waits for its own notBefore only');
    t.same(reason(done, at(22.2)), [true, 'holder'], 'then runs');
    const raised = onArbiterAnswer(s, confirming({ generation: 6 }), at(20), at(20.1), A).state;
    t.same([raised.seen, raised.known?.generation], [6, 6], 'the raised generation is adopted once final');
    t.same(reason(raised, at(20.2)), [true, 'holder'], 'and runs');
  });
  t.test('a floor-pending record cannot end a known lock-delay', async (t) => {
    const s = onArbiterAnswer(fresh(), telling({ notBefore: T + 3 }), at(10), at(10), A).state;
    const pending = onArbiterAnswer(s, telling({ floorPending: true }), at(11), at(11), A).state;
    t.equal(pending.waitUntilMono, Infinity, 'the wait becomes infinite');
  });
  t.test('a hold while running keeps current and parks the renewal (S2.3)', async (t) => {
    const s = holding();
    const step = onArbiterAnswer(s, confirming({}, T + 8), at(12), at(12.1), A);
    t.same(step.state.current, s.current, 'the running grant is kept');
    t.same(
      step.state.pending,
      { generation: 3, sent: at(12), seconds: 5, startMono: 20.1, earliestMono: 20.1, source: 'arbiter' },
      'the renewal waits for the hold',
    );
    t.same(reason(step.state, at(14)), [true, 'holder'], 'runs on what it has');
    t.same(
      reason(step.state, at(15.5)),
      [false, 'lock-delay'],
      'after the old validity, before the hold ends: waiting',
    );
    t.same(
      reason(step.state, at(20.1)),
      [false, 'no-quorum-expired'],
      'at the end of the hold the parked grant (until 17) is spent',
    );
    t.equal(persisted(step.state, at(14)).lockDelayPending, true, 'a parked grant is persisted as pending');
    t.equal(persisted(step.state, at(14)).confirmedAt, W + 12, 'confirmedAt is the latest send');
  });
  t.test('a hold when not running parks the grant alone', async (t) => {
    const s = onArbiterAnswer(fresh(), confirming({}, T + 2), at(10), at(10.1), A).state;
    t.same([s.current, s.pending?.startMono], [null, 12.1], 'parked');
    t.same(reason(s, at(12.1)), [true, 'holder'], 'runs when the hold ends');
  });
  t.test('a hold in the past does not wait', async (t) => {
    t.equal(
      onArbiterAnswer(fresh(), confirming({}, T - 5), at(10), at(10.1), A).state.current?.startMono,
      10.1,
      'immediate',
    );
  });
  t.test('a grant with a lock-delay after an expired grant replaces it', async (t) => {
    const s = holding();
    const step = onArbiterAnswer(s, confirming({ notBefore: T + 3 }), at(16), at(16), A);
    t.same([step.state.current, step.state.pending?.startMono], [null, 19], 'the spent current is dropped');
  });
});

t.test('onArbiterFailure marks the arbiter unreachable, told once', async (t) => {
  const s = holding();
  const one = onArbiterFailure(s);
  t.equal(one.state.arbiterOk, false, 'unreachable');
  t.same(
    one.events.map((e) => e.event),
    ['arbiter-unreachable'],
    'told',
  );
  t.same(onArbiterFailure(one.state).events, [], 'not twice');
  t.same(reason(one.state, at(12)), [true, 'within-ttl'], 'the validity keeps running as within-ttl');
  t.same(reason(one.state, at(15)), [false, 'no-quorum-expired'], 'until it ends');
  t.same(
    reason(one.state, at(15), 'telegram-poller'),
    [true, 'fail-open'],
    'then fail-open roles of the last holder run',
  );
  t.same(
    reason(one.state, at(15), 'ledger-cli'),
    [false, 'no-quorum-expired'],
    'ledger-cli never fails open, even when listed',
  );
  t.equal(decide(one.state, at(15), 'telegram-poller').validForSeconds, null, 'fail-open has no bound');
});

// ---------------------------------------------------------------------------------------
// peer confirmation

/** node-b as a standby that knows mbp holds generation 3. */
function standby(patch: Partial<RecordSummary> = {}): AgentState {
  return onArbiterAnswer(fresh(B), telling(patch), at(10), at(10.1), B).state;
}

t.test('onConfirmRequest', async (t) => {
  const refusals: ReadonlyArray<readonly [string, AgentState, { host: string; generation: number }, string, number]> = [
    ['a request for itself is refused', standby(), { host: 'node-b', generation: 3 }, 'self', 3],
    [
      'a generation below the seen one is refused and the higher one is told',
      { ...standby(), seen: 5 },
      { host: 'mbp', generation: 3 },
      'higher-generation',
      5,
    ],
    [
      'another holder at the known generation is refused',
      standby(),
      { host: 'node-c', generation: 3 },
      'other-holder',
      3,
    ],
    [
      'another holder below the known generation is refused as higher-generation',
      standby(),
      { host: 'node-c', generation: 2 },
      'higher-generation',
      3,
    ],
    [
      'an agent running as holder refuses a newer holder while its grant runs',
      onArbiterAnswer(fresh(B), confirming({ holder: 'node-b', generation: 4 }), at(10), at(10.1), B).state,
      { host: 'mbp', generation: 5 },
      'holding',
      4,
    ],
  ];
  for (const [name, s, req, why, generation] of refusals) {
    t.test(name, async (t) => {
      const step = onConfirmRequest(s, req, at(11), B);
      t.same(step.answer, { confirmed: false, generation, reason: why }, 'answer');
      t.equal(step.state.gave, null, 'nothing given');
      t.same(
        step.events.map((e) => [e.event, e.data.reason]),
        [['confirmation-refused', why]],
        'event',
      );
    });
  }
  t.test('confirmed: the standby records it and waits ttl + margin before running itself (A4)', async (t) => {
    const step = onConfirmRequest(standby(), { host: 'mbp', generation: 3 }, at(11), B);
    t.same(step.answer, { confirmed: true, generation: 3, reason: 'confirmed' }, 'answer');
    t.same(
      step.state.gave,
      { holder: 'mbp', generation: 3, at: at(11), untilMono: 18, ttlSeconds: 6, safetyMarginSeconds: 1 },
      'gave: until receive + ttl + margin on mono',
    );
    t.same(
      step.events.map((e) => e.event),
      ['confirmation-given'],
      'event',
    );
    t.same(
      persisted(step.state, at(11)).gaveConfirmation,
      { holder: 'mbp', generation: 3, at: W + 11 },
      'persisted before answering',
    );
    // The arbiter promotes node-b at once: its own wait still holds.
    const promoted = onArbiterAnswer(
      step.state,
      { record: rec({ holder: 'node-b', generation: 4 }), confirms: true, hold: null },
      at(12),
      at(12.1),
      B,
    ).state;
    t.ok(promoted.current !== null, 'the promotion is granted');
    t.same(
      reason(promoted, at(17.9), 'cron', B),
      [false, 'lock-delay'],
      'but does not run before the confirmation validity has passed',
    );
    t.same(reason(promoted, at(17.9, W + 100), 'cron', B), [false, 'lock-delay'], 'a wall jump does not end the wait');
    const renewed = onArbiterAnswer(
      promoted,
      { record: rec({ holder: 'node-b', generation: 4 }), confirms: true, hold: null },
      at(18),
      at(18),
      B,
    ).state;
    t.same(reason(renewed, at(18), 'cron', B), [true, 'holder'], 'then it runs');
    t.equal(settle(step.state, at(18)).gave, null, 'the spent confirmation is dropped');
  });
  t.test('a confirmation of an unknown holder at a higher generation adopts it', async (t) => {
    const step = onConfirmRequest(standby(), { host: 'node-c', generation: 5 }, at(11), B);
    t.same(
      step.answer,
      { confirmed: true, generation: 5, reason: 'confirmed' },
      'confirmed with the adopted generation',
    );
    t.same(
      step.events.map((e) => e.event),
      ['generation-adopted', 'confirmation-given'],
      'events',
    );
  });
  t.test('a standby without a record confirms with the timing the holder states (A6)', async (t) => {
    const step = onConfirmRequest(
      fresh(B),
      { host: 'mbp', generation: 1, ttlSeconds: 6, safetyMarginSeconds: 1 },
      at(11),
      B,
    );
    t.equal(step.answer.confirmed, true, 'confirmed');
    t.equal(step.state.gave?.untilMono, 18, "waits with the holder's ttl + margin");
    t.same(
      [persisted(step.state, at(11)).ttlSeconds, persisted(step.state, at(11)).safetyMarginSeconds],
      [6, 1],
      'kept for the start guard',
    );
  });
  t.test('a standby that knows no lease timing at all confirms nothing (A6: it has no wait to keep)', async (t) => {
    const step = onConfirmRequest(fresh(B), { host: 'mbp', generation: 1 }, at(11), B);
    t.same(step.answer, { confirmed: false, generation: 0, reason: 'unknown-timing' }, 'refused');
    t.equal(step.state.gave, null, 'nothing given');
  });
  t.test("a stated ttl longer than the standby's record lengthens the wait", async (t) => {
    const step = onConfirmRequest(
      standby(),
      { host: 'mbp', generation: 3, ttlSeconds: 30, safetyMarginSeconds: 2 },
      at(11),
      B,
    );
    t.equal(step.state.gave?.untilMono, 43, '11 + 30 + 2');
  });
  t.test('a longer known ttl lengthens the wait; a second confirmation never shortens it', async (t) => {
    const long = onArbiterAnswer(fresh(B), telling({ ttlSeconds: 20 }), at(10), at(10), B).state;
    const one = onConfirmRequest(long, { host: 'mbp', generation: 3 }, at(11), B).state;
    t.equal(one.gave?.untilMono, 32, '11 + 20 + 1');
    const shorter = onArbiterAnswer(one, telling({ ttlSeconds: 6 }), at(12), at(12), B).state;
    const two = onConfirmRequest(shorter, { host: 'mbp', generation: 3 }, at(13), B).state;
    t.same([two.gave?.untilMono, two.gave?.at], [32, at(13)], 'kept the later end');
    t.same(
      [persisted(two, at(13)).ttlSeconds, persisted(two, at(13)).safetyMarginSeconds],
      [20, 1],
      "and the longer confirmation's timing, for the start guard (A4)",
    );
  });
  t.test('a standby with a spent grant of its own confirms and drops it', async (t) => {
    const s = onArbiterAnswer(fresh(B), confirming({ holder: 'node-b', generation: 3 }), at(10), at(10), B).state;
    const step = onConfirmRequest(
      onArbiterAnswer(s, telling({ holder: 'mbp', generation: 4 }), at(11), at(11), B).state,
      { host: 'mbp', generation: 4 },
      at(20),
      B,
    );
    t.same(
      [step.answer.confirmed, step.state.current, step.state.pending],
      [true, null, null],
      'confirmed, nothing of its own left',
    );
  });
});

// ---------------------------------------------------------------------------------------
// peer results (rule ③, L2)

t.test('onPeerResults', async (t) => {
  const off = onArbiterFailure(holding()).state; // mbp, generation 3, the arbiter unreachable
  const yes = (peer: string, generation = 3) => ({ peer, answered: true, confirmed: true, generation });
  t.test('every peer confirming gives a validity from the round send time: quorum-standby', async (t) => {
    const step = onPeerResults(off, [yes('node-b')], ['node-b'], at(14), at(14.3), A);
    t.same(
      step.state.current,
      { generation: 3, sent: at(14), seconds: 5, startMono: 14.3, earliestMono: 14.3, source: 'peer' },
      'grant',
    );
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['quorum-standby', { generation: 3, peers: 1 }]],
      'event',
    );
    t.same(reason(step.state, at(18)), [true, 'quorum-standby'], 'runs on the quorum');
    t.same(reason(step.state, at(19)), [false, 'no-quorum-expired'], 'until send + ttl − margin');
  });
  const noQuorum: ReadonlyArray<readonly [string, Parameters<typeof onPeerResults>[1], readonly string[]]> = [
    ['quorum needs every peer: one of two is not enough', [yes('node-b')], ['node-b', 'node-c']],
    [
      'a peer that did not answer withholds',
      [yes('node-b'), { peer: 'node-c', answered: false }],
      ['node-b', 'node-c'],
    ],
    [
      'a peer that refused withholds',
      [yes('node-b'), { peer: 'node-c', answered: true, confirmed: false, generation: 3 }],
      ['node-b', 'node-c'],
    ],
    [
      'a missing generation withholds the confirmation',
      [{ peer: 'node-b', answered: true, confirmed: true }],
      ['node-b'],
    ],
    ['no peers is no quorum', [], []],
    ['an answer from a host that is not a peer does not count', [yes('node-c')], ['node-b']],
  ];
  for (const [name, results, peers] of noQuorum) {
    t.test(name, async (t) => {
      const step = onPeerResults(off, results, peers, at(14), at(14.3), A);
      t.same(step.state.current, off.current, 'no new grant');
      t.same(step.events, [], 'no event');
      t.same(reason(step.state, at(15.5)), [false, 'no-quorum-expired'], 'the old validity ends as usual');
    });
  }
  t.test('a peer naming a generation above the ceiling is not adopted and withholds its confirmation', async (t) => {
    const step = onPeerResults(off, [yes('node-b', GENERATION_CEILING + 1)], ['node-b'], at(14), at(14.3), A);
    t.equal(step.state.seen, off.seen, 'the seen generation stays');
    t.same(step.state.current, off.current, 'no new grant');
    t.same(step.events, [], 'no event');
  });
  t.test('a higher generation from a peer is adopted and stops this host', async (t) => {
    const step = onPeerResults(
      off,
      [{ peer: 'node-b', answered: true, confirmed: false, generation: 4 }],
      ['node-b'],
      at(12),
      at(12.1),
      A,
    );
    t.equal(step.state.seen, 4, 'adopted');
    t.same([step.state.current, step.state.pending], [null, null], 'every grant dropped at once');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['generation-adopted', { from: 3, to: 4, via: 'peer' }]],
      'event',
    );
    t.same(reason(step.state, at(12.2)), [false, 'stale-generation'], 'nothing runs: a higher generation was seen');
    // Issue: fail-open roles once ignored it, and two pollers ran (node-b at 4, mbp at 3).
    t.same(
      reason(step.state, at(12.2), 'telegram-poller'),
      [false, 'stale-generation'],
      'not even a fail-open role (A5)',
    );
    t.same(
      reason(onArbiterFailure(holding()).state, at(30), 'telegram-poller'),
      [true, 'fail-open'],
      'while a fail-open role without a higher generation still runs',
    );
  });
  t.test('a higher generation in a confirming answer is no quorum either', async (t) => {
    const step = onPeerResults(off, [yes('node-b', 4), yes('node-c', 3)], ['node-b', 'node-c'], at(12), at(12.1), A);
    t.same([step.state.seen, step.state.current], [4, null], 'adopted and stopped');
  });
  t.test('a round answered too late gives nothing', async (t) => {
    const step = onPeerResults(off, [yes('node-b')], ['node-b'], at(13), at(14.1), A);
    t.same(step.state.current, off.current, 'no new grant: the running one is kept');
    t.same(step.events, [], 'no event');
  });
  t.test('a too-late round still adopts a higher generation (nothing is lost by learning)', async (t) => {
    const step = onPeerResults(
      off,
      [{ peer: 'node-b', answered: true, generation: 7 }],
      ['node-b'],
      at(14),
      at(15.5),
      A,
    );
    t.equal(step.state.seen, 7, 'adopted');
  });
  const notHolder: ReadonlyArray<readonly [string, AgentState]> = [
    ['an agent without a record', fresh()],
    ['a standby', onArbiterAnswer(fresh(), telling({ holder: 'node-b' }), at(10), at(10.1), A).state],
    [
      'a holder that released',
      onArbiterAnswer(fresh(), telling({ released: true, expired: true }), at(10), at(10.1), A).state,
    ],
    ['a holder that stepped down', stepDown(off)],
    ['a holder whose generation is below the seen one', { ...off, seen: 4 }],
  ];
  for (const [name, s] of notHolder) {
    t.test(`${name} gets no quorum`, async (t) => {
      const step = onPeerResults(s, [yes('node-b')], ['node-b'], at(14), at(14.3), A);
      t.same([step.state.current, step.state.pending], [s.current, s.pending], 'no new grant');
      t.notOk(
        step.events.some((e) => e.event === 'quorum-standby'),
        'no quorum event',
      );
    });
  }
  t.test('a quorum during a lock-delay waits for it', async (t) => {
    const waiting = onArbiterFailure(
      onArbiterAnswer(fresh(), confirming({ notBefore: T + 10 }), at(10), at(10), A).state,
    ).state;
    const step = onPeerResults(waiting, [yes('node-b')], ['node-b'], at(12), at(12), A);
    t.same(
      [step.state.current, step.state.pending?.startMono, step.state.pending?.source],
      [null, 20, 'peer'],
      'parked',
    );
    t.same(reason(step.state, at(13)), [false, 'lock-delay'], 'lock-delay');
  });
  t.test('a quorum during a lock-delay does not displace a running grant', async (t) => {
    const run = holding();
    const s: AgentState = { ...onArbiterFailure(run).state, waitUntilMono: 30 };
    const step = onPeerResults(s, [yes('node-b')], ['node-b'], at(12), at(12), A);
    t.same([step.state.current, step.state.pending], [run.current, null], 'the running grant is kept');
  });
});

// ---------------------------------------------------------------------------------------
// step down, resume, settle, persisted

t.test('stepDown and resume', async (t) => {
  const down = stepDown(holding());
  t.same([down.current, down.pending, down.steppedDown], [null, null, 3], 'nothing of generation 3 runs any more');
  t.same(reason(down, at(11)), [false, 'not-holder'], 'fence: a stepped-down generation is not its own any more (A7)');
  const again = onArbiterAnswer(down, confirming(), at(11), at(11.1), A).state;
  t.equal(again.current, null, 'a confirming answer at the stepped-down generation grants nothing');
  t.same(reason(resume(again), at(11.2)), [false, 'no-quorum-expired'], 'resume grants nothing by itself');
  const back = onArbiterAnswer(resume(again), confirming(), at(12), at(12.1), A).state;
  t.same(reason(back, at(12.2)), [true, 'holder'], 'after resume the next confirming answer runs');
  const next = onArbiterAnswer(down, confirming({ generation: 4 }), at(12), at(12.1), A).state;
  t.same(reason(next, at(12.2)), [true, 'holder'], 'a new generation (re-acquire) runs without resume');
  t.equal(stepDown(fresh()).steppedDown, 0, 'stepping down without a record changes nothing');
  t.equal(stepDown({ ...down, known: null }).steppedDown, 3, 'the step-down mark never goes down');
});

// ---------------------------------------------------------------------------------------
// the step-down of a holder that lost the lease (A7)

/** The record after an admin moved the lease from mbp (generation 3) to node-b (4), behind a lock-delay. */
const moved = (patch: Partial<RecordSummary> = {}): ArbiterAnswer =>
  telling({ holder: 'node-b', generation: 4, revision: 12, notBefore: T + 10, ...patch });

t.test('A7: a holder that sees another holder steps down for good and owes an acknowledgement', async (t) => {
  const step = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A);
  const s = step.state;
  t.same([s.steppedDown, s.lost, s.current, s.pending], [3, 3, null, null], 'generation 3 is stepped down and lost');
  t.same(
    s.ackDue,
    { generation: 3, revision: 12, ran: true },
    'the acknowledgement is bound to the generation and the revision seen',
  );
  t.same(
    step.events.filter((e) => e.event === 'step-down').map((e) => e.data),
    [{ generation: 3, holder: 'node-b', to: 4, via: 'record', acknowledge: true }],
    'one step-down event',
  );
  t.match(
    persisted(s, at(11.1)),
    { steppedDown: 3, lost: 3 },
    'both marks are in local.json (the shell writes it first)',
  );
  for (const role of ['cron', 'telegram-poller', 'ledger-cli'])
    t.equal(decide(s, at(11.2), role).run, false, `${role} does not run`);
  const later = onArbiterAnswer(s, moved({ revision: 13 }), at(12), at(12.1), A).state;
  t.same(
    [later.ackDue, later.lost],
    [{ generation: 3, revision: 12, ran: true }, 3],
    'a later answer does not decide again',
  );
});

t.test('G7: the acknowledgement says whether this life of the agent ran the generation', async (t) => {
  t.equal(holding().ran, 3, 'a holder whose grant started ran it');
  const waiting = onArbiterAnswer(fresh(), confirming({ notBefore: T + 30 }), at(10), at(10.2), A).state;
  t.equal(waiting.ran, 0, 'one still inside its lock-delay did not');
  t.same(
    onArbiterAnswer(waiting, moved(), at(11), at(11.1), A).state.ackDue,
    { generation: 3, revision: 12, ran: false },
    'so its acknowledgement does not say so',
  );
  const guarded = initialAgent(A, at(0), 0, {
    holder: 'mbp',
    generation: 2,
    confirmedAt: null,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    gaveConfirmation: null,
    lockDelayPending: true,
  });
  t.equal(onArbiterAnswer(guarded, confirming(), at(1), at(1.1), A).state.ran, 0, 'nor one inside its start guard');
});

t.test(
  "A4 (S2.1): a standby that confirmed the holder keeps its own wait through that holder's accepted step-down",
  async (t) => {
    const gave = onConfirmRequest(standby(), { host: 'mbp', generation: 3 }, at(11), B).state;
    t.not(gave.gave, null, 'node-b confirmed mbp at generation 3 and waits');
    const promoted = (displaced: RecordSummary['displaced']) =>
      onArbiterAnswer(
        gave,
        confirming({ holder: 'node-b', generation: 4, revision: 30, notBefore: T, displaced }),
        at(12),
        at(12.1),
        B,
      );
    const acked = promoted({ host: 'mbp', generation: 3, acknowledgedAt: T - 1, savedSeconds: 5 });
    // mbp may have answered run on that confirmation to a caller its step-down cannot reach (a
    // script that asked hq fence check): the wait covers those answers, not only its children.
    t.not(
      acked.state.gave,
      null,
      'mbp acknowledged its step-down from generation 3: node-b still waits out the confirmation it gave',
    );
    t.same(reason(acked.state, at(12.2), 'cron', B)[0], false, 'node-b does not run inside it');
  },
);

t.test(
  'A7: a higher generation for this same host is a loss of the old one, with nothing to acknowledge',
  async (t) => {
    const step = onArbiterAnswer(holding(), confirming({ generation: 5, revision: 20 }), at(11), at(11.1), A);
    t.same(
      [step.state.steppedDown, step.state.lost, step.state.ackDue],
      [3, 3, null],
      'generation 3 stepped down, no acknowledgement (the arbiter raised its own grant)',
    );
    t.same(reason(step.state, at(11.2)), [true, 'holder'], 'generation 5 runs');
  },
);

const noAck: ReadonlyArray<readonly [string, ArbiterAnswer]> = [
  ['a handover (no lock-delay to end)', moved({ notBefore: T })],
  ['a record without notBefore', moved({ notBefore: null })],
  ['a record whose floor is pending (its database is new: it waits for nobody)', moved({ floorPending: true })],
  ['a record without holder', telling({ holder: null, generation: 4, expired: true })],
];
for (const [name, answer] of noAck) {
  t.test(`A7: a loss shown by ${name} steps down without an acknowledgement`, async (t) => {
    const s = onArbiterAnswer(holding(), answer, at(11), at(11.1), A).state;
    t.same([s.steppedDown, s.lost, s.ackDue], [3, 3, null], 'stepped down, nothing owed');
  });
}

t.test(
  'A7: a generation an earlier life of the agent held is never acknowledged (its children are unknown)',
  async (t) => {
    const p: Persisted = {
      holder: 'mbp',
      generation: 3,
      confirmedAt: W,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      gaveConfirmation: null,
      lockDelayPending: false,
    };
    const again = onArbiterAnswer(initialAgent(A, at(0), 3, p), confirming(), at(10), at(10.2), A).state;
    t.equal(again.ackFloor, 3, 'the floor is what the agent knew at its start');
    const s = onArbiterAnswer(again, moved(), at(11), at(11.1), A).state;
    t.same([s.steppedDown, s.ackDue], [3, null], 'stepped down, but no acknowledgement');
    const newer = onArbiterAnswer(
      onArbiterAnswer(again, confirming({ generation: 5 }), at(12), at(12.1), A).state,
      moved({ generation: 6, revision: 30 }),
      at(13),
      at(13.1),
      A,
    ).state;
    t.same(newer.ackDue, { generation: 5, revision: 30, ran: true }, 'a generation first held in this life is');
  },
);

t.test('A7: the step-down marks survive a restart, and a stepped-down generation never runs again', async (t) => {
  const s = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A).state;
  const restarted = initialAgent(A, at(50), 0, persisted(s, at(11.1)));
  t.same(
    [restarted.steppedDown, restarted.lost, restarted.ackDue],
    [3, 3, null],
    'marks back, nothing owed after a restart',
  );
  const old = { ...persisted(s, at(11.1)), steppedDown: 3, lost: undefined };
  t.same(
    [initialAgent(A, at(50), 0, old).steppedDown, initialAgent(A, at(50), 0, old).lost],
    [3, 0],
    'a file without lost keeps the step-down',
  );
  const p: Persisted = {
    holder: 'mbp',
    generation: 3,
    confirmedAt: W,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    gaveConfirmation: null,
    lockDelayPending: false,
  };
  t.equal(initialAgent(A, at(0), 0, p).steppedDown, 0, 'a file written before the marks has none');
  // The one path back to a record naming this host at 3: a restored arbiter (the agent seen only 3).
  const back = onArbiterAnswer({ ...restarted, seen: 3 }, confirming(), at(60), at(60.1), A).state;
  for (const role of ['cron', 'telegram-poller'])
    t.equal(decide(back, at(60.2), role).run, false, `${role}: no run for generation 3`);
});

t.test('A7: peer confirmations gathered for a generation do not run it once it is stepped down', async (t) => {
  const quorum = onPeerResults(
    onArbiterFailure(holding()).state,
    [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
    ['node-b'],
    at(14),
    at(14.2),
    A,
  ).state;
  t.same(reason(quorum, at(14.3)), [true, 'quorum-standby'], 'the quorum runs');
  const marked: AgentState = { ...quorum, steppedDown: 3 };
  t.same(reason(marked, at(14.3)), [false, 'not-holder'], 'with the generation stepped down it does not, grant or not');
  t.same(reason(marked, at(14.3), 'telegram-poller'), [false, 'not-holder'], 'nor fail-open');
});

t.test('A7: the arbiter asks the displaced holder to acknowledge', async (t) => {
  const lost = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A).state;
  const sent = acknowledged(lost, 3);
  t.equal(sent.ackDue, null, 'sent');
  t.equal(acknowledged(lost, 2), lost, 'another generation clears nothing');
  t.equal(acknowledged(sent, 3), sent, 'nothing owed: nothing changes');
  const asked = (s: AgentState, stepDown: number | null, patch: Partial<RecordSummary> = {}) =>
    onArbiterAnswer(s, { ...moved({ revision: 14, ...patch }), stepDown }, at(12), at(12.1), A);
  t.same(
    asked(sent, 3).state.ackDue,
    { generation: 3, revision: 14, ran: true },
    'asked again (the answer got lost): the same acknowledgement again',
  );
  t.equal(asked(lost, 3).state.ackDue, lost.ackDue, 'while one is owed, it stays');
  t.equal(asked(sent, null).state.ackDue, null, 'not asked: nothing');
  t.equal(asked(sent, 4).state.ackDue, null, 'asked for the record’s own generation: ignored');
  t.equal(asked(sent, 0).state.ackDue, null, 'asked for generation 0: ignored');
  const stranger = asked(
    onArbiterAnswer(fresh(A, 2), telling({ holder: 'node-b', generation: 2 }), at(1), at(1.1), A).state,
    3,
  );
  t.same(
    [stranger.state.steppedDown, stranger.state.lost, stranger.state.ackDue],
    [3, 3, { generation: 3, revision: 14, ran: false }],
    'an agent that never knew it held 3 steps down when asked',
  );
  t.same(
    stranger.events.map((e) => e.event),
    ['generation-adopted', 'step-down'],
    'and says so',
  );
  const restarted = initialAgent(A, at(50), 0, persisted(lost, at(11.1)));
  t.equal(asked(restarted, 3).state.ackDue, null, 'after a restart: never (its children are unknown)');
});

t.test(
  'A7: a generation whose children the agent could not see gone is never acknowledged, asked again or not',
  async (t) => {
    const lost = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A).state;
    t.same(lost.ackDue?.generation, 3, 'owed: generation 3');
    const gaveUp = unvouched(lost, 3);
    t.equal(gaveUp.ackDue, null, 'nothing is sent');
    t.ok(gaveUp.ackFloor >= 3, 'generation 3 joins the never-acknowledged floor');
    const askedAgain = onArbiterAnswer(gaveUp, { ...moved({ revision: 14 }), stepDown: 3 }, at(12), at(12.1), A).state;
    t.equal(
      askedAgain.ackDue,
      null,
      'asked again (its lock-delay still runs): still nothing owed — a second look would find no child it knows of',
    );
    const regained = onArbiterAnswer(
      askedAgain,
      confirming({ generation: 5, revision: 20 }),
      at(13),
      at(13.1),
      A,
    ).state;
    const later = onArbiterAnswer(regained, moved({ generation: 6, revision: 22 }), at(14), at(14.1), A).state;
    t.same(later.ackDue?.generation, 5, 'a later generation it held and lost is owed as before');
    t.same(unvouched(lost, 2).ackDue, lost.ackDue, 'giving up on a lower generation leaves the owed one');
  },
);

t.test('A7: resume undoes a release step-down, never a lost generation', async (t) => {
  const lost = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A).state;
  const regained = onArbiterAnswer(lost, confirming({ generation: 5, revision: 20 }), at(12), at(12.1), A).state;
  const released = stepDown(regained);
  t.same([released.steppedDown, released.lost], [5, 3], 'the release step-down is above the lost one');
  t.same([resume(released).steppedDown, resume(released).lost], [3, 3], 'resume goes back to the lost generation');
});

t.test('A7: a release step-down undoes itself once a record proves its release never landed', async (t) => {
  const down = stepDown(holding());
  t.same(down.releasing, { generation: 3, untilMono: Infinity }, 'until the release leaves, nothing can be proven');
  const none = fresh();
  t.equal(releaseSent(none, at(11), A), none, 'no release step-down: nothing to note');
  const sent = releaseSent(down, at(11), A);
  t.same(
    sent.releasing,
    { generation: 3, untilMono: 13 },
    'the release lands within one request timeout of its send, sent within one of this',
  );
  const early = onArbiterAnswer(sent, confirming(), at(12.9), at(13), A);
  t.same(
    [early.state.steppedDown, early.state.releasing],
    [3, sent.releasing],
    'a request sent before that proves nothing',
  );
  const late = onArbiterAnswer(sent, confirming(), at(13), at(13.1), A);
  t.same(
    [late.state.steppedDown, late.state.releasing],
    [0, null],
    'one sent after it still naming this host: the release never landed, the step-down is undone',
  );
  t.same(
    late.events.map((e) => [e.event, e.data]),
    [['step-down-undone', { generation: 3 }]],
    'and says so',
  );
  t.same(reason(late.state, at(13.2)), [true, 'holder'], 'the holder runs again');
  const pending = onArbiterAnswer(sent, confirming({ floorPending: true }), at(13), at(13.1), A).state;
  t.same([pending.steppedDown, pending.releasing], [3, sent.releasing], 'a pending record proves nothing');
  const released = onArbiterAnswer(sent, telling({ released: true, expired: true }), at(12), at(12.1), A).state;
  t.same([released.steppedDown, released.releasing], [3, null], 'released: decided, and it stays stepped down');
  const handed = onArbiterAnswer(sent, moved({ notBefore: T }), at(12), at(12.1), A).state;
  t.same([handed.steppedDown, handed.lost, handed.releasing], [3, 3, null], 'handed over: lost, decided');
  t.equal(resume(sent).releasing, null, 'resume decides too');
  const restarted = initialAgent(A, at(100), 0, persisted(sent, at(11)));
  t.same(
    [restarted.steppedDown, restarted.releasing],
    [3, { generation: 3, untilMono: 102 }],
    'after a restart the release, if any, was sent before the start',
  );
  const lost = onArbiterAnswer(holding(), moved(), at(11), at(11.1), A).state;
  t.equal(
    initialAgent(A, at(100), 0, persisted(lost, at(11))).releasing,
    null,
    'a lost generation is no release step-down',
  );
  t.same(
    [stepDown(lost).steppedDown, stepDown(lost).releasing],
    [3, null],
    'a standby steps down from nothing: no release to wait for',
  );
});

t.test('A7: an acknowledged step-down ends the new holder’s lock-delay at its next answer', async (t) => {
  const waiting = onArbiterAnswer(
    fresh(B),
    confirming({ holder: 'node-b', generation: 4, notBefore: T + 10 }),
    at(10),
    at(10.2),
    B,
  ).state;
  t.same(reason(waiting, at(11), 'cron', B), [false, 'lock-delay'], 'behind the lock-delay');
  const acked = { host: 'mbp', generation: 3, acknowledgedAt: T + 1.5 };
  const unacked = onArbiterAnswer(
    waiting,
    telling({
      holder: 'node-b',
      generation: 4,
      notBefore: T + 1.5,
      now: T + 1.5,
      displaced: { ...acked, acknowledgedAt: null },
    }),
    at(11.5),
    at(11.6),
    B,
  ).state;
  t.equal(
    unacked.waitUntilMono,
    waiting.waitUntilMono,
    'a shorter lock-delay without an acknowledgement does not shorten the wait',
  );
  const step = onArbiterAnswer(
    waiting,
    telling({ holder: 'node-b', generation: 4, notBefore: T + 1.5, now: T + 1.5, displaced: acked }),
    at(11.5),
    at(11.6),
    B,
  );
  t.equal(step.state.waitUntilMono, 11.6, 'the acknowledged record is taken as it is');
  t.same(reason(step.state, at(11.7), 'cron', B), [true, 'holder'], 'the waiting grant runs at once');
  const held = onArbiterAnswer(
    fresh(B),
    confirming({ holder: 'node-b', generation: 4, notBefore: T + 10 }, T + 5),
    at(10),
    at(10.2),
    B,
  ).state;
  const stillHeld = onArbiterAnswer(
    held,
    telling({ holder: 'node-b', generation: 4, notBefore: T + 1.5, now: T + 1.5, displaced: acked }),
    at(11.5),
    at(11.6),
    B,
  ).state;
  t.equal(stillHeld.pending?.startMono, 15.2, 'a grant behind a hold (S2.3) still waits for the hold');
});

t.test('settle: a validity once over stays over, so a later backward wall jump cannot revive it', async (t) => {
  const s = holding(); // valid until send + 5
  const jumped = at(11, W + 20); // a forward wall jump: elapsed 10 s
  t.same(reason(s, jumped), [false, 'no-quorum-expired'], 'over after the forward jump');
  const over = settle(s, jumped);
  t.equal(over.current, null, 'the spent grant is dropped');
  t.same(reason(over, at(11.5)), [false, 'no-quorum-expired'], 'the wall jumping back does not bring it back');
  const parked = onArbiterAnswer(fresh(), confirming({ notBefore: T + 10 }), at(10), at(10), A).state;
  t.equal(settle(parked, at(12, W + 30)).pending, null, 'a parked grant that is spent before its start is dropped too');
  t.equal(settle(parked, at(12)).pending, parked.pending, 'a parked grant still valid is kept');
});

t.test('settle folds a started pending grant, drops spent waits, and keeps the rest', async (t) => {
  const s = onArbiterAnswer(fresh(), confirming({ notBefore: T + 3 }), at(10), at(10), A).state;
  t.equal(settle(s, at(12)), s, 'nothing due: the same object');
  const g = settle(s, at(13));
  t.same([g.current?.startMono, g.pending], [13, null], 'folded');
});

t.test('persisted', async (t) => {
  t.same(
    persisted(fresh(A, 4), at(1)),
    {
      holder: null,
      generation: 4,
      confirmedAt: null,
      ttlSeconds: 0,
      safetyMarginSeconds: 0,
      gaveConfirmation: null,
      lockDelayPending: false,
      steppedDown: 0,
      lost: 0,
      released: false,
      floorPending: false,
    },
    'a fresh agent',
  );
  t.same(
    persisted(holding(), at(11)),
    {
      holder: 'mbp',
      generation: 3,
      confirmedAt: W + 10,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      gaveConfirmation: null,
      lockDelayPending: false,
      steppedDown: 0,
      lost: 0,
      released: false,
      floorPending: false,
    },
    'a running holder',
  );
  const waiting = onArbiterAnswer(fresh(), telling({ notBefore: T + 3 }), at(10), at(10), A).state;
  t.equal(persisted(waiting, at(11)).lockDelayPending, true, 'a lock-delay in progress is pending');
  t.equal(persisted(waiting, at(13)).lockDelayPending, false, 'and not after it');
  t.equal(persisted(holding(), at(5)).lockDelayPending, true, 'a grant that has not started yet is pending');
  t.test('a restart from persisted state forgets every validity (A5) and guards', async (t) => {
    const s = onConfirmRequest(standby(), { host: 'mbp', generation: 3 }, at(11), B).state;
    const restarted = initialAgent(B, at(500), 3, persisted(s, at(11)));
    t.equal(restarted.startGuardUntilMono, 507, 'guarded');
    const running = holding();
    const again = initialAgent(A, at(11), 3, persisted(running, at(11)));
    t.same(
      reason(again, at(11.5)),
      [false, 'no-quorum-expired'],
      'no validity survives a restart (the record does: A8)',
    );
  });
});

t.test(
  'A8, L2: a holder restarted during an arbiter outage runs again on its peers, after its start guard; a standby never',
  async (t) => {
    const P = { ...A, failOpenRoles: [] };
    // mbp holds generation 3 and runs on node-b's confirmation; the arbiter is down.
    const off = onArbiterFailure(holding({}, P)).state;
    const quorum = onPeerResults(
      off,
      [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
      ['node-b'],
      at(14),
      at(14),
      P,
    ).state;
    t.same(reason(quorum, at(15), 'cron', P), [true, 'quorum-standby'], 'before the restart: quorum-standby');
    const disk = persisted(quorum, at(15));
    t.match(
      disk,
      { holder: 'mbp', generation: 3, released: false, floorPending: false },
      'local.json says who holds what',
    );
    const restarted = initialAgent(P, at(100), 3, disk);
    t.match(
      restarted.known,
      { holder: 'mbp', generation: 3, floorPending: false, released: false, ttlSeconds: 6 },
      'the record is known again',
    );
    t.equal(persisted(restarted, at(100)).holder, 'mbp', 'and written back as it was, not with holder null');
    t.same(
      reason(restarted, at(100.5), 'cron', P),
      [false, 'no-quorum-expired'],
      'nothing runs on the restored record alone, and the reason is not no-lease-after-seen',
    );
    const down = onArbiterFailure(restarted);
    t.ok(asksPeers(down.state, { kind: 'no-answer' }), 'the restarted holder asks its peers');
    const again = onPeerResults(
      down.state,
      [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
      ['node-b'],
      at(101),
      at(101),
      P,
    ).state;
    t.same(reason(again, at(101.5), 'cron', P), [true, 'quorum-standby'], 'and runs again on their confirmation');
    const newer = onPeerResults(
      down.state,
      [{ peer: 'node-b', answered: true, confirmed: false, generation: 4 }],
      ['node-b'],
      at(101),
      at(101),
      P,
    ).state;
    t.same(reason(newer, at(101.5), 'cron', P)[0], false, 'a peer that knows a newer generation stops it');

    // With a flag on record (a grant that had not started), the start guard comes first.
    const waiting = onArbiterAnswer(fresh(P), confirming({ notBefore: T + 3 }), at(10), at(10), P).state;
    const guarded = initialAgent(P, at(100), 3, persisted(waiting, at(11)));
    t.equal(guarded.startGuardUntilMono, 107, 'the start guard holds for ttl + margin');
    const early = onPeerResults(
      onArbiterFailure(guarded).state,
      [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
      ['node-b'],
      at(101),
      at(101),
      P,
    ).state;
    t.same(reason(early, at(101.5), 'cron', P), [false, 'lock-delay'], 'confirmed, but inside the start guard: no');
    const after = onPeerResults(
      onArbiterFailure(guarded).state,
      [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
      ['node-b'],
      at(107),
      at(107),
      P,
    ).state;
    t.same(reason(after, at(107.5), 'cron', P), [true, 'quorum-standby'], 'after it: quorum-standby');

    // A restarted standby knows the holder again and never runs.
    const b = initialAgent(B, at(100), 3, persisted(standby(), at(11)));
    t.same(reason(b, at(100.5), 'cron', B), [false, 'not-holder'], 'a restarted standby: not-holder');
    t.notOk(asksPeers(onArbiterFailure(b).state, { kind: 'no-answer' }), 'and asks no one');
    t.equal(
      onConfirmRequest(b, { host: 'node-c', generation: 3 }, at(101), B).answer.reason,
      'other-holder',
      'it confirms no other holder at that generation',
    );

    // What is not known again: a pending record, a released one, a file written before the flags.
    const pending = persisted(
      onArbiterAnswer(fresh(P), confirming({ floorPending: true }), at(10), at(10), P).state,
      at(11),
    );
    t.equal(initialAgent(P, at(100), 3, pending).known, null, 'a record whose floor was pending is forgotten');
    t.equal(initialAgent(P, at(100), 3, { ...disk, released: true }).known, null, 'a released one too');
    const { released: _r, floorPending: _f, ...older } = disk;
    t.equal(initialAgent(P, at(100), 3, older).known, null, 'and one from a file that did not say');
  },
);

// ---------------------------------------------------------------------------------------
// the fence: every documented reason and the clocks (A1, A2)

t.test('fence: every documented reason', async (t) => {
  const off = onArbiterFailure(holding()).state;
  const quorum = onPeerResults(
    off,
    [{ peer: 'node-b', answered: true, confirmed: true, generation: 3 }],
    ['node-b'],
    at(11),
    at(11),
    A,
  ).state;
  const gave = onConfirmRequest(
    onArbiterAnswer(fresh(), telling({ holder: 'node-b', generation: 3 }), at(9), at(9), A).state,
    { host: 'node-b', generation: 3 },
    at(10),
    A,
  ).state;
  const gaveThenPromoted = onArbiterAnswer(gave, confirming({ generation: 4 }), at(11), at(11), A).state;
  const cases: ReadonlyArray<readonly [FenceReason, string, AgentState, Stamp, string, boolean]> = [
    ['holder', 'a confirmed holder with the arbiter reachable runs as holder', holding(), at(11), 'cron', true],
    ['quorum-standby', 'a holder confirmed by every standby runs as quorum-standby', quorum, at(12), 'cron', true],
    ['within-ttl', 'a holder whose arbiter is unreachable runs within its ttl', off, at(12), 'cron', true],
    [
      'lock-delay',
      'a holder inside its lock-delay waits',
      onArbiterAnswer(fresh(), confirming({ notBefore: T + 3 }), at(10), at(10), A).state,
      at(11),
      'cron',
      false,
    ],
    [
      'lock-delay',
      'a standby that gave a confirmation waits even when promoted',
      gaveThenPromoted,
      at(12),
      'cron',
      false,
    ],
    ['not-holder', 'a standby does not run', standby(), at(11), 'cron', false],
    [
      'stale-generation',
      'a stale record does not run',
      onArbiterAnswer(fresh(A, 9), confirming(), at(10), at(10), A).state,
      at(11),
      'cron',
      false,
    ],
    ['no-quorum-expired', 'a holder past its validity does not run', off, at(15), 'cron', false],
    ['no-lease', 'no record and never a generation: no-lease', fresh(), at(1), 'cron', false],
    [
      'no-lease-after-seen',
      'no record after a seen generation: no-lease-after-seen',
      fresh(A, 1),
      at(1),
      'cron',
      false,
    ],
    ['fail-open', 'a fail-open role of the last holder runs after its validity', off, at(15), 'telegram-poller', true],
  ];
  const seen = new Set<FenceReason>();
  for (const [why, name, s, now, role, run] of cases) {
    const d = fence(s, role, now, A);
    t.same([d.run, d.reason, d.role], [run, why, role], name);
    t.equal(d.validForSeconds === null, !run || why === 'fail-open', `${name}: validForSeconds only when bounded`);
    seen.add(why);
  }
  t.same([...seen].sort(), [...FENCE_REASONS].sort(), "every reason of the protocol's list is produced, and no other");
  t.same(reason(off, at(15), 'ledger-cli'), [false, 'no-quorum-expired'], 'ledger-cli is never fail-open');
  t.same(reason(quorum, at(12), 'ledger-cli'), [true, 'quorum-standby'], 'ledger-cli runs on a real quorum');
  const d = decide(standby(), at(11));
  t.same(
    [d.generation, d.holder, d.validForSeconds],
    [3, 'mbp', null],
    'a refusal still names the generation and the holder',
  );
});

t.test('fence: validity from send time with elapsed = max(mono, wall) (A1)', async (t) => {
  const s = holding(); // sent at mono 10 / wall W+10, valid 5 s
  const cases: ReadonlyArray<readonly [string, Stamp, boolean, number | null]> = [
    ['both clocks at +2 s: 3 s left', at(12), true, 3],
    ['a laptop sleep (mono frozen, wall +6 s) ends it', at(10.5, W + 16), false, null],
    ['a forward wall jump of 4 s shortens it', at(11, W + 14), true, 1],
    ['a backward wall jump does not lengthen it', at(14.9, W + 5), true, 0.1],
    ['a backward wall jump does not lengthen it past the mono end', at(15, W - 100), false, null],
  ];
  for (const [name, now, run, left] of cases) {
    const d = decide(s, now);
    t.equal(d.run, run, name);
    if (left !== null) t.ok(Math.abs((d.validForSeconds ?? -1) - left) < 1e-9, `${name}: ${left} s left`);
  }
});

t.test('queryFence settles once: the decision is the fence of the settled state, which it returns', async (t) => {
  const s = holding();
  const later = at(16); // the grant (valid until 15) is spent
  const q = queryFence(s, 'cron', later, A);
  t.same(q.state, settle(s, later), 'the settled state is returned for the shell to keep');
  t.equal(q.state.current, null, 'with the spent grant dropped');
  t.same(q.decision, fence(s, 'cron', later, A), 'the decision is the one fence gives');
  t.same(queryFence(q.state, 'cron', later, A).state, q.state, 'settling a settled state changes nothing');
});

t.test('fence reads memory only: it does not change the state it is given', async (t) => {
  const s = onArbiterAnswer(fresh(), confirming({ notBefore: T + 3 }), at(10), at(10), A).state;
  const copy = JSON.stringify(s);
  fence(s, 'cron', at(20), A);
  t.equal(JSON.stringify(s), copy, 'unchanged');
});

// ---------------------------------------------------------------------------------------
// property: given arbiter answers only, the fence never says run on two hosts at once (S2)

const AS: ArbiterSettings = {
  arbiter: 'cloud-vm',
  candidates: ['mbp', 'node-b'],
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  promoteAfterChecks: 2,
  viewFreshSeconds: 6,
};
const HOSTS = ['mbp', 'node-b'] as const;
/** The agents' request timeout (theirs: the arbiter learns it from each request). */
const RT = 1;
const agentSettings = (host: string): AgentSettings => ({ ...A, host, failOpenRoles: [] });

interface SimNode {
  s: AgentState;
  /** mono = real − monoLag (a sleep stops mono); wall = real + wallOff (jumps). */
  monoLag: number;
  wallOff: number;
  asleepUntil: number;
  /** Real time of the last backward wall jump (see the sleep rule below). */
  backJumpAt: number;
  up: boolean;
}

interface SimResult {
  overlaps: string[];
  runSamples: number;
  bothRan: boolean;
}

/**
 * A small discrete-event world: one arbiter (real time), two agents with their own clocks,
 * heartbeats every second, checks every second, random delays, drops and late answers, network
 * cuts, laptop sleeps, wall-clock jumps, agent and arbiter restarts, database loss, explicit
 * acquires and forced transfers — every random choice read from `tape` so fast-check shrinks it.
 */
function simulate(tape: readonly number[], seconds = 30): SimResult {
  let i = 0;
  const rnd = (): number => (i < tape.length ? (tape[i++] as number) : 500) / 1000;
  let now = 0;
  let arb: ArbiterState = { lease: emptyLease(AS.ttlSeconds), observers: new Map(), floor: 0 };
  let boot = newBoot(-1000);
  const nodes = new Map<string, SimNode>();
  for (const h of HOSTS) {
    const wallOff = W + rnd() * 100;
    nodes.set(h, {
      s: initialAgent(agentSettings(h), { mono: 0, wall: wallOff }, 0, null),
      monoLag: 0,
      wallOff,
      asleepUntil: -1,
      backJumpAt: -Infinity,
      up: true,
    });
  }
  const node = (h: string): SimNode => nodes.get(h) as SimNode;
  /** A host answers probes when its network is up and it is not asleep. */
  const reachableHost = (h: string): boolean => node(h).up && now >= node(h).asleepUntil;
  const stampOf = (n: SimNode): Stamp => ({ mono: now - n.monoLag, wall: now + n.wallOff });
  const queue: { at: number; seq: number; fn: () => void }[] = []; // sorted by (at, seq)
  let seq = 0;
  const push = (when: number, fn: () => void) => {
    let lo = 0;
    let hi = queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((queue[mid] as { at: number }).at <= when) lo = mid + 1;
      else hi = mid;
    }
    queue.splice(lo, 0, { at: when, seq: seq++, fn });
  };
  const onNode = (h: string, when: number, fn: (n: SimNode) => void) => {
    const run = () => {
      const n = node(h);
      if (now < n.asleepUntil)
        push(n.asleepUntil, run); // a frozen process acts on waking
      else fn(n);
    };
    push(when, run);
  };
  const delay = () => (rnd() < 0.9 ? rnd() * 0.6 : 0.6 + rnd());
  const answerOf = (confirms: boolean, hold: number | null): ArbiterAnswer => {
    const parsed = parseRecord(JSON.parse(JSON.stringify(toRecord(arb.lease, arb.observers, now))));
    if (!parsed.ok) throw new Error(parsed.problem);
    return { record: parsed.value, confirms, hold };
  };
  const heartbeatOf = (h: string) => {
    const n = node(h);
    const sent = stampOf(n);
    const settings = agentSettings(h);
    let answered = false;
    onNode(h, now + RT, (m) => {
      if (!answered) m.s = onArbiterFailure(m.s).state;
    });
    if (!n.up || rnd() < 0.1) return; // the request is lost
    push(now + delay(), () => {
      const known = n.s.known;
      const reachable = known?.holder != null && reachableHost(known.holder) && rnd() < 0.9;
      const step = heartbeat(
        arb,
        { now, settings: AS, boot },
        {
          host: h,
          seenGeneration: n.s.seen,
          heartbeatSeconds: 1,
          requestTimeoutSeconds: 1,
          ...(known?.holder === h ? { generation: known.generation } : {}),
          ...(known && known.holder !== null && known.holder !== h
            ? { view: { target: known.holder, reachable, ping: reachable, health: false } }
            : {}),
        },
      );
      arb = step.next;
      boot = step.boot;
      const confirms = step.answer.outcome === 'renewed';
      const answer = answerOf(confirms, confirms ? renewHold({ now, settings: AS, boot }, boot, arb) : null);
      if (!node(h).up || rnd() < 0.1) return; // the answer is lost
      onNode(h, now + delay(), (m) => {
        answered = true;
        m.s = onArbiterAnswer(m.s, answer, sent, stampOf(m), settings).state;
      });
    });
  };
  for (let k = 0; k < seconds; k++) {
    for (const h of HOSTS) {
      const phase = rnd();
      onNode(h, k + phase, () => heartbeatOf(h));
    }
    push(k + 0.5, () => {
      const holder = arb.lease.holder;
      const up = holder !== null && reachableHost(holder) && rnd() < 0.9;
      const step = check(arb, { now, settings: AS, boot }, { ping: up, health: false });
      arb = step.next;
      boot = step.boot;
    });
    push(k + rnd(), () => {
      const r = rnd();
      const h = HOSTS[rnd() < 0.5 ? 0 : 1] as string;
      const n = node(h);
      if (k === 0 || r < 0.05) {
        // `hq lease acquire` on h: the CLI sends the host's seen generation; the agent learns at its next heartbeat.
        const step = acquire(
          arb,
          { now, settings: AS, boot },
          { host: k === 0 ? 'mbp' : h, seenGeneration: node(k === 0 ? 'mbp' : h).s.seen, requestTimeoutSeconds: 1 },
        );
        arb = step.next;
        boot = step.boot;
      } else if (r < 0.08) {
        arb = transfer(arb, { now, settings: AS, boot }, { to: h }).next;
      } else if (r < 0.1) {
        boot = newBoot(now); // arbiter restart
      } else if (r < 0.11) {
        arb = { lease: { ...emptyLease(AS.ttlSeconds), floorPending: true }, observers: new Map(), floor: 0 }; // database lost
        boot = newBoot(now);
      } else if (r < 0.14 && now >= n.asleepUntil) {
        const p = persisted(n.s, stampOf(n)); // kill -9 and restart
        n.s = initialAgent(agentSettings(h), stampOf(n), n.s.seen, p);
      } else if (r < 0.18 && now >= n.asleepUntil && now - n.backJumpAt > 2 * AS.ttlSeconds) {
        const d = rnd() * 12; // laptop sleep: the process freezes, mono stops
        n.asleepUntil = now + d;
        n.monoLag += d;
      } else if (r < 0.22) {
        // A wall-clock jump either way — but never backwards around a sleep: with mono stopped
        // AND the wall set back, no local clock sees the time that passed (see the report).
        const jump = (rnd() - 0.5) * 40;
        const nearSleep = now < n.asleepUntil + 2 * AS.ttlSeconds;
        n.wallOff += nearSleep ? Math.abs(jump) : jump;
        if (!nearSleep && jump < 0) n.backJumpAt = now;
      } else if (r < 0.3) {
        n.up = !n.up; // network cut or repair (all of h's traffic, and probes of h)
      }
    });
  }
  const result: SimResult = { overlaps: [], runSamples: 0, bothRan: false };
  const ran = new Set<string>();
  for (let step = 0; step <= seconds * 20; step++) {
    const sample = step / 20;
    // Run every event due by this sample (events may schedule more events).
    for (;;) {
      const e = queue[0];
      if (e === undefined || e.at > sample) break;
      queue.shift();
      now = e.at;
      e.fn();
    }
    now = sample;
    const runners = HOSTS.filter((h) => {
      const n = node(h);
      return now >= n.asleepUntil && fence(n.s, 'git-push', stampOf(n), agentSettings(h)).run;
    });
    for (const h of runners) ran.add(h);
    if (runners.length > 0) result.runSamples++;
    if (runners.length > 1) result.overlaps.push(`both ${runners.join(' and ')} run at ${sample}`);
  }
  result.bothRan = ran.size === 2;
  return result;
}

t.test('property: the fence never says run for two hosts at once, given arbiter answers only (S2)', async (t) => {
  let samples = 0;
  let handovers = 0;
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 999 }), { minLength: 900, maxLength: 1500, size: 'max' }),
      (tape) => {
        const r = simulate(tape);
        samples += r.runSamples;
        if (r.bothRan) handovers++;
        if (r.overlaps.length > 0) throw new Error(r.overlaps.slice(0, 3).join('; '));
      },
    ),
    // A failure prints its seed and path (replay with { seed, path }); shrinking a long tape is slow, so skip it.
    { numRuns: 80, endOnFailure: true },
  );
  t.ok(samples > 0, `someone ran in ${samples} samples (the world is not vacuous)`);
  t.ok(handovers > 0, `both hosts ran, at different times, in ${handovers} schedules (the lease moved)`);
});

// ---------------------------------------------------------------------------------------
// property: one agent under random inputs keeps A1–A5 in every fence answer

type AgentOp =
  | {
      k: 'answer';
      holder: string | null;
      generation: number;
      released: boolean;
      floorPending: boolean;
      notBefore: number;
      confirms: boolean;
      hold: number | null;
      delay: number;
      ask: number | null;
    }
  | { k: 'failure' }
  | { k: 'confirm'; host: string; generation: number }
  | { k: 'peers'; confirmed: boolean; generation: number | null; delay: number }
  | { k: 'stepDown' }
  | { k: 'resume' }
  | { k: 'restart' }
  | { k: 'time'; seconds: number; jump: number };

/** `a` nine times in ten, else `b`: keeps the interesting histories (a live holder) frequent. */
const mostly = <T, U>(a: T, b: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
  fc.oneof({ arbitrary: fc.constant(a), weight: 9 }, { arbitrary: b, weight: 1 });

const agentOpArb: fc.Arbitrary<AgentOp> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant('answer' as const),
      holder: mostly('mbp' as string | null, fc.constantFrom('node-b', null)),
      generation: fc.integer({ min: 0, max: 6 }),
      released: mostly(false, fc.constant(true)),
      floorPending: mostly(false, fc.constant(true)),
      notBefore: fc.oneof(fc.integer({ min: -5, max: 0 }), fc.integer({ min: -5, max: 10 })),
      confirms: mostly(true, fc.constant(false)),
      hold: mostly(null, fc.integer({ min: -5, max: 10 })),
      delay: fc.oneof(fc.double({ min: 0, max: 0.9, noNaN: true }), fc.double({ min: 0, max: 1.5, noNaN: true })),
      ask: mostly(null as number | null, fc.integer({ min: 0, max: 6 })),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'failure' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('confirm' as const),
      host: fc.constantFrom('mbp', 'node-b', 'node-c'),
      generation: fc.integer({ min: 0, max: 6 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('peers' as const),
      confirmed: mostly(true, fc.constant(false)),
      generation: mostly(null as number | null, fc.integer({ min: 0, max: 6 })).map((g) => g ?? 3),
      delay: fc.oneof(fc.double({ min: 0, max: 0.9, noNaN: true }), fc.double({ min: 0, max: 1.5, noNaN: true })),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'stepDown' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'resume' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'restart' as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      k: fc.constant('time' as const),
      seconds: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.double({ min: 0, max: 8, noNaN: true })),
      jump: fc.oneof(fc.constant(0), fc.constant(0), fc.double({ min: -30, max: 30, noNaN: true })),
    }),
  },
);

t.test(
  'property: under random answers, confirmations, peer rounds, restarts and clock jumps every fence answer keeps A1–A5 and A7',
  async (t) => {
    fc.assert(
      fc.property(fc.array(agentOpArb, { maxLength: 60, size: 'max' }), (ops) => {
        let now = at(100);
        let s = initialAgent(A, now, 0, null);
        let seen = s.seen;
        let lost = s.lost;
        // The arbiter's clock runs with real time (mono here: no sleeps); a grant's notBefore is
        // fixed when it is made, so it is fixed per (holder, generation).
        const arbiterNow = () => T + now.mono - 100;
        const notBefores = new Map<string, number>();
        let wasRunning = false;
        for (const op of ops) {
          const earlier = (d: number): Stamp => ({ mono: now.mono - d, wall: now.wall - d });
          switch (op.k) {
            case 'answer': {
              const generation = op.holder === null ? 0 : Math.max(op.generation, 1);
              const tenure = `${op.holder}@${generation}`;
              const notBefore = notBefores.get(tenure) ?? arbiterNow() - op.delay / 2 + op.notBefore;
              notBefores.set(tenure, notBefore);
              const record = rec({
                holder: op.holder,
                generation,
                released: op.released,
                expired: op.released || op.holder === null,
                floorPending: op.floorPending,
                notBefore,
                now: arbiterNow() - op.delay / 2,
              });
              const hold = op.hold === null ? null : arbiterNow() + op.hold;
              s = onArbiterAnswer(
                s,
                { record, confirms: op.confirms, hold, stepDown: op.ask },
                earlier(op.delay),
                now,
                A,
              ).state;
              break;
            }
            case 'failure':
              s = onArbiterFailure(s).state;
              break;
            case 'confirm':
              s = onConfirmRequest(
                s,
                { host: op.host, generation: op.generation, ttlSeconds: 6, safetyMarginSeconds: 1 },
                now,
                A,
              ).state;
              break;
            case 'peers': {
              const result = {
                peer: 'node-b',
                answered: true,
                confirmed: op.confirmed,
                ...(op.generation === null ? {} : { generation: op.generation }),
              };
              s = onPeerResults(s, [result], ['node-b'], earlier(op.delay), now, A).state;
              break;
            }
            case 'stepDown':
              s = stepDown(s);
              break;
            case 'resume':
              s = resume(s);
              break;
            case 'restart':
              s = initialAgent(A, now, s.seen, persisted(s, now));
              break;
            case 'time':
              now = { mono: now.mono + op.seconds, wall: now.wall + op.seconds + op.jump };
              s = settle(s, now);
              break;
          }
          if (s.seen < seen) throw new Error(`seen went down ${seen} → ${s.seen} (A3)`);
          seen = s.seen;
          if (s.lost < lost || s.steppedDown < s.lost)
            throw new Error(`a lost generation came back: lost ${lost} → ${s.lost}, steppedDown ${s.steppedDown} (A7)`);
          lost = s.lost;
          if (s.ackDue !== null && s.ackDue.generation <= s.ackFloor)
            throw new Error('an acknowledgement owed for a generation an earlier life held (A7)');
          const bounded = fence(s, 'cron', now, A);
          const startedRun = bounded.run && !wasRunning;
          wasRunning = bounded.run;
          for (const role of ['cron', 'ledger-cli', 'telegram-poller']) {
            const d = fence(s, role, now, A);
            if (!d.run) continue;
            if (d.generation <= s.steppedDown)
              throw new Error(`runs generation ${d.generation} after stepping down from ${s.steppedDown} (A7)`);
            if (d.reason === 'fail-open') {
              if (role === 'ledger-cli') throw new Error('ledger-cli failed open (A5)');
              if (s.known?.holder !== 'mbp') throw new Error('fail-open for a host that is not the last known holder');
              continue;
            }
            const left = d.validForSeconds ?? NaN;
            if (!(left > 0 && left <= 6 - 1)) throw new Error(`validity left ${left} outside (0, ttl − margin] (A1)`);
            if (s.known?.holder !== 'mbp' || s.stale || s.known.released)
              throw new Error(`runs as ${d.reason} without holding a live record`);
            if (s.gave !== null && now.mono < s.gave.untilMono)
              throw new Error('runs inside the wait after a confirmation it gave (A4)');
            if (s.startGuardUntilMono !== null && now.mono < s.startGuardUntilMono)
              throw new Error('runs inside the start guard (A4)');
            // A2 is about starting: a validity may not *begin* inside a wait. A holder already
            // running on a grant of its tenure keeps it (a later answer may park a renewal).
            if (startedRun && now.mono < s.waitUntilMono) throw new Error('starts running inside the lock-delay (A2)');
            if (d.generation !== s.known.generation || d.generation < 1)
              throw new Error('runs with a generation that is not the known one');
          }
        }
        return true;
      }),
      { numRuns: 300 },
    );
    t.pass('no fence answer broke A1–A5 or A7 in 300 random agent histories');
  },
);
