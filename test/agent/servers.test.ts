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
import { stampClock } from '../../packages/runtime/src/clock.js';
import { VERSION } from '../../packages/runtime/src/version.js';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { peerInfo, primaryAnswer } from '../../apps/agent/src/daemon/summaries.js';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import { listenSocket, peerApp, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { compiled } from '../../apps/agent/src/daemon/lazy-schemas.js';
import { createMetrics } from '../../apps/agent/src/daemon/metrics.js';
import { agentSetup, PEER_TOKEN, shortDir } from './helpers.js';
import { eventually, FakeTime, flush } from '../registry/fake-time.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

function get(
  socketPath: string,
  path: string,
  method = 'GET',
): Promise<{ status: number; body: { [k: string]: unknown } }> {
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
  const { arb, config } = await agentSetup(t, dir, { holder });
  const metrics = createMetrics();
  // The link's refresh and extra heartbeats wait on timers nobody advances: each test sends its own.
  const time = new FakeTime();
  const agent = await openAgent({ config, clock: stampClock, log: silent, observer: metrics, linkTimers: time });
  metrics.attach(agent);
  const socket = socketApp(agent, metrics);
  await listenSocket(socket, config.socketPath, config.stateDir);
  const peer = peerApp(agent, metrics);
  t.teardown(async () => {
    await stopAgent(agent);
    await socket.close();
    await peer.close();
  });
  return { dir, agent, arb, config, socket, peer, metrics, time };
}

t.test('the socket answers the fence from memory and refuses unknown roles with 400', async (t) => {
  const { agent, config } = await setup(t);
  const before = await get(config.socketPath, '/v1/fence?role=cron');
  t.equal(before.status, 200, 'a known role is answered');
  t.same(
    before.body,
    { run: false, reason: 'no-lease', generation: 0, holder: null, role: 'cron', validForSeconds: null },
    'before any answer there is no lease',
  );
  await agent.link.heartbeat();
  const after = await get(config.socketPath, '/v1/fence?role=cron');
  t.equal(after.body['run'], true, 'after a renewal the holder may run');
  t.equal(after.body['reason'], 'holder', 'as the holder');
  t.ok(
    (after.body['validForSeconds'] as number) > 4 && (after.body['validForSeconds'] as number) <= 5,
    'with ttl − margin of validity',
  );
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
  t.equal(agent.fence.decide('cron').run, false, 'after a step-down nothing runs');
  await agent.link.heartbeat();
  t.equal(agent.fence.decide('cron').run, false, 'not even after a renewal of the same generation');
  await get(config.socketPath, '/v1/resume', 'POST');
  await agent.link.heartbeat();
  t.equal(agent.fence.decide('cron').run, true, 'resume undoes the step-down');
});

t.test('a stale socket from a crash is replaced, a live one is never stolen', async (t) => {
  const dir = shortDir(t);
  const path = join(dir, 'stale.sock');
  // A process that listens and dies by SIGKILL leaves its socket file behind.
  const child = spawn(
    process.execPath,
    ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`],
    { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, NODE_OPTIONS: '' } },
  );
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
  await t.rejects(
    listenSocket(again, config.socketPath, config.stateDir),
    { name: 'SocketInUse', message: /another agent answers/ },
    'a socket a live agent answers on is refused',
  );
  writeFileSync(join(dir, 'plain'), 'x');
  await t.rejects(
    listenSocket(socketApp(null as never, null), join(dir, 'plain'), dir),
    { name: 'SocketInUse', message: /not a socket/ },
    'a regular file at the path is never deleted',
  );
  t.ok(existsSync(join(dir, 'plain')), 'the regular file is still there');
});

t.test('the peer listener answers health without a token and confirmations only with the peer token', async (t) => {
  const { peer, config, agent } = await setup(t, 'node-b');
  const health = await peer.inject({ method: 'GET', url: '/v1/health' });
  t.same(health.json(), { status: 'ok', role: 'agent', host: 'mbp', version: VERSION }, 'health needs no token');
  await agent.link.heartbeat();
  const primary = await peer.inject({ method: 'GET', url: '/v1/primary' });
  t.same(primary.json(), { known: true, holder: 'node-b', generation: 1 }, 'primary answers from memory');
  const body = { host: 'node-b', generation: 1 };
  const none = await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: body });
  t.equal(none.statusCode, 401, 'no token → 401');
  const wrong = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: body,
    headers: { authorization: `Bearer ${'00'.repeat(32)}` },
  });
  t.equal(wrong.statusCode, 401, 'a wrong token → 401');
  const coerced = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'node-b', generation: '1' },
    headers: { authorization: `bearer ${PEER_TOKEN}` },
  });
  t.equal(coerced.statusCode, 400, 'a string generation is not coerced');
  const huge = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'node-b', generation: 2 ** 48 + 1 },
    headers: { authorization: `Bearer ${PEER_TOKEN}` },
  });
  t.same(
    [huge.statusCode, huge.json().error],
    [400, 'HQ_ERR_BAD_REQUEST'],
    'a generation above the ceiling is refused, never confirmed or adopted',
  );
  const extra = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { ...body, x: 1 },
    headers: { authorization: `Bearer ${PEER_TOKEN}` },
  });
  t.equal(extra.statusCode, 400, 'an unknown field is refused');
  for (const host of ['constructor', 'prototype']) {
    const reserved = await peer.inject({
      method: 'POST',
      url: '/v1/peer/confirm',
      payload: { host, generation: 1 },
      headers: { authorization: `Bearer ${PEER_TOKEN}` },
    });
    t.same(
      [reserved.statusCode, reserved.json().error],
      [400, 'HQ_ERR_BAD_REQUEST'],
      `the reserved name ${host} is no host, refused by the schema`,
    );
  }
  const probe = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { ...body, probe: true },
    headers: { authorization: `Bearer ${PEER_TOKEN}` },
  });
  t.same(
    [probe.statusCode, probe.json()],
    [200, { confirmed: false, generation: 1, reason: 'probe' }],
    'a probe is answered without a confirmation',
  );
  const afterProbe = JSON.parse(readFileSync(join(config.stateDir, 'local.json'), 'utf8')) as {
    gaveConfirmation: unknown;
  };
  t.equal(afterProbe.gaveConfirmation, null, 'and nothing is recorded: a probe grants nothing');
  const probeNoToken = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { ...body, probe: true },
  });
  t.equal(probeNoToken.statusCode, 401, 'a probe needs the peer token like a confirmation (that is what it proves)');
  const ok = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: body,
    headers: { authorization: `BEARER ${PEER_TOKEN}` },
  });
  t.equal(ok.statusCode, 200, 'the peer token (any scheme case) is accepted');
  t.same(
    ok.json(),
    { confirmed: true, generation: 1, reason: 'confirmed' },
    'the standby confirms the holder it knows',
  );
  // Persisted before the answer (S2.2): the flag is on disk the moment the answer exists.
  const local = JSON.parse(readFileSync(join(config.stateDir, 'local.json'), 'utf8')) as {
    gaveConfirmation: { holder: string } | null;
  };
  t.equal(local.gaveConfirmation?.holder, 'node-b', 'gaveConfirmation is in local.json');
  const self = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'mbp', generation: 1 },
    headers: { authorization: `Bearer ${PEER_TOKEN}` },
  });
  t.same(self.json(), { confirmed: false, generation: 1, reason: 'self' }, 'an agent never confirms itself');
  const info = await peer.inject({
    method: 'GET',
    url: '/v1/peer',
    headers: { authorization: `Bearer ${PEER_TOKEN}` },
  });
  t.same(
    info.json(),
    {
      host: 'mbp',
      holder: 'node-b',
      generation: 1,
      seenGeneration: 1,
      gaveConfirmation: { holder: 'node-b', generation: 1 },
    },
    '/v1/peer tells the peer state',
  );
  t.equal((await peer.inject({ method: 'GET', url: '/v1/peer' })).statusCode, 401, '/v1/peer needs the token');
  await agent.link.heartbeat();
  t.equal(agent.fence.decide('cron').reason, 'not-holder', 'the standby does not run');
  const metrics = await peer.inject({ method: 'GET', url: '/metrics' });
  t.match(
    metrics.body,
    /hq_agent_fence_decisions_total\{role="cron",run="false",reason="not-holder",host="mbp"\} 1/,
    'fence decisions are counted by role, run and reason',
  );
  t.match(
    metrics.body,
    /hq_agent_heartbeats_total\{outcome="standby",host="mbp"\} 2/,
    'heartbeat outcomes are counted',
  );
  t.match(metrics.body, /hq_agent_validity_remaining_seconds\{host="mbp"\} 0/, 'validity remaining is exported');
  const series = metrics.body.split('\n').filter((l) => l.startsWith('hq_'));
  t.ok(series.length > 5, `the agent exports series (${series.length})`);
  for (const l of series) t.match(l, /\{(?:.*,)?host="mbp"[,}]/, `every agent series names its machine as host: ${l}`);
  t.notMatch(metrics.body, /machine=/, 'no agent series uses a machine label');
});

t.test('a heartbeat sent while the arbiter is down asks the peers and logs no crash', async (t) => {
  const { agent, arb } = await setup(t);
  await agent.link.heartbeat();
  t.equal(agent.fence.decide('cron').reason, 'holder', 'renewed first');
  arb.down = true;
  const hb = await agent.link.heartbeat();
  t.equal(hb.outcome, 'unreachable', 'the outcome is unreachable');
  t.equal(hb.peerConfirmation, 'not-confirmed', 'with no peers configured there is no quorum');
  t.equal(agent.fence.decide('cron').reason, 'within-ttl', 'the holder runs on the validity it has');
  await flush(); // what the heartbeat left running in the background has its turn to fail
});

// ---------------------------------------------------------------------------------------
// the protocol version (docs/PROTOCOL.md "Versions"): both listeners — the socket, its fence
// fast path too, and the peer listener — answer in the version they were spoken to and refuse
// one they do not serve with one 400; the CLI's socket client says its version and reads the
// agent's; the heartbeat names this agent's release, and leaves it out for a protocol 1 arbiter.

function ask(
  socketPath: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; protocol: string | undefined; body: { [k: string]: unknown } }> {
  return new Promise((done, fail) => {
    const req = request({ socketPath, path, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () =>
        done({
          status: res.statusCode ?? 0,
          protocol: res.headers['hq-protocol'] as string | undefined,
          body: JSON.parse(text) as { [k: string]: unknown },
        }),
      );
    });
    req.on('error', fail);
    req.end();
  });
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
    t.match(
      String(three.body['message']),
      /protocol 3, newer than hq-agent on mbp speaks hq protocol 1 to 2: upgrade hq-agent on mbp/,
      `${path}: naming both versions and what to upgrade`,
    );
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
  const bad = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    headers: { 'hq-protocol': '0', 'content-type': 'application/json' },
    payload: '{}',
  });
  t.equal(bad.statusCode, 400, 'protocol 0 is refused before authentication');
  t.equal(bad.json().error, 'HQ_ERR_PROTOCOL_VERSION', 'with the code');
});

t.test('the heartbeat names this release, in protocol 2', async (t) => {
  const { agent, arb } = await setup(t);
  await agent.link.heartbeat();
  const hb = arb.heartbeats.at(-1) as { version?: string } | undefined;
  t.equal(hb?.version, VERSION, 'the heartbeat body carries the agent release');
});

t.test('to an arbiter of protocol 1 the heartbeat leaves the protocol 2 field out', async (t) => {
  const { agent, arb } = await setup(t);
  arb.protocol = null;
  await agent.link.heartbeat(); // learns protocol 1 from this answer
  await agent.link.heartbeat();
  const hb = arb.heartbeats.at(-1) as { version?: string; host?: string } | undefined;
  t.equal(hb?.host, 'mbp', 'the heartbeat went');
  t.equal(hb?.version, undefined, 'without the release field');
});

t.test(
  'the heartbeat carries what the peer probes found, and leaves it out for an arbiter of protocol 1',
  async (t) => {
    const dir = shortDir(t);
    const { arb, config: base } = await agentSetup(t, dir);
    // Nothing listens on port 9: the probe finds the path broken.
    const config = { ...base, peers: new Map([['node-b', 'http://127.0.0.1:9']]) };
    const agent = await openAgent({ config, clock: stampClock, log: silent });
    t.teardown(() => stopAgent(agent));
    await agent.link.heartbeat();
    t.equal(
      (arb.heartbeats.at(-1) as { peerPaths?: unknown }).peerPaths,
      undefined,
      'before the first probe: no peerPaths',
    );
    // The probe after the heartbeat, in the background: a refused connection to port 9.
    await eventually('the probe of node-b', () => agent.peers.peerPaths.has('node-b'));
    await agent.link.heartbeat();
    t.match(
      (arb.heartbeats.at(-1) as { peerPaths?: unknown }).peerPaths,
      [{ peer: 'node-b', ok: false, problem: /^http:\/\/127\.0\.0\.1:9 does not answer/, ageSeconds: Number }],
      'then the finding, with its age',
    );
    arb.protocol = null;
    await agent.link.heartbeat(); // learns protocol 1 from this answer
    await agent.link.heartbeat();
    t.equal(
      (arb.heartbeats.at(-1) as { peerPaths?: unknown }).peerPaths,
      undefined,
      'an arbiter of protocol 1 never gets the field',
    );
  },
);

t.test(
  'a run names only pids the agent may signal: not 1, not the agent, not a group its supervisor did not start',
  async (t) => {
    const { socket, agent } = await setup(t);
    await agent.link.heartbeat(); // the holder: the fence says run for generation 1
    const claim = (supervisorPid: number) =>
      socket.inject({
        method: 'POST',
        url: '/v1/runs',
        payload: { role: 'cron', generation: 1, graceSeconds: 1, supervisorPid },
      });
    const report = (id: string, pgid: number) =>
      socket.inject({ method: 'POST', url: `/v1/runs/${id}`, payload: { pgid } });
    for (const [pid, what] of [
      [1, 'init'],
      [process.pid, "the agent's own process"],
    ] as const) {
      const r = await claim(pid);
      t.equal(r.statusCode, 400, `supervisorPid ${what}: 400`);
      t.equal(r.json().error, 'HQ_ERR_BAD_REQUEST', 'a bad request');
    }
    t.same(agent.runs.list(), [], 'nothing registered');
    // A real supervisor (a child of this test) and its child, in a process group of its own.
    const sup = spawn(
      process.execPath,
      [
        '-e',
        "const c=require('child_process').spawn('sleep',['60'],{detached:true,stdio:'ignore'});console.log(c.pid);setInterval(()=>{},1e3)",
      ],
      { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, NODE_OPTIONS: '' } },
    );
    t.teardown(() => sup.kill('SIGKILL'));
    const childPid = Number(
      await new Promise<string>((r) => sup.stdout.once('data', (d: Buffer) => r(d.toString().trim()))),
    );
    t.teardown(() => {
      try {
        process.kill(-childPid, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    const claimed = await claim(sup.pid as number);
    t.equal(claimed.statusCode, 200, `a supervisor that is neither is registered (${claimed.body})`);
    const id = (claimed.json() as { id: string }).id;
    t.equal((await report(id, 1)).statusCode, 400, 'pgid 1 (kill(-1): every process) is refused');
    t.match(
      (await report(id, process.pid)).json(),
      { error: 'HQ_ERR_BAD_REQUEST', message: /this agent's own process/ },
      "the agent's own group is refused",
    );
    const other = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' }); // a group this test leads, not the supervisor
    t.teardown(() => other.kill('SIGKILL'));
    if (process.platform === 'linux') {
      t.match(
        (await report(id, other.pid as number)).json(),
        { error: 'HQ_ERR_BAD_REQUEST', message: /not a process group led by a child of the run's supervisor/ },
        'a group the supervisor did not start is refused (Linux: /proc says whose child it is)',
      );
    } else {
      t.skip('the parent of a group is read from /proc, which only Linux has');
    }
    t.same(
      agent.runs.list().map((r) => r.pgid),
      [null],
      'none of these was taken',
    );
    t.equal((await report(id, childPid)).statusCode, 200, "the supervisor's own child is taken");
    t.same(
      agent.runs.list().map((r) => r.pgid),
      [childPid],
      "as the run's group",
    );
    t.equal((await report('999', childPid)).statusCode, 404, 'an unknown run: 404');
  },
);

t.test("a route's schema is compiled at its first request, by Fastify's compiler, once", async (t) => {
  const before = { ...compiled };
  const { peer, socket, config } = await setup(t, 'node-b');
  await peer.ready();
  // What an idle agent is asked: the fence (fast path and route), status, health, metrics.
  await get(config.socketPath, '/v1/fence?role=cron');
  await get(config.socketPath, '/v1/fence?role=cron&x=1');
  await get(config.socketPath, '/v1/status');
  await peer.inject({ method: 'GET', url: '/v1/health' });
  await peer.inject({ method: 'GET', url: '/metrics' });
  t.same(
    compiled,
    { validators: before.validators + 1, serializers: before.serializers },
    "listening and idle answers compile nothing but the fence route's query (asked once)",
  );
  const auth = { authorization: `Bearer ${PEER_TOKEN}` };
  const bad = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'node-b' },
    headers: auth,
  });
  t.same(
    bad.json(),
    { error: 'HQ_ERR_BAD_REQUEST', message: "body must have required property 'generation'" },
    "the first request is validated: ajv's message",
  );
  t.same(
    compiled,
    { validators: before.validators + 2, serializers: before.serializers + 1 },
    'its body validator and its 400 serializer were compiled then',
  );
  const ok = await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'node-b', generation: 1 },
    headers: auth,
  });
  t.match(ok.json(), { confirmed: false, generation: 0 }, 'a valid body is answered (serialized by its 200 schema)');
  t.equal(compiled.serializers, before.serializers + 2, 'the 200 serializer compiled at its first answer');
  await peer.inject({ method: 'POST', url: '/v1/peer/confirm', payload: { host: 'node-b' }, headers: auth });
  await peer.inject({
    method: 'POST',
    url: '/v1/peer/confirm',
    payload: { host: 'node-b', generation: 1 },
    headers: auth,
  });
  t.same(
    compiled,
    { validators: before.validators + 2, serializers: before.serializers + 2 },
    'and each is kept: compiled once',
  );
  const run = await callAgent(config.socketPath, 'POST', '/v1/runs', 5, { role: 'nope', supervisorPid: process.pid });
  t.match(run, { status: 400 }, 'another route validates as it did');
  t.ok(socket.server.listening, 'the socket still serves');
});

t.test(
  "both listeners answer a wrong method with 405 and Allow, and the router's own refusals in hq's shape",
  async (t) => {
    const { agent } = await setup(t);
    const socket = socketApp(agent, null, { fastPath: false });
    const peer = peerApp(agent, null);
    t.teardown(() => Promise.all([socket.close(), peer.close()]));
    const wrong = await peer.inject({ method: 'DELETE', url: '/v1/health' });
    t.same(
      [wrong.statusCode, wrong.json().error],
      [405, 'HQ_ERR_METHOD_NOT_ALLOWED'],
      'peer: DELETE /v1/health is 405',
    );
    t.equal(wrong.headers['allow'], 'GET, HEAD', 'with the methods it answers');
    const runs = await socket.inject({ method: 'GET', url: '/v1/runs/abc' });
    t.same(
      [runs.statusCode, runs.json().error],
      [405, 'HQ_ERR_METHOD_NOT_ALLOWED'],
      'socket: GET on a run (a path with a parameter) is 405',
    );
    t.equal(runs.headers['allow'], 'DELETE, POST', 'with the methods it answers');
    t.equal((await peer.inject({ method: 'GET', url: '/v1/nothing' })).statusCode, 404, 'an unknown path stays 404');
    for (const [what, url] of [
      ['a path parameter over 100 characters', `/v1/runs/${'a'.repeat(120)}`],
      ['a malformed percent escape', '/v1/runs/%zz'],
    ] as const) {
      const res = await socket.inject({ method: 'DELETE', url });
      t.equal(res.statusCode, 400, `socket, ${what}: 400`);
      t.same(Object.keys(res.json() as object).sort(), ['error', 'message'], `socket, ${what}: only error and message`);
      t.equal(res.json().error, 'HQ_ERR_BAD_REQUEST', `socket, ${what}: the catalog code`);
    }
  },
);

t.test('each answer the agent declares is what it sends, whole', async (t) => {
  const { config, agent, peer } = await setup(t);
  const declared = await import('../../apps/agent/src/schemas/source.js');
  const { default: Value } = await import('typebox/value');
  const hb = await get(config.socketPath, '/v1/heartbeat', 'POST');
  const st = await get(config.socketPath, '/v1/status');
  const answers: ReadonlyArray<readonly [string, object, unknown, unknown]> = [
    ['POST /v1/heartbeat', declared.HeartbeatReport, hb.body, agent.link.lastHeartbeat],
    ['GET /v1/status', declared.AgentStatus, st.body, null],
    ['GET /v1/seen', declared.SeenAnswer, (await get(config.socketPath, '/v1/seen')).body, null],
    [
      'GET /v1/primary',
      declared.Primary,
      (await get(config.socketPath, '/v1/primary')).body,
      primaryAnswer(agent.store.state),
    ],
    [
      'GET /v1/peer',
      declared.PeerInfo,
      (
        await peer.inject({ method: 'GET', url: '/v1/peer', headers: { authorization: `Bearer ${PEER_TOKEN}` } })
      ).json(),
      peerInfo(agent),
    ],
  ];
  for (const [route, schema, body, produced] of answers) {
    t.ok(Value.Check(schema as never, body), `${route} matches its schema`);
    const props = Object.keys((schema as { properties: object }).properties).sort();
    t.same(Object.keys(body as object).sort(), props, `${route} sends every declared field and no other`);
    if (produced !== null)
      t.same(body, JSON.parse(JSON.stringify(produced)), `${route}: the serializer dropped nothing the agent produced`);
  }
  t.equal(st.body['holder'], 'mbp', 'the status is read after the renewal');
});
