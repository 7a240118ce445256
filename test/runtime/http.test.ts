/** The one JSON HTTP client: bodies both ways, the deadline, and tokens that stay with their origin. */
import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  KEEP_ALIVE_IDLE_SECONDS,
  describe,
  joinUrl,
  keepAliveFor,
  peerProtocol,
  requestJson,
  tokenBelongsTo,
} from '../../packages/runtime/src/http.js';

async function server(
  t: { teardown(fn: () => unknown): void },
  answer: (
    path: string,
    body: string,
    headers: IncomingHttpHeaders,
  ) => { status: number; text: string; headers?: Record<string, string> } | null,
) {
  const seen: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += String(d)));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body });
      const a = answer(req.url ?? '', body, req.headers);
      if (a === null) return; // never answers
      res.writeHead(a.status, { 'content-type': 'application/json', ...(a.headers ?? {}) });
      res.end(a.text);
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    s.closeAllConnections();
    return new Promise<void>((r) => s.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
}

t.test('a JSON body goes out and the answer comes back parsed, or null when it is not JSON', async (t) => {
  const s = await server(t, (path, body) =>
    path === '/echo' ? { status: 201, text: body } : { status: 200, text: 'not json' },
  );
  const r = await requestJson({
    method: 'POST',
    url: joinUrl(`${s.url}/`, '/echo'),
    body: { a: 1 },
    token: 'tok',
    timeoutSeconds: 5,
  });
  t.same(r, { kind: 'answer', status: 201, body: { a: 1 }, protocol: 1 }, 'the echo is parsed');
  t.match(
    s.seen[0]?.headers,
    { 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer tok' },
    'JSON both ways, the plain token sent',
  );
  t.same(
    await requestJson({ method: 'GET', url: `${s.url}/x`, timeoutSeconds: 5 }),
    { kind: 'answer', status: 200, body: null, protocol: 1 },
    'a body that is not JSON is null',
  );
  t.notOk('authorization' in (s.seen[1]?.headers ?? {}), 'no token, no Authorization header');
});

t.test('an answer later than the deadline is unreachable, never half-read', async (t) => {
  const s = await server(t, () => null);
  const r = await requestJson({ method: 'GET', url: s.url, timeoutSeconds: 0.2 });
  t.same(r, { kind: 'unreachable', problem: 'no answer within 0.2 s' }, 'the deadline is named');
  t.equal(describe(r), 'unreachable: no answer within 0.2 s', 'and described in one line');
  t.equal(
    describe({ kind: 'answer', status: 403, body: { error: 'HQ_ERR_WRONG_HOST' } }),
    'HTTP 403 HQ_ERR_WRONG_HOST',
    'a refusal is described by status and code',
  );
});

t.test('a bound token is sent to its own origin only', async (t) => {
  const s = await server(t, () => ({ status: 200, text: '{}' }));
  const other = await server(t, () => ({ status: 200, text: '{}' }));
  const token = { token: 'secret', url: s.url };
  await requestJson({ method: 'GET', url: `${s.url}/v1/x`, token, timeoutSeconds: 5 });
  await requestJson({ method: 'GET', url: `${other.url}/v1/x`, token, timeoutSeconds: 5 });
  t.equal(s.seen[0]?.headers.authorization, 'Bearer secret', 'its origin gets it');
  t.notOk('authorization' in (other.seen[0]?.headers ?? {}), 'another port does not');
  t.notOk(tokenBelongsTo({ token: 'x', url: 'not a url' }, 'not a url'), 'a token without an origin belongs nowhere');
});

t.test('the protocol version: said on every request, read from every answer, bodies shaped to the peer', async (t) => {
  // An arbiter of protocol 1 (hq 0.1.x): no header on its answers, unknown fields refused.
  const old = await server(t, (_path, body) =>
    Object.hasOwn(JSON.parse(body) as object, 'version')
      ? { status: 400, text: '{"error":"HQ_ERR_BAD_REQUEST","message":"body must NOT have additional properties"}' }
      : { status: 200, text: '{"ok":true}' },
  );
  t.equal(peerProtocol(old.url), null, 'an origin never heard from');
  const first = await requestJson({
    method: 'POST',
    url: `${old.url}/v1/heartbeat`,
    body: { host: 'mbp', version: '0.2.0' },
    timeoutSeconds: 5,
  });
  t.match(first, { kind: 'answer', status: 200, protocol: 1 }, 'the heartbeat is served by the old arbiter');
  t.equal(old.seen.length, 2, 'after one 400 for the protocol 2 field, once more');
  t.same(
    old.seen.map((s) => JSON.parse(s.body) as unknown),
    [{ host: 'mbp', version: '0.2.0' }, { host: 'mbp' }],
    'the second without it',
  );
  t.ok(
    old.seen.every((s) => s.headers['hq-protocol'] === '2'),
    'each saying protocol 2 (0.1.x ignores the header)',
  );
  t.equal(peerProtocol(`${old.url}/other`), 1, 'the origin is known as protocol 1');
  await requestJson({
    method: 'POST',
    url: `${old.url}/v1/heartbeat`,
    body: { host: 'mbp', version: '0.2.0' },
    timeoutSeconds: 5,
  });
  t.equal(old.seen.length, 3, 'from then on one request each');
  t.same(JSON.parse(old.seen[2]?.body ?? '{}'), { host: 'mbp' }, 'already without the field');
  const other = await requestJson({
    method: 'POST',
    url: `${old.url}/v1/lease/acquire`,
    body: { host: 'mbp', version: 'x' },
    timeoutSeconds: 5,
  });
  t.match(other, { status: 400 }, 'a field no version lists is never taken out (the 400 stands)');

  // The same origin upgraded: its answers say 2, and the field goes again.
  const now = await server(t, () => ({ status: 200, text: '{}', headers: { 'hq-protocol': '2' } }));
  const r = await requestJson({
    method: 'POST',
    url: `${now.url}/v1/heartbeat`,
    body: { host: 'mbp', version: '0.2.0' },
    timeoutSeconds: 5,
  });
  t.match(r, { kind: 'answer', status: 200, protocol: 2 }, 'a protocol 2 answer');
  t.same(JSON.parse(now.seen[0]?.body ?? '{}'), { host: 'mbp', version: '0.2.0' }, 'with the field');
  const garbled = await server(t, () => ({ status: 200, text: '{}', headers: { 'hq-protocol': 'soon' } }));
  t.match(
    await requestJson({ method: 'GET', url: garbled.url, timeoutSeconds: 5 }),
    { protocol: 2 },
    'an answer whose header is no version is taken as the version asked in',
  );
});

t.test(
  'keepAlive: false closes the connection with the answer; the default keeps it for the next request',
  async (t) => {
    const seen: { connection: string | undefined; port: number | undefined }[] = [];
    const s = createServer((req, res) => {
      seen.push({ connection: req.headers.connection, port: req.socket.remotePort });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    t.teardown(() => {
      s.closeAllConnections();
      return new Promise<void>((r) => s.close(() => r()));
    });
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    const open = () => new Promise<number>((r) => s.getConnections((_e, n) => r(n)));
    await requestJson({ method: 'GET', url: `${url}/a`, timeoutSeconds: 5, keepAlive: false });
    await requestJson({ method: 'GET', url: `${url}/b`, timeoutSeconds: 5, keepAlive: false });
    for (let i = 0; i < 100 && (await open()) > 0; i++) await new Promise((r) => setTimeout(r, 10));
    t.equal(await open(), 0, 'keepAlive false: no connection stays open after the answers');
    await requestJson({ method: 'GET', url: `${url}/c`, timeoutSeconds: 5 });
    await requestJson({ method: 'GET', url: `${url}/d`, timeoutSeconds: 5 });
    t.same(
      seen.map((x) => x.connection),
      ['close', 'close', 'keep-alive', 'keep-alive'],
      'the request says connection: close, the default keep-alive',
    );
    t.not(seen[0]?.port, seen[1]?.port, 'each closing request had its own connection');
    t.equal(seen[2]?.port, seen[3]?.port, 'the default: the next request reuses the connection');
    t.equal(await open(), 1, 'and it stays open');
  },
);

t.test("keepAliveFor: only a next request within node's keep-alive keeps the connection", async (t) => {
  t.equal(keepAliveFor(1), true, 'a heartbeat every second (the fast settings)');
  t.equal(keepAliveFor(KEEP_ALIVE_IDLE_SECONDS), false, 'at the keep-alive itself node would already close it');
  t.equal(keepAliveFor(30), false, 'the registry every 30 s');
  t.equal(keepAliveFor(60), false, 'the refresh every 60 s');
});
