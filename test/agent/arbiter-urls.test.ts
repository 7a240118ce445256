/**
 * `arbiterUrls` (several arbiters, store etcd): the config key beside `arbiterUrl`, and the
 * client that tries them in order — the next on no answer or on a 503 that another arbiter may
 * not give — within one deadline, starting next time with the one that answered.
 */
import t from 'tap';
import { createServer, type Server } from 'node:http';
import { resolveConfig, validateConfigFile } from '../../apps/agent/src/config.js';
import '../../apps/agent/src/config-checker.js';
import { ArbiterEndpoints } from '../../packages/runtime/src/http.js';
import { freePort } from '../system/harness.js';

const base = { hostName: 'mbp', tailscaleBin: '' };

t.test(
  'arbiterUrls: the first is arbiterUrl; arbiterUrl alone still works; both, duplicates or a path are refused',
  async (t) => {
    const many = resolveConfig(
      validateConfigFile({ ...base, arbiterUrls: ['http://a1:8470', 'http://a2:8470'] }),
      null,
    );
    t.equal(many.arbiterUrl, 'http://a1:8470', 'arbiterUrl is the first of arbiterUrls');
    t.same(many.arbiterUrls, ['http://a1:8470', 'http://a2:8470'], 'both, in order');
    const one = resolveConfig(validateConfigFile({ ...base, arbiterUrl: 'http://a1:8470' }), null);
    t.same([one.arbiterUrl, one.arbiterUrls], ['http://a1:8470', null], 'arbiterUrl alone: one arbiter');
    t.throws(
      () =>
        resolveConfig(
          validateConfigFile({ ...base, arbiterUrl: 'http://a1:8470', arbiterUrls: ['http://a2:8470'] }),
          null,
        ),
      /give either arbiterUrl .* or arbiterUrls/,
      'not both',
    );
    t.throws(
      () => resolveConfig(validateConfigFile({ ...base, arbiterUrls: ['http://a1:8470', 'http://a1:8470'] }), null),
      /arbiterUrls\[1\].*named twice/,
      'no URL twice',
    );
    t.throws(
      () => resolveConfig(validateConfigFile({ ...base, arbiterUrls: ['http://a1:8470/x'] }), null),
      /arbiterUrls\[0\]/,
      'a bare origin each',
    );
    t.throws(() => validateConfigFile({ ...base, arbiterUrls: [] }), /arbiterUrls/, 'at least one');
  },
);

function serve(
  t: { teardown(fn: () => void): void },
  answer: (hits: number) => { status: number; body: unknown } | 'hang' | 'reset',
): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const srv: Server = createServer((req, res) => {
    hits++;
    const a = answer(hits);
    if (a === 'hang') return;
    if (a === 'reset') return void req.socket.destroy(); // read, maybe decided, and the connection lost
    res.writeHead(a.status, { 'content-type': 'application/json' }).end(JSON.stringify(a.body));
  });
  t.teardown(() => {
    srv.closeAllConnections();
    srv.close();
  });
  return new Promise((resolve) =>
    srv.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, hits: () => hits }),
    ),
  );
}

t.test(
  'the next arbiter on no answer or a not-elected 503, sticky on the one that answered, within one deadline',
  async (t) => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const notElected = await serve(t, () => ({ status: 503, body: { error: 'HQ_ERR_NOT_ELECTED', message: 'no' } }));
    const good = await serve(t, () => ({ status: 200, body: { ok: true } }));
    const e = new ArbiterEndpoints([dead, notElected.url, good.url]);
    const r = await e.request({ method: 'GET', path: '/v1/lease', timeoutSeconds: 2 });
    t.match(
      r,
      { kind: 'answer', status: 200, body: { ok: true } },
      'a refused connection and a not-elected 503 move on to the third',
    );
    t.equal(e.url, good.url, 'the one that answered is tried first next time');
    await e.request({ method: 'GET', path: '/v1/lease', timeoutSeconds: 2 });
    t.equal(notElected.hits(), 1, 'so the not-elected one is not asked again');

    const full = await serve(t, () => ({ status: 503, body: { error: 'HQ_ERR_BAND_FULL', message: 'full' } }));
    const f = new ArbiterEndpoints([full.url, good.url]);
    t.match(
      await f.request({ method: 'POST', path: '/v1/leases/port', body: {}, timeoutSeconds: 2 }),
      { status: 503, body: { error: 'HQ_ERR_BAND_FULL' } },
      'any other answer is the answer (a full band is full on every arbiter)',
    );

    const hang = await serve(t, () => 'hang');
    const h = new ArbiterEndpoints([hang.url, good.url]);
    const t0 = performance.now();
    const slow = await h.request({ method: 'GET', path: '/v1/lease', timeoutSeconds: 0.4 });
    const ms = performance.now() - t0;
    t.equal(
      slow.kind,
      'unreachable',
      'a hung arbiter uses the whole deadline: no answer later than requestTimeoutSeconds (S2.3)',
    );
    t.ok(ms < 1000, `the call ended with its deadline (${ms.toFixed(0)} ms)`);
    t.equal(h.url, good.url, 'the next request starts with the next arbiter');
    t.match(
      await h.request({ method: 'GET', path: '/v1/lease', timeoutSeconds: 0.4 }),
      { status: 200 },
      'which answers',
    );
  },
);

t.test('code written against one arbiter URL (the registry member, port leases) moves on too', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const good = await serve(t, () => ({ status: 200, body: { ok: true } }));
  const other = await serve(t, () => ({ status: 200, body: { other: true } }));
  const request = new ArbiterEndpoints([dead, good.url]).asRequester();
  t.match(
    await request({ method: 'POST', url: `${dead}/v1/resources/register`, body: {}, token: 't', timeoutSeconds: 2 }),
    { kind: 'answer', status: 200, body: { ok: true } },
    "a request to the first arbiter's URL is answered by the next",
  );
  t.equal(good.hits(), 1, 'the next arbiter got it');
  t.match(
    await request({ method: 'GET', url: `${other.url}/v1/health`, timeoutSeconds: 2 }),
    { status: 200, body: { other: true } },
    'another URL is sent as it is',
  );
});

t.test('a request that may not be decided twice moves on only when nothing was decided for certain', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const reset = await serve(t, () => 'reset');
  const gateway = await serve(t, () => ({ status: 504, body: { error: 'gateway timeout' } }));
  const notElected = await serve(t, () => ({ status: 503, body: { error: 'HQ_ERR_NOT_ELECTED', message: 'no' } }));
  const good = await serve(t, () => ({ status: 200, body: { ok: true } }));
  const release = {
    method: 'POST',
    path: '/v1/lease/release',
    body: { host: 'mbp', generation: 3 },
    timeoutSeconds: 2,
  } as const;

  const afterReset = await new ArbiterEndpoints([reset.url, good.url]).request(release);
  t.equal(afterReset.kind, 'unreachable', 'a release sent and then cut off: its outcome is unknown, and so reported');
  t.equal(
    good.hits(),
    0,
    'not sent to the next arbiter (a refusal there — "not the holder" — would be taken for the outcome)',
  );
  t.match(
    await new ArbiterEndpoints([gateway.url, good.url]).request(release),
    { kind: 'answer', status: 504 },
    "a proxy's 504 for a release is its answer",
  );
  t.equal(good.hits(), 0, 'nor after a 504');

  t.match(
    await new ArbiterEndpoints([dead, notElected.url, good.url]).request(release),
    { kind: 'answer', status: 200 },
    'never connected, or a 503 that says nothing was decided: the next arbiter',
  );
  t.equal(good.hits(), 1, 'which decided it');
  t.match(
    await new ArbiterEndpoints([reset.url, good.url]).request({ ...release, path: '/v1/heartbeat', retrySafe: true }),
    { kind: 'answer', status: 200 },
    'a heartbeat (retrySafe: a renewal decided twice is a renewal) moves on after a reset',
  );
  t.match(
    await new ArbiterEndpoints([reset.url, good.url]).request({ method: 'GET', path: '/v1/lease', timeoutSeconds: 2 }),
    { kind: 'answer', status: 200 },
    'and so does a read',
  );
});
