import t from 'tap';
import { CasError } from '../../apps/arbiter/src/store/store.js';
import { harness, type Harness } from './helper.js';

function isError(
  t: Tap.Test,
  res: { statusCode: number; json(): any; body: string },
  status: number,
  code: string,
  what: string,
) {
  t.equal(res.statusCode, status, `${what}: status ${status}`);
  const body = res.json();
  t.equal(body.error, code, `${what}: error code ${code}`);
  t.type(body.message, 'string', `${what}: a message`);
  t.notOk(/\n\s+at /.test(res.body), `${what}: no stack trace`);
}
declare namespace Tap {
  type Test = Parameters<Parameters<typeof t.test>[1]>[0];
}

t.test('400: schema violations, coercion, reserved names, unknown fields and bad JSON', async (t) => {
  const h: Harness = await harness(t);
  const cases: Array<[string, unknown]> = [
    ['a string where a number is expected', { host: 'mbp', generation: '1' }],
    ['an array where a host is expected', { host: ['mbp'], generation: 1 }],
    ['the reserved name constructor', { host: 'constructor', generation: 1 }],
    ['the reserved name prototype', { host: 'prototype', generation: 1 }],
    ['an upper-case host', { host: 'MBP', generation: 1 }],
    ['a host with a trailing space', { host: 'mbp ', generation: 1 }],
    ['an unknown field', { host: 'mbp', generation: 1, extra: true }],
    ['a missing field', { host: 'mbp' }],
    ['an unsafe integer', { host: 'mbp', generation: Number.MAX_SAFE_INTEGER + 1 }],
    ['a negative generation', { host: 'mbp', generation: -1 }],
    ['a fractional generation', { host: 'mbp', generation: 1.5 }],
    ['null', null],
    ['an array body', [1]],
  ];
  for (const [what, body] of cases) isError(t, await h.post('/v1/lease/renew', body), 400, 'HQ_ERR_BAD_REQUEST', what);
  isError(t, await h.post('/v1/lease/renew', '{"host":'), 400, 'HQ_ERR_BAD_REQUEST', 'truncated JSON');
  isError(
    t,
    await h.post('/v1/lease/renew', '{"host":"mbp","generation":1,"__proto__":{"x":1}}'),
    400,
    'HQ_ERR_BAD_REQUEST',
    'proto poisoning',
  );
  isError(
    t,
    await h.post('/v1/lease/renew', '{"host":"mbp","constructor":{"prototype":{"x":1}}}'),
    400,
    'HQ_ERR_BAD_REQUEST',
    'constructor poisoning',
  );
  isError(t, await h.post('/v1/lease/acquire', undefined), 400, 'HQ_ERR_BAD_REQUEST', 'a missing body');
  isError(
    t,
    await h.post(
      '/v1/heartbeat',
      { host: 'mbp', view: { target: 'node-b', reachable: 'yes', ping: true, health: true } },
      h.tokens.mbp,
    ),
    400,
    'HQ_ERR_BAD_REQUEST',
    'a view with a string boolean',
  );
  isError(
    t,
    await h.post('/v1/lease/transfer', { to: 'constructor' }),
    400,
    'HQ_ERR_BAD_REQUEST',
    'transfer to a reserved name',
  );
});

t.test('401: no token, unknown, malformed and revoked tokens', async (t) => {
  const h = await harness(t);
  isError(t, await h.post('/v1/lease/acquire', { host: 'mbp' }, null), 401, 'HQ_ERR_UNAUTHORIZED', 'no token');
  isError(
    t,
    await h.post('/v1/lease/acquire', { host: 'mbp' }, 'f'.repeat(64)),
    401,
    'HQ_ERR_UNAUTHORIZED',
    'an unknown token',
  );
  isError(
    t,
    await h.post('/v1/lease/acquire', { host: 'mbp' }, 'short'),
    401,
    'HQ_ERR_UNAUTHORIZED',
    'a malformed token',
  );
  const basic = await h.post('/v1/lease/acquire', { host: 'mbp' }, null, { authorization: `Basic ${h.tokens.mbp}` });
  isError(t, basic, 401, 'HQ_ERR_UNAUTHORIZED', 'another scheme');
  const lower = await h.post('/v1/lease/acquire', { host: 'mbp' }, null, { authorization: `bearer ${h.tokens.mbp}` });
  t.equal(lower.statusCode, 200, 'the scheme is case-insensitive');
  isError(t, await h.get('/v1/lease', 'a'.repeat(64)), 401, 'HQ_ERR_UNAUTHORIZED', 'an invalid token on an open read');
  t.equal((await h.get('/v1/health', 'a'.repeat(64))).statusCode, 200, 'health ignores tokens');
  t.equal(await h.rt.store.revokeTokens('mbp', h.clock.now()), 1, 'one token revoked');
  isError(
    t,
    await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp),
    401,
    'HQ_ERR_UNAUTHORIZED',
    'a revoked token from the next request on',
  );
});

t.test('401 on reads when openReads is false, and a query token reads', async (t) => {
  const h = await harness(t, { auth: { openReads: false } });
  isError(t, await h.get('/v1/lease'), 401, 'HQ_ERR_UNAUTHORIZED', 'a read without a token');
  isError(t, await h.get('/metrics'), 401, 'HQ_ERR_UNAUTHORIZED', 'metrics without a token');
  t.equal((await h.get('/v1/lease', h.tokens.query)).statusCode, 200, 'a query token reads the lease');
  t.equal((await h.get('/v1/events', h.tokens.mbp)).statusCode, 200, 'a member token reads events');
  t.equal((await h.get('/v1/health')).statusCode, 200, 'health stays open');
});

t.test('403: scopes and a member token acting for another host', async (t) => {
  const h = await harness(t);
  isError(
    t,
    await h.post('/v1/lease/acquire', { host: 'node-b' }, h.tokens.mbp),
    403,
    'HQ_ERR_WRONG_HOST',
    'mbp acquiring for node-b',
  );
  isError(
    t,
    await h.post('/v1/heartbeat', { host: 'mbp' }, h.tokens.nodeb),
    403,
    'HQ_ERR_WRONG_HOST',
    'node-b heartbeating as mbp',
  );
  isError(
    t,
    await h.post('/v1/lease/release', { host: 'node-b' }, h.tokens.mbp),
    403,
    'HQ_ERR_WRONG_HOST',
    'mbp releasing for node-b',
  );
  isError(
    t,
    await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.query),
    403,
    'HQ_ERR_FORBIDDEN',
    'a query token acquiring',
  );
  isError(t, await h.post('/v1/check', undefined, h.tokens.mbp), 403, 'HQ_ERR_FORBIDDEN', 'a member token checking');
  isError(
    t,
    await h.post('/v1/lease/transfer', { to: 'mbp' }, h.tokens.mbp),
    403,
    'HQ_ERR_FORBIDDEN',
    'a member token transferring',
  );
  const m = await h.app.inject({
    method: 'PUT',
    url: '/v1/maintenance',
    headers: { authorization: `Bearer ${h.tokens.nodeb}`, 'content-type': 'application/json' },
    payload: { enabled: true },
  });
  isError(t, m, 403, 'HQ_ERR_FORBIDDEN', 'a member token setting maintenance');
  isError(
    t,
    await h.post('/v1/heartbeat', { host: 'mbp' }, h.tokens.admin),
    403,
    'HQ_ERR_FORBIDDEN',
    'heartbeats take a member token',
  );
  t.equal(
    (await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.admin)).statusCode,
    200,
    'an admin token acts for any host',
  );
});

t.test('404 for unknown routes, 405 for a known route asked with another method', async (t) => {
  const h = await harness(t, {}, { registry: true });
  isError(t, await h.get('/v1/nothing'), 404, 'HQ_ERR_NOT_FOUND', 'an unknown path');
  isError(t, await h.get('/v1/lease/'), 404, 'HQ_ERR_NOT_FOUND', 'a trailing slash');
  const wrong = await h.app.inject({ method: 'DELETE', url: '/v1/lease' });
  isError(t, wrong, 405, 'HQ_ERR_METHOD_NOT_ALLOWED', 'a known path asked with a method it does not answer');
  t.equal(wrong.headers['allow'], 'GET, HEAD', 'the Allow header lists the methods it answers');
  const param = await h.app.inject({ method: 'GET', url: '/v1/leases/port/31450/heartbeat' });
  isError(t, param, 405, 'HQ_ERR_METHOD_NOT_ALLOWED', 'a path with a parameter asked with another method');
  t.equal(param.headers['allow'], 'POST', 'the Allow header of a parameterized path');
  isError(
    t,
    await h.app.inject({ method: 'DELETE', url: '/v1/lease/x' }),
    404,
    'HQ_ERR_NOT_FOUND',
    'an unknown path under a known one',
  );
});

t.test("the router's own refusals answer in hq's shape", async (t) => {
  const h = await harness(t, {}, { registry: true });
  const long = await h.app.inject({
    method: 'DELETE',
    url: `/v1/resources/${'a'.repeat(120)}`,
    headers: { authorization: `Bearer ${h.tokens.admin}` },
  });
  isError(t, long, 400, 'HQ_ERR_BAD_REQUEST', 'a path parameter over 100 characters');
  t.same(
    Object.keys(long.json() as object).sort(),
    ['error', 'message'],
    'only error and message (no Fastify code or statusCode)',
  );
  t.match(long.json().message, /longer than 100 characters/, 'the message says what to fix');
  const badEscape = await h.app.inject({
    method: 'DELETE',
    url: '/v1/resources/%zz',
    headers: { authorization: `Bearer ${h.tokens.admin}` },
  });
  isError(t, badEscape, 400, 'HQ_ERR_BAD_REQUEST', 'a malformed percent escape');
  t.same(Object.keys(badEscape.json() as object).sort(), ['error', 'message'], 'only error and message');
});

t.test('409 carries the record and the catalog code', async (t) => {
  const h = await harness(t);
  const res = await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp);
  isError(t, res, 409, 'HQ_ERR_NOT_HOLDER', 'renew without a lease');
  t.equal(res.json().ok, false, 'ok false');
  t.equal(res.json().reason, 'not-holder', 'reason');
  t.equal(res.json().lease.name, 'hq', 'the record');
});

t.test('412 when If-Match is stale, and the write happens when it matches', async (t) => {
  const h = await harness(t);
  const rev = (await h.get('/v1/lease')).json().revision;
  const stale = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp, { 'if-match': `"${rev + 5}"` });
  isError(t, stale, 412, 'HQ_ERR_PRECONDITION', 'a stale If-Match');
  t.equal((await h.get('/v1/lease')).json().holder, null, 'nothing was written');
  const ok = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp, { 'if-match': `"${rev}"` });
  t.equal(ok.statusCode, 200, 'a matching If-Match writes');
  const after = await h.get('/v1/lease');
  t.equal(after.headers.etag, `"${ok.json().lease.revision}"`, 'the ETag follows the revision');
  isError(
    t,
    await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp, { 'if-match': 'garbage' }),
    412,
    'HQ_ERR_PRECONDITION',
    'a malformed If-Match',
  );
});

t.test('413 for a body over 64 KiB', async (t) => {
  const h = await harness(t);
  const big = JSON.stringify({ host: 'mbp', pad: 'x'.repeat(70 * 1024) });
  isError(t, await h.post('/v1/lease/acquire', big, h.tokens.mbp), 413, 'HQ_ERR_TOO_LARGE', 'a 70 KiB body');
});

t.test('415 for anything but JSON', async (t) => {
  const h = await harness(t);
  const text = await h.app.inject({
    method: 'POST',
    url: '/v1/lease/acquire',
    headers: { authorization: `Bearer ${h.tokens.mbp}`, 'content-type': 'text/plain' },
    payload: '{"host":"mbp"}',
  });
  isError(t, text, 415, 'HQ_ERR_UNSUPPORTED_MEDIA', 'text/plain');
  const form = await h.app.inject({
    method: 'POST',
    url: '/v1/lease/acquire',
    headers: { authorization: `Bearer ${h.tokens.mbp}`, 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'host=mbp',
  });
  isError(t, form, 415, 'HQ_ERR_UNSUPPORTED_MEDIA', 'a form');
  const none = await h.app.inject({
    method: 'POST',
    url: '/v1/lease/acquire',
    headers: { authorization: `Bearer ${h.tokens.mbp}` },
    payload: '{"host":"mbp"}',
  });
  t.ok([400, 415].includes(none.statusCode), 'a body without a content type is refused as a 4xx');
  t.type(none.json().error, 'string', 'with an error code');
});

t.test(
  '503, not 500: a record that keeps changing under every retry of a decision (etcd: other writers)',
  async (t) => {
    const h: Harness = await harness(t);
    await h.settle();
    const store = h.rt.arbiter.deps.store;
    const transactAll = store.transactAll.bind(store);
    let tries = 0;
    store.transactAll = () => {
      tries++;
      throw new CasError();
    };
    t.teardown(() => (store.transactAll = transactAll));
    const res = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
    isError(t, res, 503, 'HQ_ERR_STORE_UNAVAILABLE', 'a decision that lost every compare-and-swap');
    t.match(res.json().message, /kept changing.*nothing was decided; send again/, 'it says nothing was decided');
    t.equal(tries, 4, 'decided once and again three times');
    store.transactAll = transactAll;
    t.equal(
      (await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp)).statusCode,
      200,
      'the next request decides',
    );
  },
);
