import t from 'tap';
import { Registry } from 'prom-client';
import { registerOperatorMetrics } from '../../apps/arbiter/src/operator-metrics.js';
import { harness } from './helper.js';

t.test('health answers without a token and names the arbiter', async (t) => {
  const h = await harness(t);
  const res = await h.get('/v1/health');
  t.equal(res.statusCode, 200, 'health is 200');
  const body = res.json();
  t.equal(body.status, 'ok', 'status is ok');
  t.equal(body.role, 'arbiter', 'role is arbiter');
  t.equal(body.host, 'cloud-vm', 'host is the arbiter name');
  t.match(body.version, /^\d+\.\d+\.\d+/, 'version is semver');
});

t.test('a new database serves an empty record with floorPending and an ETag of its revision', async (t) => {
  const h = await harness(t);
  const res = await h.get('/v1/lease');
  t.equal(res.statusCode, 200, 'open reads need no token');
  const lease = res.json();
  t.equal(lease.name, 'hq', 'record name');
  t.equal(lease.holder, null, 'no holder');
  t.equal(lease.generation, 0, 'generation 0');
  t.equal(lease.expired, true, 'an empty lease is expired');
  t.equal(lease.floorPending, true, 'a database created at this start has a pending floor');
  t.same(lease.views, {}, 'no views yet');
  t.equal(res.headers.etag, `"${lease.revision}"`, 'ETag is the quoted revision');
  t.type(lease.now, 'number', 'now is a number');
  t.equal(
    lease.safetyMarginSeconds,
    1,
    'before the first grant the record shows the configured safetyMarginSeconds, not 0',
  );
  t.equal(lease.ttlSeconds, 6, 'and the configured ttlSeconds');
});

t.test('acquire grants generation 1 and a second host is refused with 409 held', async (t) => {
  const h = await harness(t);
  await h.settle();
  const a = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(a.statusCode, 200, 'first acquire is 200');
  const body = a.json();
  t.equal(body.ok, true, 'ok true');
  t.equal(body.lease.holder, 'mbp', 'mbp holds');
  t.equal(body.lease.generation, 1, 'generation 1');
  t.equal(body.lease.floorPending, false, 'floor complete after both candidates reported');
  t.equal(body.hold, null, 'no hold once every candidate reported');
  t.equal(body.lease.notBefore, body.lease.now, 'no lock-delay for a first grant after the start waits');
  const b = await h.post('/v1/lease/acquire', { host: 'node-b' }, h.tokens.nodeb);
  t.equal(b.statusCode, 409, 'second acquire is 409');
  const c = b.json();
  t.equal(c.ok, false, 'ok false');
  t.equal(c.reason, 'held', 'reason held');
  t.equal(c.error, 'HQ_ERR_HELD', 'catalog code');
  t.match(
    c.message,
    /^the lease is held by mbp \(generation 1\); it moves by a handover from mbp/,
    'the message names the holder and how the lease moves',
  );
  t.equal(c.lease.holder, 'mbp', 'the record is in the 409 body');
  const again = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  t.equal(again.json().lease.generation, 1, 'the holder re-acquiring renews at the same generation');
});

t.test('acquire by a host that is not a candidate is a 409 not-candidate', async (t) => {
  const h = await harness(t);
  const res = await h.post('/v1/lease/acquire', { host: 'stranger' });
  t.equal(res.statusCode, 409, '409');
  t.equal(res.json().error, 'HQ_ERR_NOT_CANDIDATE', 'code');
  t.match(res.json().message, /not a candidate \(candidates: mbp, node-b\)$/, 'the message lists the candidates');
});

t.test('renew extends the lease for the holder and refuses stale generations and other hosts', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  h.clock.advance(2);
  const r = await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp);
  t.equal(r.statusCode, 200, 'renew is 200');
  t.equal(r.json().lease.expiresAt, r.json().lease.now + 6, 'expiresAt is now + ttl');
  t.equal(r.json().hold, null, 'hold is null');
  const stale = await h.post('/v1/lease/renew', { host: 'mbp', generation: 99 }, h.tokens.mbp);
  t.equal(stale.statusCode, 409, 'stale renew is 409');
  t.equal(stale.json().reason, 'stale-generation', 'reason stale-generation');
  t.equal(stale.json().error, 'HQ_ERR_STALE_GENERATION', 'code');
  const other = await h.post('/v1/lease/renew', { host: 'node-b', generation: 1 }, h.tokens.nodeb);
  t.equal(other.json().reason, 'not-holder', 'a standby cannot renew');
});

t.test('heartbeats renew the holder and record the standby view', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const hb = await h.post(
    '/v1/heartbeat',
    { host: 'mbp', generation: 1, seenGeneration: 1, heartbeatSeconds: 1 },
    h.tokens.mbp,
  );
  t.equal(hb.statusCode, 200, '200');
  t.equal(hb.json().outcome, 'renewed', 'holder renewed');
  t.equal(hb.json().reason, null, 'no reason');
  t.equal(hb.json().hold, null, 'hold null');
  const sb = await h.post(
    '/v1/heartbeat',
    {
      host: 'node-b',
      seenGeneration: 1,
      view: { target: 'mbp', reachable: true, ping: true, health: false },
      confirmation: { holder: 'mbp', generation: 1, ageSeconds: 0.5 },
    },
    h.tokens.nodeb,
  );
  t.equal(sb.json().outcome, 'standby', 'standby outcome');
  const view = sb.json().lease.views['node-b'];
  t.same(
    view,
    { target: 'mbp', reachable: true, ping: true, health: false, at: sb.json().lease.now },
    'view stored with the receive time',
  );
  const stale = await h.post('/v1/heartbeat', { host: 'mbp', generation: 7 }, h.tokens.mbp);
  t.equal(stale.json().outcome, 'renew-refused', 'a wrong generation is refused');
  t.equal(stale.json().reason, 'stale-generation', 'with its reason');
  t.equal(stale.statusCode, 200, 'heartbeat answers are 200 even when refused');
});

t.test('heartbeat without a lease says no-lease', async (t) => {
  const h = await harness(t);
  const res = await h.post('/v1/heartbeat', { host: 'node-b' }, h.tokens.nodeb);
  t.equal(res.json().outcome, 'no-lease', 'no-lease');
});

t.test('release marks the lease expired and handover grants the named candidate at once', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const ho = await h.post('/v1/lease/release', { host: 'mbp', generation: 1, handoverTo: 'node-b' }, h.tokens.mbp);
  t.equal(ho.statusCode, 200, 'handover is 200');
  const lease = ho.json().lease;
  t.equal(lease.holder, 'node-b', 'node-b holds');
  t.equal(lease.generation, 2, 'generation 2');
  t.equal(lease.notBefore, lease.now, 'no lock-delay on handover');
  const rel = await h.post('/v1/lease/release', { host: 'node-b' }, h.tokens.nodeb);
  t.equal(rel.json().lease.released, true, 'released');
  t.equal(rel.json().lease.expired, true, 'released is expired');
  t.equal(rel.json().lease.holder, 'node-b', 'release keeps the holder');
  const bad = await h.post('/v1/lease/release', { host: 'mbp' }, h.tokens.mbp);
  t.equal(bad.statusCode, 409, 'a non-holder release is 409');
  t.equal(bad.json().reason, 'not-holder', 'not-holder');
});

t.test('transfer moves the lease behind the old holder lock-delay and maintenance is recorded', async (t) => {
  const h = await harness(t);
  await h.settle();
  const a = (await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp)).json();
  const tr = await h.post('/v1/lease/transfer', { to: 'node-b' });
  t.equal(tr.statusCode, 200, 'transfer 200');
  t.equal(tr.json().lease.holder, 'node-b', 'node-b holds');
  t.equal(tr.json().lease.generation, 2, 'generation 2');
  t.equal(tr.json().lease.notBefore, a.lease.expiresAt + 1, 'lock-delay = old expiry + margin');
  t.equal(tr.json().lease.promotedFrom, 'mbp', 'promotedFrom');
  const same = await h.post('/v1/lease/transfer', { to: 'node-b' });
  t.equal(same.statusCode, 409, 'transfer to the holder is 409');
  t.equal(same.json().error, 'HQ_ERR_SAME_HOLDER', 'same-holder');
  const m = await h.app.inject({
    method: 'PUT',
    url: '/v1/maintenance',
    headers: { authorization: `Bearer ${h.tokens.admin}`, 'content-type': 'application/json' },
    payload: { enabled: true, reason: 'upgrade' },
  });
  t.equal(m.statusCode, 200, 'maintenance 200');
  t.equal(m.json().lease.maintenance, true, 'maintenance on');
  const p = (await h.get('/v1/primary')).json();
  t.same(p, { known: true, holder: 'node-b', generation: 2 }, 'primary names the holder');
});

t.test('a forced transfer is not counted or shown as a promotion', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  t.equal((await h.post('/v1/lease/transfer', { to: 'node-b' })).statusCode, 200, 'transferred');
  t.match((await h.get('/metrics')).body, /^hq_promotions_total 0$/m, 'hq_promotions_total stays 0');
  t.match(
    (await h.get('/metrics')).body,
    /^hq_lease_operations_total\{op="transfer",outcome="[a-z-]+"\} 1$/m,
    'the transfer is counted as an operation',
  );
  const { eventLabel } = await import('../../apps/arbiter/src/routes/status-page/model.js');
  const ev = (
    (await h.get('/v1/events')).json() as { events: Array<{ event: string; data: Record<string, unknown> }> }
  ).events.find((e) => e.event === 'promoted');
  t.equal(eventLabel(ev?.event ?? '', ev?.data), 'transferred', 'the status page labels it transferred');
  t.equal(eventLabel('promoted', { via: 'check' }), 'promoted', 'a promotion by a check stays promoted');
});

t.test(
  'the displaced holder’s step-down acknowledgement ends the lock-delay; a second, another host’s or a forged one changes nothing',
  async (t) => {
    const h = await harness(t);
    await h.settle();
    await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    const tr = (await h.post('/v1/lease/transfer', { to: 'node-b' })).json();
    t.ok(tr.lease.notBefore > tr.lease.now, 'node-b waits behind mbp’s lock-delay');
    t.match(
      tr.lease.displaced,
      { host: 'mbp', generation: 1, acknowledgedAt: null, savedSeconds: null },
      'the record names the displaced holder',
    );
    const hb = (await h.post('/v1/heartbeat', { host: 'mbp', generation: 1, seenGeneration: 2 }, h.tokens.mbp)).json();
    t.equal(hb.stepDown, 1, 'mbp’s heartbeat answer asks it to acknowledge its step-down from generation 1');
    const ack = { host: 'mbp', generation: 1, revision: tr.lease.revision };
    const forged = await h.post('/v1/lease/stepped-down', ack, h.tokens.nodeb);
    t.equal(forged.statusCode, 403, 'node-b’s token cannot acknowledge for mbp');
    t.equal(forged.json().error, 'HQ_ERR_WRONG_HOST', 'wrong host');
    const other = await h.post('/v1/lease/stepped-down', { ...ack, host: 'node-b' }, h.tokens.nodeb);
    t.same(
      [other.statusCode, other.json().accepted, other.json().reason],
      [200, false, 'not-previous-holder'],
      'node-b is not the displaced holder',
    );
    const wrong = await h.post('/v1/lease/stepped-down', { ...ack, generation: 2 }, h.tokens.mbp);
    t.same(
      [wrong.json().accepted, wrong.json().reason],
      [false, 'wrong-generation'],
      'another generation changes nothing',
    );
    const bad = await h.post('/v1/lease/stepped-down', { ...ack, generation: '1' }, h.tokens.mbp);
    t.equal(bad.statusCode, 400, 'a string generation is a 400 (no coercion)');
    const ok = await h.post('/v1/lease/stepped-down', ack, h.tokens.mbp);
    t.equal(ok.statusCode, 200, '200');
    const body = ok.json();
    t.same([body.accepted, body.reason], [true, null], 'accepted');
    t.ok(body.savedSeconds > 0, `the lock-delay ended early (${body.savedSeconds} s saved)`);
    t.equal(body.lease.notBefore, body.lease.now, 'node-b may run from now');
    t.match(
      body.lease.displaced,
      { host: 'mbp', generation: 1, acknowledgedAt: body.lease.now },
      'the record shows the acknowledgement',
    );
    const again = (await h.post('/v1/lease/stepped-down', ack, h.tokens.mbp)).json();
    t.same([again.accepted, again.reason], [false, 'duplicate'], 'a second acknowledgement is a duplicate');
    const events = (await h.get('/v1/events?limit=1000')).json().events.map((e: { event: string }) => e.event);
    t.ok(
      events.includes('stepped-down') && events.includes('step-down-refused'),
      'both the acceptance and the refusals are events',
    );
    const m = await h.get('/metrics');
    t.match(
      m.body,
      /hq_lease_operations_total\{op="stepped-down",outcome="accepted"\} 1/,
      'the operation is counted with its outcome',
    );
    t.match(m.body, /hq_step_down_saved_seconds_total \d/, 'and the seconds it saved');
  },
);

t.test(
  'a handover or transfer to a host not heard from within its interval is 409 target-silent unless force',
  async (t) => {
    const h = await harness(t);
    await h.settle();
    await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0, heartbeatSeconds: 2 }, h.tokens.nodeb);
    const heardAt = h.clock.now();
    h.clock.advance(8.5); // 2 × 1.5 + 5 = 8 s of grace
    await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp);
    const ho = await h.post('/v1/lease/release', { host: 'mbp', generation: 1, handoverTo: 'node-b' }, h.tokens.mbp);
    t.equal(ho.statusCode, 409, 'a handover to a silent host is 409');
    t.equal(ho.json().error, 'HQ_ERR_TARGET_SILENT', 'with the catalog code');
    t.equal(ho.json().reason, 'target-silent', 'and the reason');
    t.equal(
      ho.json().message,
      `node-b was last heard 9 s ago (${new Date(heardAt * 1000).toISOString()}), longer than its heartbeat interval 2 s × 1.5 + 5 s; is its agent running? force overrides`,
      'the message says when it was last heard',
    );
    t.equal(ho.json().lease.holder, 'mbp', 'mbp still holds');
    t.equal(ho.json().lease.released, false, 'nothing was released');
    const tr = await h.post('/v1/lease/transfer', { to: 'node-b' });
    t.equal(tr.statusCode, 409, 'a transfer to a silent host is 409');
    t.equal(tr.json().error, 'HQ_ERR_TARGET_SILENT', 'target-silent');
    const badForce = await h.post('/v1/lease/transfer', { to: 'node-b', force: 'yes' });
    t.equal(badForce.statusCode, 400, 'force must be a boolean');
    const forced = await h.post(
      '/v1/lease/release',
      { host: 'mbp', generation: 1, handoverTo: 'node-b', force: true },
      h.tokens.mbp,
    );
    t.equal(forced.statusCode, 200, 'force: true overrides');
    t.equal(forced.json().lease.holder, 'node-b', 'node-b holds');
    await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 1, heartbeatSeconds: 2 }, h.tokens.mbp);
    const back = await h.post('/v1/lease/transfer', { to: 'mbp' });
    t.equal(back.statusCode, 200, 'a transfer to a host that just heartbeat is accepted');
    const events = (await h.get('/v1/events?limit=1000')).json().events as Array<{
      event: string;
      data: Record<string, unknown>;
    }>;
    t.match(
      events.find((e) => e.event === 'release-refused'),
      {
        data: {
          reason: 'target-silent',
          handoverTo: 'node-b',
          lastHeartbeatAt: heardAt,
          heartbeatSeconds: 2,
          graceSeconds: 8,
        },
      },
      'the refusal is in the event log with the last heartbeat',
    );
  },
);

t.test('a check with a reachable holder keeps the streak at zero', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  h.prober.answers.set('mbp', { ping: true, health: false });
  const c = await h.post('/v1/check', undefined);
  t.equal(c.statusCode, 200, 'check 200');
  t.same(
    c.json(),
    { promoted: false, streak: 0, holder: 'mbp', generation: 1, ping: true, health: false, promotee: null },
    'check answer',
  );
  t.same(h.prober.calls, ['mbp'], 'the holder was probed');
  const lease = (await h.get('/v1/lease')).json();
  t.equal(lease.views['cloud-vm'].reachable, true, 'the arbiter view is recorded');
  const empty = await h.post('/v1/check', {});
  t.equal(empty.statusCode, 200, 'an empty JSON object is accepted as the check body');
  const bad = await h.post('/v1/check', { now: true });
  t.equal(bad.statusCode, 400, 'a check body with fields is refused');
});

t.test('events page in ascending order with after and limit', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const all = (await h.get('/v1/events')).json().events;
  t.ok(all.length >= 3, 'events were recorded');
  t.ok(
    all.every((e: { id: number }, i: number) => i === 0 || e.id > all[i - 1].id),
    'ascending ids',
  );
  const acquired = all.find((e: { event: string }) => e.event === 'acquired');
  t.match(acquired, { category: 'hq.lease', host: 'mbp', data: { generation: 1 } }, 'acquired event with its data');
  const page = (await h.get(`/v1/events?after=${all[0].id}&limit=1`)).json().events;
  t.equal(page.length, 1, 'limit 1');
  t.equal(page[0].id, all[1].id, 'after skips up to the id');
  for (const q of ['limit=0', 'limit=1001', 'after=-1', 'after=abc', 'limit=1.5', 'after=1&after=2', 'other=1']) {
    const r = await h.get(`/v1/events?${q}`);
    t.equal(r.statusCode, 400, `?${q} is 400`);
    t.equal(r.json().error, 'HQ_ERR_BAD_REQUEST', `?${q} has the catalog code`);
  }
  t.equal((await h.get('/v1/events?limit=1000')).statusCode, 200, 'limit 1000 is allowed');
});

t.test('events: tail N gives the newest N, since T the events at or after T; one start at a time', async (t) => {
  const h = await harness(t);
  const base = h.clock.now();
  await h.rt.store.appendEvents(
    Array.from({ length: 30 }, (_, i) => ({ at: base + i, category: 'control', event: `t${i}`, host: null, data: {} })),
  );
  const all = await h.rt.store.listEvents(0, 1000);
  const tail = (await h.get('/v1/events?tail=5')).json().events as Array<{ id: number; event: string }>;
  t.same(
    tail.map((e) => e.id),
    all.slice(-5).map((e) => e.id),
    'tail=5 is the newest five, oldest first',
  );
  const since = (await h.get(`/v1/events?since=${base + 27}`)).json().events as Array<{ event: string }>;
  t.same(
    since.map((e) => e.event),
    ['t27', 't28', 't29'],
    'since T starts at the first event at or after T',
  );
  const frac = (await h.get(`/v1/events?since=${base + 26.5}&limit=1`)).json().events as Array<{ event: string }>;
  t.same(
    frac.map((e) => e.event),
    ['t27'],
    'since takes fractional seconds and limit pages it',
  );
  for (const q of ['tail=0', 'tail=1001', 'limit=0', 'limit=1001', 'after=9999999999999999']) {
    const r = await h.get(`/v1/events?${q}`);
    t.equal(r.statusCode, 400, `?${q} is outside the document's pattern: 400`);
    t.equal(r.json().error, 'HQ_ERR_BAD_REQUEST', `?${q} has the catalog code`);
  }
  // Every combination the document allows is an answer: lower bounds, the last ones, a cap.
  const ids = (q: string) =>
    h.get(`/v1/events?${q}`).then((r) => (r.json().events as Array<{ id: number }>).map((e) => e.id));
  const id = (i: number) => (all[all.length - 30 + i] as { id: number }).id;
  t.same(await ids(`tail=3&after=${id(0)}`), [id(27), id(28), id(29)], 'tail with after: the last three above after');
  t.same(await ids(`tail=5&after=${id(27)}`), [id(28), id(29)], 'tail with a later after: only those above after');
  t.same(await ids(`since=${base + 28}&tail=5`), [id(28), id(29)], 'since with tail: the last ones at or after since');
  t.same(await ids('tail=3&limit=2'), [id(28), id(29)], 'tail with limit: the last min(tail, limit)');
  t.same(
    await ids(`after=${id(25)}&since=${base + 20}&limit=2`),
    [id(26), id(27)],
    'after and since: the later bound wins',
  );
  for (const q of ['since=abc', 'since=-5', 'since=1e9'])
    t.equal((await h.get(`/v1/events?${q}`)).statusCode, 400, `?${q} is 400`);
});

t.test('sweepEvents keeps events younger than events.maxAgeDays and at most events.maxCount', async (t) => {
  const h = await harness(t, { events: { maxAgeDays: 1, maxCount: 100 } });
  t.same(h.rt.config.events, { maxAgeDays: 1, maxCount: 100 }, 'the config carries the bounds');
  const now = h.clock.now();
  await h.rt.store.appendEvents(
    Array.from({ length: 10 }, (_, i) => ({
      at: now - 2 * 86_400 + i,
      category: 'control',
      event: 'old',
      host: null,
      data: {},
    })),
  );
  await h.rt.store.appendEvents(
    Array.from({ length: 150 }, (_, i) => ({
      at: now - 3600 + i,
      category: 'control',
      event: 'new',
      host: null,
      data: {},
    })),
  );
  const before = await h.rt.store.listEvents(0, 1000);
  const swept = await h.rt.sweepEvents();
  const after = await h.rt.store.listEvents(0, 1000);
  t.equal(after.length, 100, 'at most maxCount stay');
  t.equal(swept, before.length - 100, 'the sweep says how many went');
  t.ok(
    after.every((e) => e.event === 'new'),
    'the old ones went first',
  );
  t.same(
    after.map((e) => e.id),
    before.slice(-100).map((e) => e.id),
    'the newest stay',
  );
  h.clock.advance(2 * 86_400);
  t.equal(await h.rt.sweepEvents(), 100, 'two days later (the driven clock) every one is past maxAgeDays');
});

t.test('metrics expose the documented names computed from the store', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  await h.post('/v1/check', undefined);
  const res = await h.get('/metrics');
  t.equal(res.statusCode, 200, 'metrics 200');
  t.match(res.headers['content-type'], /text\/plain/, 'prometheus text');
  for (const name of [
    'hq_lease_generation 1',
    'hq_lease_holder{host="mbp"} 1',
    'hq_lease_holder{host="node-b"} 0',
    'hq_lease_expires_in_seconds',
    'hq_lease_dual_unreachable_streak 0',
    'hq_view_reachable{observer="cloud-vm",target="mbp"} 0',
    'hq_view_age_seconds{observer="cloud-vm",target="mbp"}',
    'hq_checks_total{result="unreachable"} 1',
    'hq_promotions_total 0',
    'hq_lease_operations_total{op="acquire",outcome="ok"} 1',
    'hq_agent_last_heartbeat_age_seconds{host="mbp"}',
    'hq_http_request_duration_seconds_bucket',
  ]) {
    t.ok(res.body.includes(name), `metrics include ${name}`);
  }
});

t.test('the operator gauges read the store once per scrape, and afresh on the next one', async (t) => {
  const h = await harness(t);
  await h.settle();
  const registry = new Registry();
  let reads = 0;
  registerOperatorMetrics(
    registry,
    () => {
      reads++;
      return h.rt.store.read();
    },
    h.rt.config,
    h.clock,
  );
  t.match(await registry.metrics(), /hq_maintenance_enabled 0/, 'maintenance off');
  t.equal(reads, 1, 'five gauges, one store read');
  const m = await h.app.inject({
    method: 'PUT',
    url: '/v1/maintenance',
    headers: { authorization: `Bearer ${h.tokens.admin}`, 'content-type': 'application/json' },
    payload: { enabled: true },
  });
  t.equal(m.statusCode, 200, 'maintenance on');
  t.match(await registry.metrics(), /hq_maintenance_enabled 1/, 'the next scrape sees it at once');
  t.equal(reads, 2, 'with one more read');
});

t.test(
  'hq_lease_runnable is 0 while no host may run (no holder, released, lock-delay) and 1 while the holder may',
  async (t) => {
    const h = await harness(t);
    await h.settle();
    const runnable = async (): Promise<number> =>
      Number(/^hq_lease_runnable (\d)$/m.exec((await h.get('/metrics')).body)?.[1]);
    t.equal(await runnable(), 0, 'no holder yet: 0');
    const a = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    t.equal(a.statusCode, 200, 'mbp acquires');
    const notBefore = (a.json() as { lease: { notBefore: number | null } }).lease.notBefore;
    if (notBefore !== null && notBefore > h.clock.now()) {
      t.equal(await runnable(), 0, 'behind a lock-delay: 0');
      h.clock.advance(notBefore - h.clock.now() + 0.1);
    }
    t.equal(await runnable(), 1, 'the holder may run: 1');
    const r = await h.post('/v1/lease/release', { host: 'mbp' }, h.tokens.mbp);
    t.equal(r.statusCode, 200, 'mbp releases');
    t.equal(await runnable(), 0, 'released: 0');
  },
);

t.test('the daemon wiring serves the fleet registry beside the lease API', async (t) => {
  const h = await harness(t, { portBands: { test: { from: 40000, to: 40001 } } }, { registry: true });
  const a = await h.post('/v1/leases/port', { machine: 'mbp', purpose: 'web', ttlMs: 60000 }, h.tokens.mbp);
  t.equal(a.statusCode, 200, 'a port lease is granted');
  t.equal(a.json().port, 40000, 'the lowest port of the configured test band');
  const wrong = await h.post('/v1/leases/port', { machine: 'node-b', purpose: 'web', ttlMs: 60000 }, h.tokens.mbp);
  t.equal(wrong.statusCode, 403, 'a member token leases only for its machine');
  const reg = await h.post(
    '/v1/resources/register',
    {
      id: 'mbp',
      name: 'mbp',
      kind: 'machine',
      machine: 'mbp',
      attrs: { cpuCount: 8 },
      observedAt: h.clock.now() * 1000,
      ttlMs: 120000,
    },
    h.tokens.mbp,
  );
  t.equal(reg.statusCode, 200, 'a machine registers');
  t.equal((await h.get('/v1/resources')).json().resources.length, 1, 'and is listed');
  t.match(
    (await h.get('/metrics')).body,
    /hq_fleet_member_up\{host="mbp"\} 1/,
    'fleet gauges are on the arbiter registry, labelled host like every hq metric',
  );
});

t.test(
  'a generation named in a request is a safe integer ≥ 1: 0 and -0 are 400 and write nothing (the issue: they renewed)',
  async (t) => {
    const h = await harness(t);
    await h.settle();
    const acq = await h.post(
      '/v1/lease/acquire',
      { host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: 1 },
      h.tokens.mbp,
    );
    t.equal(acq.statusCode, 200, 'acquired');
    const before = (await h.get('/v1/lease')).json() as { revision: number };
    for (const [path, body] of [
      ['/v1/heartbeat', '{"host":"mbp","generation":0}'],
      ['/v1/heartbeat', '{"host":"mbp","generation":-0}'],
      ['/v1/lease/renew', '{"host":"mbp","generation":0}'],
      ['/v1/lease/release', '{"host":"mbp","generation":0}'],
    ] as const) {
      const r = await h.post(path, body, h.tokens.mbp);
      t.equal(r.statusCode, 400, `${path} ${body} is 400`);
      t.match(r.json(), { error: 'HQ_ERR_BAD_REQUEST' }, 'a schema refusal');
    }
    const after = (await h.get('/v1/lease')).json() as { revision: number };
    t.equal(after.revision, before.revision, 'the record was not written');
    const ok = await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
    t.equal(ok.statusCode, 200, 'a seen generation of 0 (never seen) is still fine');
  },
);
