/**
 * The protocol version at the arbiter (docs/PROTOCOL.md "Versions"): every answer carries the
 * version it was spoken to; a version it does not serve is one 400 naming both versions and what
 * to upgrade, on every route (a later one too: the hook is in front of all of them) and on the
 * lease read's fast path; a protocol 1 heartbeat may not carry the protocol 2 field; each host's
 * version shows on /v1/status, the page and hq_host_version.
 */
import t from 'tap';
import pino from 'pino';
import { request } from 'undici';
import { buildApp } from '../../apps/arbiter/src/server/app.js';
import { VERSION } from '../../packages/runtime/src/version.js';
import { EventWaiters } from '../../apps/arbiter/src/routes/events-stream.js';
import { harness } from './helper.js';

t.test('answers carry the version they were spoken to', async (t) => {
  const h = await harness(t);
  const none = await h.get('/v1/health');
  t.equal(none.statusCode, 200, 'a request without the header (hq 0.1.x, curl) is served');
  t.equal(none.headers['hq-protocol'], '1', 'and answered as protocol 1');
  const two = await h.app.inject({ method: 'GET', url: '/v1/health', headers: { 'hq-protocol': '2' } });
  t.equal(two.headers['hq-protocol'], '2', 'protocol 2 is answered as 2');
  const missing = await h.app.inject({ method: 'GET', url: '/v1/nothing', headers: { 'hq-protocol': '1' } });
  t.equal(missing.statusCode, 404, 'a 404');
  t.equal(missing.headers['hq-protocol'], '1', 'carries it too');
});

const refused: ReadonlyArray<readonly [string, string | string[], RegExp]> = [
  [
    'a newer version',
    '3',
    /the request speaks hq protocol 3, newer than hq-arbiter on cloud-vm speaks hq protocol 1 to 2: upgrade hq-arbiter on cloud-vm/,
  ],
  [
    'an older version',
    '0',
    /the request speaks hq protocol 0, older than hq-arbiter on cloud-vm speaks hq protocol 1 to 2: upgrade the sender's hq/,
  ],
  ['a word', 'two', /hq-protocol: "two" is not a protocol version/],
  ['two headers', ['1', '2'], /hq-protocol: "1, 2" is not a protocol version/],
];
for (const [name, header, message] of refused) {
  t.test(`${name} is refused with one 400 on every route`, async (t) => {
    const h = await harness(t);
    for (const [method, url, body] of [
      ['GET', '/v1/health', undefined],
      ['GET', '/v1/lease', undefined],
      ['POST', '/v1/heartbeat', { host: 'mbp' }],
      ['POST', '/v1/lease/acquire', { host: 'mbp' }],
      ['GET', '/v1/no-such-route', undefined],
    ] as const) {
      const r = await h.app.inject({
        method,
        url,
        headers: {
          'hq-protocol': header,
          authorization: `Bearer ${h.tokens.mbp}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      t.equal(r.statusCode, 400, `${method} ${url}: 400`);
      t.equal(r.json().error, 'HQ_ERR_PROTOCOL_VERSION', `${method} ${url}: the code says why`);
      t.match(r.json().message, message, `${method} ${url}: one line naming both versions and what to upgrade`);
      t.equal(r.headers['hq-protocol'], '2', `${method} ${url}: the refusal says the version this arbiter speaks`);
    }
  });
}

t.test('strict within a version: a protocol 1 heartbeat may not carry the release field of protocol 2', async (t) => {
  const h = await harness(t);
  await h.settle();
  const v1 = await h.post('/v1/heartbeat', { host: 'mbp', version: '0.2.0' }, h.tokens.mbp, { 'hq-protocol': '1' });
  t.equal(v1.statusCode, 400, 'refused');
  t.match(
    v1.json(),
    {
      error: 'HQ_ERR_BAD_REQUEST',
      message: /body\/version is a field of hq protocol 2; a protocol 1 request may not carry it/,
    },
    'naming the field and both versions',
  );
  const unstated = await h.post('/v1/heartbeat', { host: 'mbp', version: '0.2.0' }, h.tokens.mbp);
  t.equal(unstated.statusCode, 400, 'no header is protocol 1: refused too');
  const v2 = await h.post('/v1/heartbeat', { host: 'mbp', version: '0.2.0' }, h.tokens.mbp, { 'hq-protocol': '2' });
  t.equal(v2.statusCode, 200, 'protocol 2 carries it');
  const unknown = await h.post('/v1/heartbeat', { host: 'mbp', cadence: 1 }, h.tokens.mbp, { 'hq-protocol': '2' });
  t.equal(unknown.statusCode, 400, 'a field of no version is still refused in protocol 2');
  const old = await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(old.statusCode, 200, "a protocol 1 heartbeat without it is served (hq 0.1.x's own)");
});

/** The arbiter app with the operator pages (the daemon serves them; the harness app does not). */
async function operatorApp(t: Parameters<Parameters<typeof t.test>[1]>[0], h: Awaited<ReturnType<typeof harness>>) {
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: VERSION,
  };
  const app = await buildApp({ hq, log: pino({ level: 'silent' }), operator: { waiters: new EventWaiters() } });
  t.teardown(() => app.close());
  return app;
}

t.test("each host's version: /v1/status, the page, hq_host_version", async (t) => {
  const h = await harness(t);
  const app = await operatorApp(t, h);
  await h.settle();
  await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0, version: '0.2.0' }, h.tokens.nodeb, {
    'hq-protocol': '2',
  });
  const st = (await app.inject({ method: 'GET', url: '/v1/status' })).json() as {
    hosts: Array<{
      host: string;
      protocol: number | null;
      release: string | null;
      versionText: string;
      upgrade: string | null;
    }>;
  };
  const row = (host: string) => st.hosts.find((x) => x.host === host);
  t.match(
    row('mbp'),
    {
      protocol: 1,
      release: null,
      versionText: 'hq 0.1 (protocol 1)',
      upgrade: 'mbp runs hq 0.1 (protocol 1); upgrade it',
    },
    'mbp (no header) runs 0.1: upgrade it',
  );
  t.match(
    row('node-b'),
    { protocol: 2, release: '0.2.0', versionText: 'hq 0.2.0 (protocol 2)', upgrade: null },
    'node-b runs protocol 2',
  );
  t.match(row('cloud-vm'), { protocol: 2, release: VERSION, upgrade: null }, 'the arbiter row is this arbiter');
  const metrics = (await h.get('/metrics')).body;
  t.match(metrics, /hq_host_version\{host="mbp",version="0\.1"\} 1/, 'the metric names mbp at 0.1');
  t.match(metrics, /hq_host_version\{host="node-b",version="0\.2\.0"\} 1/, 'and node-b at its release');
  t.match(
    metrics,
    new RegExp(`hq_host_version\\{host="cloud-vm",version="${VERSION.replaceAll('.', '\\.')}"\\} 1`),
    'and the arbiter itself',
  );
  await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0, version: '0.2.0' }, h.tokens.mbp, {
    'hq-protocol': '2',
  });
  const after = (await app.inject({ method: 'GET', url: '/v1/status' })).json() as typeof st;
  t.equal(after.hosts.find((x) => x.host === 'mbp')?.upgrade, null, 'once mbp speaks protocol 2 the note is gone');
  t.notMatch(
    (await h.get('/metrics')).body,
    /hq_host_version\{host="mbp",version="0\.1"\}/,
    'and so is its old series',
  );
});

t.test('the status page shows the note in the version column', async (t) => {
  const h = await harness(t);
  const app = await operatorApp(t, h);
  await h.settle();
  await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  const html = (await app.inject({ method: 'GET', url: '/' })).body;
  t.match(
    html,
    /<td data-label="version" class="c-version warn" title="mbp runs hq 0\.1 \(protocol 1\); upgrade it">hq 0\.1 \(protocol 1\); upgrade it<\/td>/,
    "mbp's row says to upgrade it",
  );
  t.match(html, /<th>version<\/th>/, 'under a version heading');
});

t.test('the lease read fast path carries the version and leaves a refusal to Fastify', async (t) => {
  const h = await harness(t, { auth: { openReads: true } });
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: 'test',
  };
  const app = await buildApp({ hq, log: pino({ level: 'silent' }) });
  t.teardown(() => app.close());
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const one = await request(`${base}/v1/lease`);
  await one.body.text();
  t.equal(one.statusCode, 200, 'served without the header');
  t.equal(one.headers['hq-protocol'], '1', 'as protocol 1');
  const two = await request(`${base}/v1/lease`, { headers: { 'hq-protocol': '2' } });
  await two.body.text();
  t.equal(two.headers['hq-protocol'], '2', 'protocol 2 as 2');
  const three = await request(`${base}/v1/lease`, { headers: { 'hq-protocol': '3' } });
  t.equal(three.statusCode, 400, 'protocol 3: 400');
  t.equal(((await three.body.json()) as { error: string }).error, 'HQ_ERR_PROTOCOL_VERSION', 'from the hook');
});
