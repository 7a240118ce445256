/**
 * The `hq` and `hq-agent` command lines: exit codes, one-line errors without stack traces,
 * full-sentence help with defaults, and the light import graph of `hq fence check`.
 */
import t from 'tap';
import { chmodSync, readFileSync, statSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { COMMANDS } from '../../apps/agent/src/cli/main.js';
import { helpText } from '../../apps/agent/src/cli/args.js';
import { AGENT_SPEC } from '../../apps/agent/src/daemon-spec.js';
import type { AddressInfo } from 'node:net';
import {
  AGENT_CLI,
  FakeAgent,
  FakeArbiter,
  ROOT,
  hq,
  record,
  run,
  runUntil,
  shortDir,
  sleep,
  writeConfig,
} from './helpers.js';

function oneLine(t: Parameters<Parameters<typeof t.test>[1]>[0], stderr: string, what: string): void {
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, 1, `${what}: one line on stderr (${stderr.trim()})`);
  t.notMatch(stderr, /\n\s+at /, `${what}: no stack trace`);
}

t.test('every flag of every command has full-sentence help that states its default', async (t) => {
  for (const c of [...COMMANDS, { spec: AGENT_SPEC }]) {
    const text = helpText(c.spec);
    t.match(text, /^Usage: hq /, `hq ${c.spec.name} --help starts with a usage line`);
    t.match(text, /Exit codes: /, `hq ${c.spec.name} --help documents its exit codes`);
    for (const f of c.spec.flags) {
      t.match(f.help, /^[A-Z].*\.$/, `--${f.name} of hq ${c.spec.name} is a full sentence`);
      t.match(f.help, /Default|Required|required/, `--${f.name} of hq ${c.spec.name} states its default`);
    }
  }
});

t.test('usage errors exit 2 with one line', async (t) => {
  const cases: [string, string[]][] = [
    ['no command', []],
    ['an unknown command', ['frobnicate']],
    ['an unknown subcommand', ['lease', 'steal']],
    ['a missing --role', ['fence', 'check']],
    ['an unknown flag', ['fence', 'check', '--role', 'cron', '--bogus']],
    ['a flag without its value', ['fence', 'check', '--role']],
    ['a bad number', ['fence', 'run', '--role', 'cron', '--grace', 'soon', '--', 'true']],
    ['fence run without a command', ['fence', 'run', '--role', 'cron']],
    ['maintenance without on|off', ['maintenance', 'maybe']],
    ['an invalid host name', ['host', 'set', 'Not_A_Host']],
  ];
  for (const [name, args] of cases) {
    const r = await hq(args);
    t.equal(r.code, 2, `${name} exits 2`);
    if (args.length > 0) oneLine(t, r.stderr, name);
  }
  const help = await hq(['fence', 'run', '--help']);
  t.equal(help.code, 0, '--help exits 0');
  t.match(help.stdout, /--grace G\s+Seconds between SIGTERM and SIGKILL/, '--help describes the flags');
});

t.test('usage errors name the command once and suggest the nearest flag or command', async (t) => {
  const cases: [string, string[], string][] = [
    ['a bad positional', ['maintenance', 'maybe'], 'hq maintenance: on|off must be one of on, off (got "maybe")\n'],
    [
      'a typo of a flag',
      ['fence', 'check', '--rol', 'cron'],
      'hq fence check: unknown flag --rol (did you mean --role?)\n',
    ],
    [
      'a prefix of a flag',
      ['lease', 'release', '--handover', 'node-b'],
      'hq lease release: unknown flag --handover (did you mean --handover-to?)\n',
    ],
    ['an unrelated flag', ['seen', '--colour'], 'hq seen: unknown flag --colour (see --help)\n'],
    ['a typo of a command', ['lese', 'status'], 'hq: unknown command "lese" (did you mean lease?)\n'],
    [
      'a typo of a subcommand',
      ['lease', 'stauts'],
      'hq: unknown command "lease stauts" (did you mean lease status?)\n',
    ],
    ['a missing required flag', ['failover'], 'hq failover: --to is required (see --help)\n'],
    ['a typo of a doctor flag', ['doctor', '--jsn'], 'hq doctor: unknown flag --jsn (did you mean --json?)\n'],
    [
      'a typo of a standby command',
      ['standby', 'snapshto'],
      'hq: unknown command "standby snapshto" (did you mean standby snapshot?)\n',
    ],
    ['an unknown standby flag', ['standby', 'role', '--bogus'], 'hq standby role: unknown flag --bogus (see --help)\n'],
  ];
  for (const [name, args, line] of cases) {
    const r = await hq(args);
    t.equal(r.code, 2, `${name} exits 2`);
    t.equal(r.stderr, line, `${name}: ${line.trim()}`);
    t.notMatch(r.stderr, /hq: hq |hq [a-z ]+: hq /, `${name}: no doubled prefix`);
  }
  const daemon = await run([AGENT_CLI, '--confg', 'x.json']);
  t.equal(daemon.code, 2, 'hq-agent with a mistyped flag exits 2');
  t.equal(daemon.stderr, 'hq-agent: unknown flag --confg (did you mean --config?)\n', 'and names the nearest flag');
  const word = await run([AGENT_CLI, 'srve']);
  t.equal(word.code, 2, 'hq-agent with an unknown word exits 2');
  t.equal(word.stderr, 'hq-agent: unknown argument "srve" (see --help)\n', 'and names it');
  const bare = await run([AGENT_CLI, '--config']);
  t.equal(bare.code, 2, 'hq-agent --config without its path exits 2');
  t.equal(bare.stderr, 'hq-agent: --config needs a value\n', 'in one line');
});

t.test(
  'with no agent config at all, the read-only commands ask the arbiter at its own default and say so',
  async (t) => {
    if (existsSync('/etc/hq/agent.json')) {
      t.skip('/etc/hq/agent.json exists on this machine, so there is a config');
      return;
    }
    const home = shortDir(t);
    const line =
      'hq: no agent config (--config, $HQ_CONFIG, ~/.hq/agent.json, /etc/hq/agent.json): asking the arbiter at its default http://127.0.0.1:8470\n';
    for (const args of [['lease', 'status'], ['events']]) {
      const r = await hq(args, { env: { HOME: home, HQ_CONFIG: '' } });
      // Whatever listens on 8470 here (nothing, or an arbiter): never the "not set" config error.
      t.ok(r.code === 0 || r.code === 3, `hq ${args.join(' ')} exits 0 or 3, not 2 (${r.code}: ${r.stderr.trim()})`);
      t.equal(`${r.stderr.split('\n')[0]}\n`, line, `hq ${args.join(' ')}: the first line names the URL and why`);
      t.notMatch(r.stderr, /arbiterUrl: not set/, `hq ${args.join(' ')}: no config error`);
      if (r.code === 3)
        t.match(r.stderr, /127\.0\.0\.1:8470|unreachable/, 'an unreachable default is reported as unreachable');
    }
    const cfg = join(home, 'agent.json');
    writeFileSync(cfg, JSON.stringify({ hostName: 'mbp', tailscaleBin: '' }));
    const named = await hq(['lease', 'status', '--config', cfg], { env: { HOME: home, HQ_CONFIG: '' } });
    t.equal(named.code, 2, 'a config that exists without an arbiterUrl is still a config error');
    t.match(named.stderr, /arbiterUrl: not set/, 'naming the key');
  },
);

t.test('config errors exit 2 with one line naming the key, for hq and hq-agent', async (t) => {
  const dir = shortDir(t);
  const cases: [string, { [k: string]: unknown }, RegExp][] = [
    ['an unknown key', { colour: 'blue' }, /colour: is not a known key/],
    [
      'a misspelt key, with the nearest one',
      { heartbeatCorn: '* * * * *' },
      /heartbeatCorn: is not a known key \(did you mean heartbeatCron\?\)/,
    ],
    ['a nested unknown key', { listen: { host: '127.0.0.1', prot: 1 } }, /listen\.prot: is not a known key/],
    ['a string where a number belongs', { refreshSeconds: '6' }, /refreshSeconds/],
    [
      'ledger-cli as fail-open',
      { failOpenRoles: ['ledger-cli'] },
      /failOpenRoles: "ledger-cli" can never be fail-open/,
    ],
    // S6: the lease timing and the candidates are the arbiter's; an agent refuses them naming the owner.
    ["the arbiter's ttlSeconds", { ttlSeconds: 6 }, /ttlSeconds: is a key of hq-arbiter's config, not of hq-agent's/],
    [
      "the arbiter's safetyMarginSeconds",
      { safetyMarginSeconds: 1 },
      /safetyMarginSeconds: is a key of hq-arbiter's config/,
    ],
    ["the arbiter's candidates", { candidates: ['mbp', 'node-b'] }, /candidates: is a key of hq-arbiter's config/],
    [
      'a probe as long as its own heartbeat',
      { heartbeatCron: '*/2 * * * * *', probeTimeoutSeconds: 2 },
      /probeTimeoutSeconds \(2\) must be shorter than the heartbeat interval of heartbeatCron \(2\)/,
    ],
    ['a reserved host name in peers', { peers: { constructor: 'http://127.0.0.1:1' } }, /peers\.constructor/],
    // The host rule is the protocol's on every side: the reserved names are no host here either.
    ['a reserved hostName', { hostName: 'constructor' }, /^\S+: hostName: "constructor" is a reserved name$/],
    ['a reserved arbiter', { arbiter: 'prototype' }, /^\S+: arbiter: "prototype" is a reserved name$/],
    [
      'a hostName that is no host',
      { hostName: 'Node B' },
      /^\S+: hostName: must match \^\[a-z0-9\]\[a-z0-9-\]\{0,31\}\$$/,
    ],
    ['a cron that never fires', { heartbeatCron: '0 0 30 2 *' }, /heartbeatCron/],
    // The member token is sent to arbiterUrl: a bare origin only.
    [
      'credentials in arbiterUrl',
      { arbiterUrl: 'http://user:pass@127.0.0.1:8470' },
      /arbiterUrl: .* must not carry credentials/,
    ],
    [
      'a path in arbiterUrl',
      { arbiterUrl: 'http://127.0.0.1:8470/hq' },
      /arbiterUrl: .* must be a bare origin without a path \(use http:\/\/127\.0\.0\.1:8470\)/,
    ],
  ];
  const { loadConfig } = await import('../../apps/agent/src/config.js');
  await import('../../apps/agent/src/config-checker.js');
  for (const [name, extra, pattern] of cases) {
    const config = writeConfig(join(dir), extra);
    t.throws(() => loadConfig(config), { name: 'ConfigError', message: pattern }, `${name} is refused, naming the key`);
  }
  // The same through the real command lines, once each.
  const config = writeConfig(join(dir), { colour: 'blue' });
  const a = await hq(['lease', 'status', '--config', config]);
  t.equal(a.code, 2, 'hq: an invalid config exits 2');
  t.match(a.stderr, /colour: is not a known key/, 'hq: the key is named');
  oneLine(t, a.stderr, 'hq: an invalid config');
  const slow = writeConfig(join(dir), { heartbeatCron: '*/2 * * * * *', probeTimeoutSeconds: 2 });
  const b = await run([AGENT_CLI, '--config', slow]);
  t.equal(b.code, 2, 'hq-agent: an impossible cadence exits 2');
  t.match(
    b.stderr,
    /probeTimeoutSeconds \(2\) must be shorter than the heartbeat interval of heartbeatCron \(2\)/,
    'hq-agent: the key and the numbers are named',
  );
  oneLine(t, b.stderr, 'hq-agent: an impossible cadence');
  const owned = writeConfig(join(dir), { ttlSeconds: 1500 });
  const c = await run([AGENT_CLI, '--config', owned]);
  t.equal(c.code, 2, "hq-agent: the arbiter's key exits 2");
  t.match(c.stderr, /ttlSeconds: is a key of hq-arbiter's config, not of hq-agent's/, 'naming its owner');
  oneLine(t, c.stderr, "hq-agent: the arbiter's key");
  const missing = await hq(['seen', '--config', join(dir, 'nope.json')]);
  t.equal(missing.code, 2, 'a missing --config file exits 2');
  writeFileSync(join(dir, 'broken.json'), '{');
  const broken = await run([AGENT_CLI, '--config', join(dir, 'broken.json')]);
  t.equal(broken.code, 2, 'invalid JSON exits 2');
  oneLine(t, broken.stderr, 'invalid JSON');
});

t.test('the fast test settings and the defaults both pass the timing checks', async (t) => {
  const { resolveConfig } = await import('../../apps/agent/src/config.js');
  const dir = shortDir(t);
  const fast = resolveConfig({ hostName: 'mbp', stateDir: dir, heartbeatCron: '* * * * * *', refreshSeconds: 1 }, null);
  t.equal(fast.heartbeatSeconds, 1, 'six fields are seconds');
  t.equal(
    fast.probeTimeoutSeconds,
    0.5,
    'the probe timeout defaults to half the heartbeat interval when that is shorter than 5 s',
  );
  const defaults = resolveConfig({ hostName: 'mbp', stateDir: dir }, null);
  t.equal(defaults.heartbeatSeconds, 600, 'the default heartbeat is every 10 minutes');
  t.equal(defaults.refreshSeconds, 60, 'the default refresh is a minute');
  t.equal(defaults.requestTimeoutSeconds, 5, 'the default request timeout is 5 s');
  t.equal(defaults.socketPath, join(dir, 'agent.sock'), 'the socket defaults into the state dir');
  t.equal(defaults.arbiterUrl, null, 'without tailnetDomain the arbiter URL waits for tailscale');
  const tailnet = resolveConfig({ hostName: 'mbp', stateDir: dir, tailnetDomain: 'example.ts.net' }, null);
  t.equal(tailnet.arbiterUrl, 'http://cloud-vm.example.ts.net:8470', 'the arbiter URL is derived from the tailnet');
  t.same([...tailnet.peers], [], 'without configured peers, they come from the candidates the arbiter names');
  const { peersFromCandidates } = await import('../../apps/agent/src/config.js');
  t.same(
    [...peersFromCandidates(tailnet, ['mbp', 'node-b'])],
    [['node-b', 'http://node-b.example.ts.net:8471']],
    "the arbiter's other candidates at their tailnet addresses",
  );
  const configured = resolveConfig({ hostName: 'mbp', stateDir: dir, peers: { 'node-b': 'http://127.0.0.1:1' } }, null);
  t.same(
    [...peersFromCandidates(configured, ['mbp', 'node-b', 'node-c'])],
    [['node-b', 'http://127.0.0.1:1']],
    'configured peers stay as configured',
  );
  mkdirSync(join(dir, 'h'), { recursive: true });
  writeFileSync(join(dir, 'h', 'host'), 'node-b\n');
  t.equal(resolveConfig({ stateDir: join(dir, 'h') }, null).hostName, 'node-b', 'the host file names the host');
});

t.test('local commands exit with their documented codes when nothing runs', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const check = await hq(['fence', 'check', '--role', 'cron', '--json', '--config', config]);
  t.equal(check.code, 1, 'fence check without an agent is a skip (exit 1)');
  t.equal(
    (JSON.parse(check.stdout) as { reason: string }).reason,
    'agent-unreachable',
    'with the reason agent-unreachable',
  );
  t.match(check.stderr, /could not ask the agent: no agent socket at/, 'and a clear message naming the cause');
  const role = await hq(['fence', 'check', '--role', 'nope', '--config', config]);
  t.equal(role.code, 2, 'an unknown role exits 2 even without an agent');
  const seen = await hq(['seen', '--config', config]);
  t.equal(seen.code, 3, 'seen exits 3 when no generation was ever seen');
  mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, 'state', 'seen-generation'), '4\n', { mode: 0o600 });
  const seen4 = await hq(['seen', '--json', '--config', config]);
  t.equal(seen4.code, 0, 'seen exits 0 once a generation was seen');
  t.same(JSON.parse(seen4.stdout), { seen: true, generation: 4, source: 'file' }, 'seen --json tells the generation');
  const hb = await hq(['heartbeat', '--config', config]);
  t.equal(hb.code, 3, 'heartbeat without an agent exits 3');
  const status = await hq(['lease', 'status', '--config', config]);
  t.equal(status.code, 3, 'lease status with the arbiter unreachable exits 3');
  oneLine(t, status.stderr, 'lease status unreachable');
  const primary = await hq(['primary', '--config', config]);
  t.equal(primary.code, 3, 'primary exits 3 when no agent answers');
  const fo = await hq(['failover', '--to', 'node-b', '--config', config], { env: { HQ_ADMIN_TOKEN: '' } });
  t.equal(fo.code, 2, 'failover without an admin token is a usage error');
  const acquire = await hq(['lease', 'acquire', '--config', config]);
  t.equal(acquire.code, 2, 'acquire without a member token file is a config error');
  writeFileSync(join(dir, 'state', 'token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
  const acquire3 = await hq(['lease', 'acquire', '--config', config]);
  t.equal(acquire3.code, 3, 'acquire with the arbiter unreachable exits 3');
  const force = await hq(['lease', 'release', '--force', '--config', config]);
  t.equal(force.code, 2, 'release --force without --handover-to is a usage error');
  t.equal(force.stderr, 'hq lease release: --force applies only with --handover-to\n', 'and says so in one line');
});

t.test('hq host set writes the host file atomically with mode 0600', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const r = await hq(['host', 'set', 'node-b', '--config', config]);
  t.equal(r.code, 0, 'a valid name exits 0');
  t.equal(readFileSync(join(dir, 'state', 'host'), 'utf8'), 'node-b\n', 'the file holds the name and a newline');
  t.equal(statSync(join(dir, 'state', 'host')).mode & 0o777, 0o600, 'the file is 0600');
  const bad = await hq(['host', 'set', 'prototype', '--config', config]);
  t.equal(bad.code, 2, 'a reserved name exits 2');
});

t.test('hq-agent stops on SIGTERM: exit 0 and the socket removed', async (t) => {
  const dir = shortDir(t);
  const { arb, pid, exited: p, sock } = await startAgentDaemon(t, dir);
  t.ok(existsSync(sock), 'the agent created its socket');
  for (let i = 0; i < 200 && arb.heartbeats.length === 0; i++) await sleep(50);
  t.ok(arb.heartbeats.length > 0, 'the agent heartbeats at start');
  process.kill(pid, 'SIGTERM');
  const r = await p;
  t.equal(r.code, 0, 'SIGTERM exits 0');
  t.notOk(existsSync(sock), 'the socket is removed');
  const lines = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { category?: string; event?: string });
  t.ok(
    lines.every((l) => typeof l.category === 'string' || l.event === undefined),
    'every log line is JSON',
  );
  t.ok(
    lines.some((l) => l.category === 'hq.lease' && l.event === 'renewed') || arb.heartbeats.length > 0,
    'lease events are logged with their category',
  );
});

t.test(
  'a token file at 0644: the agent and hq heartbeat name the mode and say chmod 600; the heartbeat exits 1',
  async (t) => {
    const dir = shortDir(t);
    const { arb, config, pid, exited: p } = await startAgentDaemon(t, dir);
    // The token is read at start: change its mode only once the agent runs on it.
    for (let i = 0; i < 600 && arb.heartbeats.length === 0; i++) await sleep(50);
    arb.requireToken = true;
    t.teardown(() => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    });
    const token = join(dir, 'state', 'token');
    chmodSync(token, 0o644);
    const hb = await hq(['heartbeat', '--config', config]);
    t.equal(hb.code, 1, `a refused heartbeat exits 1 (${hb.stdout.trim()})`);
    t.match(
      hb.stdout,
      /must be mode 0600 \(is 0644\); fix: chmod 600 \S+token \(the token itself stays valid\)/,
      'the reason is the mode, and the fix is chmod, not a new token',
    );
    t.notMatch(hb.stdout, /token issue/, 'no reissue is suggested');
    process.kill(pid, 'SIGTERM');
    const r = await p;
    t.match(
      r.stdout,
      /"event":"token-unavailable"[^\n]*must be mode 0600[^\n]*chmod 600/,
      'the agent logged the mode and the fix',
    );
  },
);

t.test(
  "while the arbiter answers, the agent probes each peer's confirmation path: a peer token that differs is loud",
  async (t) => {
    const dir = shortDir(t);
    const arb = new FakeArbiter();
    await arb.listen();
    t.teardown(() => arb.close());
    const probes: Array<{ body: string; auth: string | undefined }> = [];
    const peer = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        probes.push({ body, auth: req.headers.authorization });
        res.writeHead(401, { 'content-type': 'application/json', 'hq-protocol': '2' });
        res.end(JSON.stringify({ error: 'HQ_ERR_UNAUTHORIZED', message: 'a valid bearer token is required' }));
      });
    });
    await new Promise<void>((r) => peer.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => peer.close(() => r())));
    const peerUrl = `http://127.0.0.1:${(peer.address() as AddressInfo).port}`;
    const config = writeConfig(dir, { arbiterUrl: arb.url, peers: { 'node-b': peerUrl } });
    writeToken(dir);
    writeFileSync(join(dir, 'state', 'peer-token'), `${'ef'.repeat(32)}\n`, { mode: 0o600 });
    let pid = 0;
    const exited = run([AGENT_CLI, '--config', config], { onSpawn: (n) => (pid = n) });
    for (let i = 0; i < 600 && probes.length === 0; i++) await sleep(50);
    t.ok(probes.length > 0, 'the agent probed node-b');
    t.match(JSON.parse(probes[0]?.body ?? '{}'), { host: 'mbp', probe: true }, 'with probe: true (nothing is granted)');
    t.equal(probes[0]?.auth, `Bearer ${'ef'.repeat(32)}`, 'with its peer token');
    await sleep(300);
    const status = await hq(['heartbeat', '--config', config]);
    t.equal(status.code, 0, 'the arbiter itself is fine');
    const { callAgent } = await import('../../apps/agent/src/cli/local.js');
    const s = await callAgent(join(dir, 'agent.sock'), 'GET', '/v1/status', 5);
    t.match(
      (s as { body: unknown }).body,
      {
        peerPaths: {
          'node-b': { ok: false, problem: /refuses this host's peer token \(HTTP 401\): the peer tokens differ/ },
        },
      },
      'GET /v1/status names the broken path',
    );
    process.kill(pid, 'SIGTERM');
    const r = await exited;
    t.match(r.stdout, /"event":"peer-path-broken"[^\n]*"peer":"node-b"/, 'the agent logged it as an error event');
  },
);

t.test(
  "an arbiterUrl that points at an hq agent is named as such, by the agent's log and by hq lease status; an unreachable arbiter is logged",
  async (t) => {
    const dir = shortDir(t);
    const agentLike = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const health = req.url === '/v1/health';
        res.writeHead(health ? 200 : 404, { 'content-type': 'application/json', 'hq-protocol': '2' });
        res.end(
          JSON.stringify(
            health
              ? { status: 'ok', role: 'agent', host: 'node-b', version: '0.2.0-dev' }
              : { error: 'HQ_ERR_NOT_FOUND', message: 'no such resource' },
          ),
        );
      });
    });
    await new Promise<void>((r) => agentLike.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => agentLike.close(() => r())));
    const url = `http://127.0.0.1:${(agentLike.address() as AddressInfo).port}`;
    const config = writeConfig(dir, { arbiterUrl: url });
    writeToken(dir);
    const status = await hq(['lease', 'status', '--config', config]);
    t.equal(status.code, 3, 'lease status exits 3');
    t.match(
      status.stderr,
      /is not the arbiter: it answers like an hq agent's peer listener .*set arbiterUrl to the arbiter's address/,
      'lease status names the address as an agent',
    );
    const r = await runUntil([AGENT_CLI, '--config', config], /is an hq agent/);
    t.match(
      r.stdout + r.stderr,
      /arbiterUrl http:\/\/127\.0\.0\.1:\d+ is an hq agent \(node-b's peer listener\), not the arbiter/,
      'the agent names it too',
    );

    mkdirSync(join(dir, 'd', 'state'), { recursive: true, mode: 0o700 });
    const down = writeConfig(join(dir, 'd'), { arbiterUrl: 'http://127.0.0.1:9' });
    writeFileSync(join(dir, 'd', 'state', 'token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const r2 = await runUntil([AGENT_CLI, '--config', down], /"event":"arbiter-unreachable"/);
    t.match(
      r2.stdout,
      /"event":"arbiter-unreachable"[^\n]*arbiter unreachable at http:\/\/127\.0\.0\.1:9/,
      'an arbiter never reached since the start is logged as unreachable',
    );
  },
);

t.test('hq fence check loads neither Fastify, pino, undici, TypeBox, the S3 signer nor the arbiter', async (t) => {
  const src = join(ROOT, 'apps/agent/src');
  const seen = new Set<string>();
  const externals = new Set<string>();
  const walk = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    // Static imports only: `import(...)` is lazy and is what keeps the other commands out.
    for (const m of text.matchAll(/^import\s+(?!type\b)[^'"]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm)) {
      const spec = (m[1] ?? m[2]) as string;
      if (spec.startsWith('.')) walk(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      else externals.add(spec);
    }
  };
  walk(join(src, 'cli/entry.ts'));
  walk(join(src, 'cli/fence.ts'));
  const heavy = [...externals].filter((e) =>
    /fastify|pino|undici|typebox|node-cron|prom-client|arbiter|better-sqlite3|aws4/.test(e),
  );
  t.same(heavy, [], `the fence path imports only light modules (${[...externals].join(', ')})`);
});

/** A stand-in peer listener answering `GET /v1/primary`; it records each request's Authorization header. */
async function primaryPeer(
  t: { teardown(fn: () => unknown): void },
  answer: unknown,
): Promise<{ port: number; url: string; auth: (string | undefined)[]; answer: unknown }> {
  const p = { answer, auth: [] as (string | undefined)[], port: 0, url: '' };
  const server = createServer((req, res) => {
    p.auth.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json');
    if (req.url !== '/v1/primary') {
      res.statusCode = 404;
      res.end('{}');
      return;
    }
    res.end(JSON.stringify(p.answer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  p.port = (server.address() as { port: number }).port;
  p.url = `http://127.0.0.1:${p.port}`;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return p;
}

t.test('hq primary resolves through resolvePrimary: a stale answer below the seen generation is ignored', async (t) => {
  const dir = shortDir(t);
  const self = await primaryPeer(t, { known: true, holder: 'mbp', generation: 5 });
  const nodeB = await primaryPeer(t, { known: true, holder: 'node-b', generation: 9 });
  // This host (mbp) is asked through its own peer listener; node-b through its peer URL.
  const config = writeConfig(dir, { listen: { host: '127.0.0.1', port: self.port }, peers: { 'node-b': nodeB.url } });
  mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, 'state', 'seen-generation'), '8\n', { mode: 0o600 });

  const won = await hq(['primary', '--json', '--config', config]);
  t.equal(won.code, 0, `node-b's answer above the floor is found (exit 0; ${won.stderr.trim()})`);
  const w = JSON.parse(won.stdout) as { [k: string]: unknown };
  t.match(
    w,
    {
      known: true,
      holder: 'node-b',
      generation: 9,
      source: 'node-b',
      seenGeneration: 8,
      floor: 8,
      mode: 'lease',
      url: nodeB.url,
    },
    'node-b at generation 9 wins',
  );
  t.match(
    w['asked'],
    [
      { host: 'mbp', status: 'stale', holder: 'mbp', generation: 5 },
      { host: 'node-b', status: 'usable', holder: 'node-b', generation: 9 },
    ],
    "this host's own answer (generation 5 < 8) is reported stale and not used",
  );
  t.match(
    w['answers'],
    [
      { source: 'local:mbp', known: true, holder: 'mbp', generation: 5, status: 'stale' },
      { source: 'node-b', known: true, generation: 9 },
    ],
    'answers keeps its earlier fields',
  );
  const human = await hq(['primary', '--config', config]);
  t.equal(
    human.stdout,
    'node-b (generation 9, from node-b)\n',
    'the human line names the holder, generation and source',
  );

  // Every answer below the floor: nothing usable, exit 3 — never an older holder.
  nodeB.answer = { known: true, holder: 'node-b', generation: 7 };
  const stale = await hq(['primary', '--json', '--config', config]);
  t.equal(stale.code, 3, 'with every answer older than the seen generation, primary exits 3');
  const s = JSON.parse(stale.stdout) as { [k: string]: unknown };
  t.match(
    s,
    { known: false, holder: null, generation: null, seenGeneration: 8, fallback: { holder: 'mbp' } },
    'and names no holder (the fallback is reported apart)',
  );
  t.match(s['reason'], /older than generation 8/, 'the reason says the answers were older than the seen generation');
  t.match(stale.stderr, /generation ≥ 8/, 'stderr says which generation was needed');
  oneLine(t, stale.stderr, 'primary with stale answers');

  // A holder that is not a candidate is never accepted, however high its generation.
  nodeB.answer = { known: true, holder: 'spare', generation: 20 };
  const foreign = await hq(['primary', '--json', '--config', config]);
  t.equal(foreign.code, 3, 'a holder outside the candidates is not accepted');
  t.match(
    (JSON.parse(foreign.stdout) as { asked: unknown }).asked,
    [{ host: 'mbp' }, { host: 'node-b', status: 'not-a-candidate' }],
    'and is reported as not-a-candidate',
  );
  t.ok(
    [...self.auth, ...nodeB.auth].every((a) => a === undefined),
    'no token is sent to any candidate',
  );
});

t.test('hq lease status prints a header block and one table row per observer; --json is unchanged', async (t) => {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  await arb.listen();
  t.teardown(() => arb.close());
  const now = Date.now() / 1000;
  arb.holder = 'node-b';
  arb.generation = 4;
  arb.leaseOver = {
    revision: 11,
    maintenance: true,
    promotedFrom: 'mbp',
    views: {
      'node-b': { target: 'mbp', reachable: false, ping: false, health: false, at: now - 3 },
      mbp: { target: 'node-b', reachable: true, ping: true, health: true, at: now - 1 },
    },
  };
  const config = writeConfig(dir, { arbiterUrl: arb.url });
  const r = await hq(['lease', 'status', '--config', config]);
  t.equal(r.code, 0, `lease status exits 0 (${r.stderr.trim()})`);
  const lines = r.stdout.trimEnd().split('\n');
  t.match(lines[0], /^holder\s+node-b$/, 'the holder comes first');
  t.match(lines[1], /^generation\s+4 \(revision 11, promoted from mbp\)$/, 'then the generation');
  t.match(lines[2], /^validity\s+\d+\.\d s left \(ttl 6 s\)$/, 'then the validity left');
  t.match(lines[3], /^maintenance\s+on$/, 'then the maintenance flag');
  t.match(lines[4], /^failover\s+(\S+ \S+ worst case|unknown)/, "then the arbiter's worst-case failover sentence");
  t.equal(lines[5], '', 'a blank line ends the header block');
  t.match(lines[6], /^observer {2}target {2}reachable {2}ping {2}health {2}age$/, 'the table header names the columns');
  t.match(lines[7], /^node-b {4}mbp {5}no {9}no {4}no {6}\d+\.\d s$/, "node-b's row, columns aligned");
  t.match(lines[8], /^mbp {7}node-b {2}yes {8}ok {4}ok {6}\d+\.\d s$/, "mbp's row");
  t.equal(lines.length, 9, 'one row per observer and nothing else');
  const j = await hq(['lease', 'status', '--json', '--config', config]);
  t.equal(j.code, 0, 'lease status --json exits 0');
  const v = JSON.parse(j.stdout) as { [k: string]: unknown };
  t.same(
    Object.keys(v),
    [
      'lease',
      'validForSeconds',
      'lockDelayLeftSeconds',
      'views',
      'maintenance',
      'failoverSeconds',
      'lockDelaySeconds',
      'failover',
      'timingProblems',
      'peerPathProblems',
    ],
    '--json keeps its keys (and names broken peer paths)',
  );
  t.match(
    v,
    {
      lease: { holder: 'node-b', generation: 4 },
      maintenance: true,
      views: [
        { observer: 'node-b', target: 'mbp', reachable: false },
        { observer: 'mbp', target: 'node-b', reachable: true },
      ],
    },
    '--json keeps its content',
  );
});

t.test(
  'hq lease status never shows a validity longer than the TTL: a holder behind a wait shows when it may run and until when',
  async (t) => {
    const dir = shortDir(t);
    const arb = new FakeArbiter();
    await arb.listen();
    t.teardown(() => arb.close());
    const now = Date.now() / 1000;
    // A grant behind 24.7 min of lock-delay at ttl 1500 s: expiresAt − now is 49.7 min.
    const notBefore = now + 1482;
    arb.leaseOver = { ttlSeconds: 1500, safetyMarginSeconds: 30, notBefore, expiresAt: notBefore + 1500 };
    const config = writeConfig(dir, { arbiterUrl: arb.url });
    const r = await hq(['lease', 'status', '--config', config]);
    t.equal(r.code, 0, `lease status exits 0 (${r.stderr.trim()})`);
    const line = r.stdout.split('\n').find((l) => l.startsWith('validity')) ?? '';
    t.match(
      line,
      /^validity {5}may run in 24\.\d min \(at \S+Z\), then for 25\.0 min \(until \S+Z\) \(ttl 1500 s\)$/,
      'when it may run, for how long and until when (which wait holds it is the waiting line)',
    );
    t.notMatch(line, /49\.\d min/, 'not the 49.7 min to expiresAt');
    const j = JSON.parse((await hq(['lease', 'status', '--json', '--config', config])).stdout) as {
      validForSeconds: number;
      lockDelayLeftSeconds: number;
    };
    t.ok(
      j.validForSeconds <= 1500 && j.validForSeconds > 1499,
      `--json validForSeconds is what it may run for, at most the TTL (${j.validForSeconds})`,
    );
    t.ok(j.lockDelayLeftSeconds > 1400, '--json lockDelayLeftSeconds says how long until then');
    arb.leaseOver = { ttlSeconds: 1500, safetyMarginSeconds: 30, notBefore: now - 10, expiresAt: now + 1490 };
    const running = await hq(['lease', 'status', '--config', config]);
    t.match(
      running.stdout,
      /^validity {5}2[45]\.\d min left \(ttl 1500 s\)$/m,
      'a holder that may run now: the validity left',
    );
  },
);

t.test(
  'hq failover and hq lease release --handover-to pass --force as force: true, and show a target-silent refusal',
  async (t) => {
    const dir = shortDir(t);
    const bodies: Array<{ url: string; body: unknown }> = [];
    let refuse = true;
    const server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        bodies.push({ url: req.url ?? '', body: JSON.parse(text || 'null') });
        res.setHeader('content-type', 'application/json');
        const lease = record({ holder: 'mbp', generation: 1 });
        if (refuse) {
          res.statusCode = 409;
          res.end(
            JSON.stringify({
              ok: false,
              reason: 'target-silent',
              lease,
              error: 'HQ_ERR_TARGET_SILENT',
              message:
                'node-b was last heard 300 s ago (2026-12-01T10:00:00.000Z), longer than its heartbeat interval 60 s × 1.5 + 5 s; is its agent running? force overrides',
            }),
          );
        } else res.end(JSON.stringify({ ok: true, lease: record({ holder: 'node-b', generation: 2 }) }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const config = writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'state', 'token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const env = { env: { HQ_ADMIN_TOKEN: 'cd'.repeat(32) } };
    const refused = await hq(['failover', '--to', 'node-b', '--config', config], env);
    t.equal(refused.code, 1, 'a target-silent refusal exits 1');
    t.match(
      refused.stderr,
      /^hq failover: refused \(HTTP 409, target-silent: HQ_ERR_TARGET_SILENT: node-b was last heard 300 s ago/,
      'and says when the target was last heard',
    );
    t.same(bodies.at(-1), { url: '/v1/lease/transfer', body: { to: 'node-b' } }, 'without --force no force field');
    refuse = false;
    const forced = await hq(['failover', '--to', 'node-b', '--force', '--config', config], env);
    t.equal(forced.code, 0, 'failover --force exits 0');
    t.same(
      bodies.at(-1),
      { url: '/v1/lease/transfer', body: { to: 'node-b', force: true } },
      '--force sends force: true',
    );
    const handover = await hq(['lease', 'release', '--handover-to', 'node-b', '--force', '--config', config]);
    t.equal(handover.code, 0, `release --handover-to --force exits 0 (${handover.stderr.trim()})`);
    t.same(
      bodies.at(-1),
      { url: '/v1/lease/release', body: { host: 'mbp', handoverTo: 'node-b', force: true } },
      'the handover carries force: true',
    );
  },
);

t.test('a refused acquire names the holder and its generation in its one line', async (t) => {
  const dir = shortDir(t);
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.statusCode = 409;
      res.end(
        JSON.stringify({
          ok: false,
          reason: 'held',
          lease: record({ holder: 'node-b', generation: 4 }),
          error: 'HQ_ERR_HELD',
          message: 'the lease is held',
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const config = writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  writeToken(dir);
  const r = await hq(['lease', 'acquire', '--config', config]);
  t.equal(r.code, 1, 'refused: exit 1');
  t.equal(
    r.stderr,
    'hq lease acquire: refused: held by node-b (generation 4; HTTP 409)\n',
    'one line naming holder and generation',
  );
});

t.test(
  'a granted acquire says when the new holder may run: now, after which wait (until when, why), or once the floor is complete',
  async (t) => {
    const dir = shortDir(t);
    let lease: { [k: string]: unknown } = {};
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, lease }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const config = writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    writeToken(dir);
    const now = 1_800_000_000;
    lease = record({ holder: 'mbp', generation: 5, now, notBefore: null });
    const at = await hq(['lease', 'acquire', '--config', config]);
    t.equal(at.code, 0, 'granted: exit 0');
    t.match(at.stdout, /^acquired: mbp holds generation 5; it may run now\n$/, 'no wait: it says so');
    lease = record({ holder: 'mbp', generation: 6, now, notBefore: now + 30 });
    const later = await hq(['lease', 'acquire', '--config', config]);
    t.match(
      later.stdout,
      /^acquired: mbp holds generation 6; it may run in 30\.0 s: until 2027-01-15T08:00:30\.000Z: the old holder's lock-delay, or the arbiter's start wait/,
      'an arbiter that does not say which wait (hq 0.1): how long and until when, both waits named',
    );
    lease = record({ holder: 'mbp', generation: 7, now, notBefore: now + 30, floorPending: true });
    const pending = await hq(['lease', 'acquire', '--config', config]);
    t.match(
      pending.stdout,
      /^acquired: mbp holds generation 7; it may not run yet: the floor is pending: it may run once every candidate has reported its seen generation/,
      'the floor pending: what it waits for',
    );
    const start = {
      kind: 'start-wait',
      until: now + 30,
      host: null,
      unreported: ['node-b'],
      text: "the arbiter's start wait until 2027-01-15T08:00:30.000Z (…): it ends sooner once every candidate has reported (node-b has not yet)",
    };
    lease = record({ holder: 'mbp', generation: 8, now, notBefore: now + 30, wait: start });
    const said = await hq(['lease', 'acquire', '--config', config]);
    t.equal(
      said.stdout,
      `acquired: mbp holds generation 8; it may run in 30.0 s: ${start.text}\n`,
      "the arbiter's word on which wait holds it, how long it has left, and why",
    );
    lease = record({
      holder: 'mbp',
      generation: 9,
      now,
      notBefore: now + 30,
      floorPending: true,
      wait: {
        kind: 'floor-pending',
        until: null,
        host: null,
        unreported: ['node-b'],
        text: "the arbiter's database is new: (node-b has not yet)",
      },
    });
    const floor = await hq(['lease', 'acquire', '--config', config]);
    t.equal(
      floor.stdout,
      "acquired: mbp holds generation 9; it may not run yet: the arbiter's database is new: (node-b has not yet)\n",
      'a pending floor, with who has not reported',
    );
    lease = record({ holder: 'mbp', generation: 10, now, notBefore: now + 30, wait: null });
    t.equal(
      (await hq(['lease', 'acquire', '--config', config])).stdout,
      'acquired: mbp holds generation 10; it may run now\n',
      'wait null from this arbiter: nothing holds it',
    );
  },
);

t.test('hq lease status shows which wait holds the holder (text), and the record carries it (--json)', async (t) => {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  await arb.listen();
  t.teardown(() => arb.close());
  const now = Date.now() / 1000;
  arb.holder = 'node-b';
  arb.generation = 2;
  const wait = {
    kind: 'start-wait',
    until: now + 90,
    host: null,
    unreported: [],
    text: "the arbiter's start wait until T: it ends sooner once mbp acknowledges its step-down saying it ran generation 1",
  };
  arb.leaseOver = { promotedFrom: 'mbp', notBefore: now + 90, wait };
  const config = writeConfig(dir, { arbiterUrl: arb.url });
  const r = await hq(['lease', 'status', '--config', config]);
  t.equal(r.code, 0, `exit 0 (${r.stderr.trim()})`);
  const lines = r.stdout.split('\n');
  t.match(
    lines[2],
    /^validity\s+\d+\.\d s left \(ttl 6 s\)$/,
    'the validity line no longer calls every wait a lock-delay',
  );
  t.match(
    lines[3],
    /^waiting\s+\d+\.\d s left: the arbiter's start wait until T: it ends sooner once mbp acknowledges its step-down saying it ran generation 1$/,
    'the waiting line: how long, which wait and why',
  );
  const j = await hq(['lease', 'status', '--json', '--config', config]);
  t.match(JSON.parse(j.stdout), { lease: { wait } }, '--json carries the record’s wait');
});

t.test('hq lease release --handover-to H --wait S prints which wait holds H until it may run', async (t) => {
  const dir = shortDir(t);
  const now = Date.now() / 1000;
  const start = {
    kind: 'start-wait',
    until: now + 40,
    host: null,
    unreported: ['node-b'],
    text: "the arbiter's start wait until T: node-b has not yet reported",
  };
  const granted = record({ holder: 'node-b', generation: 2, notBefore: now + 40, wait: start });
  let reads = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/v1/lease/release') return void res.end(JSON.stringify({ ok: true, lease: granted }));
      reads++;
      // Read 1: the start wait; then the wait is over.
      res.end(
        JSON.stringify(reads < 2 ? granted : record({ holder: 'node-b', generation: 2, notBefore: now, wait: null })),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const config = writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  writeToken(dir);
  const r = await hq(['lease', 'release', '--handover-to', 'node-b', '--wait', '20', '--config', config]);
  t.equal(r.code, 0, `exit 0 (${r.stderr.trim()})`);
  const lines = r.stdout.trimEnd().split('\n');
  t.equal(lines[0], 'handed over to node-b at generation 2; waiting up to 20 s until it may run');
  t.match(
    lines[1],
    /^waiting: \d+\.\d s left: the arbiter's start wait until T: node-b has not yet reported$/,
    'which wait, how long, why',
  );
  t.match(
    lines[2],
    /^node-b may run at generation 2 after \d+(\.\d)? s: the old holder stepped down before it handed over: no lock-delay to wait for$/,
    'then that it may run',
  );
  const usage = await hq(['lease', 'release', '--wait', '5', '--config', config]);
  t.equal(usage.code, 2, '--wait without --handover-to: exit 2');
  t.equal(usage.stderr, 'hq lease release: --wait applies only with --handover-to\n', 'one line naming the fix');
});

/** A member token in the state dir of a `writeConfig` config (0600, dir 0700). */
function writeToken(dir: string, mode = 0o600): string {
  mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
  const path = join(dir, 'state', 'token');
  writeFileSync(path, `${'ab'.repeat(32)}\n`, { mode });
  chmodSync(path, mode);
  return path;
}

t.test('an agent whose configuration can never work exits 2 at start with the fix', async (t) => {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  await arb.listen();
  t.teardown(() => arb.close());
  const config = writeConfig(dir, { arbiterUrl: arb.url });
  const missing = await run([AGENT_CLI, '--config', config]);
  t.equal(missing.code, 2, 'no token file: exit 2');
  t.match(
    missing.stderr,
    /tokenFile: token file \S+token does not exist; fix: on the arbiter, hq-arbiter join mbp then hq join/,
    'names the file and the fix',
  );
  oneLine(t, missing.stderr, 'a missing token file');
  writeToken(dir, 0o640);
  const open = await run([AGENT_CLI, '--config', config]);
  t.equal(open.code, 2, 'a group-readable token file: exit 2');
  t.match(
    open.stderr,
    /tokenFile: .*must be mode 0600 \(is 0640\); fix: chmod 600 /,
    'says the mode it needs and that chmod fixes it',
  );

  // An arbiter that refuses the token for this host (a hostName that is not the token's machine).
  const refusing = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = 403;
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({ error: 'HQ_ERR_WRONG_HOST', message: 'this member token belongs to "node-b", not "mbp"' }),
      );
    });
  });
  await new Promise<void>((done) => refusing.listen(0, '127.0.0.1', done));
  t.teardown(() => refusing.close());
  const port = (refusing.address() as { port: number }).port;
  writeToken(dir);
  const wrongHost = await run([AGENT_CLI, '--config', writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${port}` })]);
  t.equal(wrongHost.code, 2, "a hostName that is not the token's machine: exit 2");
  t.match(
    wrongHost.stderr,
    /hostName: the arbiter refuses "mbp" .*belongs to "node-b".*set hostName to the token's machine/,
    'names both hosts and the fix',
  );
  oneLine(t, wrongHost.stderr, 'a wrong host');
  t.notOk(existsSync(join(dir, 'agent.sock')), 'and leaves no socket behind');
});

t.test(
  'a hostName that differs from the host file: the config wins, logged at start and shown by hq doctor',
  async (t) => {
    const dir = shortDir(t);
    const {
      config,
      pid,
      exited: p,
    } = await startAgentDaemon(t, dir, () => writeFileSync(join(dir, 'state', 'host'), 'node-b\n', { mode: 0o600 }));
    process.kill(pid, 'SIGTERM');
    const r = await p;
    const line = r.stdout.split('\n').find((l) => l.includes('hostname-mismatch'));
    t.ok(line !== undefined, 'logged at start');
    t.match(
      JSON.parse(line ?? '{}'),
      { event: 'hostname-mismatch', hostName: 'mbp', hostFileName: 'node-b', wins: 'config' },
      'with both values and which wins',
    );
    const doc = await hq(['doctor', '--json', '--config', config]);
    const checks = (JSON.parse(doc.stdout) as { checks: Array<{ name: string; status: string; detail: string }> })
      .checks;
    const host = checks.find((c) => c.name === 'hostname');
    t.match(
      host,
      { status: 'fail', detail: /hostName "mbp" in the config, but .*host says "node-b"; the config wins/ },
      'hq doctor shows it',
    );
  },
);

t.test(
  'errors name what they used: the URL and the file it came from, a server that is no arbiter, the config file; --json errors are JSON on stdout',
  async (t) => {
    const dir = shortDir(t);
    const down = writeConfig(dir, { arbiterUrl: 'http://127.0.0.1:9' });
    const a = await hq(['lease', 'status', '--config', down]);
    t.equal(a.code, 3, 'unreachable exits 3');
    t.match(
      a.stderr,
      /^hq lease status: the arbiter at http:\/\/127\.0\.0\.1:9 is unreachable \(ECONNREFUSED\) \(arbiterUrl from .*agent\.json\)\n$/,
      'names the URL and the config file',
    );
    const j = await hq(['lease', 'status', '--config', down, '--json']);
    t.match(
      JSON.parse(j.stdout),
      { ok: false, error: 'unreachable', exitCode: 3 },
      'with --json the error is JSON on stdout too',
    );

    const other = createServer((_req, res) => {
      res.statusCode = 404;
      res.end('<html>not found</html>');
    });
    await new Promise<void>((done) => other.listen(0, '127.0.0.1', done));
    t.teardown(() => other.close());
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    const b = await hq(['lease', 'status', '--config', writeConfig(dir, { arbiterUrl: url })]);
    t.equal(b.code, 3, 'a server that is not an arbiter exits 3');
    t.match(
      b.stderr,
      new RegExp(
        `^hq lease status: ${url.replaceAll('.', '\\.')} answered HTTP 404 but is not an hq arbiter \\(arbiterUrl from `,
      ),
      'says so',
    );

    const bad = writeConfig(dir, { colour: 'blue' });
    const c = await hq(['lease', 'status', '--config', bad]);
    t.equal(c.code, 2, 'a bad config exits 2');
    t.ok(
      c.stderr.includes(`${bad}: colour: is not a known key`),
      `the config error names the file (${c.stderr.trim()})`,
    );
    const cj = await hq(['lease', 'status', '--config', bad, '--json']);
    t.match(
      JSON.parse(cj.stdout),
      { ok: false, error: 'config', exitCode: 2 },
      'a config error is JSON on stdout with --json',
    );
  },
);

t.test('help is wrapped to 80 columns: hq --help and every command, doctor and standby included', async (t) => {
  const { DOCTOR_SPEC } = await import('../../apps/agent/src/cli/doctor.js');
  const { STANDBY_SPECS } = await import('../../apps/agent/src/cli/standby-specs.js');
  const specs = [...COMMANDS.map((c) => c.spec), DOCTOR_SPEC, ...Object.values(STANDBY_SPECS)];
  for (const spec of specs) {
    const long = helpText(spec)
      .split('\n')
      .filter((l) => [...l].length > 80);
    t.same(long, [], `hq ${spec.name} --help fits 80 columns`);
  }
  const top = await hq(['--help']);
  t.same(
    top.stdout.split('\n').filter((l) => [...l].length > 80),
    [],
    'hq --help fits 80 columns',
  );
  for (const spec of specs)
    t.ok(top.stdout.includes(`\n  ${spec.name} `), `hq --help lists hq ${spec.name}, from its spec`);
  const daemon = await run([AGENT_CLI, '--help']);
  t.equal(daemon.code, 0, 'hq-agent --help exits 0');
  t.equal(daemon.stdout, helpText(AGENT_SPEC, 'hq-agent'), 'hq-agent --help is made from its spec');
  t.same(
    daemon.stdout.split('\n').filter((l) => [...l].length > 80),
    [],
    'hq-agent --help fits 80 columns',
  );
});

/**
 * A real hq-agent against a FakeArbiter, with a member token, started and waited for until its
 * socket exists (`before` runs after the config and token are written, before the spawn).
 */
async function startAgentDaemon(
  t: Parameters<Parameters<typeof t.test>[1]>[0],
  dir: string,
  before: () => void = () => undefined,
) {
  const arb = new FakeArbiter();
  await arb.listen();
  t.teardown(() => arb.close());
  const config = writeConfig(dir, { arbiterUrl: arb.url });
  writeToken(dir);
  before();
  let pid = 0;
  const exited = run([AGENT_CLI, '--config', config], { onSpawn: (n) => (pid = n) });
  const sock = join(dir, 'agent.sock');
  // Generous: a loaded machine can take many seconds to start node.
  for (let i = 0; i < 600 && !existsSync(sock); i++) await sleep(50);
  return { arb, config, pid, exited, sock };
}

t.test(
  'hq lease release waits as long as the agent says its step-down can take, and releases nothing before it is done',
  async (t) => {
    const dir = shortDir(t);
    const bodies: string[] = [];
    const server = createServer((req, res) => {
      bodies.push(req.url ?? '');
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, lease: record({ holder: null, generation: 3 }) }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const config = writeConfig(dir, { arbiterUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    writeToken(dir);
    const agent = new FakeAgent(join(dir, 'agent.sock'));
    await agent.listen();
    t.teardown(() => agent.close());
    let stepDownMs = 1500;
    let answerAfterMs: number | 'never' = 1200;
    agent.routes['GET /v1/status'] = async () => ({
      status: 200,
      body: { host: 'mbp', holder: 'mbp', generation: 3, stepDownSeconds: stepDownMs / 1000 },
    });
    agent.routes['POST /v1/step-down'] = async () => {
      if (answerAfterMs === 'never') return 'hang';
      await sleep(answerAfterMs);
      return { status: 200, body: { ok: true, steppedDown: 3, childrenGone: true } };
    };
    agent.routes['POST /v1/heartbeat'] = async () => ({ status: 200, body: { ok: true } });
    const ok = await hq(['lease', 'release', '--config', config]);
    t.equal(ok.code, 0, `a step-down that takes 1.2 s of its 1.5 s is waited for (${ok.stderr.trim()})`);
    t.same(bodies, ['/v1/lease/release'], 'then the release, with the generation');
    t.match(
      ok.stdout,
      /^released by mbp: HQ is now empty — no host may run fenced jobs until one runs "hq lease acquire" .*nothing brings HQ back by itself\n$/,
      'a release without a handover says HQ is empty and what brings it back',
    );

    bodies.length = 0;
    stepDownMs = 0;
    answerAfterMs = 'never';
    const slow = await hq(['lease', 'release', '--config', config]);
    t.equal(slow.code, 1, 'a step-down that does not finish in its time exits 1');
    t.match(
      slow.stderr,
      /^hq lease release: the agent did not finish its step-down within 2 s .*nothing was released\. The agent goes on ending this generation's children: run it again\n$/,
      'one line: nothing released, run again',
    );
    t.same(bodies, [], 'no release was sent: a child still running would overlap the next holder');

    // A handover has no lock-delay: every child must be proven gone.
    let resumed = 0;
    answerAfterMs = 0;
    stepDownMs = 1000;
    agent.routes['POST /v1/step-down'] = async () => ({
      status: 200,
      body: { ok: true, steppedDown: 3, childrenGone: false },
    });
    agent.routes['POST /v1/resume'] = async () => {
      resumed++;
      return { status: 200, body: { ok: true } };
    };
    const unproven = await hq(['lease', 'release', '--handover-to', 'node-b', '--config', config]);
    t.equal(unproven.code, 1, 'a handover with a child not proven gone exits 1');
    t.match(unproven.stderr, /^hq lease release: a fenced child of generation 3 could not be proven gone/, 'saying so');
    t.same([bodies, resumed], [[], 1], 'nothing handed over, and the step-down undone (the lease is still ours)');
  },
);
