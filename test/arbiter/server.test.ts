import t from 'tap';
import { connect, type AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { harness } from './helper.js';
import { startArbiter, writeConfig } from './child.js';

function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.end(text));
    let out = '';
    s.on('data', (d) => (out += String(d)));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

t.test('a real listener: duplicate Authorization is 400, keep-alive is reused, revocation applies on the same connection', async (t) => {
  const h = await harness(t);
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const port = (h.app.server.address() as AddressInfo).port;
  let connections = 0;
  h.app.server.on('connection', () => connections++);

  const body = '{"host":"mbp"}';
  const dup = await raw(
    port,
    `POST /v1/lease/acquire HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.tokens.mbp}\r\nAuthorization: Bearer ${h.tokens.admin}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
  t.match(dup, /^HTTP\/1\.1 400 /, 'two Authorization headers are a 400');
  t.match(dup, /"error":"HQ_ERR_BAD_REQUEST"/, 'with the catalog code');

  const agent = new Agent({ connections: 1 });
  t.teardown(() => agent.close());
  connections = 0;
  const call = async (token: string, scheme = 'Bearer') => {
    const res = await request(`http://127.0.0.1:${port}/v1/lease/acquire`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `${scheme} ${token}`, 'content-type': 'application/json' },
      body,
    });
    return { status: res.statusCode, body: (await res.body.json()) as { error?: string } };
  };
  t.equal((await call(h.tokens.mbp, 'BEARER')).status, 200, 'an upper-case scheme is accepted');
  t.equal((await call(h.tokens.mbp, 'bearer')).status, 200, 'a lower-case scheme is accepted');
  h.rt.store.revokeTokens('mbp', h.clock.now());
  const after = await call(h.tokens.mbp);
  t.equal(after.status, 401, 'the revoked token fails on the next request');
  t.equal(connections, 1, 'all three requests used one keep-alive connection');
});

t.test('SIGTERM finishes the in-flight request, closes the database and exits 0 within 10 s', async (t) => {
  const dir = t.testdir();
  let release: (() => void) | null = null;
  const slow = createServer((_req, res) => {
    release = () => {
      res.writeHead(200);
      res.end('{"status":"ok"}');
    };
    setTimeout(() => release?.(), 300);
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => slow.close(() => r())));
  let probed: () => void = () => undefined;
  const probedOnce = new Promise<void>((r) => (probed = r));
  slow.on('request', () => probed());
  const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/v1/health`;
  // Checks only on request (a schedule that never fires in this test: 23:59:59 would, so use the request path only).
  const config = writeConfig(dir, { healthUrls: { mbp: url }, checkCron: '*/30 * * * * *', ttlSeconds: 60, viewFreshSeconds: 60 });
  const a = await startArbiter(t, config);
  const token = readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const acq = await request(`${a.base}/v1/lease/acquire`, { method: 'POST', headers, body: '{"host":"mbp"}' });
  t.equal(acq.statusCode, 200, 'acquired');
  await acq.body.dump();

  const inflight = request(`${a.base}/v1/check`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  await probedOnce;
  const t0 = Date.now();
  a.proc.kill('SIGTERM');
  const res = await inflight;
  t.equal(res.statusCode, 200, 'the in-flight check was answered');
  t.match((await res.body.json()) as object, { holder: 'mbp', health: true }, 'with its result');
  const exit = await a.exited;
  t.equal(exit.code, 0, 'exit code 0');
  t.ok(Date.now() - t0 < 10_000, `within 10 s (${Date.now() - t0} ms)`);
  t.ok(a.lines.some((l) => l['msg'] === 'closed'), 'logged its close');
  t.ok(a.lines.every((l) => typeof l['level'] === 'number' && typeof l['time'] === 'number'), 'stdout is pino JSON lines');
  const refused = await request(`${a.base}/v1/health`).then(
    () => false,
    () => true,
  );
  t.ok(refused, 'nothing listens after the close');
});
