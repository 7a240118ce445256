/**
 * The registry routes inside the arbiter's real app (real SqliteStore file in a testdir, the real
 * auth plugin and tokens, the real error handler), with an injected clock.
 */
import t from 'tap';
import { machineBody, registryHarness } from './helper.js';

const json = (r: { body: string }): any => JSON.parse(r.body);

t.test('a member registers its own machine and lists it', async (t) => {
  const h = await registryHarness(t);
  const r = await h.req('POST', '/v1/resources/register', { body: machineBody('mbp') });
  t.equal(r.statusCode, 200, 'registering its own machine is 200');
  t.match(
    json(r),
    { id: 'mbp', kind: 'machine', machine: 'mbp', owner: 'mbp', ttlMs: 90_000, expiresAt: h.nowMs() + 90_000 },
    'the answer is the stored record',
  );
  const list = await h.req('GET', '/v1/resources', { token: null });
  t.equal(list.statusCode, 200, 'listing needs no token with openReads');
  t.same(
    json(list).resources.map((x: { id: string }) => x.id),
    ['mbp'],
    'the machine is listed',
  );
  t.same(json(list).resources[0].attrs.loadAvg, [0.5, 0.4, 0.3], 'attrs come back as sent');
});

t.test('a member token may not register another machine, and scopes are enforced', async (t) => {
  const h = await registryHarness(t);
  const other = await h.req('POST', '/v1/resources/register', { body: machineBody('node-b') });
  t.equal(other.statusCode, 403, 'registering for another machine is 403');
  t.equal(json(other).error, 'HQ_ERR_WRONG_HOST', 'with the wrong-host code');
  const none = await h.req('POST', '/v1/resources/register', { body: machineBody('mbp'), token: null });
  t.equal(none.statusCode, 401, 'no token is 401');
  const query = await h.req('POST', '/v1/resources/register', { body: machineBody('mbp'), token: h.tokens.query });
  t.equal(query.statusCode, 403, 'a query token may not register');
  const byAdmin = await h.req('POST', '/v1/resources/register', { body: machineBody('node-b'), token: h.tokens.admin });
  t.equal(byAdmin.statusCode, 200, 'an admin token registers any machine');
  t.equal(json(byAdmin).owner, 'cloud-vm', 'and is recorded as the owner');
});

t.test('ids, fields and types are validated strictly', async (t) => {
  const h = await registryHarness(t);
  const bad: [string, unknown][] = [
    ['an id of __proto__', machineBody('mbp', { id: '__proto__' })],
    ['an id of constructor', machineBody('mbp', { id: 'constructor' })],
    ['an id of prototype', machineBody('mbp', { id: 'prototype' })],
    ['an upper-case id', machineBody('mbp', { id: 'MBP' })],
    ['a machine of constructor', machineBody('mbp', { machine: 'constructor' })],
    ['an unknown field', machineBody('mbp', { extra: 1 })],
    ['a kind outside machine|instance', machineBody('mbp', { kind: 'vm' })],
    ['a ttl as a string', machineBody('mbp', { ttlMs: '90000' })],
    ['a ttl below a second', machineBody('mbp', { ttlMs: 999 })],
    ['an attrs key of constructor', machineBody('mbp', { attrs: { constructor: 1 } })],
    ['an attrs key starting with an underscore', machineBody('mbp', { attrs: { _x: 1 } })],
    ['a nested attrs object', machineBody('mbp', { attrs: { deep: { a: 1 } } })],
  ];
  for (const [name, body] of bad) {
    const r = await h.req('POST', '/v1/resources/register', { body });
    t.equal(r.statusCode, 400, `${name} is 400`);
    t.equal(json(r).error, 'HQ_ERR_BAD_REQUEST', `${name} has the bad-request code`);
  }
  const proto = await h.req('POST', '/v1/resources/register', { body: '{"id":"mbp","__proto__":{"x":1}}' });
  t.equal(proto.statusCode, 400, 'a __proto__ key in the body is 400');
  const path = await h.req('POST', '/v1/resources/constructor/heartbeat', { body: {} });
  t.equal(path.statusCode, 400, 'constructor as a path id is 400');
  const q = await h.req('GET', '/v1/resources?kind=vm', { token: null });
  t.equal(q.statusCode, 400, 'an unknown kind filter is 400');
  const q2 = await h.req('GET', '/v1/resources?colour=red', { token: null });
  t.equal(q2.statusCode, 400, 'an unknown query parameter is 400');
});

t.test(
  'registry expiry: a heartbeat renews, an expired record is 404 and gone from the list and the metrics',
  async (t) => {
    const h = await registryHarness(t);
    await h.req('POST', '/v1/resources/register', { body: machineBody('mbp', { ttlMs: 60_000 }) });
    await h.req('POST', '/v1/resources/register', {
      body: machineBody('node-b', { ttlMs: 600_000, attrs: { loadAvg: [2.5, 1, 1] } }),
      token: h.tokens.nodeb,
    });
    h.clock.advance(50);
    const hb = await h.req('POST', '/v1/resources/mbp/heartbeat', {
      body: { attrs: { loadAvg: [1.25, 1, 1], cpuCount: 4 } },
    });
    t.equal(hb.statusCode, 200, 'a heartbeat inside the TTL is 200');
    t.equal(json(hb).expiresAt, h.nowMs() + 60_000, 'it extends the record by its TTL from now');
    t.match(
      await h.metrics.metrics(),
      /hq_fleet_member_load1\{host="mbp"\} 1\.25/,
      'the load gauge shows the heartbeat attrs',
    );
    const stranger = await h.req('POST', '/v1/resources/mbp/heartbeat', { body: {}, token: h.tokens.nodeb });
    t.equal(stranger.statusCode, 403, "another machine's token may not renew it");
    h.clock.advance(61);
    const late = await h.req('POST', '/v1/resources/mbp/heartbeat', { body: {} });
    t.equal(late.statusCode, 404, 'a heartbeat after expiry is 404');
    const list = await h.req('GET', '/v1/resources?kind=machine', { token: null });
    t.same(
      json(list).resources.map((x: { id: string }) => x.id),
      ['node-b'],
      'the expired machine is not listed',
    );
    const text = await h.metrics.metrics();
    t.notMatch(text, /host="mbp"/, 'the expired machine is gone from the metrics');
    t.match(text, /hq_fleet_member_up\{host="node-b"\} 1/, 'the live machine is up');
    const again = await h.req('POST', '/v1/resources/register', { body: machineBody('mbp') });
    t.equal(again.statusCode, 200, 're-registering after expiry is 200');
    const filtered = await h.req('GET', '/v1/resources?machine=node-b', { token: null });
    t.same(
      json(filtered).resources.map((x: { id: string }) => x.id),
      ['node-b'],
      'the machine filter works',
    );
  },
);

t.test('delete: only by its machine, then 404', async (t) => {
  const h = await registryHarness(t);
  await h.req('POST', '/v1/resources/register', { body: machineBody('mbp', { id: 'mbp-web-1', kind: 'instance' }) });
  const stranger = await h.req('DELETE', '/v1/resources/mbp-web-1', { token: h.tokens.nodeb });
  t.equal(stranger.statusCode, 403, "another machine's token may not delete it");
  const own = await h.req('DELETE', '/v1/resources/mbp-web-1');
  t.equal(own.statusCode, 200, 'its machine deletes it');
  const twice = await h.req('DELETE', '/v1/resources/mbp-web-1');
  t.equal(twice.statusCode, 404, 'deleting again is 404');
  const taken = await h.req('POST', '/v1/resources/register', {
    body: machineBody('node-b', { id: 'shared' }),
    token: h.tokens.nodeb,
  });
  t.equal(taken.statusCode, 200, 'node-b registers "shared"');
  const clash = await h.req('POST', '/v1/resources/register', { body: machineBody('mbp', { id: 'shared' }) });
  t.equal(clash.statusCode, 409, "a live id of another machine can't be taken over");
});

t.test('port leases: lowest free port, heartbeat, release, reuse', async (t) => {
  const h = await registryHarness(t);
  const body = { machine: 'mbp', purpose: 'web', ttlMs: 60_000 };
  const a = await h.req('POST', '/v1/leases/port', { body });
  t.equal(a.statusCode, 200, 'a lease is granted');
  t.match(
    json(a),
    { port: 31450, expiresAt: h.nowMs() + 60_000, ttlMs: 60_000 },
    'the lowest test port, expiring after the TTL',
  );
  t.match(json(a).leaseId, /^[0-9a-f]{32}$/, 'with a 128-bit hex lease id');
  const b = await h.req('POST', '/v1/leases/port', { body });
  t.equal(json(b).port, 31451, 'the next lease gets the next port');
  const idA = json(a).leaseId as string;
  h.clock.advance(10);
  const hb = await h.req('POST', '/v1/leases/port/31450/heartbeat', { headers: { 'x-port-lease-id': idA } });
  t.equal(hb.statusCode, 200, 'the owner renews with its id');
  t.equal(json(hb).expiresAt, h.nowMs() + 60_000, 'the renewal extends from now');
  const wrongId = await h.req('POST', '/v1/leases/port/31450/heartbeat', {
    headers: { 'x-port-lease-id': json(b).leaseId },
  });
  t.equal(wrongId.statusCode, 409, 'another lease id is 409');
  const stranger = await h.req('POST', '/v1/leases/port/31450/heartbeat', {
    headers: { 'x-port-lease-id': idA },
    token: h.tokens.nodeb,
  });
  t.equal(stranger.statusCode, 403, 'another machine is 403');
  const unknown = await h.req('POST', '/v1/leases/port/31460/heartbeat', { headers: { 'x-port-lease-id': idA } });
  t.equal(unknown.statusCode, 404, 'an unleased port is 404');
  const outside = await h.req('POST', '/v1/leases/port/8470/heartbeat', { headers: { 'x-port-lease-id': idA } });
  t.equal(outside.statusCode, 404, 'a port outside the test band is 404');
  const noHeader = await h.req('POST', '/v1/leases/port/31450/heartbeat');
  t.equal(noHeader.statusCode, 400, 'a missing x-port-lease-id is 400');
  const badHeader = await h.req('POST', '/v1/leases/port/31450/heartbeat', { headers: { 'x-port-lease-id': 'nope' } });
  t.equal(badHeader.statusCode, 400, 'a malformed x-port-lease-id is 400');
  const list = await h.req('GET', '/v1/leases/port', { token: null });
  t.same(
    json(list).leases.map((l: { port: number }) => l.port),
    [31450, 31451],
    'both live leases are listed',
  );
  t.notMatch(list.body, new RegExp(idA), 'the list never shows lease ids');
  const rel = await h.req('DELETE', '/v1/leases/port/31450', { headers: { 'x-port-lease-id': idA } });
  t.equal(rel.statusCode, 200, 'the owner releases with its id');
  const relAgain = await h.req('DELETE', '/v1/leases/port/31450', { headers: { 'x-port-lease-id': idA } });
  t.equal(relAgain.statusCode, 404, 'a released lease is 404');
  const c = await h.req('POST', '/v1/leases/port', { body });
  t.equal(json(c).port, 31450, 'a released port is leased again, lowest first');
  h.clock.advance(61);
  const late = await h.req('POST', '/v1/leases/port/31451/heartbeat', {
    headers: { 'x-port-lease-id': json(b).leaseId },
  });
  t.equal(late.statusCode, 404, 'an expired lease is 404 on renewal');
  const d = await h.req('POST', '/v1/leases/port', { body: { ...body, excluded: [31450] } });
  t.equal(json(d).port, 31451, 'an expired lease is reused, and an excluded port is skipped');
});

t.test('port leases: refusals, clamp and a full band', async (t) => {
  const h = await registryHarness(t, {
    bands: { reserved: [31451], test: { from: 31450, to: 31452 }, offline: { from: 31500, to: 31509 } },
  });
  const body = { machine: 'mbp', purpose: 'web', ttlMs: 60_000 };
  const other = await h.req('POST', '/v1/leases/port', { body: { ...body, machine: 'node-b' } });
  t.equal(other.statusCode, 403, 'a member may not lease for another machine');
  const typed = await h.req('POST', '/v1/leases/port', { body: { ...body, ttlMs: '60000' } });
  t.equal(typed.statusCode, 400, 'a string TTL is 400 (no coercion)');
  const purpose = await h.req('POST', '/v1/leases/port', { body: { ...body, purpose: '__proto__' } });
  t.equal(purpose.statusCode, 400, 'a purpose of __proto__ is 400');
  const long = await h.req('POST', '/v1/leases/port', {
    body: { ...body, ttlMs: 7 * 24 * 3600 * 1000, excluded: [31500, 31420] },
  });
  t.equal(json(long).ttlMs, 24 * 3600 * 1000, 'a week-long TTL is clamped to 24 h');
  t.equal(json(long).port, 31450, 'the first port is granted (excluded ports outside the band change nothing)');
  const share = await h.req('POST', '/v1/leases/port', { body });
  t.equal(share.statusCode, 503, 'a second port for mbp is beyond its share of a two-port band');
  t.same(
    json(share),
    {
      error: 'HQ_ERR_BAND_FULL',
      message: 'mbp already holds 1 port of the test band 31450–31452, its share (half the band); release one first',
    },
    'and the answer says so',
  );
  const second = await h.req('POST', '/v1/leases/port', {
    body: { ...body, machine: 'node-b' },
    token: h.tokens.admin,
  });
  t.equal(json(second).port, 31452, 'another machine gets a port; the reserved 31451 is skipped');
  const full = await h.req('POST', '/v1/leases/port', { body: { ...body, machine: 'seed' }, token: h.tokens.admin });
  t.equal(full.statusCode, 503, 'a full band is 503');
  t.same(
    json(full),
    { error: 'HQ_ERR_BAND_FULL', message: 'every port of the test band 31450–31452 is leased' },
    'with a clear message',
  );
  const byAdmin = await h.req('DELETE', '/v1/leases/port/31452', {
    headers: { 'x-port-lease-id': json(second).leaseId },
    token: h.tokens.admin,
  });
  t.equal(byAdmin.statusCode, 200, 'an admin may release any lease with its id');
  t.match(await h.metrics.metrics(), /hq_port_leases 1/, 'the lease gauge counts live leases');
});
