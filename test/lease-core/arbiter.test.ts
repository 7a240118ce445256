import t from 'tap';
import fc from 'fast-check';
import {
  acquire as acquireCore,
  atRestart,
  check,
  emptyLease,
  heartbeat as heartbeatCore,
  isCandidate,
  lockDelayUntil,
  newBoot,
  noteReport as noteReportCore,
  reportDue,
  promotee,
  release,
  renew,
  renewHold,
  setMaintenance,
  startWaitUntil,
  stepDownAsked,
  steppedDown,
  targetSilence,
  toRecord,
  transfer,
} from '../../packages/lease-core/src/index.js';
import type {
  ArbiterSettings,
  ArbiterState,
  Boot,
  Context,
  LeaseState,
  Observer,
  Step,
} from '../../packages/lease-core/src/index.js';
import type { AcquireRequest, HeartbeatRequest } from '../../packages/protocol/src/index.js';

/**
 * The agents' request timeout is theirs (S6): every request declares it, and the arbiter counts
 * a report for S2.3/S2.4 only with it. These tests send 5 s unless a case says otherwise.
 */
const RT = 5;
const acquire = (s: ArbiterState, c: Context, i: AcquireRequest) =>
  acquireCore(s, c, { requestTimeoutSeconds: RT, ...i });
const heartbeat = (s: ArbiterState, c: Context, i: HeartbeatRequest) =>
  heartbeatCore(s, c, { requestTimeoutSeconds: RT, ...i });
const noteReport = (
  s: ArbiterState,
  c: Context,
  b: Boot,
  host: string,
  seen: number | undefined,
  generation: number | undefined,
  rt: number | null = RT,
) => noteReportCore(s, c, b, host, seen, generation, rt ?? undefined);

// ttl 100, margin 10: a lock-delay is expiresAt + 10, a start wait is startAt + 110, and a
// report counts from startAt + 2 × 5. WARM is a boot long past both waits.
const S: ArbiterSettings = {
  arbiter: 'cloud-vm',
  candidates: ['mbp', 'node-b'],
  ttlSeconds: 100,
  safetyMarginSeconds: 10,
  promoteAfterChecks: 2,
  viewFreshSeconds: 50,
};
const S3: ArbiterSettings = { ...S, candidates: ['mbp', 'node-b', 'node-c'] };
const WARM: Boot = newBoot(0);
const START = 1000; // the start of a young boot
const young = (reports: ReadonlyArray<readonly [string, number]> = []): Boot => ({
  startAt: START,
  reports: new Map(reports),
  noEarlierLife: false,
});

function ctx(now: number, boot: Boot = WARM, settings: ArbiterSettings = S): Context {
  return { now, boot, settings };
}

const NO_OBSERVER: Observer = {
  view: null,
  confirmation: null,
  lastHeartbeatAt: null,
  heartbeatSeconds: null,
  refreshSeconds: null,
  requestTimeoutSeconds: null,
};

function state(
  lease: Partial<LeaseState> = {},
  observers: ReadonlyArray<readonly [string, Partial<Observer>]> = [],
  floor = 0,
): ArbiterState {
  return {
    lease: { ...emptyLease(100), ...lease },
    observers: new Map(observers.map(([h, o]) => [h, { ...NO_OBSERVER, ...o }] as const)),
    floor,
  };
}

// mbp holds generation 3, granted at 900, renewed at 950, expires at 1050.
const HELD: Partial<LeaseState> = {
  holder: 'mbp',
  generation: 3,
  revision: 5,
  acquiredAt: 900,
  renewedAt: 950,
  expiresAt: 1050,
  notBefore: 900,
};
const held = (
  patch: Partial<LeaseState> = {},
  observers: ReadonlyArray<readonly [string, Partial<Observer>]> = [],
  floor = 3,
): ArbiterState => state({ ...HELD, ...patch }, observers, floor);

const unreachableView = (target: string, at: number) => ({
  view: { target, reachable: false, ping: false, health: false, at },
});
const confirmation = (holder: string, at: number, generation = 3) => ({ confirmation: { holder, generation, at } });
/** An observer last heard at `at`, reporting a 10 s heartbeat (alive for 10 × 1.5 + 5 = 20 s). */
const alive = (host: string, at: number) => [host, { lastHeartbeatAt: at, heartbeatSeconds: 10 }] as const;

function events(step: Step<unknown>): string[] {
  return step.events.map((e) => e.event);
}

// ---------------------------------------------------------------------------------------
// acquire

interface Expect {
  readonly ok: boolean;
  readonly reason?: string;
  readonly lease?: Partial<LeaseState>;
  readonly floor?: number;
  readonly events?: readonly string[];
  /** The state object is returned untouched (nothing to write). */
  readonly unchanged?: boolean;
}

type Case<I> = readonly [name: string, state: ArbiterState, ctx: Context, input: I, expect: Expect];

function runTable<I>(
  name: string,
  decide: (s: ArbiterState, c: Context, i: I) => Step<{ ok: boolean; reason?: string }>,
  cases: ReadonlyArray<Case<I>>,
): void {
  t.test(name, async (t) => {
    for (const [title, s, c, input, expect] of cases) {
      t.test(title, async (t) => {
        const step = decide(s, c, input);
        t.equal(step.answer.ok, expect.ok, expect.ok ? 'accepted' : 'refused');
        if (expect.reason !== undefined) t.equal(step.answer.reason, expect.reason, 'reason');
        if (expect.lease !== undefined) t.match(step.next.lease, expect.lease, 'the next lease');
        if (expect.floor !== undefined) t.equal(step.next.floor, expect.floor, 'the floor');
        if (expect.events !== undefined) t.same(events(step), expect.events, 'events');
        if (expect.unchanged === true) t.equal(step.next, s, 'nothing to write: the same state object');
        if (step.next.lease !== s.lease)
          t.ok(step.next.lease.revision > s.lease.revision, 'every write of the lease row bumps the revision');
        else t.equal(step.next.lease.revision, s.lease.revision, 'no write, same revision');
        t.ok(step.next.lease.generation >= s.lease.generation, 'generation never goes down (G1)');
        t.ok(step.next.floor >= s.floor, 'the floor never goes down');
      });
    }
  });
}

runTable('acquire', acquire, [
  [
    'acquire of a free lease grants generation 1 at once',
    state(),
    ctx(1000),
    { host: 'mbp' },
    {
      ok: true,
      lease: {
        holder: 'mbp',
        generation: 1,
        revision: 1,
        acquiredAt: 1000,
        renewedAt: 1000,
        expiresAt: 1100,
        notBefore: 1000,
        released: false,
        promotedFrom: null,
        ttlSeconds: 100,
      },
      events: ['acquired'],
    },
  ],
  [
    'acquire of an expired lease of another host waits for its lock-delay',
    held(),
    ctx(1055),
    { host: 'node-b' },
    {
      ok: true,
      lease: {
        holder: 'node-b',
        generation: 4,
        notBefore: 1060,
        expiresAt: 1160,
        promotedFrom: 'mbp',
        dualUnreachableStreak: 0,
      },
      events: ['acquired'],
    },
  ],
  [
    'acquire long after expiry of another host starts at once',
    held(),
    ctx(2000),
    { host: 'node-b' },
    { ok: true, lease: { holder: 'node-b', generation: 4, notBefore: 2000, expiresAt: 2100, promotedFrom: 'mbp' } },
  ],
  [
    'acquire of a live lease of another host is refused as held',
    held(),
    ctx(1000),
    { host: 'node-b' },
    { ok: false, reason: 'held', events: ['acquire-refused'], unchanged: true },
  ],
  [
    'acquire one instant before expiry is still refused as held',
    held(),
    ctx(1049.999),
    { host: 'node-b' },
    { ok: false, reason: 'held' },
  ],
  [
    'holder re-acquire renews and keeps generation',
    held(),
    ctx(1000),
    { host: 'mbp' },
    {
      ok: true,
      lease: { holder: 'mbp', generation: 3, revision: 6, renewedAt: 1000, expiresAt: 1100, acquiredAt: 900 },
      events: ['renewed'],
    },
  ],
  [
    'holder re-acquire renews even past expiry',
    held(),
    ctx(1500),
    { host: 'mbp' },
    { ok: true, lease: { holder: 'mbp', generation: 3, expiresAt: 1600 }, events: ['renewed'] },
  ],
  [
    'holder re-acquire during its lock-delay renews from notBefore',
    held({ notBefore: 1080, expiresAt: 1180 }),
    ctx(1000),
    { host: 'mbp' },
    { ok: true, lease: { generation: 3, notBefore: 1080, expiresAt: 1180 } },
  ],
  [
    'acquire after its own release grants a new generation without lock-delay',
    held({ released: true }),
    ctx(1000),
    { host: 'mbp' },
    {
      ok: true,
      lease: { holder: 'mbp', generation: 4, notBefore: 1000, expiresAt: 1100, released: false, promotedFrom: null },
      events: ['acquired'],
    },
  ],
  [
    "acquire after another host's release waits for the released holder's lock-delay",
    held({ released: true }),
    ctx(1000),
    { host: 'node-b' },
    { ok: true, lease: { holder: 'node-b', generation: 4, notBefore: 1060, expiresAt: 1160, promotedFrom: 'mbp' } },
  ],
  [
    'acquire by a non-candidate is refused and its report is ignored',
    held(),
    ctx(1000),
    { host: 'cloud-vm', seenGeneration: 9 },
    { ok: false, reason: 'not-candidate', floor: 3, unchanged: true },
  ],
  [
    'acquire by an unknown host is refused',
    state(),
    ctx(1000),
    { host: 'laptop2' },
    { ok: false, reason: 'not-candidate', events: ['acquire-refused'] },
  ],
  [
    'the floor raises the generation of a grant (S1)',
    state({}, [], 7),
    ctx(1000),
    { host: 'mbp' },
    { ok: true, lease: { generation: 8 } },
  ],
  [
    'the seen generation of the acquire itself raises the floor first',
    state(),
    ctx(1000),
    { host: 'mbp', seenGeneration: 12 },
    { ok: true, floor: 12, lease: { generation: 13 } },
  ],
  [
    'a refused acquire still raises the floor and repairs the record',
    held(),
    ctx(1000),
    { host: 'node-b', seenGeneration: 9 },
    {
      ok: false,
      reason: 'held',
      floor: 9,
      lease: { holder: 'mbp', generation: 10 },
      events: ['generation-raised', 'acquire-refused'],
    },
  ],
  [
    'lock-delay after another holder covers a confirmation a standby gave it',
    held({}, [['node-b', confirmation('mbp', 1040)]]),
    ctx(1055),
    { host: 'node-b' },
    { ok: true, lease: { holder: 'node-b', notBefore: 1150, expiresAt: 1250 } },
  ],
  [
    'a confirmation of another holder does not lengthen the lock-delay',
    held({}, [['node-b', confirmation('node-c', 1040)]]),
    ctx(1055),
    { host: 'node-b' },
    { ok: true, lease: { notBefore: 1060 } },
  ],
  [
    'an old confirmation is dominated by the expiry',
    held({}, [['node-b', confirmation('mbp', 900)]]),
    ctx(1055),
    { host: 'node-b' },
    { ok: true, lease: { notBefore: 1060 } },
  ],
  [
    'a grant after a start waits ttl + margin after the start (S2.3)',
    state(),
    ctx(1020, young()),
    { host: 'mbp', seenGeneration: 0 },
    { ok: true, lease: { holder: 'mbp', generation: 1, notBefore: 1110, expiresAt: 1210, acquiredAt: 1020 } },
  ],
  [
    'a grant starts at once when every candidate reported never having seen a generation',
    state(),
    ctx(1020, young([['node-b', 0]])),
    { host: 'mbp', seenGeneration: 0 },
    { ok: true, lease: { generation: 1, notBefore: 1020, expiresAt: 1120 } },
  ],
  [
    'a never-seen report sent too soon after the start does not count',
    state(),
    ctx(1009, young([['node-b', 0]])),
    { host: 'mbp', seenGeneration: 0 },
    { ok: true, lease: { notBefore: 1110 } },
  ],
  [
    'one candidate that has seen a generation keeps the start wait',
    state({}, [], 2),
    ctx(1020, young([['node-b', 2]])),
    { host: 'mbp', seenGeneration: 0 },
    { ok: true, lease: { notBefore: 1110, generation: 3 } },
  ],
  [
    'a missing report keeps the start wait',
    state(),
    ctx(1020, young()),
    { host: 'mbp', seenGeneration: 0 },
    { ok: true, lease: { notBefore: 1110 } },
  ],
  [
    'an acquire without a seen generation is not a report',
    state(),
    ctx(1020, young([['node-b', 0]])),
    { host: 'mbp' },
    { ok: true, lease: { notBefore: 1110 } },
  ],
  [
    'the start wait and the lock-delay both hold: the later one wins',
    held({ expiresAt: 1150 }),
    ctx(1150, young()),
    { host: 'node-b', seenGeneration: 3 },
    { ok: true, lease: { notBefore: 1160, expiresAt: 1260 } },
  ],
]);

t.test('acquire reports the new boot with the counted report', async (t) => {
  const step = acquire(state(), ctx(1020, young()), { host: 'mbp', seenGeneration: 4 });
  t.same([...step.boot.reports], [['mbp', 4]], 'the report counts for this life');
  t.equal(step.boot.startAt, START, 'same start');
  const early = acquire(state(), ctx(1009, young()), { host: 'mbp', seenGeneration: 4 });
  t.equal(early.boot.reports.size, 0, 'a report received before 2 × requestTimeout does not count');
  t.equal(early.next.floor, 4, 'but it raises the floor');
});

// ---------------------------------------------------------------------------------------
// floor pending (S2.4) and stale-record repair

t.test(
  'floorPending: a grant is made, raised above a later report, and completes when every candidate reported',
  async (t) => {
    const fresh = state({ floorPending: true });
    const boot0 = young();
    const a = acquire(fresh, ctx(1020, boot0), { host: 'mbp', seenGeneration: 0 });
    t.equal(a.answer.ok, true, 'the grant is answered');
    t.match(
      a.next.lease,
      { holder: 'mbp', generation: 1, floorPending: true, notBefore: 1110 },
      'it stays pending and behind the start wait',
    );
    const b = heartbeat(a.next, ctx(1021, a.boot), { host: 'node-b', seenGeneration: 5 });
    t.match(
      b.next.lease,
      { holder: 'mbp', generation: 6, floorPending: false },
      'raised above the report and the floor is complete',
    );
    t.same(events(b), ['generation-raised', 'floor-complete', 'standby'], 'both are told');
    t.same(b.events[0]?.data, { from: 1, to: 6, floor: 5 }, 'the raise says from, to and floor');
    t.equal(b.next.lease.notBefore, 1110, 'the raise keeps the lock-delay');
  },
);

t.test(
  'floorPending: a report equal to the pending generation raises it (it may be another holder from a lost life)',
  async (t) => {
    const s = state({ ...HELD, generation: 5, floorPending: true }, [], 5);
    const step = heartbeat(s, ctx(1020, young()), { host: 'node-b', seenGeneration: 5 });
    t.match(step.next.lease, { generation: 6, floorPending: true }, 'raised, still pending: mbp has not reported');
    t.same(events(step), ['generation-raised', 'standby'], 'no completion yet');
  },
);

t.test(
  "floorPending: the holder's own heartbeat at the raised generation is refused until the floor completes",
  async (t) => {
    const s = state({ ...HELD, generation: 6, floorPending: true }, [], 5);
    const step = heartbeat(s, ctx(1020, young([['node-b', 5]])), { host: 'mbp', generation: 6, seenGeneration: 6 });
    t.match(step.next.lease, { generation: 7, floorPending: false }, 'raised once more and complete');
    t.same(
      step.answer,
      { outcome: 'renew-refused', reason: 'stale-generation', reportInSeconds: null },
      'the holder learns the new generation',
    );
    const again = heartbeat(step.next, ctx(1021, step.boot), { host: 'mbp', generation: 7, seenGeneration: 7 });
    t.same(again.answer, { outcome: 'renewed', reason: null, reportInSeconds: null }, 'the next heartbeat at 7 renews');
    t.equal(again.next.lease.generation, 7, 'no further raise once complete');
  },
);

t.test('floorPending without a holder completes without a raise', async (t) => {
  const step = heartbeat(state({ floorPending: true }), ctx(1020, young([['mbp', 2]])), {
    host: 'node-b',
    seenGeneration: 3,
  });
  t.equal(step.next.lease.floorPending, false, 'complete');
  t.equal(step.next.floor, 3, 'floor');
  t.same(events(step), ['floor-complete', 'no-lease'], 'no raise without a holder');
  const grant = acquire(step.next, ctx(1200, step.boot), { host: 'mbp', seenGeneration: 2 });
  t.equal(grant.next.lease.generation, 4, 'the next grant is above the complete floor');
});

t.test('floorPending stays while a report does not count yet', async (t) => {
  const step = heartbeat(state({ floorPending: true }), ctx(1005, young([['mbp', 0]])), {
    host: 'node-b',
    seenGeneration: 0,
  });
  t.equal(step.next.lease.floorPending, true, 'still pending');
  t.equal(step.boot.reports.has('node-b'), false, 'not counted');
});

t.test('a stale record is repaired above the floor behind the start wait', async (t) => {
  const step = heartbeat(held({}, [], 3), ctx(1020, young()), { host: 'node-b', seenGeneration: 7 });
  t.match(
    step.next.lease,
    { holder: 'mbp', generation: 8, notBefore: 1110 },
    're-granted to the same holder at floor + 1, behind the start wait',
  );
  t.equal(step.next.floor, 7, 'floor');
  t.same(
    step.events[0],
    { category: 'hq.lease', event: 'generation-raised', host: 'mbp', data: { from: 3, to: 8, floor: 7 } },
    'raise event',
  );
  const warm = heartbeat(held({}, [], 3), ctx(1020), { host: 'node-b', seenGeneration: 7 });
  t.equal(warm.next.lease.notBefore, 1020, 'long after a start the repair waits only for now');
  const later = heartbeat(held({ notBefore: 1300 }, [], 3), ctx(1020), { host: 'node-b', seenGeneration: 7 });
  t.equal(later.next.lease.notBefore, 1300, 'a later notBefore is kept');
});

t.test('noteReport: only seen generations of candidates count as reports, each the highest one', async (t) => {
  const s = state();
  const c = ctx(1020, young([['mbp', 4]]));
  t.equal(
    noteReport(s, c, c.boot, 'mbp', 2, undefined).boot.reports.get('mbp'),
    4,
    'a lower report keeps the higher one',
  );
  t.equal(noteReport(s, c, c.boot, 'mbp', 6, undefined).boot.reports.get('mbp'), 6, 'a higher report replaces it');
  t.equal(noteReport(s, c, c.boot, 'node-b', undefined, 5).boot, c.boot, 'a generation alone is not a report');
  t.equal(noteReport(s, c, c.boot, 'cloud-vm', 5, undefined).boot, c.boot, 'a non-candidate does not count');
  t.equal(noteReport(s, c, c.boot, 'cloud-vm', 5, undefined).state.floor, 5, 'but any report raises the floor');
  t.equal(noteReport(s, c, c.boot, 'node-b', undefined, 5).state.floor, 5, 'a generation raises the floor too');
  t.equal(noteReport(s, c, c.boot, 'node-b', 0, 0).state, s, 'a report that changes nothing returns the same state');
});

// ---------------------------------------------------------------------------------------
// renew

runTable('renew', renew, [
  [
    'renew by holder before expiry keeps generation',
    held(),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    { ok: true, lease: { holder: 'mbp', generation: 3, renewedAt: 1000, expiresAt: 1100 }, events: ['renewed'] },
  ],
  [
    'renew by holder past expiry renews (an arbiter outage must not end the lease)',
    held(),
    ctx(1400),
    { host: 'mbp', generation: 3 },
    { ok: true, lease: { generation: 3, expiresAt: 1500 } },
  ],
  [
    'renew during the lock-delay extends from notBefore',
    held({ notBefore: 1070 }),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    { ok: true, lease: { expiresAt: 1170 } },
  ],
  [
    'renew by a non-holder is refused',
    held(),
    ctx(1000),
    { host: 'node-b', generation: 3 },
    { ok: false, reason: 'not-holder', events: ['renew-refused'], unchanged: true },
  ],
  [
    'renew of a free lease is refused as not-holder',
    state(),
    ctx(1000),
    { host: 'mbp', generation: 0 },
    { ok: false, reason: 'not-holder' },
  ],
  [
    'renew with an older generation is refused as stale',
    held(),
    ctx(1000),
    { host: 'mbp', generation: 2 },
    { ok: false, reason: 'stale-generation', unchanged: true },
  ],
  [
    'renew with a higher generation than the record repairs the record and is refused',
    held(),
    ctx(1000),
    { host: 'mbp', generation: 5 },
    {
      ok: false,
      reason: 'stale-generation',
      floor: 5,
      lease: { generation: 6 },
      events: ['generation-raised', 'renew-refused'],
    },
  ],
  [
    'renew of a released lease is refused as expired',
    held({ released: true }),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    { ok: false, reason: 'expired', unchanged: true },
  ],
  [
    'renew takes the configured ttl',
    held({ ttlSeconds: 50 }),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    { ok: true, lease: { ttlSeconds: 100, expiresAt: 1100 } },
  ],
]);

// ---------------------------------------------------------------------------------------
// heartbeat

const view = { target: 'mbp', reachable: false, ping: false, health: false };

t.test('heartbeat', async (t) => {
  t.test('the holder heartbeat renews and keeps generation', async (t) => {
    const step = heartbeat(held(), ctx(1000), { host: 'mbp', generation: 3, seenGeneration: 3, heartbeatSeconds: 10 });
    t.same(step.answer, { outcome: 'renewed', reason: null, reportInSeconds: null }, 'renewed');
    t.match(step.next.lease, { generation: 3, expiresAt: 1100, renewedAt: 1000 }, 'renewal');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['renewed', { generation: 3, via: 'heartbeat' }]],
      'event',
    );
    t.match(
      step.next.observers.get('mbp'),
      { lastHeartbeatAt: 1000, heartbeatSeconds: 10 },
      'the holder is an observer too',
    );
  });
  t.test('the holder heartbeat without a generation renews', async (t) => {
    t.equal(heartbeat(held(), ctx(1000), { host: 'mbp' }).answer.outcome, 'renewed', 'renewed');
  });
  t.test('the holder heartbeat renews past expiry (L2)', async (t) => {
    const step = heartbeat(held(), ctx(2000), { host: 'mbp', generation: 3 });
    t.equal(step.answer.outcome, 'renewed', 'renewed');
    t.equal(step.next.lease.expiresAt, 2100, 'from now');
  });
  t.test('the holder heartbeat with a stale generation is refused but still recorded', async (t) => {
    const step = heartbeat(held(), ctx(1000), { host: 'mbp', generation: 2, heartbeatSeconds: 10 });
    t.same(step.answer, { outcome: 'renew-refused', reason: 'stale-generation', reportInSeconds: null }, 'refused');
    t.same(
      step.next.lease,
      { ...held().lease, revision: held().lease.revision + 1 },
      'no renewal written: only the revision moves (the heartbeat was recorded)',
    );
    t.equal(step.next.observers.get('mbp')?.lastHeartbeatAt, 1000, 'heartbeat time recorded');
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['renew-refused', { reason: 'stale-generation', generation: 3 }]],
      'event',
    );
  });
  t.test('the holder heartbeat of a released lease is refused as expired', async (t) => {
    t.same(
      heartbeat(held({ released: true }), ctx(1000), { host: 'mbp', generation: 3 }).answer,
      { outcome: 'renew-refused', reason: 'expired', reportInSeconds: null },
      'refused',
    );
  });
  t.test('a standby heartbeat records its view, confirmation and interval, and answers standby', async (t) => {
    const step = heartbeat(held(), ctx(1000), {
      host: 'node-b',
      seenGeneration: 3,
      view,
      confirmation: { holder: 'mbp', generation: 3, ageSeconds: 7 },
      heartbeatSeconds: 10,
    });
    t.same(step.answer, { outcome: 'standby', reason: null, reportInSeconds: null }, 'standby');
    t.same(
      step.next.observers.get('node-b'),
      {
        view: { ...view, at: 1000 },
        confirmation: { holder: 'mbp', generation: 3, at: 993 },
        lastHeartbeatAt: 1000,
        heartbeatSeconds: 10,
        refreshSeconds: null,
        requestTimeoutSeconds: RT,
      },
      'the view is stamped with the receive time; the confirmation at receive − age',
    );
    t.same(
      step.events.map((e) => [e.event, e.data]),
      [['standby', { holder: 'mbp', generation: 3, reachable: false }]],
      'event',
    );
    t.same(
      step.next.lease,
      { ...held().lease, revision: held().lease.revision + 1 },
      'the lease itself is unchanged; the revision moves with the recorded view',
    );
  });
  t.test('a heartbeat without view or confirmation keeps the previous ones', async (t) => {
    const before = held({}, [
      [
        'node-b',
        {
          view: { ...view, at: 990 },
          confirmation: { holder: 'mbp', generation: 3, at: 980 },
          heartbeatSeconds: 10,
          lastHeartbeatAt: 990,
        },
      ],
    ]);
    const step = heartbeat(before, ctx(1000), { host: 'node-b' });
    t.same(
      step.next.observers.get('node-b'),
      {
        view: { ...view, at: 990 },
        confirmation: { holder: 'mbp', generation: 3, at: 980 },
        lastHeartbeatAt: 1000,
        heartbeatSeconds: 10,
        refreshSeconds: null,
        requestTimeoutSeconds: RT,
      },
      'kept, only the heartbeat time moves',
    );
    t.same(step.events[0]?.data, { holder: 'mbp', generation: 3, reachable: false }, 'the kept view is reported');
  });
  t.test('a first heartbeat without a view reports reachable null', async (t) => {
    const step = heartbeat(held(), ctx(1000), { host: 'node-b' });
    t.same(
      step.next.observers.get('node-b'),
      {
        view: null,
        confirmation: null,
        lastHeartbeatAt: 1000,
        heartbeatSeconds: null,
        refreshSeconds: null,
        requestTimeoutSeconds: RT,
      },
      'nothing but the time',
    );
    t.same(step.events[0]?.data, { holder: 'mbp', generation: 3, reachable: null }, 'no view');
  });
  t.test('a negative confirmation age is taken as 0 (never earlier than the receive time)', async (t) => {
    const step = heartbeat(held(), ctx(1000), {
      host: 'node-b',
      confirmation: { holder: 'mbp', generation: 3, ageSeconds: -5 },
    });
    t.equal(step.next.observers.get('node-b')?.confirmation?.at, 1000, 'at = now');
  });
  t.test('a heartbeat without a lease answers no-lease', async (t) => {
    const step = heartbeat(state(), ctx(1000), { host: 'node-b', seenGeneration: 0 });
    t.same(step.answer, { outcome: 'no-lease', reason: null, reportInSeconds: null }, 'no-lease');
    t.same(events(step), ['no-lease'], 'event');
  });
  t.test('a non-candidate heartbeat is refused and changes nothing', async (t) => {
    const s = held();
    const step = heartbeat(s, ctx(1000), { host: 'cloud-vm', seenGeneration: 99, view });
    t.same(step.answer, { outcome: 'renew-refused', reason: 'not-candidate', reportInSeconds: null }, 'refused');
    t.equal(step.next, s, 'same state');
    t.equal(step.boot, WARM, 'same boot');
    t.same(
      step.events.map((e) => [e.event, e.host, e.data]),
      [['renew-refused', 'cloud-vm', { reason: 'not-candidate' }]],
      'event',
    );
  });
  t.test('a heartbeat seen generation counts as a report for this life', async (t) => {
    const step = heartbeat(state(), ctx(1020, young()), { host: 'node-b', seenGeneration: 2, generation: 1 });
    t.same([...step.boot.reports], [['node-b', 2]], 'counted');
    t.equal(step.next.floor, 2, 'floor');
  });
});

// ---------------------------------------------------------------------------------------
// release and handover

runTable('release', release, [
  [
    'a plain release keeps the holder and marks the lease released',
    held(),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    {
      ok: true,
      lease: { holder: 'mbp', generation: 3, released: true, revision: 6, expiresAt: 1050 },
      events: ['released'],
    },
  ],
  [
    'a release without a generation is accepted',
    held(),
    ctx(1000),
    { host: 'mbp' },
    { ok: true, lease: { released: true } },
  ],
  [
    'a release past expiry is accepted',
    held(),
    ctx(5000),
    { host: 'mbp', generation: 3 },
    { ok: true, lease: { released: true } },
  ],
  [
    'a second release is idempotent: nothing is written',
    held({ released: true }),
    ctx(1000),
    { host: 'mbp', generation: 3 },
    { ok: true, unchanged: true, events: [] },
  ],
  [
    'a release by a non-holder is refused',
    held(),
    ctx(1000),
    { host: 'node-b' },
    { ok: false, reason: 'not-holder', events: ['release-refused'], unchanged: true },
  ],
  [
    'a release of a free lease is refused as not-holder',
    state(),
    ctx(1000),
    { host: 'mbp' },
    { ok: false, reason: 'not-holder' },
  ],
  [
    'a release with an older generation is refused as stale',
    held(),
    ctx(1000),
    { host: 'mbp', generation: 2 },
    { ok: false, reason: 'stale-generation', unchanged: true },
  ],
  [
    'a handover grants the target at once: no lock-delay (the old holder stepped down first)',
    held({}, [alive('node-b', 995)]),
    ctx(1000),
    { host: 'mbp', generation: 3, handoverTo: 'node-b' },
    {
      ok: true,
      lease: {
        holder: 'node-b',
        generation: 4,
        notBefore: 1000,
        expiresAt: 1100,
        acquiredAt: 1000,
        promotedFrom: 'mbp',
        released: false,
      },
      events: ['released', 'acquired'],
    },
  ],
  [
    'a handover ignores confirmations given to the old holder',
    held({}, [['node-c', confirmation('mbp', 990)], alive('node-b', 995)]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { notBefore: 1000 } },
  ],
  [
    'a handover by a holder still behind its lock-delay keeps it: it protects the holder before (found by the simulator)',
    held({ notBefore: 1040, promotedFrom: 'node-c' }, [alive('node-b', 995)]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    {
      ok: true,
      lease: {
        holder: 'node-b',
        generation: 4,
        notBefore: 1040,
        displaced: { host: 'mbp', generation: 3, revision: 6, floor: 1040, acknowledgedAt: null, savedSeconds: null },
      },
    },
  ],
  [
    'a handover still waits for the start wait (S2.3)',
    held({}, [alive('node-b', 1015)]),
    ctx(1020, young()),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { holder: 'node-b', notBefore: 1110 } },
  ],
  [
    'a handover is above the floor',
    state({ ...HELD, holder: 'mbp', generation: 8 }, [alive('node-b', 995)], 8),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { generation: 9 } },
  ],
  [
    'a handover from a record below the floor repairs it first, then grants above it',
    held({}, [alive('node-b', 995)], 8),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { holder: 'node-b', generation: 10 }, events: ['generation-raised', 'released', 'acquired'] },
  ],
  [
    'a handover after a plain release still hands over',
    held({ released: true }, [alive('node-b', 995)]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { holder: 'node-b', generation: 4, released: false } },
  ],
  [
    'a handover to a non-candidate is refused',
    held(),
    ctx(1000),
    { host: 'mbp', handoverTo: 'cloud-vm' },
    { ok: false, reason: 'not-candidate', unchanged: true },
  ],
  [
    'a handover to itself is refused as same-holder',
    held(),
    ctx(1000),
    { host: 'mbp', handoverTo: 'mbp' },
    { ok: false, reason: 'same-holder', unchanged: true },
  ],
  [
    'a handover by a non-holder is refused as not-holder',
    held(),
    ctx(1000),
    { host: 'node-b', handoverTo: 'node-b' },
    { ok: false, reason: 'not-holder' },
  ],
  [
    'a handover to a target that never heartbeat is refused as target-silent',
    held(),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: false, reason: 'target-silent', events: ['release-refused'], unchanged: true },
  ],
  [
    'a handover to a target heard just beyond interval × 1.5 + 5 s is refused',
    held({}, [alive('node-b', 979.9)]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: false, reason: 'target-silent', unchanged: true },
  ],
  [
    'a handover to a target heard exactly interval × 1.5 + 5 s ago is accepted',
    held({}, [alive('node-b', 980)]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { holder: 'node-b' } },
  ],
  [
    'a handover with force goes to a silent target',
    held(),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b', force: true },
    { ok: true, lease: { holder: 'node-b', generation: 4 } },
  ],
  [
    'a target that never reported its interval is alive within viewFreshSeconds',
    held({}, [['node-b', { lastHeartbeatAt: 950 }]]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: true, lease: { holder: 'node-b' } },
  ],
  [
    'a target that never reported its interval is silent beyond viewFreshSeconds',
    held({}, [['node-b', { lastHeartbeatAt: 949 }]]),
    ctx(1000),
    { host: 'mbp', handoverTo: 'node-b' },
    { ok: false, reason: 'target-silent' },
  ],
]);

t.test('a refusal for a silent target says when it was last heard, in its event', async (t) => {
  const step = release(held({}, [alive('node-b', 700)]), ctx(1000), { host: 'mbp', handoverTo: 'node-b' });
  t.same(
    step.events.map((e) => [e.event, e.host, e.data]),
    [
      [
        'release-refused',
        'mbp',
        {
          reason: 'target-silent',
          handoverTo: 'node-b',
          lastHeartbeatAt: 700,
          heartbeatSeconds: 10,
          graceSeconds: 20,
          message:
            'node-b was last heard 300 s ago (1970-01-01T00:11:40.000Z), longer than its heartbeat interval 10 s × 1.5 + 5 s; is its agent running? force overrides',
        },
      ],
    ],
    'the event carries the target, its last heartbeat, its interval, the grace and the line',
  );
  const never = transfer(held(), ctx(1000), { to: 'node-b' });
  t.same(
    never.events[0]?.data,
    {
      reason: 'target-silent',
      via: 'transfer',
      to: 'node-b',
      lastHeartbeatAt: null,
      heartbeatSeconds: null,
      graceSeconds: null,
      message: 'node-b has never sent a heartbeat to this arbiter; start its agent, or force',
    },
    'a target never heard from says so',
  );
  const noInterval = release(held({}, [['node-b', { lastHeartbeatAt: 900 }]]), ctx(1000), {
    host: 'mbp',
    handoverTo: 'node-b',
  });
  t.match(
    noInterval.events[0]?.data,
    { graceSeconds: 50, message: /last heard 100 s ago .*longer than viewFreshSeconds 50 s/ },
    'without a reported interval the rule is viewFreshSeconds',
  );
  t.equal(
    targetSilence(held({}, [alive('node-b', 995)]), ctx(1000), 'node-b'),
    null,
    'a target heard 5 s ago is alive',
  );
});

t.test('a handover event names from, via and the new generation', async (t) => {
  const step = release(held({}, [alive('node-b', 995)]), ctx(1000), { host: 'mbp', handoverTo: 'node-b' });
  t.same(
    step.events.map((e) => [e.event, e.host, e.data]),
    [
      ['released', 'mbp', { generation: 3, handoverTo: 'node-b' }],
      ['acquired', 'node-b', { generation: 4, notBefore: 1000, from: 'mbp', via: 'handover' }],
    ],
    'events',
  );
  t.equal(
    toRecord(release(held(), ctx(1000), { host: 'mbp' }).next.lease, new Map(), 1000).expired,
    true,
    'a released record shows expired',
  );
});

// ---------------------------------------------------------------------------------------
// transfer and maintenance

runTable('transfer', transfer, [
  [
    "a transfer gives the target generation + 1 behind the old holder's lock-delay",
    held({}, [alive('node-b', 995)]),
    ctx(1000),
    { to: 'node-b' },
    {
      ok: true,
      lease: {
        holder: 'node-b',
        generation: 4,
        notBefore: 1060,
        expiresAt: 1160,
        promotedFrom: 'mbp',
        acquiredAt: 1000,
      },
      events: ['promoted'],
    },
  ],
  [
    'a transfer waits for confirmations given to the old holder',
    held({}, [['node-b', { ...confirmation('mbp', 1020), lastHeartbeatAt: 995, heartbeatSeconds: 10 }]]),
    ctx(1000),
    { to: 'node-b' },
    { ok: true, lease: { notBefore: 1130 } },
  ],
  [
    'a transfer to the live holder is refused as same-holder',
    held(),
    ctx(1000),
    { to: 'mbp' },
    { ok: false, reason: 'same-holder', events: ['acquire-refused'], unchanged: true },
  ],
  [
    'a transfer to the holder of an expired lease re-grants it without lock-delay',
    held({}, [alive('mbp', 1095)]),
    ctx(1100),
    { to: 'mbp' },
    { ok: true, lease: { holder: 'mbp', generation: 4, notBefore: 1100, promotedFrom: null } },
  ],
  [
    'a transfer to the holder of a released lease re-grants it',
    held({ released: true }, [alive('mbp', 995)]),
    ctx(1000),
    { to: 'mbp' },
    { ok: true, lease: { holder: 'mbp', generation: 4, released: false } },
  ],
  [
    'a transfer to a non-candidate is refused',
    held(),
    ctx(1000),
    { to: 'cloud-vm' },
    { ok: false, reason: 'not-candidate', unchanged: true },
  ],
  [
    'a transfer without a holder grants at once',
    state({ generation: 2 }, [alive('node-b', 995)]),
    ctx(1000),
    { to: 'node-b' },
    { ok: true, lease: { holder: 'node-b', generation: 3, notBefore: 1000, promotedFrom: null } },
  ],
  [
    'a transfer is above the floor',
    held({}, [alive('node-b', 995)], 11),
    ctx(1000),
    { to: 'node-b' },
    { ok: true, lease: { generation: 12 } },
  ],
  [
    'a transfer to a target that never heartbeat is refused as target-silent',
    held(),
    ctx(1000),
    { to: 'node-b' },
    { ok: false, reason: 'target-silent', events: ['acquire-refused'], unchanged: true },
  ],
  [
    'a transfer to a target silent beyond its interval is refused',
    held({}, [alive('node-b', 900)]),
    ctx(1000),
    { to: 'node-b' },
    { ok: false, reason: 'target-silent', unchanged: true },
  ],
  [
    'a transfer with force goes to a silent target',
    held(),
    ctx(1000),
    { to: 'node-b', force: true },
    { ok: true, lease: { holder: 'node-b', generation: 4 } },
  ],
]);

// ---------------------------------------------------------------------------------------
// the step-down acknowledgement (G6)

// mbp (generation 3, expires 1050) is moved to node-b at 1000: generation 4 at revision 6,
// behind mbp's lock-delay until 1060. node-b is alive (heard at 995).
const MOVED = transfer(held({ notBefore: 900 }, [alive('node-b', 995)]), ctx(1000), { to: 'node-b' }).next;
const ACK = { host: 'mbp', generation: 3, revision: 6 };

t.test('every grant that displaces a holder records it; a first grant does not', async (t) => {
  t.same(
    MOVED.lease.displaced,
    { host: 'mbp', generation: 3, revision: 6, floor: 900, acknowledgedAt: null, savedSeconds: null },
    'the transfer displaced mbp at 3',
  );
  t.equal(acquire(state(), ctx(1000), { host: 'mbp' }).next.lease.displaced, null, 'a first grant displaced nobody');
  t.match(
    release(held({}, [alive('node-b', 995)]), ctx(1000), { host: 'mbp', handoverTo: 'node-b' }).next.lease.displaced,
    { host: 'mbp', generation: 3 },
    'a handover displaces the old holder too',
  );
  t.match(
    acquire(held(), ctx(1055), { host: 'node-b' }).next.lease.displaced,
    { host: 'mbp', generation: 3, floor: 900 },
    'so does an acquire after expiry',
  );
  t.equal(
    transfer(state({ generation: 2 }, [alive('node-b', 995)]), ctx(1000), { to: 'node-b' }).next.lease.displaced,
    null,
    'a transfer without a holder displaced nobody',
  );
});

runTable('steppedDown', steppedDown, [
  [
    'the displaced holder’s acknowledgement ends the lock-delay at once',
    MOVED,
    ctx(1005),
    ACK,
    {
      ok: true,
      lease: {
        holder: 'node-b',
        generation: 4,
        notBefore: 1005,
        expiresAt: 1160,
        displaced: { host: 'mbp', generation: 3, revision: 6, floor: 900, acknowledgedAt: 1005, savedSeconds: 55 },
      },
      events: ['stepped-down'],
    },
  ],
  [
    'an acknowledgement naming a later revision is accepted (it saw the grant and more)',
    MOVED,
    ctx(1005),
    { ...ACK, revision: 9 },
    { ok: true, lease: { notBefore: 1005 } },
  ],
  [
    'an acknowledgement from another host is refused',
    MOVED,
    ctx(1005),
    { ...ACK, host: 'node-b' },
    { ok: false, reason: 'not-previous-holder', events: ['step-down-refused'] },
  ],
  [
    'an acknowledgement for an older generation is refused',
    MOVED,
    ctx(1005),
    { ...ACK, generation: 2 },
    { ok: false, reason: 'wrong-generation', lease: { notBefore: 1060 } },
  ],
  [
    'an acknowledgement for the new generation is refused',
    MOVED,
    ctx(1005),
    { ...ACK, generation: 4 },
    { ok: false, reason: 'wrong-generation' },
  ],
  [
    'an acknowledgement made before the grant was seen is refused',
    MOVED,
    ctx(1005),
    { ...ACK, revision: 5 },
    { ok: false, reason: 'stale-revision' },
  ],
  [
    'an acknowledgement after the lock-delay ran out is late',
    MOVED,
    ctx(1060),
    ACK,
    { ok: false, reason: 'late', unchanged: true },
  ],
  [
    'a duplicate acknowledgement is refused',
    steppedDown(MOVED, ctx(1005), ACK).next,
    ctx(1006),
    ACK,
    { ok: false, reason: 'duplicate', lease: { notBefore: 1005 }, unchanged: true },
  ],
  [
    'an acknowledgement while nothing was displaced is refused',
    held(),
    ctx(1000),
    ACK,
    { ok: false, reason: 'not-previous-holder', unchanged: true },
  ],
  [
    'an acknowledgement to a record without holder is refused',
    state({ displaced: MOVED.lease.displaced ?? null }),
    ctx(1000),
    ACK,
    { ok: false, reason: 'not-previous-holder' },
  ],
  [
    'an acknowledgement to a row written before 0.2.0 is refused',
    state({ ...MOVED.lease, displaced: undefined }),
    ctx(1000),
    ACK,
    { ok: false, reason: 'not-previous-holder' },
  ],
  [
    'an acknowledgement cannot end the start wait (S2.3)',
    { ...MOVED, lease: { ...MOVED.lease, notBefore: 1110 } },
    ctx(1020, young()),
    ACK,
    { ok: false, reason: 'other-wait' },
  ],
  [
    'an acknowledgement ends the lock-delay only down to the start wait',
    { ...MOVED, lease: { ...MOVED.lease, notBefore: 1150 } },
    ctx(1020, young()),
    ACK,
    {
      ok: true,
      lease: {
        notBefore: 1110,
        displaced: { host: 'mbp', generation: 3, revision: 6, floor: 900, acknowledgedAt: 1020, savedSeconds: 40 },
      },
    },
  ],
  [
    'an acknowledgement cannot end a pending floor (S2.4)',
    { ...MOVED, lease: { ...MOVED.lease, floorPending: true } },
    ctx(1005),
    ACK,
    { ok: false, reason: 'other-wait' },
  ],
  [
    'an acknowledgement is refused when the record has no notBefore',
    { ...MOVED, lease: { ...MOVED.lease, notBefore: null } },
    ctx(1005),
    ACK,
    { ok: false, reason: 'late' },
  ],
  [
    'a generation the acknowledgement reports above the floor raises it',
    { ...MOVED, floor: 0 },
    ctx(1005),
    ACK,
    { ok: true, floor: 3 },
  ],
]);

t.test('an acknowledgement never ends the wait for the holder before the displaced one (G6)', async (t) => {
  // mbp@3 → node-b@4 behind mbp's lock-delay (1060); before it ran, node-b@4 → node-c@5 behind node-b's.
  const one = transfer(held({}, [alive('node-b', 995), alive('node-c', 995)]), ctx(1000, WARM, S3), {
    to: 'node-b',
  }).next;
  const two = transfer(one, ctx(1010, WARM, S3), { to: 'node-c' }).next;
  t.match(
    two.lease.displaced,
    { host: 'node-b', generation: 4, floor: 1060 },
    'node-c’s grant displaced node-b, whose own grant waited until 1060',
  );
  const step = steppedDown(two, ctx(1020, WARM, S3), { host: 'node-b', generation: 4, revision: two.lease.revision });
  t.same(
    [step.answer, step.next.lease.notBefore],
    [{ ok: true, savedSeconds: (two.lease.notBefore as number) - 1060, notBefore: 1060 }, 1060],
    'node-b’s acknowledgement ends the wait down to mbp’s lock-delay',
  );
  const late = steppedDown(two, ctx(1020, WARM, S3), { host: 'mbp', generation: 3, revision: two.lease.revision });
  t.same(late.answer, { ok: false, reason: 'not-previous-holder' }, 'mbp is not the displaced holder any more');
});

t.test('the acknowledgement events say what was saved, and why a refusal changed nothing', async (t) => {
  const ok = steppedDown(MOVED, ctx(1005), ACK);
  t.same(
    ok.events.map((e) => [e.event, e.host, e.data]),
    [['stepped-down', 'mbp', { generation: 3, holder: 'node-b', to: 4, notBefore: 1005, savedSeconds: 55 }]],
    'stepped-down with the time saved',
  );
  t.same(ok.answer, { ok: true, savedSeconds: 55, notBefore: 1005 }, 'the answer says it too');
  t.same(
    toRecord(ok.next.lease, new Map(), 1005).displaced,
    { host: 'mbp', generation: 3, acknowledgedAt: 1005, savedSeconds: 55 },
    'the record shows the acknowledgement',
  );
  const no = steppedDown(MOVED, ctx(1005), { ...ACK, generation: 2 });
  t.same(
    no.events.map((e) => [e.event, e.host, e.data]),
    [['step-down-refused', 'mbp', { reason: 'wrong-generation', generation: 2, revision: 6, holder: 'node-b' }]],
    'step-down-refused names the reason',
  );
});

t.test('stepDownAsked asks only the displaced holder, only while its acknowledgement would be accepted', async (t) => {
  t.equal(stepDownAsked(MOVED, ctx(1005), 'mbp'), 3, 'mbp is asked for generation 3');
  t.equal(stepDownAsked(MOVED, ctx(1005), 'node-b'), null, 'the new holder is not');
  t.equal(stepDownAsked(MOVED, ctx(1060), 'mbp'), null, 'not after the lock-delay');
  t.equal(
    stepDownAsked(steppedDown(MOVED, ctx(1005), ACK).next, ctx(1006), 'mbp'),
    null,
    'not after its acknowledgement',
  );
  t.equal(stepDownAsked(held(), ctx(1000), 'mbp'), null, 'not when nothing was displaced');
});

t.test('atRestart clamps the floor of a displaced holder like notBefore', async (t) => {
  const far = {
    ...MOVED,
    lease: {
      ...MOVED.lease,
      displaced: { ...(MOVED.lease.displaced as NonNullable<LeaseState['displaced']>), floor: 99_999 },
    },
  };
  const r = atRestart(far, ctx(2000, newBoot(2000)));
  t.equal(r.lease.displaced?.floor, 2000 + 110, 'the floor is clamped to start + ttl + margin');
  t.ok(r.lease.revision > far.lease.revision, 'a write');
  const near = atRestart(MOVED, ctx(2000, newBoot(2000)));
  t.equal(near.lease.displaced, MOVED.lease.displaced, 'a floor before the limit is kept as it is');
});

t.test('maintenance on and off', async (t) => {
  const on = setMaintenance(held(), ctx(1000), { enabled: true, reason: 'disk swap' });
  t.same(on.answer, { ok: true }, 'accepted');
  t.match(on.next.lease, { maintenance: true, maintenanceReason: 'disk swap', revision: 6 }, 'stored');
  t.same(
    on.events,
    [{ category: 'control', event: 'maintenance', host: null, data: { enabled: true, reason: 'disk swap' } }],
    'a control event',
  );
  t.equal(
    setMaintenance(held(), ctx(1000), { enabled: true }).next.lease.maintenanceReason,
    null,
    'no reason given → null',
  );
  const off = setMaintenance(on.next, ctx(1001), { enabled: false, reason: 'ignored' });
  t.match(off.next.lease, { maintenance: false, maintenanceReason: null }, 'off clears the reason');
  t.equal(toRecord(on.next.lease, new Map(), 1000).maintenance, true, 'the record shows it');
});

// ---------------------------------------------------------------------------------------
// check and promotion

const DOWN = { ping: false, health: false };

t.test('check', async (t) => {
  t.test('a check without a holder resets the streak and names no holder', async (t) => {
    const step = check(state({ dualUnreachableStreak: 1 }), ctx(1000), DOWN);
    t.same(
      step.answer,
      { promoted: false, streak: 0, holder: null, generation: 0, ping: false, health: false, promotee: null },
      'answer',
    );
    t.match(step.next.lease, { lastCheckAt: 1000, dualUnreachableStreak: 0 }, 'recorded');
    t.same(
      step.events,
      [{ category: 'control', event: 'arbiter-check', host: null, data: { streak: 0, holder: null, probed: false } }],
      'event',
    );
  });
  t.test('a check without a probe still names the holder', async (t) => {
    const step = check(held({ dualUnreachableStreak: 1 }), ctx(1000), null);
    t.equal(step.answer.holder, 'mbp', 'the answer names the holder');
    t.same(step.events[0]?.data, { streak: 0, holder: 'mbp', probed: false }, 'the event says it was not probed');
  });
  t.test('a check without a probe resets the streak and records no view', async (t) => {
    const step = check(held({ dualUnreachableStreak: 1 }), ctx(1000), null);
    t.equal(step.answer.streak, 0, 'streak reset');
    t.equal(step.answer.promoted, false, 'no promotion');
    t.equal(step.next.observers.has('cloud-vm'), false, 'no view of its own');
  });
  t.test('a reachable holder resets the streak and records the arbiter view', async (t) => {
    const s = held({ dualUnreachableStreak: 1 }, [['node-b', unreachableView('mbp', 990)]]);
    const step = check(s, ctx(1000), { ping: true, health: false });
    t.same(
      step.answer,
      { promoted: false, streak: 0, holder: 'mbp', generation: 3, ping: true, health: false, promotee: null },
      'answer',
    );
    t.same(
      step.next.observers.get('cloud-vm')?.view,
      { target: 'mbp', reachable: true, ping: true, health: false, at: 1000 },
      'own view',
    );
    t.match(step.next.lease, { dualUnreachableStreak: 0, lastCheckAt: 1000, holder: 'mbp' }, 'recorded');
  });
  t.test('health alone makes the holder reachable', async (t) => {
    const step = check(held({}, [['node-b', unreachableView('mbp', 990)]]), ctx(1000), { ping: false, health: true });
    t.equal(step.answer.streak, 0, 'no streak');
    t.equal(step.next.observers.get('cloud-vm')?.view?.reachable, true, 'reachable');
  });
  t.test('an unreachable holder with an agreeing fresh view extends the streak', async (t) => {
    const step = check(held({}, [['node-b', unreachableView('mbp', 990)]]), ctx(1000), DOWN);
    t.same(
      step.answer,
      { promoted: false, streak: 1, holder: 'mbp', generation: 3, ping: false, health: false, promotee: 'node-b' },
      'one check',
    );
    t.same(
      step.events[0]?.data,
      { streak: 1, ping: false, health: false, promotee: 'node-b' },
      'event names the promotee',
    );
  });
  t.test(`promotion after ${S.promoteAfterChecks} checks, behind the old holder's lock-delay`, async (t) => {
    const s = held({}, [['node-b', { ...unreachableView('mbp', 990), ...confirmation('node-c', 1030) }]]);
    const one = check(s, ctx(1000), DOWN);
    const two = check(one.next, ctx(1001), DOWN);
    t.same(
      two.answer,
      { promoted: true, streak: 2, holder: 'node-b', generation: 4, ping: false, health: false, promotee: 'node-b' },
      'promoted',
    );
    t.match(
      two.next.lease,
      {
        holder: 'node-b',
        generation: 4,
        notBefore: 1060,
        expiresAt: 1160,
        promotedFrom: 'mbp',
        dualUnreachableStreak: 0,
        lastCheckAt: 1001,
        acquiredAt: 1001,
      },
      'granted',
    );
    t.same(events(two), ['arbiter-check', 'promoted'], 'events');
    t.same(two.events[1]?.data, { generation: 4, from: 'mbp', notBefore: 1060, streak: 2 }, 'promotion event');
  });
  t.test(
    'a promotion waits for a confirmation the promotee gave the holder long enough ago to count as unreachable',
    async (t) => {
      // confirmation at 945: 1001 − 945 = 56 > viewFresh 50, so not "recent", but its validity (945 + 100 + 10) still bounds notBefore.
      const s = held({}, [['node-b', { ...unreachableView('mbp', 995), ...confirmation('mbp', 945) }]]);
      const two = check(check(s, ctx(1000), DOWN).next, ctx(1001), DOWN);
      t.equal(two.answer.promoted, true, 'promoted');
      t.equal(two.next.lease.notBefore, 1060, 'expiresAt + margin is later than 945 + ttl + margin = 1055');
      const late = held({ expiresAt: 1000 }, [
        ['node-b', { ...unreachableView('mbp', 995), ...confirmation('mbp', 945) }],
      ]);
      t.equal(
        check(check(late, ctx(1000), DOWN).next, ctx(1001), DOWN).next.lease.notBefore,
        1055,
        'the confirmation bounds it when later',
      );
    },
  );
  t.test('no view means no promotee: the streak resets', async (t) => {
    const step = check(held({ dualUnreachableStreak: 1 }), ctx(1000), DOWN);
    t.same([step.answer.streak, step.answer.promotee], [0, null], 'reset');
    t.equal(step.next.lease.dualUnreachableStreak, 0, 'stored');
  });
  t.test('maintenance keeps counting but never promotes', async (t) => {
    const s = held({ maintenance: true }, [['node-b', unreachableView('mbp', 990)]]);
    let step = check(s, ctx(1000), DOWN);
    for (let i = 1; i <= 4; i++) step = check(step.next, ctx(1000 + i), DOWN);
    t.equal(step.answer.promoted, false, 'not promoted');
    t.equal(step.answer.streak, 5, 'the streak is counted');
    t.equal(step.next.lease.holder, 'mbp', 'holder kept');
    const after = check(setMaintenance(step.next, ctx(1006), { enabled: false }).next, ctx(1007), DOWN);
    t.equal(after.answer.promoted, true, 'after maintenance the next dual-unreachable check promotes');
  });

  // The promotee's eligibility (S5): [name, settings, observers, now, expected promotee]
  type Obs = ReadonlyArray<readonly [string, Partial<Observer>]>;
  const eligibility: ReadonlyArray<readonly [string, ArbiterSettings, Obs, number, string | null]> = [
    ['a fresh unreachable view is eligible', S, [['node-b', unreachableView('mbp', 990)]], 1000, 'node-b'],
    [
      'a view exactly viewFreshSeconds old is still fresh',
      S,
      [['node-b', unreachableView('mbp', 950)]],
      1000,
      'node-b',
    ],
    ['a stale view is no evidence', S, [['node-b', unreachableView('mbp', 949)]], 1000, null],
    ['a view from before acquiredAt is no evidence', S, [['node-b', unreachableView('mbp', 899)]], 920, null],
    ['a view about another target is no evidence', S, [['node-b', unreachableView('node-c', 990)]], 1000, null],
    [
      'a view that reaches the holder blocks',
      S,
      [['node-b', { view: { target: 'mbp', reachable: true, ping: true, health: true, at: 990 } }]],
      1000,
      null,
    ],
    [
      'a promotee that confirmed the holder recently is skipped (the holder is alive)',
      S,
      [['node-b', { ...unreachableView('mbp', 990), ...confirmation('mbp', 960) }]],
      1000,
      null,
    ],
    [
      'a confirmation exactly viewFreshSeconds old still counts as reaching it',
      S,
      [['node-b', { ...unreachableView('mbp', 990), ...confirmation('mbp', 950) }]],
      1000,
      null,
    ],
    [
      'an older confirmation does not block',
      S,
      [['node-b', { ...unreachableView('mbp', 990), ...confirmation('mbp', 949) }]],
      1000,
      'node-b',
    ],
    [
      'a confirmation of another holder does not block',
      S,
      [['node-b', { ...unreachableView('mbp', 990), ...confirmation('node-c', 995) }]],
      1000,
      'node-b',
    ],
    ['the holder never promotes itself, whatever it reports', S, [['mbp', unreachableView('mbp', 990)]], 1000, null],
    ["the arbiter's own view never makes it a promotee", S, [['cloud-vm', unreachableView('mbp', 990)]], 1000, null],
    ['a non-candidate observer is never a promotee', S, [['laptop2', unreachableView('mbp', 990)]], 1000, null],
    ['an observer known only by its heartbeat is no evidence', S, [['node-b', { lastHeartbeatAt: 999 }]], 1000, null],
    [
      'priority order: the first eligible candidate wins',
      S3,
      [
        ['node-c', unreachableView('mbp', 990)],
        ['node-b', unreachableView('mbp', 991)],
      ],
      1000,
      'node-b',
    ],
    [
      'priority order: an ineligible first candidate is passed over',
      S3,
      [
        ['node-b', unreachableView('mbp', 900)],
        ['node-c', unreachableView('mbp', 990)],
      ],
      1000,
      'node-c',
    ],
  ];
  for (const [name, settings, obs, now, expected] of eligibility) {
    t.test(name, async (t) => {
      const s = held({}, obs);
      t.equal(promotee(s, ctx(now, WARM, settings)), expected, 'promotee');
      const step = check(s, ctx(now, WARM, settings), DOWN);
      t.equal(step.answer.promotee, expected, 'the check agrees');
      t.equal(step.answer.streak, expected === null ? 0 : 1, 'the streak counts only with a promotee');
    });
  }
  t.test('a view from an earlier life of the arbiter is no evidence', async (t) => {
    const s = held({ acquiredAt: 800 }, [['node-b', unreachableView('mbp', 990)]]);
    t.equal(
      promotee(s, ctx(1000, { startAt: 995, reports: new Map(), noEarlierLife: false })),
      null,
      'taken before this start',
    );
    t.equal(
      promotee(s, ctx(1000, { startAt: 990, reports: new Map(), noEarlierLife: false })),
      null,
      'taken at the start',
    );
    t.equal(
      promotee(s, ctx(1000, { startAt: 989, reports: new Map(), noEarlierLife: false })),
      'node-b',
      'taken after the start',
    );
  });
  t.test('a lease without acquiredAt skips the tenure test', async (t) => {
    t.equal(
      promotee(held({ acquiredAt: null }, [['node-b', unreachableView('mbp', 10)]]), ctx(20)),
      'node-b',
      'eligible',
    );
  });
  t.test('no holder means no promotee', async (t) => {
    t.equal(promotee(state({}, [['node-b', unreachableView('mbp', 990)]]), ctx(1000)), null, 'none');
  });
  t.test('a promotee that stops agreeing resets the streak before promotion', async (t) => {
    const s = held({}, [['node-b', unreachableView('mbp', 990)]]);
    const one = check(s, ctx(1000), DOWN);
    const back = heartbeat(one.next, ctx(1000.5), {
      host: 'node-b',
      view: { target: 'mbp', reachable: true, ping: true, health: true },
    });
    const two = check(back.next, ctx(1001), DOWN);
    t.same([two.answer.promoted, two.answer.streak], [false, 0], 'no promotion, streak reset');
  });
});

// ---------------------------------------------------------------------------------------
// restart

t.test(
  'atRestart clamps every stored time to the start (a clock that jumped back while the arbiter was down)',
  async (t) => {
    // The previous life's clock ran ahead: its times lie after this start at 1000.
    const s = state(
      {
        holder: 'mbp',
        generation: 3,
        revision: 5,
        acquiredAt: 1500,
        renewedAt: 1600,
        expiresAt: 1700,
        notBefore: 1550,
        lastCheckAt: 1650,
      },
      [
        [
          'node-b',
          {
            ...unreachableView('mbp', 1640),
            ...confirmation('mbp', 1630),
            lastHeartbeatAt: 1640,
            heartbeatSeconds: 10,
          },
        ],
        ['cloud-vm', { lastHeartbeatAt: null }],
      ],
      3,
    );
    const c = ctx(1000, young());
    const r = atRestart(s, c);
    t.match(
      r.lease,
      {
        holder: 'mbp',
        generation: 3,
        revision: 6,
        acquiredAt: 1000,
        renewedAt: 1000,
        lastCheckAt: 1000,
        expiresAt: 1100,
        notBefore: 1110,
      },
      'lease times capped; holder and generation kept',
    );
    t.same(
      r.observers.get('node-b'),
      {
        view: { target: 'mbp', reachable: false, ping: false, health: false, at: 1000 },
        confirmation: { holder: 'mbp', generation: 3, at: 1000 },
        lastHeartbeatAt: 1000,
        heartbeatSeconds: 10,
        refreshSeconds: null,
        requestTimeoutSeconds: null,
      },
      'observer times capped',
    );
    t.same(r.observers.get('cloud-vm'), NO_OBSERVER, 'empty observers stay empty');
    t.equal(r.floor, 3, 'floor kept');
    t.equal(lockDelayUntil(r, c, 'mbp'), 1110, 'the lock-delay of the old holder is at most start + ttl + margin');
    t.equal(promotee(r, ctx(1020, young())), null, "the previous life's view is no evidence");
    const grant = transfer(r, ctx(1020, young()), { to: 'node-b', force: true });
    t.equal(grant.next.lease.notBefore, 1110, 'a transfer right after the start waits for the start wait, no longer');
  },
);

t.test('atRestart keeps times before the start and nulls as they are', async (t) => {
  const s = held({ lastCheckAt: null, renewedAt: null }, [
    ['node-b', { ...unreachableView('mbp', 900), lastHeartbeatAt: 900 }],
  ]);
  const r = atRestart(s, ctx(2000, newBoot(2000)));
  t.same(r.lease, s.lease, 'the lease is unchanged');
  t.same(r.observers, s.observers, 'the observers are unchanged');
});

// ---------------------------------------------------------------------------------------
// waits

t.test('startWaitUntil, renewHold and lockDelayUntil', async (t) => {
  const c = ctx(1020, young());
  t.equal(startWaitUntil(c, c.boot), 1110, 'start + ttl + margin');
  const never = young([
    ['mbp', 0],
    ['node-b', 0],
  ]);
  t.equal(startWaitUntil(ctx(1020, never), never), -Infinity, 'every candidate never saw a generation: no wait');
  const some = young([
    ['mbp', 0],
    ['node-b', 1],
  ]);
  t.equal(startWaitUntil(ctx(1020, some), some), 1110, 'one that saw a generation keeps the wait');

  const s = held();
  t.equal(renewHold(ctx(1020, young()), young(), s), 1110, 'a renewal is held while candidates have not reported');
  t.equal(renewHold(ctx(1110, young()), young(), s), null, 'no hold once the start wait is over');
  t.equal(renewHold(ctx(1020), WARM, s), null, 'no hold long after a start');
  const reported = young([
    ['mbp', 3],
    ['node-b', 2],
  ]);
  t.equal(
    renewHold(ctx(1020, reported), reported, s),
    null,
    'no hold once every candidate reported and the floor is not above the record',
  );
  t.equal(
    renewHold(ctx(1020, reported), reported, held({}, [], 4)),
    1110,
    'a floor above the record (a restored backup) keeps the hold',
  );
  t.equal(renewHold(ctx(1020, never), never, s), null, 'never seen anywhere: no hold');

  t.equal(lockDelayUntil(s, ctx(1000), null), 1000, 'no old holder: now');
  t.equal(lockDelayUntil(s, ctx(1000), 'mbp'), 1060, "the holder's expiresAt + margin");
  t.equal(lockDelayUntil(s, ctx(2000), 'mbp'), 2000, 'never before now');
  t.equal(
    lockDelayUntil(s, ctx(1000), 'node-b'),
    1000,
    "another host's expiry does not count for an old holder that is not the record's",
  );
  t.equal(
    lockDelayUntil(held({ expiresAt: null }, [['node-b', confirmation('mbp', 990)]]), ctx(1000), 'mbp'),
    1100,
    'without expiresAt only confirmations count',
  );
  t.equal(
    lockDelayUntil(
      held({}, [
        ['node-b', confirmation('mbp', 990)],
        ['node-c', confirmation('mbp', 1000)],
        ['x', confirmation('node-b', 1040)],
      ]),
      ctx(1000),
      'mbp',
    ),
    1110,
    'the latest confirmation of the old holder wins',
  );
  t.equal(
    isCandidate(S, 'mbp') && !isCandidate(S, 'cloud-vm') && !isCandidate(S, 'MBP'),
    true,
    'candidates are compared exactly',
  );
  t.same(newBoot(5), { startAt: 5, reports: new Map(), noEarlierLife: false }, 'a new boot has no reports');
});

// ---------------------------------------------------------------------------------------
// properties over random schedules

const hostArb = fc.constantFrom('mbp', 'node-b', 'node-c', 'cloud-vm');

type Op =
  | { k: 'acquire'; host: string; lose: boolean }
  | { k: 'renew'; host: string; lose: boolean }
  | { k: 'heartbeat'; host: string; reachable: boolean; lose: boolean; age: number }
  | { k: 'release'; host: string; handover: string | null; lose: boolean }
  | { k: 'transfer'; to: string }
  | { k: 'check'; ping: boolean; health: boolean }
  | { k: 'maintenance'; enabled: boolean }
  | { k: 'wait'; seconds: number }
  | { k: 'ack'; host: string; generation: number; revision: number }
  | { k: 'restart' }
  | { k: 'wipe' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ k: fc.constant('acquire' as const), host: hostArb, lose: fc.boolean() }),
  fc.record({ k: fc.constant('renew' as const), host: hostArb, lose: fc.boolean() }),
  fc.record({
    k: fc.constant('heartbeat' as const),
    host: hostArb,
    reachable: fc.boolean(),
    lose: fc.boolean(),
    age: fc.integer({ min: 0, max: 200 }),
  }),
  fc.record({
    k: fc.constant('release' as const),
    host: hostArb,
    handover: fc.option(hostArb, { nil: null }),
    lose: fc.boolean(),
  }),
  fc.record({ k: fc.constant('transfer' as const), to: hostArb }),
  fc.record({ k: fc.constant('check' as const), ping: fc.boolean(), health: fc.boolean() }),
  fc.record({ k: fc.constant('maintenance' as const), enabled: fc.boolean() }),
  fc.record({ k: fc.constant('wait' as const), seconds: fc.integer({ min: 0, max: 150 }) }),
  // generation/revision: offsets from the displaced holder's (0 = the right one), so that many are accepted
  fc.record({
    k: fc.constant('ack' as const),
    host: hostArb,
    generation: fc.constantFrom(0, 0, 0, -1, 1),
    revision: fc.constantFrom(0, 0, 3, -1),
  }),
  fc.constant({ k: 'restart' as const }),
  fc.constant({ k: 'wipe' as const }),
);

interface World {
  now: number;
  state: ArbiterState;
  boot: Boot;
  /** Each agent's seen generation: the highest generation of an answer it received. */
  seen: Map<string, number>;
  /** generation → holder, as agents received it from records whose floor was complete. */
  owners: Map<number, string>;
  violations: string[];
}

function play(ops: readonly Op[]): World {
  const w: World = {
    now: 1000,
    state: state(),
    boot: newBoot(1000),
    seen: new Map(),
    owners: new Map(),
    violations: [],
  };
  const seenOf = (h: string) => w.seen.get(h) ?? 0;
  // Only candidates' agents report their seen generation (S1), so only their knowledge is protected.
  const deliver = (host: string, lose: boolean) => {
    if (lose || !S.candidates.includes(host)) return;
    const { lease } = w.state;
    w.seen.set(host, Math.max(seenOf(host), lease.generation));
    if (lease.holder !== null && !lease.floorPending) {
      const owner = w.owners.get(lease.generation);
      if (owner !== undefined && owner !== lease.holder)
        w.violations.push(`generation ${lease.generation} held by ${owner} and ${lease.holder}`);
      w.owners.set(lease.generation, lease.holder);
    }
  };
  for (const op of ops) {
    const before = w.state;
    const c = ctx(w.now, w.boot);
    let step: Step<unknown> | null = null;
    let host: string | null = null;
    let lose = true;
    switch (op.k) {
      case 'acquire':
        step = acquire(w.state, c, { host: op.host, seenGeneration: seenOf(op.host) });
        [host, lose] = [op.host, op.lose];
        break;
      case 'renew':
        step = renew(w.state, c, { host: op.host, generation: seenOf(op.host) });
        [host, lose] = [op.host, op.lose];
        break;
      case 'heartbeat': {
        const holder = w.state.lease.holder;
        step = heartbeat(w.state, c, {
          host: op.host,
          seenGeneration: seenOf(op.host),
          ...(holder === op.host ? { generation: seenOf(op.host) } : {}),
          ...(holder !== null && holder !== op.host
            ? { view: { target: holder, reachable: op.reachable, ping: op.reachable, health: false } }
            : {}),
          ...(op.reachable && holder !== null
            ? { confirmation: { holder, generation: w.state.lease.generation, ageSeconds: op.age } }
            : {}),
        });
        [host, lose] = [op.host, op.lose];
        break;
      }
      case 'release':
        // force: the liveness check of a handover target is not a safety rule; the properties cover every grant.
        step = release(w.state, c, {
          host: op.host,
          generation: seenOf(op.host),
          ...(op.handover === null ? {} : { handoverTo: op.handover, force: true }),
        });
        [host, lose] = [op.host, op.lose];
        break;
      case 'transfer':
        step = transfer(w.state, c, { to: op.to, force: true });
        break;
      case 'check':
        step = check(w.state, c, { ping: op.ping, health: op.health });
        break;
      case 'maintenance':
        step = setMaintenance(w.state, c, { enabled: op.enabled });
        break;
      case 'wait':
        w.now += op.seconds;
        break;
      case 'ack': {
        const d = w.state.lease.displaced ?? null;
        const input = {
          host: op.host,
          generation: Math.max(1, (d?.generation ?? 1) + op.generation),
          revision: Math.max(0, (d?.revision ?? 0) + op.revision),
        };
        step = steppedDown(w.state, c, input);
        const ok = (step.answer as { ok: boolean }).ok;
        const l = step.next.lease;
        if (ok) {
          if (
            d === null ||
            input.host !== d.host ||
            input.generation !== d.generation ||
            input.revision < d.revision ||
            d.acknowledgedAt !== null
          ) {
            w.violations.push(
              `an acknowledgement accepted that does not match the displaced holder (G6): ${JSON.stringify([input, d])}`,
            );
          }
          if (before.lease.notBefore === null || w.now >= before.lease.notBefore)
            w.violations.push('an acknowledgement accepted after the lock-delay (G6)');
          if ((l.notBefore ?? -Infinity) < Math.max(d?.floor ?? -Infinity, startWaitUntil(c, w.boot)))
            w.violations.push('an acknowledgement ended a wait for someone else (G6)');
          if (
            l.holder !== before.lease.holder ||
            l.generation !== before.lease.generation ||
            l.expiresAt !== before.lease.expiresAt
          )
            w.violations.push('an acknowledgement changed more than notBefore (G6)');
        } else if ((l.notBefore ?? -Infinity) < (before.lease.notBefore ?? -Infinity))
          w.violations.push('a refused acknowledgement shortened a wait (G6)');
        break;
      }
      case 'restart':
        w.boot = newBoot(w.now);
        break;
      case 'wipe': // the database is lost: a new one, created by this start (S2.4)
        w.state = state({ floorPending: true });
        w.boot = newBoot(w.now);
        break;
    }
    if (step === null) continue;
    const next = step.next;
    if (next.lease.generation < before.lease.generation)
      w.violations.push(`generation went down ${before.lease.generation} → ${next.lease.generation} on ${op.k}`);
    if (next.floor < before.floor) w.violations.push(`floor went down on ${op.k}`);
    if (next !== before && next.lease.revision <= before.lease.revision && next.lease !== before.lease)
      w.violations.push(`revision did not move on ${op.k}`);
    if (next.lease.holder !== null && next.lease.holder !== before.lease.holder) {
      if (next.lease.generation <= next.floor)
        w.violations.push(`a new holder got ${next.lease.generation} ≤ floor ${next.floor} (G1)`);
      if (!S.candidates.includes(next.lease.holder)) w.violations.push(`non-candidate ${next.lease.holder} holds`);
      const from = before.lease.holder;
      if (
        from !== null &&
        op.k !== 'release' &&
        (next.lease.notBefore ?? -Infinity) < (before.lease.expiresAt ?? -Infinity) + S.safetyMarginSeconds
      ) {
        w.violations.push(`no lock-delay from ${from} on ${op.k} (G3)`);
      }
      if ((next.lease.notBefore ?? -Infinity) < startWaitUntil(c, step.boot))
        w.violations.push(`grant before the start wait on ${op.k} (G4)`);
      if (op.k === 'heartbeat' || op.k === 'renew')
        w.violations.push(`${op.k} changed the holder (only check promotes, G5)`);
    }
    w.state = next;
    w.boot = step.boot;
    if (host !== null) deliver(host, lose);
  }
  return w;
}

t.test(
  'property: generation and floor never go down, grants are above the floor, lock-delay and start wait hold, acknowledgements end only what they may (G1, G3, G4, G6)',
  async (t) => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60, size: 'max' }), (ops) => {
        const w = play(ops);
        return (
          w.violations.length === 0 ||
          (() => {
            throw new Error(w.violations.join('; '));
          })()
        );
      }),
      { numRuns: 400 },
    );
    t.pass('no violation in 400 random schedules');
  },
);

t.test(
  'property: once the floor is complete, no two holders ever share a generation, across database loss (G2, S1)',
  async (t) => {
    // A schedule biased towards wipes and reports: every candidate reports in each life.
    const lifeArb = fc
      .array(opArb, { maxLength: 25, size: 'max' })
      .map((ops): Op[] => [
        { k: 'wait', seconds: 11 },
        ...ops,
        { k: 'wait', seconds: 11 },
        { k: 'heartbeat', host: 'mbp', reachable: true, lose: false, age: 0 },
        { k: 'heartbeat', host: 'node-b', reachable: true, lose: false, age: 0 },
        { k: 'acquire', host: 'node-b', lose: false },
        { k: 'heartbeat', host: 'mbp', reachable: false, lose: false, age: 0 },
        { k: 'wipe' },
      ]);
    fc.assert(
      fc.property(fc.array(lifeArb, { minLength: 1, maxLength: 4, size: 'max' }), (lives) => {
        const w = play(lives.flat());
        if (w.violations.length > 0) throw new Error(w.violations.join('; '));
        return true;
      }),
      { numRuns: 200 },
    );
    t.pass('no generation shared by two holders in 200 multi-life schedules');
  },
);

// ---------------------------------------------------------------------------------------
// S6: the request timeout is the agents'; the arbiter asks for the report it needs

t.test('a report counts for S2.3 only with the request timeout the request declares (S6)', async (t) => {
  const s = state();
  const none = noteReport(s, ctx(START + 60, young()), young(), 'mbp', 0, undefined, null);
  t.equal(none.boot.reports.has('mbp'), false, 'no declared timeout: the arbiter assumes none and does not count it');
  const early = noteReport(s, ctx(START + 9, young()), young(), 'mbp', 0, undefined, 5);
  t.equal(early.boot.reports.has('mbp'), false, 'received before start + 2 × its own timeout: not counted');
  const late = noteReport(s, ctx(START + 10, young()), young(), 'mbp', 0, undefined, 5);
  t.equal(late.boot.reports.get('mbp'), 0, 'at start + 2 × its own timeout: counted');
  const longer = noteReport(s, ctx(START + 10, young()), young(), 'mbp', 0, undefined, 30);
  t.equal(longer.boot.reports.has('mbp'), false, 'an agent with a 30 s timeout counts only from start + 60');
});

t.test('reportDue asks a candidate to report again the moment its report can count', async (t) => {
  const fresh = state({ floorPending: true });
  t.equal(reportDue(ctx(START + 1, young()), young(), fresh, 'mbp', 5), 9.25, 'start + 2 × 5 − now, and a little');
  t.equal(reportDue(ctx(START + 20, young()), young(), fresh, 'mbp', 5), 0.25, 'past the line: at once');
  t.equal(
    reportDue(ctx(START + 1, young([['mbp', 0]])), young([['mbp', 0]]), fresh, 'mbp', 5),
    null,
    'already counted: nothing to ask',
  );
  t.equal(
    reportDue(ctx(START + 1, young()), young(), fresh, 'mbp', undefined),
    null,
    'no declared timeout: nothing to compute',
  );
  t.equal(reportDue(ctx(START + 1, young()), young(), fresh, 'laptop', 5), null, 'not a candidate');
  t.equal(
    reportDue(ctx(START + 500, young()), young(), state(), 'mbp', 5),
    null,
    'past the start wait with the floor known: nothing waits',
  );
  const answer = heartbeat(fresh, ctx(START + 1, young()), { host: 'mbp', seenGeneration: 0 }).answer;
  t.equal(answer.reportInSeconds, 9.25, 'the heartbeat answer carries it');
  // The holder of a grant behind a pending floor: its own report counted, the others' not yet.
  const held = state({
    floorPending: true,
    holder: 'mbp',
    generation: 1,
    acquiredAt: START + 3,
    notBefore: START + 110,
  });
  const counted = young([['mbp', 0]]);
  t.equal(
    reportDue(ctx(START + 10.5, counted), counted, held, 'mbp', 5),
    1,
    'the holder comes back a second after the line',
  );
  t.equal(
    reportDue(ctx(START + 8, counted), counted, held, 'mbp', 5),
    3,
    'or a second after the line, when it is still ahead',
  );
  t.equal(
    reportDue(ctx(START + 40.5, counted), counted, held, 'mbp', 5),
    null,
    'only within 30 s of the line (an absent candidate cannot make it spin)',
  );
  t.equal(
    reportDue(ctx(START + 10.5, counted), counted, held, 'node-b', 5),
    0.25,
    'the other candidate, not yet counted, as before',
  );
});

t.test(
  'at the defaults, a new installation grants a running lease as soon as both candidates reported (issue: 25 min wait)',
  async (t) => {
    const D: ArbiterSettings = { ...S, ttlSeconds: 1500, safetyMarginSeconds: 30, viewFreshSeconds: 1500 };
    let s = state({ floorPending: true });
    let boot = young();
    // Both agents' start-up heartbeats come right after the start: too early to count; each is
    // told when to report again, and does.
    for (const host of ['mbp', 'node-b']) {
      const first = heartbeatCore(s, ctx(START + 1, boot, D), { host, seenGeneration: 0, requestTimeoutSeconds: 5 });
      t.equal(first.answer.reportInSeconds, 9.25, `${host} is asked to report again in 9.25 s`);
      s = first.next;
      boot = first.boot;
    }
    for (const host of ['mbp', 'node-b']) {
      const again = heartbeatCore(s, ctx(START + 10.25, boot, D), {
        host,
        seenGeneration: 0,
        requestTimeoutSeconds: 5,
      });
      s = again.next;
      boot = again.boot;
    }
    t.equal(s.lease.floorPending, false, 'the floor is complete');
    const got = acquireCore(s, ctx(START + 12, boot, D), { host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: 5 });
    t.match(
      got.next.lease,
      { holder: 'mbp', generation: 1, notBefore: START + 12 },
      'generation 1, runnable at once: no start wait',
    );
  },
);

t.test(
  'a renewal by the holder ends a dual-unreachable streak: a holder that renewed since the last check is alive',
  async (t) => {
    const observers: ReadonlyArray<readonly [string, Partial<Observer>]> = [
      ['node-b', { ...unreachableView('mbp', 995), lastHeartbeatAt: 995 }],
    ];
    const s1 = check(held({ acquiredAt: 900 }, observers), ctx(1000), { ping: false, health: false });
    t.equal(s1.next.lease.dualUnreachableStreak, 1, 'the first check counts 1');
    const r = heartbeat(s1.next, ctx(1001), { host: 'mbp', generation: 3, seenGeneration: 3 });
    t.equal(r.next.lease.dualUnreachableStreak, 0, 'the renewal resets it');
    const s2 = check(r.next, ctx(1002), { ping: false, health: false });
    t.equal(s2.answer.promoted, false, 'so the next check does not promote');
    t.equal(s2.next.lease.dualUnreachableStreak, 1, 'it counts from 1 again');
    const viaRenew = renew(s1.next, ctx(1001), { host: 'mbp', generation: 3 });
    t.equal(viaRenew.next.lease.dualUnreachableStreak, 0, 'POST /v1/lease/renew resets it too');
    const viaAcquire = acquire(s1.next, ctx(1001), { host: 'mbp' });
    t.equal(viaAcquire.next.lease.dualUnreachableStreak, 0, 're-acquiring by the holder too');
  },
);

t.test('grants and renewals write the arbiter margin into the record (agents read it there, S6)', async (t) => {
  const g = acquire(state(), ctx(1000), { host: 'mbp', seenGeneration: 0 });
  t.equal(g.next.lease.safetyMarginSeconds, 10, 'the grant carries the margin');
  t.equal(toRecord(g.next.lease, g.next.observers, 1000).safetyMarginSeconds, 10, 'and so does the API record');
  const changed = renew(g.next, ctx(1010, WARM, { ...S, safetyMarginSeconds: 20 }), {
    host: 'mbp',
    generation: g.next.lease.generation,
  });
  t.equal(changed.next.lease.safetyMarginSeconds, 20, 'a renewal after a config change carries the new margin');
});

t.test(
  'a first grant made during the start wait may start once every candidate reported never having seen a generation (S2.3)',
  async (t) => {
    const D: ArbiterSettings = { ...S, ttlSeconds: 1500, safetyMarginSeconds: 30, viewFreshSeconds: 1500 };
    const fresh = state({ floorPending: true });
    // `hq lease acquire` right after the agents started: their reports do not count yet.
    const early = acquireCore(fresh, ctx(START + 3, young(), D), {
      host: 'mbp',
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    t.match(
      early.next.lease,
      { holder: 'mbp', generation: 1, notBefore: START + 1530, floorPending: true },
      'granted behind the start wait',
    );
    let s = early.next;
    let boot = early.boot;
    const a = heartbeatCore(s, ctx(START + 10.25, boot, D), {
      host: 'mbp',
      generation: 1,
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    s = a.next;
    boot = a.boot;
    t.equal(s.lease.notBefore, START + 1530, 'one report is not all of them');
    const b = heartbeatCore(s, ctx(START + 10.5, boot, D), {
      host: 'node-b',
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    t.match(
      b.next.lease,
      { generation: 1, floorPending: false, notBefore: START + 10.5, expiresAt: START + 10.5 + 1500 },
      'the last never-seen report lifts the start wait',
    );
    t.same(
      b.events.map((e) => e.event).filter((e) => e === 'floor-complete' || e === 'start-wait-lifted'),
      ['floor-complete', 'start-wait-lifted'],
      'and says so',
    );

    const seen = heartbeatCore(s, ctx(START + 10.5, boot, D), {
      host: 'node-b',
      seenGeneration: 4,
      requestTimeoutSeconds: 5,
    });
    t.equal(
      seen.next.lease.notBefore,
      START + 1530,
      'a candidate that saw a generation before keeps the full wait (an earlier life may still run)',
    );
    const transferred = transfer(early.next, ctx(START + 4, young(), D), { to: 'node-b', force: true });
    t.equal(transferred.answer.ok, true, 'the forced transfer is made');
    const afterTransfer = heartbeatCore(
      heartbeatCore(transferred.next, ctx(START + 10.25, young(), D), {
        host: 'mbp',
        seenGeneration: 0,
        requestTimeoutSeconds: 5,
      }).next,
      ctx(START + 10.5, young([['mbp', 0]]), D),
      { host: 'node-b', seenGeneration: 0, requestTimeoutSeconds: 5 },
    );
    t.equal(
      afterTransfer.next.lease.notBefore,
      transferred.next.lease.notBefore,
      "a grant that carries an old holder's lock-delay is not lifted",
    );
  },
);

t.test(
  'once every candidate reported never having seen a generation, no grant of this life waits for the start (S2.3 is about the previous life)',
  async (t) => {
    const D: ArbiterSettings = { ...S, ttlSeconds: 60, safetyMarginSeconds: 1, viewFreshSeconds: 60 };
    const fresh = state({ floorPending: true });
    const first = acquireCore(fresh, ctx(START + 3, young(), D), {
      host: 'mbp',
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    const a = heartbeatCore(first.next, ctx(START + 10.25, first.boot, D), {
      host: 'mbp',
      generation: 1,
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    const b = heartbeatCore(a.next, ctx(START + 10.5, a.boot, D), {
      host: 'node-b',
      seenGeneration: 0,
      requestTimeoutSeconds: 5,
    });
    t.equal(b.boot.noEarlierLife, true, 'the last never-seen report establishes it');
    t.equal(startWaitUntil(ctx(START + 10.5, b.boot, D), b.boot), -Infinity, 'no start wait from then on');
    // mbp adopts generation 1 and reports it: its reports are no longer "never seen".
    const c = heartbeatCore(b.next, ctx(START + 11, b.boot, D), {
      host: 'mbp',
      generation: 1,
      seenGeneration: 1,
      requestTimeoutSeconds: 5,
    });
    t.equal(c.boot.reports.get('mbp'), 1, 'the report of generation 1 is recorded');
    t.equal(c.boot.noEarlierLife, true, 'a grant of this life does not undo the fact');
    const moved = transfer(c.next, ctx(START + 12, c.boot, D), { to: 'node-b', force: true });
    t.equal(moved.answer.ok, true, 'the transfer is made');
    const lock = lockDelayUntil(c.next, ctx(START + 12, c.boot, D), 'mbp');
    t.equal(moved.next.lease.notBefore, lock, "the transfer waits for mbp's lock-delay only");
    const acked = steppedDown(moved.next, ctx(START + 12.1, moved.boot, D), {
      host: 'mbp',
      generation: 1,
      revision: moved.next.lease.revision,
    });
    t.match(
      acked.answer,
      { ok: true, notBefore: START + 12.1 },
      "mbp's acknowledgement ends the move at once, not at the end of the start wait (start + 61)",
    );
  },
);

t.test(
  'G7: after a restart on a kept database, the acknowledgement of a holder that ran ends the start wait, once every candidate reported nothing newer',
  async (t) => {
    const D: ArbiterSettings = { ...S, ttlSeconds: 60, safetyMarginSeconds: 1, viewFreshSeconds: 60 };
    // mbp held generation 3 before the restart and renews; the arbiter started at START.
    const restarted = atRestart(
      state(
        {
          holder: 'mbp',
          generation: 3,
          revision: 20,
          acquiredAt: 100,
          renewedAt: 990,
          expiresAt: 1050,
          notBefore: 101,
        },
        [alive('mbp', START + 2)],
        3,
      ),
      ctx(START, young(), D),
    );
    // node-b confirmed mbp while the arbiter was down, and says so: mbp's lock-delay outlasts the start wait.
    const kept: ArbiterState = {
      ...restarted,
      observers: new Map([
        ...restarted.observers,
        [
          'node-b',
          {
            ...NO_OBSERVER,
            lastHeartbeatAt: START + 2,
            heartbeatSeconds: 10,
            confirmation: { holder: 'mbp', generation: 3, at: START + 3 },
          },
        ],
      ]),
    };
    const reported = (seenB: number): Boot => ({
      startAt: START,
      reports: new Map([
        ['mbp', 3],
        ['node-b', seenB],
      ]),
      noEarlierLife: false,
    });
    const moved = transfer(kept, ctx(START + 3.5, reported(3), D), { to: 'node-b' });
    t.equal(moved.answer.ok, true, 'the transfer is made');
    t.equal(
      moved.next.lease.notBefore,
      START + 64,
      "behind mbp's lock-delay (the confirmation + ttl + margin), beyond the start wait",
    );
    const ack = (ran: boolean, boot: Boot, floor = 3) =>
      steppedDown({ ...moved.next, floor }, ctx(START + 3.6, boot, D), {
        host: 'mbp',
        generation: 3,
        revision: moved.next.lease.revision,
        ran,
      });
    t.match(
      ack(true, reported(3)).answer,
      { ok: true, notBefore: START + 3.6 },
      'ran, every report in, none newer: node-b may start now',
    );
    t.match(
      ack(true, reported(3)).events.find((e) => e.event === 'stepped-down')?.data,
      { ran: true },
      'the event says it ran',
    );
    t.match(
      ack(false, reported(3)).answer,
      { ok: true, notBefore: START + 61 },
      'an acknowledgement without "ran" ends the lock-delay only down to the start wait',
    );
    const partial: Boot = { startAt: START, reports: new Map([['mbp', 3]]), noEarlierLife: false };
    t.match(
      ack(true, partial).answer,
      { ok: true, notBefore: START + 61 },
      'not before every candidate reported (a restored backup may not know the newest holder)',
    );
    t.match(
      ack(true, reported(5), 5).answer,
      { ok: true, notBefore: START + 61 },
      'nor when a candidate reported a generation above the record (a holder the kept record does not know)',
    );
    t.match(
      ack(true, reported(4), 4).answer,
      { ok: true, notBefore: START + 3.6 },
      'the displacing grant itself, reported back by the agents that learned it, is no such generation',
    );
    // An acknowledgement accepted before the reports were in is followed by one after them.
    const first = ack(true, partial);
    const again = steppedDown(first.next, ctx(START + 11, reported(3), D), {
      host: 'mbp',
      generation: 3,
      revision: first.next.lease.revision,
      ran: true,
    });
    t.match(
      again.answer,
      { ok: true, notBefore: START + 11 },
      'a second acknowledgement, once the reports are in, ends the start wait',
    );
    t.equal(stepDownAsked(first.next, ctx(START + 11, reported(3), D), 'mbp'), 3, 'and the arbiter asks for it');
    t.equal(
      steppedDown(first.next, ctx(START + 11, partial, D), {
        host: 'mbp',
        generation: 3,
        revision: first.next.lease.revision,
        ran: true,
      }).answer.ok,
      false,
      'while nothing more would end, a second one is a duplicate',
    );

    // The holder's handover after the restart: `ran` lets the target start at once.
    const hand = (ran: boolean, boot: Boot) =>
      release(kept, ctx(START + 3.5, boot, D), { host: 'mbp', generation: 3, handoverTo: 'node-b', ran });
    t.equal(
      hand(true, reported(3)).next.lease.notBefore,
      START + 3.5,
      'a handover by a holder that ran: no start wait',
    );
    t.equal(hand(false, reported(3)).next.lease.notBefore, START + 61, 'without "ran": the start wait');
    t.equal(hand(true, partial).next.lease.notBefore, START + 61, 'before every report: the start wait');
    t.equal(
      release(kept, ctx(START + 3.5, reported(3), D), { host: 'mbp', handoverTo: 'node-b', ran: true }).next.lease
        .notBefore,
      START + 61,
      'a release that names no generation: the start wait',
    );
  },
);

t.test(
  'the configured standby is the preferred promotee; the others follow in candidates order (the issue: it was validated, then unused)',
  async (t) => {
    const views: ReadonlyArray<readonly [string, Partial<Observer>]> = [
      ['node-b', { ...unreachableView('mbp', 995) }],
      ['node-c', { ...unreachableView('mbp', 995) }],
    ];
    const s = held({}, views);
    t.equal(promotee(s, ctx(1000, WARM, S3)), 'node-b', 'without standby: the first eligible in candidates order');
    t.equal(promotee(s, ctx(1000, WARM, { ...S3, standby: 'node-c' })), 'node-c', 'with standby node-c: node-c first');
    const cOnlyStale = held({}, [
      ['node-b', { ...unreachableView('mbp', 995) }],
      ['node-c', { ...unreachableView('mbp', 900) }],
    ]);
    t.equal(
      promotee(cOnlyStale, ctx(1000, WARM, { ...S3, standby: 'node-c' })),
      'node-b',
      'a standby with no fresh evidence gives way to the next eligible candidate',
    );
    t.equal(
      promotee(s, ctx(1000, WARM, { ...S3, standby: 'laptop' })),
      'node-b',
      'a standby that is no candidate is ignored',
    );
  },
);
