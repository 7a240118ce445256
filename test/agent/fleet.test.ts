/**
 * `hq fleet` takes the holder from `GET /v1/lease`, not from the registry: right
 * after a failover the registry's records still carry the duties the old holder last reported
 * (for up to its 30 s registration interval), while the lease record names the new holder at
 * once. A fake arbiter answers exactly that; `hq fleet` runs as a real process.
 */
import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { chmodSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { FleetRow } from '../../apps/agent/src/cli/fleet.js';
import { run, shortDir, writeConfig } from './helpers.js';

const FIXTURE = resolve(import.meta.dirname, '../registry/fixtures/hq.ts');
const NOW = 1_750_000_000_000;

function machine(name: string, duties: string[]) {
  return {
    id: name,
    name,
    kind: 'machine',
    machine: name,
    attrs: { loadAvg: [0.5, 0.5, 0.5], cpuCount: 4, duties },
    renewedAt: NOW - 20_000,
    expiresAt: NOW + 100_000,
  };
}

async function fakeArbiter(t: Tap.Test, lease: () => { status: number; body: unknown }) {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url}`);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    // After a failover mbp -> node-b: mbp still reports the holder's duties, node-b none yet.
    if (req.url?.startsWith('/v1/resources'))
      send(200, { resources: [machine('mbp', ['ledger-cli', 'cron']), machine('node-b', [])], now: NOW });
    else if (req.url === '/v1/lease') {
      const l = lease();
      send(l.status, l.body);
    } else send(404, { error: 'HQ_ERR_NOT_FOUND', message: 'no such resource' });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const dir = shortDir(t);
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${'a'.repeat(64)}\n`);
  chmodSync(tokenFile, 0o600);
  const config = writeConfig(dir, {
    arbiterUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    tokenFile,
    peers: { 'node-b': 'http://127.0.0.1:9' },
  });
  return { config, seen };
}

const hq = (args: string[]) => run(['--import', 'tsx', FIXTURE, ...args], { timeoutMs: 40_000 });

t.test('the holder column follows the lease record, not the duties the old holder last reported', async (t) => {
  const { config, seen } = await fakeArbiter(t, () => ({
    status: 200,
    body: { name: 'hq', holder: 'node-b', generation: 8, expired: false },
  }));
  const r = await hq(['fleet', '--json', '--config', config]);
  t.equal(r.code, 0, `fleet exits 0 (stderr: ${r.stderr})`);
  t.ok(seen.includes('GET /v1/lease'), 'hq fleet read GET /v1/lease');
  const body = JSON.parse(r.stdout) as { machines: FleetRow[]; holder: string | null; generation: number | null };
  const role = (m: string) => body.machines.find((x) => x.machine === m)?.role;
  t.equal(role('node-b'), 'holder', 'node-b, which the lease names, is the holder');
  t.equal(role('mbp'), 'standby', "mbp is a standby although its reported duties still are the holder's");
  t.same(
    body.machines.find((x) => x.machine === 'mbp')?.duties,
    ['ledger-cli', 'cron'],
    'the duties column still shows what mbp reported',
  );
  t.equal(body.holder, 'node-b', "the JSON holder is the lease record's");
  t.equal(body.generation, 8, 'with its generation');
  const text = await hq(['fleet', '--config', config]);
  t.match(text.stdout, /node-b\s+holder\s/, 'the table says node-b holds it');
  t.match(text.stdout, /mbp\s+standby\s/, 'and mbp is a standby');
});

t.test('an unreadable lease shows ? in the role column and says why on one line', async (t) => {
  const { config } = await fakeArbiter(t, () => ({
    status: 401,
    body: { error: 'HQ_ERR_UNAUTHORIZED', message: 'a valid bearer token is required' },
  }));
  const r = await hq(['fleet', '--json', '--config', config]);
  t.equal(r.code, 0, 'the registry listing still succeeds');
  const body = JSON.parse(r.stdout) as { machines: FleetRow[] };
  t.same(
    body.machines.map((m) => m.role),
    ['?', '?'],
    'no machine is called holder or standby without the lease record',
  );
  t.match(
    r.stderr,
    /^hq: fleet: reading the lease: refused \(HTTP 401, HQ_ERR_UNAUTHORIZED: a valid bearer token is required\) — the ROLE column shows \?/m,
    'stderr names the problem once',
  );
  t.equal(r.stderr.trim().split('\n').length, 1, 'on one line');
});
