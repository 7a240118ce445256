import t from 'tap';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { harness } from './helper.js';

function wipe(dir: string): void {
  for (const f of ['hq.db', 'hq.db-wal', 'hq.db-shm']) rmSync(join(dir, f), { force: true });
}

t.test(
  'after the database is wiped, generations continue above what agents report (S1) behind floorPending (S2.4)',
  async (t) => {
    const dir = t.testdir();
    const h1 = await harness(t, {}, { dir });
    await h1.settle();
    await h1.post('/v1/lease/acquire', { host: 'mbp' }, h1.tokens.mbp);
    await h1.post('/v1/lease/transfer', { to: 'node-b' });
    const before = (await h1.post('/v1/lease/transfer', { to: 'mbp' })).json().lease;
    t.equal(before.generation, 3, 'three grants before the loss');
    await h1.rt.close();
    wipe(dir);

    const h = await harness(t, {}, { dir, clockStart: h1.clock.now() + 10 });
    const start = h.clock.now();
    const fresh = (await h.get('/v1/lease')).json();
    t.equal(fresh.generation, 0, 'the new database starts at generation 0');
    t.equal(fresh.floorPending, true, 'a database created at this start has floorPending');

    // A report before 2 × requestTimeout still raises the floor, but does not count as complete.
    const early = await h.post(
      '/v1/heartbeat',
      { host: 'mbp', seenGeneration: 3, requestTimeoutSeconds: 1 },
      h.tokens.mbp,
    );
    t.equal(early.json().outcome, 'no-lease', 'no lease yet');
    const a = await h.post(
      '/v1/lease/acquire',
      { host: 'mbp', seenGeneration: 3, requestTimeoutSeconds: 1 },
      h.tokens.mbp,
    );
    t.equal(a.statusCode, 200, 'the grant is answered');
    const granted = a.json().lease;
    t.equal(granted.generation, 4, 'the grant is above the reported generation 3, never a repeat');
    t.equal(granted.floorPending, true, 'the floor is still pending');
    t.ok(granted.notBefore >= start + 6 + 1, 'the grant waits ttl + margin after the start (lock-delay)');
    t.ok(a.json().hold >= start + 7, 'the answer carries the start hold');

    // node-b reports (in a request that counts) a generation above the grant: it is raised.
    h.clock.advance(2.5);
    const nb = await h.post(
      '/v1/heartbeat',
      { host: 'node-b', seenGeneration: 5, requestTimeoutSeconds: 1 },
      h.tokens.nodeb,
    );
    t.equal(nb.json().lease.generation, 6, 'the pending grant is raised above the report of 5');
    t.equal(nb.json().lease.holder, 'mbp', 'the holder stays');
    t.equal(nb.json().lease.floorPending, true, 'still pending: mbp has not reported in a request that counts');
    const mb = await h.post(
      '/v1/heartbeat',
      { host: 'mbp', seenGeneration: 4, requestTimeoutSeconds: 1 },
      h.tokens.mbp,
    );
    t.equal(mb.json().lease.floorPending, false, 'every candidate reported: the floor is complete');
    t.equal(mb.json().lease.generation, 6, 'the generation stays above every report');

    const tr = await h.post('/v1/lease/transfer', { to: 'node-b' });
    t.equal(tr.json().lease.generation, 7, 'later grants keep going up');
    const events = (await h.get('/v1/events?limit=1000')).json().events.map((e: { event: string }) => e.event);
    t.ok(events.includes('generation-raised'), 'the raise is in the event log');
    t.ok(events.includes('floor-complete'), 'the completion is in the event log');
  },
);

t.test(
  'after a restart, a lease that was live is not granted to another host before ttl + margin after the start',
  async (t) => {
    const dir = t.testdir();
    const h1 = await harness(t, {}, { dir });
    await h1.settle();
    const held = (await h1.post('/v1/lease/acquire', { host: 'mbp' }, h1.tokens.mbp)).json().lease;
    await h1.rt.close();

    const h = await harness(t, {}, { dir, clockStart: held.now + 1 });
    const start = h.clock.now();
    t.equal((await h.get('/v1/lease')).json().floorPending, false, 'a database that survived has no pending floor');
    h.clock.advance(7);
    const a = await h.post(
      '/v1/lease/acquire',
      { host: 'node-b', seenGeneration: 1, requestTimeoutSeconds: 1 },
      h.tokens.nodeb,
    );
    t.equal(a.statusCode, 200, 'the expired lease is granted');
    t.equal(a.json().lease.generation, 2, 'at the next generation');
    t.ok(a.json().lease.notBefore >= start + 6 + 1, 'not before ttl + margin after the restart');
  },
);

t.test(
  'a restart after the wall clock went back clamps the previous life times, so the lease is not held for ever',
  async (t) => {
    const dir = t.testdir();
    const h1 = await harness(t, {}, { dir });
    await h1.settle();
    const held = (await h1.post('/v1/lease/acquire', { host: 'mbp' }, h1.tokens.mbp)).json().lease;
    await h1.rt.close();

    const start = held.now - 1000; // the host clock was set back by 1000 s while the arbiter was down
    const h = await harness(t, {}, { dir, clockStart: start });
    const lease = (await h.get('/v1/lease')).json();
    t.ok(lease.expiresAt <= start + 6, 'expiresAt is clamped to start + ttl');
    t.ok(lease.renewedAt <= start, 'renewedAt is clamped to the start');
    t.ok(lease.views['node-b'] === undefined || lease.views['node-b'].at <= start, 'views are not from the future');
    h.clock.advance(8);
    const a = await h.post(
      '/v1/lease/acquire',
      { host: 'node-b', seenGeneration: 1, requestTimeoutSeconds: 1 },
      h.tokens.nodeb,
    );
    t.equal(a.statusCode, 200, 'the lease can be granted once the clamped lease expired');
    t.ok(a.json().lease.notBefore >= start + 7, 'still behind the start wait');
  },
);
