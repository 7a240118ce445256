// Which wait holds a new holder (`leaseWait`, the record's `wait`): on states the decisions
// themselves produce — a transfer long after the start, right after a restart on a kept
// database, on a new database, and a new holder that confirmed the old one during an outage.
import t from 'tap';
import {
  emptyLease,
  heartbeat,
  leaseWait,
  newBoot,
  startWaitUntil,
  steppedDown,
  transfer,
} from '../../packages/lease-core/src/index.js';
import type {
  ArbiterSettings,
  ArbiterState,
  Boot,
  Context,
  LeaseState,
  Observer,
} from '../../packages/lease-core/src/index.js';

// ttl 100, margin 10: a lock-delay is expiresAt + 10, a start wait startAt + 110, and a report
// counts from startAt + 2 × 5.
const S: ArbiterSettings = {
  arbiter: 'cloud-vm',
  candidates: ['mbp', 'node-b'],
  ttlSeconds: 100,
  safetyMarginSeconds: 10,
  promoteAfterChecks: 2,
  viewFreshSeconds: 50,
};
const START = 1000;
const WARM: Boot = newBoot(0);
const young = (reports: ReadonlyArray<readonly [string, number]> = []): Boot => ({
  startAt: START,
  reports: new Map(reports),
  noEarlierLife: false,
});
const ctx = (now: number, boot: Boot = WARM): Context => ({ now, boot, settings: S });
const NO_OBSERVER: Observer = {
  view: null,
  confirmation: null,
  lastHeartbeatAt: null,
  heartbeatSeconds: null,
  refreshSeconds: null,
  requestTimeoutSeconds: null,
};

function state(
  lease: Partial<LeaseState>,
  observers: ReadonlyArray<readonly [string, Partial<Observer>]> = [],
  floor = 3,
): ArbiterState {
  return {
    lease: { ...emptyLease(100), ...lease },
    observers: new Map(observers.map(([h, o]) => [h, { ...NO_OBSERVER, ...o }] as const)),
    floor,
  };
}

// mbp holds generation 3, renewed at 990, expires at 1090 (a kept record, granted in an earlier life).
const HELD: Partial<LeaseState> = {
  holder: 'mbp',
  generation: 3,
  revision: 5,
  acquiredAt: 900,
  renewedAt: 990,
  expiresAt: 1090,
  notBefore: 900,
};

function moved(s: ArbiterState, c: Context): ArbiterState {
  const step = transfer(s, c, { to: 'node-b', force: true });
  if (!step.answer.ok) throw new Error('transfer refused');
  return step.next;
}

t.test('no holder, a released lease, or a holder past its waits: no wait', async (t) => {
  t.equal(leaseWait(state({}), ctx(2000)), null, 'nobody holds');
  t.equal(leaseWait(state({ ...HELD, released: true }), ctx(1000)), null, 'released');
  t.equal(leaseWait(state(HELD), ctx(1000)), null, 'mbp runs: nothing holds it');
});

t.test(
  'a transfer long after the start waits for the old holder’s lock-delay, until its notBefore; the acknowledgement ends it',
  async (t) => {
    const c = ctx(1000);
    const s = moved(state(HELD), c);
    const w = leaseWait(s, c);
    t.equal(w?.kind, 'lock-delay', 'the lock-delay');
    t.equal(w?.until, s.lease.notBefore, 'until the record’s notBefore');
    t.equal(w?.until, 1090 + 10, 'mbp’s expiresAt + margin');
    t.equal(w?.host, 'mbp', 'it waits out mbp');
    t.match(
      w?.text ?? '',
      /mbp's last possible validity.*ends at once when mbp's agent acknowledges its step-down from generation 3/,
      'says what ends it sooner',
    );
    t.match(
      w?.text ?? '',
      new RegExp(new Date(1100 * 1000).toISOString().replace(/\./g, '\\.')),
      'says until when, as a time',
    );
    const acked = steppedDown(s, ctx(1001), { host: 'mbp', generation: 3, revision: s.lease.revision });
    t.equal(acked.answer.ok, true, 'the acknowledgement is accepted');
    t.equal(leaseWait(acked.next, ctx(1001.5)), null, 'and nothing holds node-b afterwards');
  },
);

t.test('a peer confirmation that outlives the renewal is named in the lock-delay', async (t) => {
  const c = ctx(1000);
  const s = moved(state(HELD, [['node-b', { confirmation: { holder: 'mbp', generation: 3, at: 995 } }]]), c);
  const w = leaseWait(s, c);
  t.equal(w?.kind, 'lock-delay');
  t.equal(w?.until, 995 + 100 + 10, 'the confirmation’s validity + margin');
  t.match(w?.text ?? '', /including the peer confirmation node-b gave it/);
});

t.test(
  'right after a restart on a kept database the start wait holds the move — not the old holder’s validity',
  async (t) => {
    const boot = young();
    const c = ctx(START + 3, boot);
    const s = moved(state(HELD), c);
    t.equal(s.lease.notBefore, startWaitUntil(c, boot), 'the grant sits at the end of the start wait');
    const w = leaseWait(s, c);
    t.equal(w?.kind, 'start-wait', 'the start wait, not the lock-delay');
    t.equal(w?.until, START + 110);
    t.equal(w?.host, null, 'no old holder’s validity is blamed');
    t.same(w?.unreported, ['mbp', 'node-b'], 'nobody has reported in a request that counts yet');
    t.match(
      w?.text ?? '',
      /start wait until .*a validity granted before that start may still be running; it ends sooner once every candidate has reported.*mbp, node-b have not yet.*mbp acknowledges its step-down saying it ran generation 3/,
    );
    t.notMatch(w?.text ?? '', /lock-delay/, 'the sentence does not speak of the lock-delay');

    // Both report (a request that counts: 2 × 5 s after the start), seen generation 4 (the grant).
    let st = s;
    let b: Boot = boot;
    for (const host of ['mbp', 'node-b']) {
      const step = heartbeat(st, ctx(START + 12, b), {
        host,
        seenGeneration: host === 'mbp' ? 3 : 4,
        requestTimeoutSeconds: 5,
      });
      st = step.next;
      b = step.boot;
    }
    const w2 = leaseWait(st, ctx(START + 12, b));
    t.equal(w2?.kind, 'start-wait');
    t.same(w2?.unreported, [], 'every candidate has reported');
    t.match(w2?.text ?? '', /ends sooner once mbp acknowledges its step-down saying it ran generation 3/);

    // An acknowledgement that does not say mbp ran ends nothing here: the sentence still says what would.
    const plain = steppedDown(st, ctx(START + 13, b), { host: 'mbp', generation: 3, revision: st.lease.revision });
    t.same(plain.answer, { ok: false, reason: 'other-wait' }, 'refused: the start wait is more than mbp’s validity');
    const w3 = leaseWait(plain.next, ctx(START + 13, b));
    t.equal(w3?.kind, 'start-wait', 'still the start wait');
    t.match(w3?.text ?? '', /ends sooner once mbp acknowledges its step-down saying it ran generation 3/);

    // One that says it ran ends it.
    const ran = steppedDown(st, ctx(START + 13, b), {
      host: 'mbp',
      generation: 3,
      revision: st.lease.revision,
      ran: true,
    });
    t.equal(leaseWait(ran.next, ctx(START + 13.5, b)), null, 'an acknowledgement saying mbp ran ends the start wait');
  },
);

t.test('an acknowledgement that ended the old holder’s validity but not the start wait says so', async (t) => {
  // mbp renewed far into the start wait (expires at START + 300): the move's lock-delay lies past
  // the start wait; an acknowledgement without "ran" lowers it to the start wait's end, no further.
  const boot = young([
    ['mbp', 3],
    ['node-b', 3],
  ]);
  const s = moved(state({ ...HELD, expiresAt: START + 300 }), ctx(START + 20, boot));
  t.equal(leaseWait(s, ctx(START + 20, boot))?.kind, 'lock-delay', 'first the lock-delay, past the start wait');
  const acked = steppedDown(s, ctx(START + 21, boot), { host: 'mbp', generation: 3, revision: s.lease.revision });
  t.equal(acked.answer.ok, true, 'accepted');
  const w = leaseWait(acked.next, ctx(START + 21, boot));
  t.equal(w?.kind, 'start-wait', 'then the start wait');
  t.match(w?.text ?? '', /mbp acknowledged its step-down without saying it ran generation 3/);
});

t.test(
  'a new database: the floor is pending until every candidate reported, and the answer says who has not',
  async (t) => {
    const boot = young([['mbp', 0]]);
    const s = state(
      {
        holder: 'mbp',
        generation: 1,
        revision: 2,
        acquiredAt: START + 1,
        renewedAt: START + 1,
        expiresAt: START + 111,
        notBefore: START + 1,
        floorPending: true,
      },
      [],
      0,
    );
    const w = leaseWait(s, ctx(START + 2, boot));
    t.equal(w?.kind, 'floor-pending');
    t.equal(w?.until, null, 'it ends on reports, not at a time');
    t.same(w?.unreported, ['node-b'], 'node-b has not reported');
    t.match(w?.text ?? '', /every candidate has reported the generation it has seen.*node-b has not yet/);
  },
);

t.test('a new holder that confirmed the old one during an outage waits that confirmation out itself', async (t) => {
  // node-b confirmed mbp (generation 3) at 995; the move's lock-delay ended on mbp's acknowledgement.
  const c = ctx(1000);
  const s = moved(state(HELD, [['node-b', { confirmation: { holder: 'mbp', generation: 3, at: 995 } }]]), c);
  const acked = steppedDown(s, ctx(1001), { host: 'mbp', generation: 3, revision: s.lease.revision });
  t.equal(acked.next.lease.notBefore, 1001, 'the record lets node-b run now');
  const w = leaseWait(acked.next, ctx(1002));
  t.equal(w?.kind, 'confirmation', 'but node-b waits its own confirmation out');
  t.equal(w?.until, 995 + 110);
  t.equal(w?.host, 'mbp');
  t.match(w?.text ?? '', /node-b confirmed mbp \(generation 3\).*which no acknowledgement ends/);
  t.equal(leaseWait(acked.next, ctx(995 + 110)), null, 'over once ttl + margin after it passed');
});

t.test('the rarer sentences', async (t) => {
  // A lock-delay with no displaced holder on record (a row written before hq 0.2).
  const legacy = leaseWait(
    state({
      ...HELD,
      holder: 'node-b',
      generation: 4,
      notBefore: 1100,
      expiresAt: 1200,
      displaced: null,
      promotedFrom: null,
    }),
    ctx(1000),
  );
  t.equal(legacy?.kind, 'lock-delay');
  t.equal(legacy?.host, null);
  t.match(legacy?.text ?? '', /the last possible validity of the holder before node-b/);
  // Inside the start wait, every candidate reported, one above the record (an older database).
  const reported = young([
    ['mbp', 3],
    ['node-b', 7],
  ]);
  const sw = startWaitUntil(ctx(START + 20, reported), reported);
  const above = leaseWait(
    state({ ...HELD, generation: 8, notBefore: sw, expiresAt: sw + 100 }, [], 9),
    ctx(START + 20, reported),
  );
  t.equal(above?.kind, 'start-wait');
  t.match(above?.text ?? '', /a candidate reported generation 9, above the record's 8/);
  // Inside the start wait, every candidate reported, a grant that displaced nobody.
  const none = leaseWait(
    state({ ...HELD, notBefore: sw, expiresAt: sw + 100, displaced: null }),
    ctx(START + 20, reported),
  );
  t.match(none?.text ?? '', /as this grant displaced none/);
  // A pending floor whose last report is in: the next answer completes it.
  const all = leaseWait(state({ ...HELD, floorPending: true }), ctx(START + 20, reported));
  t.match(all?.text ?? '', /all have; the next answer completes it/);
  // A confirmation the new holder gave for a newer or its own generation is no wait of this move.
  const own = state({ ...HELD, notBefore: 900 }, [
    ['mbp', { confirmation: { holder: 'node-b', generation: 5, at: 995 } }],
  ]);
  t.equal(leaseWait(own, ctx(1000)), null, 'a confirmation above the record’s generation');
});
