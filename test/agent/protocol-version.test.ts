/**
 * The protocol version at the agent (docs/PROTOCOL.md "Versions"): both listeners — the unix
 * socket (its fence fast path too) and the peer listener — answer in the version they were
 * spoken to and refuse one they do not serve with one 400; the CLI's socket client says its
 * version and reads the agent's; the heartbeat names this agent's release.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { ensureDir } from '../../packages/runtime/src/files.js';
import { stampClock } from '../../packages/runtime/src/clock.js';
import { Agent, VERSION, type Log } from '../../apps/agent/src/daemon/agent.js';
import { listenSocket, peerApp, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import { FakeArbiter, shortDir, fastAgentConfig } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

function ask(socketPath: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; protocol: string | undefined; body: { [k: string]: unknown } }> {
  return new Promise((done, fail) => {
    const req = request({ socketPath, path, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => done({ status: res.statusCode ?? 0, protocol: res.headers['hq-protocol'] as string | undefined, body: JSON.parse(text) as { [k: string]: unknown } }));
    });
    req.on('error', fail);
    req.end();
  });
}

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  arb.holder = 'mbp';
  await arb.listen();
  t.teardown(() => arb.close());
  const config = fastAgentConfig(arb.url, join(dir, 'state'), join(dir, 'run', 'a.sock'));
  await ensureDir(config.stateDir, 0o700);
  writeFileSync(config.tokenFile, `${'cd'.repeat(32)}\n`, { mode: 0o600 });
  writeFileSync(config.peerTokenFile, `${'ef'.repeat(32)}\n`, { mode: 0o600 });
  const agent = await Agent.open({ config, clock: stampClock, log: silent });
  const socket = socketApp(agent, null);
  await listenSocket(socket, config.socketPath, config.stateDir);
  const peer = peerApp(agent, null);
  t.teardown(async () => {
    await agent.stop();
    await socket.close();
    await peer.close();
  });
  return { agent, arb, config, socket, peer };
}

t.test('the socket, its fence fast path included, answers in the version it was spoken to', async (t) => {
  const { config } = await setup(t);
  for (const path of ['/v1/fence?role=cron', '/v1/fence?role=%63ron', '/v1/status', '/v1/nothing']) {
    const none = await ask(config.socketPath, path);
    t.equal(none.protocol, '1', `${path}: no header (hq 0.1.x, a script) is protocol 1`);
    const two = await ask(config.socketPath, path, { 'hq-protocol': '2' });
    t.equal(two.protocol, '2', `${path}: protocol 2 is answered as 2`);
    t.equal(two.status, none.status, `${path}: the same answer either way`);
    const three = await ask(config.socketPath, path, { 'hq-protocol': '3' });
    t.equal(three.status, 400, `${path}: protocol 3 is refused`);
    t.equal(three.body['error'], 'HQ_ERR_PROTOCOL_VERSION', `${path}: with the code`);
    t.match(String(three.body['message']), /protocol 3, newer than hq-agent on mbp speaks hq protocol 1 to 2: upgrade hq-agent on mbp/, `${path}: naming both versions and what to upgrade`);
    t.equal(three.protocol, '2', `${path}: the refusal says the version the agent speaks`);
  }
});

t.test("the CLI's socket client says protocol 2 and reads the agent's", async (t) => {
  const { config } = await setup(t);
  const r = await callAgent(config.socketPath, 'GET', '/v1/seen', 2);
  t.match(r, { kind: 'answer', status: 200, protocol: 2 }, 'a protocol 2 exchange');
});

t.test('the peer listener too', async (t) => {
  const { peer } = await setup(t);
  const ok = await peer.inject({ method: 'GET', url: '/v1/health', headers: { 'hq-protocol': '2' } });
  t.equal(ok.headers['hq-protocol'], '2', 'health answered as 2');
  const old = await peer.inject({ method: 'GET', url: '/v1/health' });
  t.equal(old.headers['hq-protocol'], '1', 'the arbiter of 0.1.x probes without the header: protocol 1');
  const bad = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', headers: { 'hq-protocol': '0', 'content-type': 'application/json' }, payload: '{}' });
  t.equal(bad.statusCode, 400, 'protocol 0 is refused before authentication');
  t.equal(bad.json().error, 'HQ_ERR_PROTOCOL_VERSION', 'with the code');
});

t.test('the heartbeat names this release, in protocol 2', async (t) => {
  const { agent, arb } = await setup(t);
  await agent.heartbeat();
  const hb = arb.heartbeats.at(-1) as { version?: string } | undefined;
  t.equal(hb?.version, VERSION, 'the heartbeat body carries the agent release');
});

t.test('to an arbiter of protocol 1 the heartbeat leaves the protocol 2 field out', async (t) => {
  const { agent, arb } = await setup(t);
  arb.protocol = null;
  await agent.heartbeat(); // learns protocol 1 from this answer
  await agent.heartbeat();
  const hb = arb.heartbeats.at(-1) as { version?: string; host?: string } | undefined;
  t.equal(hb?.host, 'mbp', 'the heartbeat went');
  t.equal(hb?.version, undefined, 'without the release field');
});
