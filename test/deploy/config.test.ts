/**
 * deploy/config: the example configs are valid JSON, use only the documented keys of their daemon,
 * describe one consistent three-host fleet on the placeholder tailnet, and satisfy the timing
 * relationships of S6 (lease-core's `checkTiming`) between the arbiter and each agent.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  checkCadence,
  checkLeaseTiming,
  crossTiming,
  describeFailover,
  failover,
  wrongDaemon,
} from '../../packages/lease-core/src/index.js';
import { cronGapSeconds } from '../../packages/runtime/src/schedule.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOMAIN = 'example-tailnet.ts.net';
const CANDIDATES = ['mbp', 'node-b'];
const DEFAULT_ROLES = ['telegram-poller', 'cron', 'release-run', 'git-push', 'ledger-cli'];

/** The keys each daemon reads (docs/REFERENCE.md, configuration). */
const BOTH = [
  'arbiter',
  'standby',
  'safetyMarginSeconds',
  'healthUrls',
  'tailnetDomain',
  'tailscaleBin',
  'probeTimeoutSeconds',
  'listen',
];
const AGENT_KEYS = new Set([
  ...BOTH,
  'hostName',
  'arbiterUrl',
  'heartbeatCron',
  'refreshSeconds',
  'failOpenRoles',
  'roles',
  'requestTimeoutSeconds',
  'stateDir',
  'socketPath',
  'tokenFile',
  'peers',
  'peerTokenFile',
]);
const ARBITER_KEYS = new Set([
  ...BOTH,
  'candidates',
  'ttlSeconds',
  'viewFreshSeconds',
  'promoteAfterChecks',
  'checkCron',
  'dataDir',
  'auth',
]);

type Json = Record<string, unknown>;

function load(name: string): Json {
  return JSON.parse(readFileSync(join(root, 'deploy/config', name), 'utf8')) as Json;
}

const AGENTS = [
  ['agent.node-b.json', 'node-b'],
  ['agent.mbp.json', 'mbp'],
] as const;

t.test('every example config is a JSON object', async (t) => {
  for (const name of ['arbiter.json', ...AGENTS.map(([f]) => f)]) {
    let value: unknown;
    t.doesNotThrow(() => {
      value = load(name);
    }, `${name} is valid JSON`);
    t.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${name} holds a JSON object`);
  }
});

t.test('the arbiter config uses only the arbiter’s keys', async (t) => {
  const c = load('arbiter.json');
  for (const key of Object.keys(c)) t.ok(ARBITER_KEYS.has(key), `arbiter.json: ${key} is an arbiter key`);
  t.same(Object.keys(c.listen as Json).sort(), ['host', 'port'], 'listen has exactly host and port');
  t.same(Object.keys(c.auth as Json), ['openReads'], 'auth has only openReads');
});

t.test('each agent config uses only the agent’s keys', async (t) => {
  for (const [name] of AGENTS) {
    const c = load(name);
    for (const key of Object.keys(c)) t.ok(AGENT_KEYS.has(key), `${name}: ${key} is an agent key`);
    t.same(Object.keys(c.listen as Json).sort(), ['host', 'port'], `${name}: listen has exactly host and port`);
  }
});

t.test('the arbiter config describes cloud-vm judging mbp and node-b on the placeholder tailnet', async (t) => {
  const c = load('arbiter.json');
  t.equal(c.arbiter, 'cloud-vm', 'the arbiter is cloud-vm');
  t.same(c.candidates, CANDIDATES, 'the candidates are mbp then node-b');
  t.equal(c.tailnetDomain, DOMAIN, `the tailnet domain is the placeholder ${DOMAIN}`);
  t.same(
    c.listen,
    { host: '127.0.0.1', port: 8470 },
    'the arbiter listens on loopback port 8470 (tailscale serve exposes it)',
  );
  t.same(
    c.healthUrls,
    Object.fromEntries(CANDIDATES.map((h) => [h, `http://${h}.${DOMAIN}:8471/v1/health`])),
    'every candidate has its pinned health URL on its peer port 8471',
  );
  t.same(c.auth, { openReads: true }, 'reads stay open on the tailnet (the default, spelled out)');
});

t.test('each agent config names its host, the arbiter, its peer and the same health URLs', async (t) => {
  const arbiter = load('arbiter.json');
  for (const [name, host] of AGENTS) {
    const c = load(name);
    const peer = CANDIDATES.filter((h) => h !== host);
    t.equal(c.hostName, host, `${name} is for ${host}`);
    t.equal(c.arbiter, arbiter.arbiter, `${name} names the arbiter of arbiter.json`);
    t.equal(c.arbiterUrl, `http://cloud-vm.${DOMAIN}:8470`, `${name} reaches the arbiter on the tailnet at port 8470`);
    t.equal(c.tailnetDomain, DOMAIN, `${name} uses the placeholder tailnet domain`);
    t.same(
      c.peers,
      Object.fromEntries(peer.map((h) => [h, `http://${h}.${DOMAIN}:8471`])),
      `${name} lists the other candidate as its only peer`,
    );
    t.same(c.healthUrls, arbiter.healthUrls, `${name} pins the same health URLs as the arbiter`);
    t.same(
      c.listen,
      { host: '127.0.0.1', port: 8471 },
      `${name} serves peers on loopback port 8471 (tailscale serve exposes it)`,
    );
    t.same(c.roles, DEFAULT_ROLES, `${name} lists the default roles`);
    t.notOk((c.failOpenRoles as string[]).includes('ledger-cli'), `${name} never makes ledger-cli fail-open`);
    const socket = String(c.socketPath);
    t.ok(
      socket.startsWith('/') && String(c.stateDir).startsWith('/'),
      `${name} spells out absolute state and socket paths`,
    );
  }
});

t.test('each example config holds only the keys its daemon owns, and the pair satisfies S6', async (t) => {
  const a = load('arbiter.json');
  for (const key of Object.keys(a))
    t.equal(wrongDaemon(key, 'hq-arbiter'), null, `arbiter.json: ${key} is the arbiter's`);
  const check = cronGapSeconds(String(a.checkCron));
  t.ok(check.ok, `checkCron "${String(a.checkCron)}" parses`);
  const lease = {
    ttlSeconds: Number(a.ttlSeconds),
    safetyMarginSeconds: Number(a.safetyMarginSeconds),
    checkSeconds: check.ok ? check.seconds : NaN,
    viewFreshSeconds: Number(a.viewFreshSeconds),
    promoteAfterChecks: Number(a.promoteAfterChecks),
    probeTimeoutSeconds: Number(a.probeTimeoutSeconds),
  };
  t.same(checkLeaseTiming(lease), { ok: true }, "arbiter.json passes the arbiter's own relations");
  for (const [name] of AGENTS) {
    const c = load(name);
    for (const key of Object.keys(c)) t.equal(wrongDaemon(key, 'hq-agent'), null, `${name}: ${key} is the agent's`);
    const heartbeat = cronGapSeconds(String(c.heartbeatCron));
    t.ok(heartbeat.ok, `${name}: heartbeatCron "${String(c.heartbeatCron)}" parses`);
    const cadence = {
      heartbeatSeconds: heartbeat.ok ? heartbeat.seconds : NaN,
      refreshSeconds: Number(c.refreshSeconds),
      probeTimeoutSeconds: Number(c.probeTimeoutSeconds),
      requestTimeoutSeconds: Number(c.requestTimeoutSeconds),
    };
    t.same(checkCadence(cadence), { ok: true }, `${name} passes the agent's own relations`);
    t.same(
      crossTiming(String(a.arbiter), lease, String(c.hostName), cadence),
      [],
      `arbiter.json with ${name}: no problem across the sides`,
    );
    t.comment(`${name}: ${describeFailover(failover(lease, cadence.heartbeatSeconds))}`);
  }
});

t.test('no shipped file under deploy/ points users at a document they do not have', async (t) => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const root = join(import.meta.dirname, '../../deploy');
  const files = readdirSync(root, { recursive: true, withFileTypes: true }).filter(
    (e) => e.isFile() && !/\.(png|json)$/.test(e.name),
  );
  t.ok(files.length > 10, `the deploy files are read (${files.length})`);
  for (const f of files) {
    const text = readFileSync(join(f.parentPath, f.name), 'utf8');
    t.notMatch(text, /SPEC( §|\b)/, `${f.name} cites no SPEC section`);
  }
});

t.test('the deploy guide quotes the worst-case failover the tools print for its example settings', async (t) => {
  const { failover, humanSeconds, describeFailover } = await import('../../packages/lease-core/src/index.js');
  const guide = readFileSync(join(root, 'deploy/README.md'), 'utf8');
  const f = failover({ ttlSeconds: 1500, safetyMarginSeconds: 30, checkSeconds: 600, promoteAfterChecks: 2 }, 600);
  t.match(describeFailover(f), /^30 min worst case/, 'the function says 30 min');
  t.ok(
    guide.includes(`the worst-case failover is ${humanSeconds(f.seconds)}:`),
    `the guide says ${humanSeconds(f.seconds)} too`,
  );
  t.notMatch(guide, /about 31 minutes|1860 s/, 'no second figure');
});
