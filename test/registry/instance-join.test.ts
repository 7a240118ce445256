/**
 * The agent registers its instance resource (kind "instance", with the endpoint
 * others reach it at) beside its machine, and `hq primary --write-join FILE` writes the join
 * file (bare-origin URLs, the query token falling back to the member token, 0600, atomic).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer as httpServer } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { readJoinFile } from '../../apps/agent/src/primary.js';
import { AGENT_CLI, hq, record, shortDir, sleep, writeConfig } from '../agent/helpers.js';

const MEMBER = 'c'.repeat(64);
const QUERY = 'd'.repeat(64);

function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => done(port));
    });
  });
}

/** An arbiter that renews for mbp and takes every registry call, keeping the bodies. */
async function arbiter(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const registered: { [k: string]: unknown }[] = [];
  const renewed: string[] = [];
  const server = httpServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      const lease = record({ holder: 'mbp', generation: 1 });
      if (req.url === '/v1/heartbeat')
        return res.end(JSON.stringify({ outcome: 'renewed', reason: null, lease, hold: null }));
      if (req.url === '/v1/lease') return res.end(JSON.stringify(lease));
      if (req.url === '/v1/resources/register') {
        registered.push(JSON.parse(body) as { [k: string]: unknown });
        return res.end('{}');
      }
      const m = /^\/v1\/resources\/([^/]+)\/heartbeat$/.exec(req.url ?? '');
      if (m !== null) {
        renewed.push(m[1] as string);
        return res.end('{}');
      }
      res.statusCode = 404;
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const a = server.address();
  return { url: `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`, registered, renewed };
}

async function agentUp(t: Parameters<Parameters<typeof t.test>[1]>[0], extra: { [k: string]: unknown } = {}) {
  const dir = shortDir(t);
  const arb = await arbiter(t);
  const state = join(dir, 'state');
  mkdirSync(state, { mode: 0o700 });
  writeFileSync(join(state, 'token'), `${MEMBER}\n`, { mode: 0o600 });
  chmodSync(join(state, 'token'), 0o600);
  const port = await freePort();
  const config = writeConfig(dir, {
    arbiterUrl: arb.url,
    heartbeatCron: '*/10 * * * *',
    listen: { host: '127.0.0.1', port },
    advertiseUrl: 'http://mbp.example.ts.net:8471',
    ...extra,
  });
  const child = spawn(process.execPath, [AGENT_CLI, '--config', config], {
    env: { ...process.env, HQ_CONFIG: '', NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        if (child.exitCode !== null) return r();
        child.once('close', () => r());
        child.kill('SIGTERM');
      }),
  );
  const end = Date.now() + 10_000;
  while (!out.includes('"agent-started"') && Date.now() < end) await sleep(25);
  return { dir, state, config, arb, port };
}

t.test('the agent registers its instance beside its machine, with the endpoint others reach it at', async (t) => {
  const { arb } = await agentUp(t);
  const end = Date.now() + 10_000;
  while (arb.registered.length < 2 && Date.now() < end) await sleep(25);
  const machine = arb.registered.find((b) => b['kind'] === 'machine');
  const instance = arb.registered.find((b) => b['kind'] === 'instance');
  t.match(machine, { id: 'mbp', machine: 'mbp' }, 'the machine is registered as before');
  t.match(
    instance,
    {
      id: 'mbp-agent',
      name: 'mbp-agent',
      kind: 'instance',
      machine: 'mbp',
      attrs: { service: 'hq-agent', endpoint: 'http://mbp.example.ts.net:8471' },
    },
    'the instance carries its endpoint',
  );
  t.type(instance?.['ttlMs'], 'number', 'with a TTL, renewed like the machine');
});

t.test(
  'hq primary --write-join writes the holder, its URL and the token to use, 0600, query token first',
  async (t) => {
    const { dir, state, config, arb } = await agentUp(t);
    const file = join(dir, 'joined', 'join.json');
    const r = await hq(['primary', '--config', config, '--write-join', file]);
    t.equal(r.code, 0, `hq primary --write-join exits 0 (${r.stderr})`);
    t.equal(r.stdout, 'mbp (generation 1, from local:mbp)\n', 'its answer is unchanged');
    t.equal(r.stderr, `hq: primary: join file ${file} written (member token)\n`, 'and it says where the file went');
    t.equal(statSync(file).mode & 0o777, 0o600, 'the file is 0600');
    t.equal(statSync(join(dir, 'joined')).mode & 0o777, 0o700, 'a missing directory is created 0700');
    t.same(
      JSON.parse(readFileSync(file, 'utf8')),
      {
        url: 'http://mbp.example.ts.net:8471',
        host: 'mbp',
        generation: 1,
        arbiterUrl: arb.url,
        token: MEMBER,
        tokenScope: 'member',
      },
      'without a query token the member token is written, for the arbiter',
    );
    const back = await readJoinFile(file);
    t.match(
      back,
      {
        ok: true,
        url: 'http://mbp.example.ts.net:8471',
        token: null,
        arbiterUrl: arb.url,
        arbiterToken: MEMBER,
        generation: 1,
      },
      "the reader never hands the arbiter's token out with the primary's URL",
    );

    writeFileSync(join(state, 'query-token'), `${QUERY}\n`, { mode: 0o600 });
    chmodSync(join(state, 'query-token'), 0o600);
    const q = await hq(['primary', '--config', config, '--write-join', file, '--json']);
    t.equal(q.code, 0, 'with a query token it exits 0');
    t.match(
      JSON.parse(readFileSync(file, 'utf8')),
      { token: QUERY, tokenScope: 'query' },
      '{stateDir}/query-token wins over the member token',
    );

    chmodSync(join(state, 'query-token'), 0o644);
    const bad = await hq(['primary', '--config', config, '--write-join', file]);
    t.equal(bad.code, 2, 'an insecure query token exits 2');
    t.match(
      bad.stderr,
      /^hq primary: .*--write-join: token file .*query-token .*\(fix or remove it to fall back to the member token\)\n$/,
      'one line naming the file and the fix',
    );
    t.match(JSON.parse(readFileSync(file, 'utf8')), { token: QUERY }, 'and the old file is left as it was');
  },
);

t.test('a URL that is not a bare origin is refused with one line', async (t) => {
  const dir = shortDir(t);
  for (const [name, url, message] of [
    [
      'credentials',
      'http://u:p@mbp.example.ts.net:8471',
      /advertiseUrl: "http:\/\/u:p@mbp.example.ts.net:8471" must not carry credentials/,
    ],
    [
      'a path',
      'http://mbp.example.ts.net:8471/hq',
      /advertiseUrl: "http:\/\/mbp.example.ts.net:8471\/hq" must be a bare origin without a path \(use http:\/\/mbp.example.ts.net:8471\)/,
    ],
  ] as const) {
    const config = writeConfig(join(dir), { advertiseUrl: url });
    const r = await hq(['primary', '--config', config, '--write-join', join(dir, 'j.json')]);
    t.equal(r.code, 2, `advertiseUrl with ${name}: exit 2`);
    t.match(r.stderr, message, `advertiseUrl with ${name}: names the key and the fix`);
    t.equal(r.stderr.trim().split('\n').length, 1, `advertiseUrl with ${name}: one line, no stack`);
  }
});
