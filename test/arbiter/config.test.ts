import t from 'tap';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS, configPath, validateConfig } from '../../apps/arbiter/src/config.js';
import '../../apps/arbiter/src/config-checker.js';
import { CLI, buildDist, childEnv } from './child.js';
import { FAST, arbiterCommand } from './helper.js';

t.test('the built-in defaults pass validation and resolve every key', async (t) => {
  const r = validateConfig({}, '/srv');
  t.equal(r.ok, true, 'defaults are valid');
  if (!r.ok) return;
  const c = r.config;
  t.equal(c.arbiter, 'cloud-vm', 'arbiter');
  t.same(c.candidates, ['mbp', 'node-b'], 'candidates');
  t.equal(c.ttlSeconds, 1500, 'ttl');
  t.equal(c.safetyMarginSeconds, 30, 'margin');
  t.ok(c.safetyMarginSeconds >= c.ttlSeconds * 0.01, 'the default margin covers 1 % of the ttl');
  t.equal(c.checkSeconds, 600, 'check interval from */10 * * * *');
  t.equal(c.probeTimeoutSeconds, 5, 'probe timeout 5');
  t.same(c.listen, { host: '127.0.0.1', port: 8470 }, 'listen');
  t.equal(c.dataDir, '/srv/var', 'dataDir is resolved against the working directory');
  t.equal(c.auth.openReads, true, 'open reads');
  t.equal(c.tailscaleBin, DEFAULTS.tailscaleBin, 'tailscale');
  t.same(c.events, { maxAgeDays: 90, maxCount: 100_000 }, 'the event log keeps 90 days, at most 100 000 rows');
});

t.test(
  'store: sqlite by default; etcd with its defaults, the advertise URL derived from the arbiter and listen.port',
  async (t) => {
    const d = validateConfig({});
    t.same(d.ok && d.config.store, { kind: 'sqlite' }, 'the default store is SQLite in dataDir');
    const e = validateConfig({
      tailnetDomain: 'tail1.ts.net',
      listen: { port: 9000 },
      store: { kind: 'etcd', endpoints: ['http://10.0.0.1:2379/', 'http://10.0.0.2:2379'] },
    });
    t.same(
      e.ok && e.config.store,
      {
        kind: 'etcd',
        endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
        prefix: '/hq',
        dialTimeoutMs: 2000,
        requestTimeoutMs: 5000,
        electionTtlSeconds: 10,
        advertiseUrl: 'http://cloud-vm.tail1.ts.net:9000',
        compactionIntervalSeconds: 300,
        quotaBackendBytes: 2147483648,
        tls: null,
      },
      'etcd: endpoints as origins, prefix /hq, 2 s dial, 5 s calls, a 10 s election, this arbiter advertised on its tailnet name, compaction every 5 min, the 2 GiB quota',
    );
    const off = validateConfig({
      store: {
        kind: 'etcd',
        endpoints: ['http://e:2379'],
        compactionIntervalSeconds: 0,
        quotaBackendBytes: 8 * 1024 ** 3,
      },
    });
    t.match(
      off.ok && off.config.store,
      { compactionIntervalSeconds: 0, quotaBackendBytes: 8 * 1024 ** 3 },
      'compaction off (etcd compacts itself) and an 8 GiB quota',
    );
    const own = validateConfig({
      store: { kind: 'etcd', endpoints: ['http://e:2379'], prefix: '/site-a/hq', advertiseUrl: 'http://10.0.0.5:8470' },
    });
    t.match(
      own.ok && own.config.store,
      { prefix: '/site-a/hq', advertiseUrl: 'http://10.0.0.5:8470' },
      'a prefix and an advertise URL of its own',
    );
  },
);

t.test('the fast test settings pass, with a probe timeout of half the check interval', async (t) => {
  const r = validateConfig({ ...FAST, tailscaleBin: 'tailscale' });
  t.equal(r.ok, true, 'fast settings are valid');
  if (r.ok) t.equal(r.config.probeTimeoutSeconds, 0.5, 'probe timeout 0.5 s for checks every second');
});

const invalid: Array<[string, Record<string, unknown>, string, RegExp]> = [
  ['an unknown key', { ttl: 5 }, 'ttl', /not a known key/],
  ['an unknown nested key', { listen: { host: '127.0.0.1', prot: 1 } }, 'listen.prot', /not a known key/],
  ['a string ttl', { ttlSeconds: '1500' }, 'ttlSeconds', /number/],
  ['a reserved candidate', { candidates: ['mbp', 'constructor'] }, 'candidates[1]', /host name/],
  ['the arbiter as a candidate', { candidates: ['mbp', 'cloud-vm'] }, 'candidates', /arbiter/],
  ['a duplicate candidate', { candidates: ['mbp', 'mbp'] }, 'candidates', /twice/],
  ['a standby that is not a candidate', { standby: 'other' }, 'standby', /not one of the candidates/],
  ['a bad health URL', { healthUrls: { mbp: 'ftp://x' } }, 'healthUrls.mbp', /http/],
  [
    'a health URL for a reserved name',
    { healthUrls: { prototype: 'http://127.0.0.1/' } },
    'healthUrls.prototype',
    /reserved/,
  ],
  ['a bad cron', { checkCron: 'every minute' }, 'checkCron', /cron/],
  // S6: a key the agent owns is refused naming its owner (the arbiter learns the cadence from heartbeats).
  [
    'a misspelt key, with the nearest one',
    { ttlSecond: 6 },
    'ttlSecond',
    /is not a known key \(did you mean ttlSeconds\?\)/,
  ],
  [
    'an agent key, heartbeatCron',
    { heartbeatCron: '* * * * * *' },
    'heartbeatCron',
    /is a key of hq-agent's config, not of hq-arbiter's/,
  ],
  [
    'an agent key, requestTimeoutSeconds',
    { requestTimeoutSeconds: 1 },
    'requestTimeoutSeconds',
    /is a key of hq-agent's config/,
  ],
  ['an agent key, refreshSeconds', { refreshSeconds: 1 }, 'refreshSeconds', /is a key of hq-agent's config/],
  ['a cron that never fires', { checkCron: '0 0 30 2 *' }, 'checkCron', /cron/],
  [
    'a probe timeout as long as the check interval',
    { ...FAST, probeTimeoutSeconds: 1 },
    'probeTimeoutSeconds',
    /shorter than the check interval/,
  ],
  ['a margin below 1 % of the ttl', { safetyMarginSeconds: 10 }, 'safetyMarginSeconds', /1% clock-rate drift/],
  [
    'a fast ttl with the default margin',
    { ...FAST, safetyMarginSeconds: undefined },
    'safetyMarginSeconds',
    /half of ttlSeconds/,
  ],
  ['a port out of range', { listen: { port: 70000 } }, 'listen.port', /65535/],
  ['an empty hook command', { hooks: { command: [] } }, 'hooks.command', /1/],
  ['an event history of no days', { events: { maxAgeDays: 0 } }, 'events.maxAgeDays', /0/],
  ['an event history of a handful of rows', { events: { maxCount: 5 } }, 'events.maxCount', /100/],
  ['a fractional event count', { events: { maxCount: 1000.5 } }, 'events.maxCount', /integer/],
  ['an unknown events key', { events: { keepDays: 3 } }, 'events.keepDays', /./],
  ['an unknown store kind', { store: { kind: 'postgres' } }, 'store.kind', /./],
  [
    'an etcd key on a sqlite store',
    { store: { kind: 'sqlite', endpoints: ['http://127.0.0.1:2379'] } },
    'store.endpoints',
    /applies to kind "etcd" only/,
  ],
  ['an etcd store without endpoints', { store: { kind: 'etcd' } }, 'store.endpoints', /is required for kind "etcd"/],
  [
    'an etcd endpoint that is not a URL',
    { store: { kind: 'etcd', endpoints: ['etcd-1:2379'] } },
    'store.endpoints[0]',
    /http:\/\/host:port/,
  ],
  [
    'an ftp etcd endpoint',
    { store: { kind: 'etcd', endpoints: ['ftp://etcd-1:2379'] } },
    'store.endpoints[0]',
    /http:\/\/host:port or https:\/\/host:port/,
  ],
  [
    'an etcd endpoint with a path',
    { store: { kind: 'etcd', endpoints: ['http://etcd-1:2379/v3'] } },
    'store.endpoints[0]',
    /bare origin/,
  ],
  [
    'an etcd endpoint named twice',
    { store: { kind: 'etcd', endpoints: ['http://e:2379', 'http://e:2379/'] } },
    'store.endpoints[1]',
    /twice/,
  ],
  [
    'an unknown etcd tls key',
    { store: { kind: 'etcd', endpoints: ['https://e:2379'], tls: { ca: '/etc/ca.pem' } } },
    'store.tls.ca',
    /./,
  ],
  [
    'etcd tls naming no file',
    { store: { kind: 'etcd', endpoints: ['https://e:2379'], tls: {} } },
    'store.tls',
    /names no file/,
  ],
  [
    'an etcd tls file that is not there',
    { store: { kind: 'etcd', endpoints: ['https://e:2379'], tls: { caFile: '/nonexistent/ca.pem' } } },
    'store.tls.caFile',
    /\/nonexistent\/ca\.pem cannot be read \(ENOENT\)/,
  ],
  [
    'an etcd client certificate without its key',
    { store: { kind: 'etcd', endpoints: ['https://e:2379'], tls: { certFile: '/etc/hostname' } } },
    'store.tls.keyFile',
    /go together/,
  ],
  [
    'an http etcd endpoint with tls',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], tls: { caFile: '/etc/hostname' } } },
    'store.endpoints[0]',
    /is http:\/\/ but store\.tls is given/,
  ],
  [
    'an etcd prefix with a trailing slash',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], prefix: '/hq/' } },
    'store.prefix',
    /no trailing slash/,
  ],
  [
    'an etcd prefix without a leading slash',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], prefix: 'hq' } },
    'store.prefix',
    /leading slash/,
  ],
  [
    'an etcd request timeout below the dial timeout',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], dialTimeoutSeconds: 3, requestTimeoutSeconds: 2 } },
    'store.requestTimeoutSeconds',
    /at least store.dialTimeoutSeconds/,
  ],
  [
    'an election TTL a keep-alive call can outlast',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], electionTtlSeconds: 6 } },
    'store.electionTtlSeconds',
    /must exceed store.requestTimeoutSeconds \+ 2/,
  ],
  [
    'a negative compaction interval',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], compactionIntervalSeconds: -1 } },
    'store.compactionIntervalSeconds',
    /0/,
  ],
  [
    'a fractional compaction interval',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], compactionIntervalSeconds: 1.5 } },
    'store.compactionIntervalSeconds',
    /integer/,
  ],
  [
    'a compaction interval on a sqlite store',
    { store: { kind: 'sqlite', compactionIntervalSeconds: 60 } },
    'store.compactionIntervalSeconds',
    /applies to kind "etcd" only/,
  ],
  [
    'a quota below etcd’s smallest useful one',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], quotaBackendBytes: 1000 } },
    'store.quotaBackendBytes',
    /65536/,
  ],
  [
    'an advertise URL with a path',
    { store: { kind: 'etcd', endpoints: ['http://e:2379'], advertiseUrl: 'http://a:8470/x' } },
    'store.advertiseUrl',
    /bare origin/,
  ],
];

for (const [what, input, key, problem] of invalid) {
  t.test(`validation refuses ${what} naming the key`, async (t) => {
    const clean = JSON.parse(JSON.stringify(input)) as Record<string, unknown>;
    const r = validateConfig(clean);
    t.equal(r.ok, false, 'refused');
    if (r.ok) return;
    t.equal(r.key, key, `the key is ${key}`);
    t.match(r.message, problem, 'the problem is explained');
  });
}

t.test('the config path comes from the flag, then the environment, then the home and /etc files', async (t) => {
  t.equal(
    configPath('/a.json', { HQ_ARBITER_CONFIG: '/b.json' }, () => true),
    '/a.json',
    'the flag wins',
  );
  t.equal(
    configPath(undefined, { HQ_ARBITER_CONFIG: '/b.json' }, () => true),
    '/b.json',
    'then the environment',
  );
  t.match(
    configPath(undefined, {}, (p) => p.endsWith('.hq/arbiter.json')),
    /\.hq\/arbiter\.json$/,
    'then ~/.hq/arbiter.json',
  );
  t.equal(
    configPath(undefined, {}, (p) => p === '/etc/hq/arbiter.json'),
    '/etc/hq/arbiter.json',
    'then /etc/hq/arbiter.json',
  );
  t.equal(
    configPath(undefined, {}, () => false),
    null,
    'else the built-in defaults',
  );
});

function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  buildDist();
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv(env), timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

t.test('an invalid config file stops hq-arbiter with one line naming the key and exit 2', async (t) => {
  const dir = t.testdir();
  const cases: Array<[string, string, RegExp]> = [
    ['unknown.json', JSON.stringify({ ttlSecond: 5 }), /ttlSecond is not a known key/],
    [
      'timing.json',
      JSON.stringify({ ...FAST, probeTimeoutSeconds: 2 }),
      /probeTimeoutSeconds \(2\) must be shorter than the check interval of checkCron \(1\)/,
    ],
    ['broken.json', '{"ttlSeconds": ', /not valid JSON/],
  ];
  const runs = cases.flatMap(([name, text, problem], i) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    // Every command reads the config the same way; one command per file keeps the test short.
    const cmd = [['serve'], ['check'], ['token', 'list']][i] as string[];
    // The first through the built bin, the others in-process (the same main).
    return [(i === 0 ? run : arbiterCommand)([...cmd, '--config', path]).then((r) => ({ r, name, cmd, problem }))];
  });
  for (const { r, name, cmd, problem } of await Promise.all(runs)) {
    t.equal(r.code, 2, `${name} ${cmd.join(' ')}: exit 2`);
    t.equal(r.stderr.trimEnd().split('\n').length, 1, `${name} ${cmd.join(' ')}: one line on stderr`);
    t.match(r.stderr, problem, `${name} ${cmd.join(' ')}: names the key and the problem`);
    t.equal(r.stdout, '', `${name} ${cmd.join(' ')}: nothing on stdout`);
  }
  const [missing, env] = await Promise.all([
    arbiterCommand(['serve', '--config', join(dir, 'absent.json')]),
    run(['token', 'list'], { HQ_ARBITER_CONFIG: join(dir, 'unknown.json') }),
  ]);
  t.equal(missing.code, 2, 'a missing file is exit 2');
  t.equal(env.code, 2, '$HQ_ARBITER_CONFIG is read');
});

t.test(
  "an arbiter given only its own keys at the fast settings starts (the issue: it demanded the agents' heartbeatCron)",
  async (t) => {
    const r = validateConfig({
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      checkCron: '*/1 * * * * *',
      probeTimeoutSeconds: 0.5,
    });
    t.equal(r.ok, true, 'accepted');
    t.equal(r.ok && r.config.checkSeconds, 1, 'checks every second');
  },
);

t.test('any valid node-cron check schedule is accepted, a yearly one too, with its real gap', async (t) => {
  const r = validateConfig({ checkCron: '0 0 1 1 *' });
  t.equal(r.ok, true, 'once a year is legal');
  t.equal(r.ok && r.config.checkSeconds, 366 * 86_400, 'its largest gap is a leap year');
});

t.test(
  "a tailnet domain with capitals, as the guide's placeholder was typed, says to write it in lower case",
  async (t) => {
    const r = validateConfig({ tailnetDomain: 'YOUR-TAILNET.ts.net' });
    t.match(
      r,
      { ok: false, key: 'tailnetDomain', message: /lower case \("your-tailnet\.ts\.net"\)/ },
      'the lower-case spelling is offered',
    );
    t.match(
      validateConfig({ tailnetDomain: 'bad_domain' }),
      { ok: false, message: /lower-case letters, digits, dots and dashes/ },
      'another bad domain is described',
    );
    t.match(validateConfig({ tailnetDomain: 'your-tailnet.ts.net' }), { ok: true }, 'the lower-case one is accepted');
  },
);
