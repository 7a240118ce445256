/**
 * `hq port run` and `hq fleet` as real processes against the real registry routes on
 * 127.0.0.1: HQ_PORT, exit codes, release, lease loss (refusal and deadline) stopping CMD with
 * TERM (→ KILL) and exit 75, and a busy port being skipped.
 */
import t, { type Test } from 'tap';
import type { Bands } from '../../apps/arbiter/src/registry/decide.js';
import type { FleetRow } from '../../apps/agent/src/cli/fleet.js';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { run, shortDir, sleep, writeConfig } from '../agent/helpers.js';
import { helpText } from '../../apps/agent/src/cli/args.js';
import { PORT_RUN_SPEC, portCommand } from '../../apps/agent/src/cli/port.js';
import { FLEET_SPEC, fleetTable } from '../../apps/agent/src/cli/fleet.js';
import { registryHarness, machineBody, type RegistryHarness } from './helper.js';

// Source through tsx: no build step (the agent's dist may lag behind files others are editing).
const FIXTURE = resolve(import.meta.dirname, 'fixtures/hq.ts');
const node = process.execPath;

async function setup(t: Test, bands?: Bands) {
  const h = await registryHarness(t, bands === undefined ? {} : { bands });
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
  const dir = shortDir(t);
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${h.tokens.mbp}\n`);
  chmodSync(tokenFile, 0o600);
  const config = writeConfig(dir, { arbiterUrl: url, tokenFile });
  return { h, url, dir, config };
}

function hq(args: readonly string[], opts: Parameters<typeof run>[1] = {}) {
  return run(['--import', 'tsx', FIXTURE, ...args], {
    timeoutMs: 40_000,
    ...opts,
    env: { HQ_PORT_PROBE_HOST: '127.0.0.1', ...(opts.env ?? {}) },
  });
}

async function leases(h: RegistryHarness): Promise<number[]> {
  const r = await h.req('GET', '/v1/leases/port', { token: null });
  return (JSON.parse(r.body) as { leases: { port: number }[] }).leases.map((l) => l.port);
}

async function until(cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(50);
  }
}

t.test('CMD gets HQ_PORT, its exit code is passed through and the lease is released', async (t) => {
  const { h, dir, config } = await setup(t);
  const out = join(dir, 'env.json');
  const code = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({port: process.env.HQ_PORT, id: process.env.HQ_PORT_LEASE_ID})); process.exit(7)`;
  const r = await hq(['port', 'run', '--purpose', 'web', '--config', config, '--', node, '-e', code]);
  t.equal(r.code, 7, `the command exits with CMD's code (stderr: ${r.stderr})`);
  const env = JSON.parse(readFileSync(out, 'utf8')) as { port: string; id: string };
  t.equal(env.port, '31450', 'CMD saw HQ_PORT, the lowest test port');
  t.match(env.id, /^[0-9a-f]{32}$/, 'and HQ_PORT_LEASE_ID');
  t.same(await leases(h), [], 'the lease was released when CMD ended');
  t.match(r.stderr, /"event":"port-released"/, 'the release is logged');
});

t.test('losing the lease (the arbiter answers 404) sends TERM to CMD and exits 75', async (t) => {
  const { h, dir, config } = await setup(t);
  const started = join(dir, 'started');
  const marker = join(dir, 'term');
  const code = `process.on('SIGTERM', () => { require('fs').writeFileSync(${JSON.stringify(marker)}, 'TERM'); process.exit(0); });
    require('fs').writeFileSync(${JSON.stringify(started)}, process.env.HQ_PORT); setInterval(() => {}, 1000);`;
  const p = hq(['port', 'run', '--purpose', 'web', '--ttl', '3', '--config', config, '--', node, '-e', code]);
  await until(() => existsSync(started));
  await sleep(1500); // at least one renewal succeeds first
  t.same(await leases(h), [31450], 'the lease is live while CMD runs');
  h.clock.advance(3600); // the arbiter's clock moves past the TTL: the next renewal is 404
  const r = await p;
  t.equal(r.code, 75, 'the command exits 75 when the lease is lost');
  t.equal(readFileSync(marker, 'utf8'), 'TERM', 'CMD got SIGTERM');
  t.match(r.stderr, /"event":"lost".*"reason":"refused","status":404/, 'the loss is logged with the 404');
  t.ok(r.ms < 20_000, 'it stopped promptly');
});

t.test(
  'an unreachable arbiter loses the lease at the deadline; a CMD ignoring TERM is killed after the grace',
  async (t) => {
    const { h, dir, config } = await setup(t);
    const started = join(dir, 'started');
    const code = `process.on('SIGTERM', () => {}); require('fs').writeFileSync(${JSON.stringify(started)}, 'x'); setInterval(() => {}, 1000);`;
    const p = hq([
      'port',
      'run',
      '--purpose',
      'web',
      '--ttl',
      '3',
      '--grace',
      '0.5',
      '--config',
      config,
      '--',
      node,
      '-e',
      code,
    ]);
    await until(() => existsSync(started));
    const cut = Date.now();
    h.app.server.closeAllConnections();
    await h.app.close();
    const r = await p;
    t.equal(r.code, 75, 'the command exits 75');
    t.match(r.stderr, /"event":"lost".*"reason":"deadline"/, 'the loss is the deadline');
    t.match(r.stderr, /"event":"killed"/, 'CMD ignored TERM and was killed');
    t.ok(
      Date.now() - cut < 8000,
      'soon after the deadline (TTL 3 s − margin 1 s) plus the grace (0.5 s), not minutes later',
    );
  },
);

t.test('a port that cannot be bound here is excluded and the next one is used', async (t) => {
  const { h, dir, config } = await setup(t);
  const busy = createServer();
  await new Promise<void>((r) => busy.listen({ port: 31450, host: '127.0.0.1' }, () => r()));
  t.teardown(() => busy.close());
  const out = join(dir, 'port');
  const r = await hq([
    'port',
    'run',
    '--purpose',
    'web',
    '--config',
    config,
    '--',
    node,
    '-e',
    `require('fs').writeFileSync(${JSON.stringify(out)}, process.env.HQ_PORT)`,
  ]);
  t.equal(r.code, 0, `the command succeeds (stderr: ${r.stderr})`);
  t.equal(readFileSync(out, 'utf8'), '31451', 'CMD got the next port');
  t.match(r.stderr, /"event":"port-busy","port":31450/, 'the busy port is logged');
  t.same(await leases(h), [], 'both leases are released (the busy one at once)');
});

t.test('a full band exits 1 and an unreachable arbiter exits 3', async (t) => {
  const { h, config } = await setup(t, {
    reserved: [],
    test: { from: 31450, to: 31450 },
    offline: { from: 31500, to: 31509 },
  });
  const taken = await h.req('POST', '/v1/leases/port', { body: { machine: 'mbp', purpose: 'x', ttlMs: 60_000 } });
  t.equal(taken.statusCode, 200, 'the only port is taken');
  const full = await hq(['port', 'run', '--purpose', 'web', '--config', config, '--', node, '-e', '']);
  t.equal(full.code, 1, 'a full band exits 1');
  t.match(full.stderr, /HQ_ERR_BAND_FULL/, 'and says why');
  const dir = shortDir(t);
  const deadConfig = writeConfig(dir, { arbiterUrl: 'http://127.0.0.1:9', tokenFile: join(dir, 'token') });
  writeFileSync(join(dir, 'token'), 'f'.repeat(64));
  chmodSync(join(dir, 'token'), 0o600);
  const dead = await hq(['port', 'run', '--purpose', 'web', '--config', deadConfig, '--', node, '-e', '']);
  t.equal(dead.code, 3, 'an unreachable arbiter exits 3');
});

t.test('usage errors exit 2 and the help names every flag (in-process, no arbiter needed)', async (t) => {
  t.equal(await portCommand(['--purpose', 'Bad Purpose', '--', node, '-e', '']), 2, 'a bad purpose is a usage error');
  t.equal(await portCommand(['--purpose', 'web']), 2, 'a missing command is a usage error');
  t.equal(await portCommand(['--purpose', 'web', '--ttl', '1', '--', node]), 2, 'a TTL under 3 s is a usage error');
  // Help is wrapped to 80 columns: read it as one line.
  const help = helpText(PORT_RUN_SPEC).replace(/\s+/g, ' ');
  t.match(help, /Usage: hq port run \[--config PATH\] --purpose P \[--ttl S\] \[--grace G\] -- CMD…/, 'the usage line');
  t.match(help, /Exit codes: .*75 when the lease was lost/, 'the exit codes are documented');
  t.match(helpText(FLEET_SPEC), /Usage: hq fleet \[--config PATH\] \[--json\]/, 'hq fleet has its usage too');
});

t.test('hq fleet lists live machines with load, heartbeat age and lease role', async (t) => {
  const { h, config } = await setup(t);
  await h.req('POST', '/v1/resources/register', {
    body: machineBody('mbp', { attrs: { loadAvg: [1.5, 1, 1], cpuCount: 8, duties: ['cron'] } }),
  });
  await h.req('POST', '/v1/resources/register', {
    body: machineBody('node-b', { ttlMs: 5000 }),
    token: h.tokens.nodeb,
  });
  h.clock.advance(12);
  const r = await hq(['fleet', '--json', '--config', config]);
  t.equal(r.code, 0, `fleet exits 0 (stderr: ${r.stderr})`);
  const body = JSON.parse(r.stdout) as { machines: FleetRow[] };
  t.same(
    body.machines.map((m) => m.machine),
    ['mbp'],
    'the expired node-b is not listed',
  );
  t.match(
    body.machines[0],
    { load1: 1.5, role: 'standby', heartbeatAgeSeconds: 12, duties: ['cron'] },
    'mbp with its load, heartbeat age and role',
  );
  const text = fleetTable(body.machines);
  t.match(text, /^MACHINE\s+ROLE\s+LOAD1/, 'the text form has a header');
  t.match(text, /mbp\s+standby\s+1\.50\s+8\s/, 'and a row per machine');
});
