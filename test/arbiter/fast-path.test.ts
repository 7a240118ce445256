/**
 * GET /v1/lease's fast path (server/fast-path.ts) against the Fastify route, both on real
 * listeners over one store: the same status, bytes and headers in every state, and every
 * request it does not own handed to Fastify.
 */
import t from 'tap';
import pino from 'pino';
import { request } from 'undici';
import { buildApp } from '../../apps/arbiter/src/server/app.js';
import { harness } from './helper.js';

const SAME_HEADERS = ['content-type', 'content-length', 'etag', 'hq-protocol'] as const;

t.test('the fast path answers exactly what the route answers, and leaves the rest to Fastify', async (t) => {
  const h = await harness(t, { auth: { openReads: true } });
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: 'test',
  };
  const fast = await buildApp({ hq, log: pino({ level: 'silent' }) });
  const slow = await buildApp({ hq, log: pino({ level: 'silent' }), fastPath: false });
  t.teardown(async () => {
    await fast.close();
    await slow.close();
  });
  const fastBase = await fast.listen({ host: '127.0.0.1', port: 0 });
  const slowBase = await slow.listen({ host: '127.0.0.1', port: 0 });
  const both = async (path: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') => {
    const a = await request(`${fastBase}${path}`, { method, headers });
    const b = await request(`${slowBase}${path}`, { method, headers });
    return [
      { status: a.statusCode, headers: a.headers, body: await a.body.text() },
      { status: b.statusCode, headers: b.headers, body: await b.body.text() },
    ] as const;
  };
  const observed = () => h.rt.metrics.registry.getSingleMetric('hq_http_request_duration_seconds')?.get();
  const countOf = async () => {
    const m = await observed();
    return (
      m?.values.find(
        (v) =>
          v.metricName === 'hq_http_request_duration_seconds_count' &&
          v.labels.route === '/v1/lease' &&
          String(v.labels.status) === '200',
      )?.value ?? 0
    );
  };

  const compare = async (what: string) => {
    // `now` is in the body: the clock is manual, so both answers are read at the same instant.
    const [a, b] = await both('/v1/lease');
    t.equal(a.status, 200, `${what}: 200`);
    t.equal(a.body, b.body, `${what}: the same bytes`);
    for (const k of SAME_HEADERS) t.equal(a.headers[k], b.headers[k], `${what}: the same ${k}`);
    return JSON.parse(a.body) as Record<string, unknown>;
  };

  await compare('a new database (floor pending, no holder)');
  await h.settle();
  t.equal((await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp)).statusCode, 200, 'mbp acquires');
  await h.post(
    '/v1/heartbeat',
    { host: 'node-b', seenGeneration: 1, view: { target: 'mbp', reachable: true, ping: true, health: true } },
    h.tokens.nodeb,
  );
  const held = await compare('held, with a view');
  t.equal(held.holder, 'mbp', 'the record is the held one');
  t.equal(
    (await h.post('/v1/lease/transfer', { to: 'node-b', force: true }, h.tokens.admin)).statusCode,
    200,
    'a transfer to node-b',
  );
  const moving = await compare('a transfer behind lock-delay');
  t.match(
    moving.wait,
    { kind: 'lock-delay', host: 'mbp', until: moving.notBefore },
    'the record says which wait holds node-b, in the same bytes',
  );
  await h.post('/v1/maintenance', { enabled: true, reason: 'test' }, h.tokens.admin);
  await compare('after maintenance was asked');
  h.clock.advance(30);
  const expired = await compare('expired');
  t.equal(expired.expired, true, 'and says so');

  const before = await countOf();
  await both('/v1/lease');
  t.equal(await countOf(), before + 2, 'both answers are counted in the request-duration metric');

  for (const [what, path, headers, method] of [
    ['a query string', '/v1/lease?x=1', {}, 'GET'],
    ['a trailing slash', '/v1/lease/', {}, 'GET'],
    ['HEAD', '/v1/lease', {}, 'HEAD'],
    ['a malformed Authorization', '/v1/lease', { authorization: 'Basic x' }, 'GET'],
    ['an unknown token', '/v1/lease', { authorization: `Bearer ${'0'.repeat(64)}` }, 'GET'],
    ['another route', '/v1/primary', {}, 'GET'],
  ] as const) {
    const [a, b] = await both(path, headers, method);
    t.equal(a.status, b.status, `${what}: Fastify's status (${b.status})`);
    t.equal(a.body, b.body, `${what}: Fastify's body`);
  }
  const [a] = await both('/v1/lease', { authorization: `Bearer ${h.tokens.query}` });
  t.equal(a.status, 200, 'a valid read token is answered on the fast path too');
});

t.test('with openReads off, an anonymous read goes to Fastify (401) and a token is needed', async (t) => {
  const h = await harness(t, { auth: { openReads: false } });
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: 'test',
  };
  const fast = await buildApp({ hq, log: pino({ level: 'silent' }) });
  t.teardown(() => fast.close());
  const base = await fast.listen({ host: '127.0.0.1', port: 0 });
  const anon = await request(`${base}/v1/lease`);
  t.equal(anon.statusCode, 401, 'anonymous: 401');
  t.match(await anon.body.json(), { error: 'HQ_ERR_UNAUTHORIZED' }, 'with the catalog code');
  const withToken = await request(`${base}/v1/lease`, { headers: { authorization: `Bearer ${h.tokens.query}` } });
  t.equal(withToken.statusCode, 200, 'a query token: 200');
  await withToken.body.text();
});

t.test('once the app closes, the fast path steps aside (Fastify answers 503 with connection: close)', async (t) => {
  const h = await harness(t);
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: 'test',
  };
  const fast = await buildApp({ hq, log: pino({ level: 'silent' }) });
  const base = await fast.listen({ host: '127.0.0.1', port: 0 });
  const { Agent } = await import('undici');
  const agent = new Agent({ connections: 1 });
  t.teardown(() => agent.close());
  const first = await request(`${base}/v1/lease`, { dispatcher: agent });
  t.equal(first.statusCode, 200, 'open: 200');
  await first.body.text();
  // Closing has begun (preClose ran synchronously inside close()): the next request on the
  // kept-alive connection must not be answered by the fast path.
  const closing = fast.close();
  const during = await request(`${base}/v1/lease`, { dispatcher: agent }).then(
    async (r) => ({ status: r.statusCode, connection: r.headers.connection, body: await r.body.text() }),
    (err: Error) => ({ status: 0, connection: undefined, body: err.message }),
  );
  await closing;
  t.ok(
    during.status === 503 || during.status === 0,
    `closing: refused (503) or the connection was closed (${during.status})`,
  );
  t.not(during.status, 200, 'never answered on the fast path once closing');
});
