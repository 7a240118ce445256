/** The one JSON HTTP client: bodies both ways, the deadline, and tokens that stay with their origin. */
import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, joinUrl, requestJson, tokenBelongsTo } from '../../packages/runtime/src/http.js';

async function server(t: { teardown(fn: () => unknown): void }, answer: (path: string, body: string) => { status: number; text: string } | null) {
  const seen: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += String(d)));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body });
      const a = answer(req.url ?? '', body);
      if (a === null) return; // never answers
      res.writeHead(a.status, { 'content-type': 'application/json' });
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
  const s = await server(t, (path, body) => (path === '/echo' ? { status: 201, text: body } : { status: 200, text: 'not json' }));
  const r = await requestJson({ method: 'POST', url: joinUrl(`${s.url}/`, '/echo'), body: { a: 1 }, token: 'tok', timeoutSeconds: 5 });
  t.same(r, { kind: 'answer', status: 201, body: { a: 1 } }, 'the echo is parsed');
  t.match(s.seen[0]?.headers, { 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer tok' }, 'JSON both ways, the plain token sent');
  t.same(await requestJson({ method: 'GET', url: `${s.url}/x`, timeoutSeconds: 5 }), { kind: 'answer', status: 200, body: null }, 'a body that is not JSON is null');
  t.notOk('authorization' in (s.seen[1]?.headers ?? {}), 'no token, no Authorization header');
});

t.test('an answer later than the deadline is unreachable, never half-read', async (t) => {
  const s = await server(t, () => null);
  const r = await requestJson({ method: 'GET', url: s.url, timeoutSeconds: 0.2 });
  t.same(r, { kind: 'unreachable', problem: 'no answer within 0.2 s' }, 'the deadline is named');
  t.equal(describe(r), 'unreachable: no answer within 0.2 s', 'and described in one line');
  t.equal(describe({ kind: 'answer', status: 403, body: { error: 'HQ_ERR_WRONG_HOST' } }), 'HTTP 403 HQ_ERR_WRONG_HOST', 'a refusal is described by status and code');
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
