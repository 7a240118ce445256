/**
 * The socket's fence fast path (fence.ts `fenceFastPath`) answers byte for byte what the
 * Fastify route answers: the same raw HTTP responses (status line, headers in order, body; the
 * Date header aside) for the holder, a standby, no lease, unknown roles, bad, missing and
 * duplicated queries, other methods and paths. Both apps serve one agent on a frozen clock, so
 * even validForSeconds is the same; the exact query is proven to bypass Fastify, and its
 * request-duration metric is still recorded.
 */
import t from 'tap';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Stamp } from '@hq/lease-core';
import { PROTOCOL_PREVIOUS, PROTOCOL_VERSION } from '@hq/protocol';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { listenSocket, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { createMetrics } from '../../apps/agent/src/daemon/metrics.js';
import { agentSetup, shortDir } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

/** One request's raw bytes in, the raw response out (the connection is left open unless the server closes it). */
function exchange(socketPath: string, request: string, head = false): Promise<string> {
  return new Promise((done, fail) => {
    const s = connect(socketPath);
    let text = '';
    const finish = (): void => {
      s.destroy();
      done(text);
    };
    const complete = (): boolean => {
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return false;
      const len = /\r\ncontent-length: (\d+)\r\n/i.exec(text.slice(0, end + 2));
      if (head) return true;
      return len !== null && text.length - (end + 4) >= Number(len[1]);
    };
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (complete()) finish();
    });
    s.on('end', finish);
    s.on('error', fail);
    s.write(request);
  });
}

/** The Date header is the only part that may differ between two answers. */
const normal = (raw: string): string => raw.replace(/\r\nDate: [^\r]*\r\n/, '\r\nDate: X\r\n');

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0], holder: string | null) {
  const dir = shortDir(t);
  const { config } = await agentSetup(t, dir, { holder });
  // A frozen clock: both apps see the same instant, so their answers can be compared byte for byte.
  const stamp: Stamp = { wall: Date.now() / 1000, mono: 1000 };
  const metrics = createMetrics();
  const agent = await openAgent({ config, clock: { now: () => stamp }, log: silent, observer: metrics });
  metrics.attach(agent);
  const fast = socketApp(agent, metrics);
  let fastifyCalls = 0;
  fast.addHook('onRequest', async () => {
    fastifyCalls++;
  });
  const route = socketApp(agent, metrics, { fastPath: false });
  const fastPath = join(dir, 'run', 'fast.sock');
  const routePath = join(dir, 'run', 'route.sock');
  await listenSocket(fast, fastPath, config.stateDir);
  await listenSocket(route, routePath, config.stateDir);
  t.teardown(async () => {
    await stopAgent(agent);
    await fast.close();
    await route.close();
  });
  return { agent, metrics, fastPath, routePath, fastifyCalls: () => fastifyCalls };
}

const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${extra}\r\n`;

/** Requests Fastify must still answer (the fast path hands them over untouched). */
const HANDED_OVER: readonly [string, string, boolean?][] = [
  ['an unknown role', get('/v1/fence?role=nope')],
  ['an empty role', get('/v1/fence?role=')],
  ['no query at all', get('/v1/fence')],
  ['an empty query', get('/v1/fence?')],
  ['a duplicated role', get('/v1/fence?role=cron&role=cron')],
  ['an extra key', get('/v1/fence?role=cron&x=1')],
  ['a trailing ampersand', get('/v1/fence?role=cron&')],
  ['a percent-encoded known role', get('/v1/fence?role=cr%6Fn')],
  ['an upper-case role', get('/v1/fence?role=CRON')],
  ['a trailing slash', get('/v1/fence/?role=cron')],
  ['a longer path', get('/v1/fencex?role=cron')],
  ['another path', get('/nope')],
  ['a POST', `POST /v1/fence?role=cron HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n`],
  ['a HEAD', `HEAD /v1/fence?role=cron HTTP/1.1\r\nHost: localhost\r\n\r\n`, true],
];

/** A version this side does not serve: Fastify's version hook refuses it first (so the counting hook after it never runs). */
const REFUSED = get('/v1/fence?role=cron', `hq-protocol: ${PROTOCOL_VERSION + 1}\r\n`);

/** Requests the fast path answers itself. */
const FAST: readonly [string, string][] = [
  ['the exact query', get('/v1/fence?role=cron')],
  ['another role', get('/v1/fence?role=ledger-cli')],
  ['Connection: close', get('/v1/fence?role=cron', 'Connection: close\r\n')],
  ['HTTP/1.0', 'GET /v1/fence?role=cron HTTP/1.0\r\n\r\n'],
  ['a GET with a body', `${get('/v1/fence?role=cron', 'Content-Type: application/json\r\nContent-Length: 2\r\n')}{}`],
  ['the previous protocol version', get('/v1/fence?role=cron', `hq-protocol: ${PROTOCOL_PREVIOUS}\r\n`)],
  ['the current protocol version', get('/v1/fence?role=cron', `hq-protocol: ${PROTOCOL_VERSION}\r\n`)],
];

async function compareAll(
  t: Parameters<Parameters<typeof t.test>[1]>[0],
  s: Awaited<ReturnType<typeof setup>>,
  what: string,
): Promise<void> {
  for (const [name, req] of FAST) {
    const before = s.fastifyCalls();
    const a = await exchange(s.fastPath, req);
    t.equal(s.fastifyCalls(), before, `${what}, ${name}: answered by the fast path, Fastify not called`);
    const b = await exchange(s.routePath, req);
    t.equal(normal(a), normal(b), `${what}, ${name}: the same bytes as the Fastify route`);
  }
  for (const [name, req, head] of HANDED_OVER) {
    const before = s.fastifyCalls();
    const a = await exchange(s.fastPath, req, head === true);
    t.equal(s.fastifyCalls(), before + 1, `${what}, ${name}: handed to Fastify`);
    const b = await exchange(s.routePath, req, head === true);
    t.equal(normal(a), normal(b), `${what}, ${name}: the same bytes as the Fastify route`);
  }
  const refused = await exchange(s.fastPath, REFUSED);
  t.match(
    refused,
    /^HTTP\/1\.1 400 [\s\S]*"error":"HQ_ERR_PROTOCOL_VERSION"/,
    `${what}, a version not served: refused`,
  );
  t.equal(
    normal(refused),
    normal(await exchange(s.routePath, REFUSED)),
    `${what}, a version not served: the same bytes as the Fastify route`,
  );
}

t.test('the fast path answers as the Fastify route does: the holder', async (t) => {
  const s = await setup(t, 'mbp');
  await s.agent.link.heartbeat();
  const raw = await exchange(s.fastPath, get('/v1/fence?role=cron'));
  t.match(raw, /^HTTP\/1\.1 200 OK\r\n/, 'a 200');
  t.match(raw, /\r\ncontent-type: application\/json; charset=utf-8\r\n/, 'JSON, as Fastify labels it');
  t.match(raw, /\r\nKeep-Alive: timeout=72\r\n/, "with Fastify's keep-alive timeout");
  const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { run: boolean; reason: string };
  t.equal(body.run, true, 'the holder may run');
  t.equal(body.reason, 'holder', 'as the holder');
  await compareAll(t, s, 'holder');
});

t.test('the fast path answers as the Fastify route does: a standby', async (t) => {
  const s = await setup(t, 'node-b');
  await s.agent.link.heartbeat();
  t.equal(s.agent.fence.decide('cron').reason, 'not-holder', 'mbp is the standby');
  await compareAll(t, s, 'standby');
});

t.test('the fast path answers as the Fastify route does: no lease yet', async (t) => {
  const s = await setup(t, null);
  await compareAll(t, s, 'no lease');
});

t.test('the fast path records the request-duration metric like the route', async (t) => {
  const s = await setup(t, 'mbp');
  const count = async (): Promise<number> => {
    const m = (await s.metrics.registry.getSingleMetricAsString('hq_http_request_duration_seconds')).match(
      /hq_http_request_duration_seconds_count\{(?=[^}]*listener="socket")(?=[^}]*method="GET")(?=[^}]*route="\/v1\/fence")(?=[^}]*status="200")[^}]*\} (\d+)/,
    );
    return m === null ? 0 : Number(m[1]);
  };
  const before = await count();
  for (let i = 0; i < 3; i++) await exchange(s.fastPath, get('/v1/fence?role=cron'));
  t.equal((await count()) - before, 3, 'three fast answers, three observations');
  await exchange(s.routePath, get('/v1/fence?role=cron'));
  t.equal((await count()) - before, 4, 'the route observes under the same labels');
});
