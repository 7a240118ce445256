/** The lease record's run window: when its holder may run and for how long, never more than the TTL. */
import t from 'tap';
import { runWindow } from '../../packages/protocol/src/lease.js';

const base = { holder: 'mbp', released: false, expired: false, floorPending: false, now: 1000 };

t.test('a holder that may run now: from now until expiresAt', async (t) => {
  t.same(
    runWindow({ ...base, notBefore: 900, expiresAt: 2400 }),
    { from: 1000, until: 2400, startsInSeconds: 0, validSeconds: 1400 },
    'the validity left',
  );
  t.same(
    runWindow({ ...base, notBefore: null, expiresAt: 1006 }),
    { from: 1000, until: 1006, startsInSeconds: 0, validSeconds: 6 },
    'no wait at all',
  );
});

t.test("a grant behind a wait counts its validity from the wait's end: never more than the TTL", async (t) => {
  // ttl 1500 s behind 1482 s of lock-delay: expiresAt − now is 2982 s (the "49.7 min left").
  const w = runWindow({ ...base, notBefore: 2482, expiresAt: 3982 });
  t.same(
    w,
    { from: 2482, until: 3982, startsInSeconds: 1482, validSeconds: 1500 },
    'may run in 1482 s, then for the TTL',
  );
});

t.test('no host may run: no window', async (t) => {
  t.equal(runWindow({ ...base, holder: null, notBefore: null, expiresAt: null }), null, 'no holder');
  t.equal(runWindow({ ...base, released: true, notBefore: null, expiresAt: 2000 }), null, 'released');
  t.equal(runWindow({ ...base, expired: true, notBefore: null, expiresAt: 900 }), null, 'expired');
  t.equal(runWindow({ ...base, floorPending: true, notBefore: null, expiresAt: 2000 }), null, 'the floor pending');
  t.equal(runWindow({ ...base, notBefore: 2000, expiresAt: 2000 }), null, 'a wait that outlasts the validity');
});
