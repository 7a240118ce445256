/**
 * The agent's listeners: the unix socket (fence from memory, 400 on unknown roles, 0660, a
 * stale socket replaced, a live one never stolen) and the peer listener (health, token-checked
 * peer confirmation persisted before it is answered).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { ensureDir } from '../../apps/agent/src/files.js';
import { systemClock } from '../../apps/agent/src/clock.js';
import { Agent, type Log } from '../../apps/agent/src/daemon/agent.js';
import { listenSocket, peerApp, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { createMetrics } from '../../apps/agent/src/daemon/metrics.js';
import { FakeArbiter, shortDir, sleep, fastAgentConfig } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };
const PEER_TOKEN = 'ef'.repeat(32);

function get(socketPath: string, path: string, method = 'GET'): Promise<{ status: number; body: { [k: string]: unknown } }> {
  return new Promise((done, fail) => {
    const req = request({ socketPath, path, method }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => done({ status: res.statusCode ?? 0, body: JSON.parse(text) as { [k: string]: unknown } }));
    });
    req.on('error', fail);
    req.end();
  });
}

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0], holder: string | null = 'mbp') {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  arb.holder = holder;
  await arb.listen();
  t.teardown(() => arb.close());
  const config = fastAgentConfig(arb.url, join(dir, 'state'), join(dir, 'run', 'a.sock'));
  await ensureDir(config.stateDir, 0o700);
  writeFileSync(config.tokenFile, `${'cd'.repeat(32)}\n`, { mode: 0o600 });
  writeFileSync(config.peerTokenFile, `${PEER_TOKEN}\n`, { mode: 0o600 });
  const metrics = createMetrics();
  const agent = await Agent.open({ config, clock: systemClock, log: silent, observer: metrics });
  metrics.attach(agent);
  const socket = socketApp(agent, metrics);
  await listenSocket(socket, config.socketPath, config.stateDir);
  const peer = peerApp(agent, metrics);
  t.teardown(async () => {
    await agent.stop();
    await socket.close();
    await peer.close();
  });
  return { dir, agent, arb, config, socket, peer, metrics };
}

t.test('the socket answers the fence from memory and refuses unknown roles with 400', async (t) => {
  const { agent, config } = await setup(t);
  const before = await get(config.socketPath, '/v1/fence?role=cron');
  t.equal(before.status, 200, 'a known role is answered');
  t.same(before.body, { run: false, reason: 'no-lease', generation: 0, holder: null, role: 'cron', validForSeconds: null }, 'before any answer there is no lease');
  await agent.heartbeat();
  const after = await get(config.socketPath, '/v1/fence?role=cron');
  t.equal(after.body['run'], true, 'after a renewal the holder may run');
  t.equal(after.body['reason'], 'holder', 'as the holder');
  t.ok((after.body['validForSeconds'] as number) > 4 && (after.body['validForSeconds'] as number) <= 5, 'with ttl − margin of validity');
  // No I/O on the fence path: it still answers with the state directory gone.
  rmSync(config.stateDir, { recursive: true, force: true });
  const noDisk = await get(config.socketPath, '/v1/fence?role=ledger-cli');
  t.equal(noDisk.body['run'], true, 'the fence is answered from memory, without the state directory');
  const bad = await get(config.socketPath, '/v1/fence?role=nope');
  t.equal(bad.status, 400, 'an unknown role is a 400');
  t.equal(bad.body['error'], 'HQ_ERR_UNKNOWN_ROLE', 'with a stable error code');
  t.type(bad.body['message'], 'string', 'and a one-line message');
  const missing = await get(config.socketPath, '/v1/fence');
  t.equal(missing.status, 400, 'a missing role is a 400');
});

t.test('the socket is 0660 in a 0750 directory and serves status, seen and step-down', async (t) => {
  const { config, agent } = await setup(t);
  t.equal(statSync(config.socketPath).mode & 0o777, 0o660, 'the socket is 0660');
  t.equal(statSync(join(config.socketPath, '..')).mode & 0o777, 0o750, 'its directory is 0750');
  const hb = await get(config.socketPath, '/v1/heartbeat', 'POST');
  t.equal(hb.body['outcome'], 'renewed', 'POST /v1/heartbeat answers after the heartbeat ran');
  const seen = await get(config.socketPath, '/v1/seen');
  t.same(seen.body, { seen: true, generation: 1 }, '/v1/seen tells the seen generation');
  const st = await get(config.socketPath, '/v1/status');
  t.equal(st.body['holder'], 'mbp', 'status names the holder');
  t.equal(st.body['arbiterOk'], true, 'status says the arbiter answered');
  await get(config.socketPath, '/v1/step-down', 'POST');
  t.equal(agent.fence('cron').run, false, 'after a step-down nothing runs');
  await agent.heartbeat();
  t.equal(agent.fence('cron').run, false, 'not even after a renewal of the same generation');
  await get(config.socketPath, '/v1/resume', 'POST');
  await agent.heartbeat();
  t.equal(agent.fence('cron').run, true, 'resume undoes the step-down');
});

t.test('a stale socket from a crash is replaced, a live one is never stolen', async (t) => {
  const dir = shortDir(t);
  const path = join(dir, 'stale.sock');
  // A process that listens and dies by SIGKILL leaves its socket file behind.
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, NODE_OPTIONS: '' } });
  await new Promise<void>((r) => child.stdout.once('data', () => r()));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  t.ok(existsSync(path), 'the crashed process left its socket file');
  const { config } = await setup(t);
  const other = socketApp(null as never, null); // routes are not called here
  await listenSocket(other, path, dir).catch((err: Error) => t.fail(`stale socket not replaced: ${err.message}`));
  t.ok(statSync(path).isSocket(), 'the stale socket was replaced by a live one');
  await other.close();
  const again = socketApp(null as never, null);
  await t.rejects(listenSocket(again, config.socketPath, config.stateDir), { name: 'SocketInUse', message: /another agent answers/ }, 'a socket a live agent answers on is refused');
  writeFileSync(join(dir, 'plain'), 'x');
  await t.rejects(listenSocket(socketApp(null as never, null), join(dir, 'plain'), dir), { name: 'SocketInUse', message: /not a socket/ }, 'a regular file at the path is never deleted');
  t.ok(existsSync(join(dir, 'plain')), 'the regular file is still there');
});

t.test('the peer listener answers health without a token and confirmations only with the peer token', async (t) => {
  const { peer, config, agent } = await setup(t, 'node-b');
  const health = await peer.inject({ method: 'GET', url: '/v1/health' });
  t.same(health.json(), { status: 'ok', role: 'agent', host: 'mbp', version: '0.1.0' }, 'health needs no token');
  await agent.heartbeat();
  const primary = await peer.inject({ method: 'GET', url: '/v1/primary' });
  t.same(primary.json(), { known: true, holder: 'node-b', generation: 1 }, 'primary answers from memory');
  const body = { host: 'node-b', generation: 1 };
  const none = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: body });
  t.equal(none.statusCode, 401, 'no token → 401');
  const wrong = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: body, headers: { authorization: `Bearer ${'00'.repeat(32)}` } });
  t.equal(wrong.statusCode, 401, 'a wrong token → 401');
  const coerced = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: { host: 'node-b', generation: '1' }, headers: { authorization: `bearer ${PEER_TOKEN}` } });
  t.equal(coerced.statusCode, 400, 'a string generation is not coerced');
  const extra = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: { ...body, x: 1 }, headers: { authorization: `Bearer ${PEER_TOKEN}` } });
  t.equal(extra.statusCode, 400, 'an unknown field is refused');
  for (const host of ['constructor', 'prototype']) {
    const reserved = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: { host, generation: 1 }, headers: { authorization: `Bearer ${PEER_TOKEN}` } });
    t.same([reserved.statusCode, reserved.json().error], [400, 'HQ_ERR_BAD_REQUEST'], `the reserved name ${host} is no host, refused by the schema`);
  }
  const ok = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: body, headers: { authorization: `BEARER ${PEER_TOKEN}` } });
  t.equal(ok.statusCode, 200, 'the peer token (any scheme case) is accepted');
  t.same(ok.json(), { confirmed: true, generation: 1, reason: 'confirmed' }, 'the standby confirms the holder it knows');
  // Persisted before the answer (S2.2): the flag is on disk the moment the answer exists.
  const local = JSON.parse(readFileSync(join(config.stateDir, 'local.json'), 'utf8')) as { gaveConfirmation: { holder: string } | null };
  t.equal(local.gaveConfirmation?.holder, 'node-b', 'gaveConfirmation is in local.json');
  const self = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: { host: 'mbp', generation: 1 }, headers: { authorization: `Bearer ${PEER_TOKEN}` } });
  t.same(self.json(), { confirmed: false, generation: 1, reason: 'self' }, 'an agent never confirms itself');
  const info = await peer.inject({ method: 'GET', url: '/v1/peer', headers: { authorization: `Bearer ${PEER_TOKEN}` } });
  t.same(info.json(), { host: 'mbp', holder: 'node-b', generation: 1, seenGeneration: 1, gaveConfirmation: { holder: 'node-b', generation: 1 } }, '/v1/peer tells the peer state');
  t.equal((await peer.inject({ method: 'GET', url: '/v1/peer' })).statusCode, 401, '/v1/peer needs the token');
  await agent.heartbeat();
  t.equal(agent.fence('cron').reason, 'not-holder', 'the standby does not run');
  const metrics = await peer.inject({ method: 'GET', url: '/metrics' });
  t.match(metrics.body, /hq_agent_fence_decisions_total\{role="cron",run="false",reason="not-holder",host="mbp"\} 1/, 'fence decisions are counted by role, run and reason');
  t.match(metrics.body, /hq_agent_heartbeats_total\{outcome="standby",host="mbp"\} 2/, 'heartbeat outcomes are counted');
  t.match(metrics.body, /hq_agent_validity_remaining_seconds\{host="mbp"\} 0/, 'validity remaining is exported');
  const series = metrics.body.split('\n').filter((l) => l.startsWith('hq_'));
  t.ok(series.length > 5, `the agent exports series (${series.length})`);
  for (const l of series) t.match(l, /\{(?:.*,)?host="mbp"[,}]/, `every agent series names its machine as host: ${l}`);
  t.notMatch(metrics.body, /machine=/, 'no agent series uses a machine label');
});

t.test('a heartbeat sent while the arbiter is down asks the peers and logs no crash', async (t) => {
  const { agent, arb } = await setup(t);
  await agent.heartbeat();
  t.equal(agent.fence('cron').reason, 'holder', 'renewed first');
  arb.down = true;
  const hb = await agent.heartbeat();
  t.equal(hb.outcome, 'unreachable', 'the outcome is unreachable');
  t.equal(hb.peerConfirmation, 'not-confirmed', 'with no peers configured there is no quorum');
  t.equal(agent.fence('cron').reason, 'within-ttl', 'the holder runs on the validity it has');
  await sleep(10);
});
