import t from 'tap';
import { acquire, emptyLease, importOld, newBoot } from '../../packages/lease-core/src/index.js';
import type {
  ArbiterSettings,
  ArbiterState,
  Context,
  LeaseState,
  OldLease,
} from '../../packages/lease-core/src/index.js';

// ttl 100, margin 10; the boot is long past its start wait unless a case says otherwise.
const S: ArbiterSettings = {
  arbiter: 'cloud-vm',
  candidates: ['mbp', 'node-b'],
  ttlSeconds: 100,
  safetyMarginSeconds: 10,
  promoteAfterChecks: 2,
  viewFreshSeconds: 50,
};
const NOW = 5000;
const ctx = (now = NOW, startAt = 0): Context => ({ now, settings: S, boot: newBoot(startAt) });
const fresh = (lease: Partial<LeaseState> = {}, floor = 0): ArbiterState => ({
  lease: { ...emptyLease(100), ...lease },
  observers: new Map(),
  floor,
});
const OLD: OldLease = { holder: 'mbp', generation: 7, expiresAt: NOW + 60, ttlSeconds: 300, released: false };

t.test('a live old holder keeps HQ at the next generation, behind the old validity', async (t) => {
  const s = importOld(fresh(), ctx(), OLD);
  t.same(
    s.answer,
    { ok: true, floor: 7, granted: { holder: 'mbp', generation: 8, notBefore: NOW + 300 + 10 } },
    'generation 8, lock-delay = now + old ttl + margin',
  );
  t.equal(s.next.floor, 7, 'the floor is the old generation');
  t.equal(s.next.lease.holder, 'mbp', 'the old holder holds the record');
  t.equal(s.next.lease.generation, 8, 'above every old generation');
  t.equal(s.next.lease.expiresAt, NOW + 310 + 100, 'its validity starts at the end of the lock-delay');
  t.equal(s.next.lease.promotedFrom, null, 'nobody is displaced');
  t.same(
    s.events.map((e) => e.event),
    ['imported', 'acquired'],
    'says what it did',
  );
  t.equal(s.events[0]?.data['oldGeneration'], 7, 'the imported event names the old generation');
});

t.test('the record’s own end of validity counts when it lies beyond a racing renewal', async (t) => {
  const s = importOld(fresh(), ctx(), { ...OLD, expiresAt: NOW + 1000, ttlSeconds: 50 });
  t.same(s.answer.ok && s.answer.granted?.notBefore, NOW + 1000 + 10, 'the later of the two, plus one margin');
});

t.test('a record without an end of validity is taken as live', async (t) => {
  const s = importOld(fresh(), ctx(), { ...OLD, expiresAt: null });
  t.same(s.answer.ok && s.answer.granted?.notBefore, NOW + 310, 'now + old ttl + margin');
});

t.test('the start wait of a young arbiter still applies', async (t) => {
  const s = importOld(fresh(), ctx(NOW, NOW - 1), { ...OLD, ttlSeconds: 10, expiresAt: NOW + 5 });
  t.same(
    s.answer.ok && s.answer.granted?.notBefore,
    NOW - 1 + 100 + 10,
    'the later of the old validity and the start wait',
  );
});

t.test('no live old holder: the floor alone, the operator acquires afresh', async (t) => {
  for (const [name, old] of [
    ['expired', { ...OLD, expiresAt: NOW - 1 }],
    ['released', { ...OLD, released: true }],
    ['no holder', { ...OLD, holder: null }],
  ] as const) {
    const s = importOld(fresh(), ctx(), old);
    t.same(s.answer, { ok: true, floor: 7, granted: null }, `${name}: nothing granted`);
    t.equal(s.next.lease.holder, null, `${name}: no holder`);
    t.equal(s.next.floor, 7, `${name}: the floor is raised`);
    t.same(
      s.events.map((e) => e.event),
      ['imported'],
      `${name}: says so`,
    );
    const a = acquire(s.next, ctx(NOW + 1), { host: 'node-b', seenGeneration: 0, requestTimeoutSeconds: 5 });
    t.equal(a.next.lease.generation, 8, `${name}: the first acquire is granted generation 8`);
  }
});

t.test('a floor already above the old generation stays', async (t) => {
  const s = importOld(fresh({}, 9), ctx(), OLD);
  t.same(
    s.answer.ok && s.answer,
    { ok: true, floor: 9, granted: { holder: 'mbp', generation: 10, notBefore: NOW + 310 } },
    'granted above the higher floor',
  );
});

t.test('an installation that already granted is refused, nothing changes', async (t) => {
  const before = fresh({ holder: 'node-b', generation: 2, revision: 3 });
  const s = importOld(before, ctx(), OLD);
  t.same(
    s.answer,
    { ok: false, reason: 'already-granted', holder: 'node-b', generation: 2 },
    'refused with the current holder',
  );
  t.equal(s.next, before, 'the state is the same object');
  t.same(s.events, [], 'no event');
});

t.test('a live old holder that is not a candidate is refused, nothing changes', async (t) => {
  const before = fresh();
  const s = importOld(before, ctx(), { ...OLD, holder: 'laptop' });
  t.same(s.answer, { ok: false, reason: 'not-candidate', holder: 'laptop', generation: 7 }, 'names the holder');
  t.equal(s.next, before, 'the state is the same object');
});
