/** The one JSON HTTP client: bodies both ways, the deadline, and tokens that stay with their origin. */
import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  KEEP_ALIVE_IDLE_SECONDS,
  describe,
  joinUrl,
  keepAliveFor,
  openStream,
  peerProtocol,
  requestJson,
  tokenBelongsTo,
} from '../../packages/runtime/src/http.js';
import { Readable } from 'node:stream';
import type { Timers } from '../../packages/runtime/src/clock.js';

/** Timers that fire only when told: `fire()` runs every timer set and not cleared. */
function heldTimers(): Timers & { fire(): void; readonly live: number } {
  const live = new Map<number, () => void>();
  let n = 0;
  return {
    set: (fn) => {
      live.set(++n, fn);
      return n;
    },
    clear: (h) => void live.delete(h as number),
    fire: () => {
      const fns = [...live.values()];
      live.clear();
      for (const fn of fns) fn();
    },
    get live() {
      return live.size;
    },
  };
}

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

t.test("a raw body (bytes or a stream) goes out as it is, with the caller's type", async (t) => {
  const s = await server(t, (_path, body) => ({ status: 200, text: JSON.stringify({ got: body }) }));
  const bytes = await requestJson({
    method: 'PUT',
    url: `${s.url}/blob`,
    rawBody: Buffer.from('abc'),
    headers: { 'content-type': 'application/octet-stream' },
    timeoutSeconds: 5,
  });
  t.match(bytes, { kind: 'answer', status: 200, body: { got: 'abc' } }, 'the bytes arrived');
  t.match(s.seen[0]?.headers, { 'content-type': 'application/octet-stream', 'content-length': '3' }, 'sized, typed');
  const streamed = await requestJson({
    method: 'PUT',
    url: `${s.url}/blob`,
    rawBody: Readable.from([Buffer.from('de'), Buffer.from('f')]),
    headers: { 'content-type': 'application/octet-stream', 'content-length': '3' },
    timeoutSeconds: 5,
  });
  t.match(streamed, { kind: 'answer', status: 200, body: { got: 'def' } }, 'a stream is piped whole');
});

t.test('the deadline runs on the injected timers: fired, the request is unreachable', async (t) => {
  const s = await server(t, () => null);
  const timers = heldTimers();
  const pending = requestJson({ method: 'GET', url: s.url, timeoutSeconds: 30, timers });
  t.equal(timers.live, 1, 'one deadline timer is set');
  timers.fire();
  t.same(await pending, { kind: 'unreachable', problem: 'no answer within 30 s' }, 'the deadline ended it');
  t.equal(timers.live, 0, 'nothing left set');
});

t.test('a stream is read as it arrives, and one idle too long is ended', async (t) => {
  const { createServer: create } = await import('node:http');
  let write: ((text: string) => void) | null = null;
  const srv = create((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`auth ${req.headers.authorization ?? 'none'}\n`);
    write = (text) => res.write(text);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    srv.closeAllConnections();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/stream`;
  const timers = heldTimers();
  const res = await openStream({ url, token: 'tok', idleSeconds: 45, timers });
  t.equal(res.status, 200, 'the head arrived');
  const got: string[] = [];
  let failure: unknown = null;
  const reading = (async () => {
    try {
      for await (const piece of res.pieces()) {
        got.push(piece);
        if (got.length === 1) write?.('second\n');
      }
    } catch (err) {
      failure = err;
    }
  })();
  for (let i = 0; i < 200 && got.length < 2; i++) await new Promise((r) => setImmediate(r));
  t.same(got, ['auth Bearer tok\n', 'second\n'], 'each piece as it came, the token sent');
  t.equal(timers.live, 1, 'one idle timer, re-armed with each piece');
  timers.fire();
  await reading;
  t.match(failure, { code: 'ETIMEDOUT', message: 'nothing arrived within 45 s' }, 'the idle stream fails, named');
  t.equal(timers.live, 0, 'and its timer cleared');
});
