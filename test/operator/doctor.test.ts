/**
 * `hq doctor` against real things on loopback: a real arbiter app (test/arbiter/helper.ts), a
 * peer's health endpoint, an agent socket, a unit file and a fake `tailscale` — first all
 * healthy (exit 0, every line ✔ or –), then each broken in turn (✖ with the fix, exit 1).
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { doctorCommand, type DoctorCheck } from '../../apps/agent/src/cli/doctor.js';
import { operatorHarness } from './helper.js';

interface World {
  dir: string;
  stateDir: string;
  configPath: string;
  unit: string;
  tailscale: string;
  config: Record<string, unknown>;
  peer: Server;
  agent: Server;
  write(extra?: Record<string, unknown>): void;
  /** Sets the arbiter's manual clock to this host's clock plus the offset of the case. */
  sync(): void;
  /** The arbiter's harness (its tokens, its requests). */
  arbiter: Awaited<ReturnType<typeof operatorHarness>>;
}

function listen(server: Server, where: { port: number; host: string } | string): Promise<void> {
  return new Promise((resolve) =>
    typeof where === 'string'
      ? server.listen(where, () => resolve())
      : server.listen(where.port, where.host, () => resolve()),
  );
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function world(
  t: Tap.Test,
  opts: { clockOffset?: number; openReads?: boolean; old?: boolean } = {},
): Promise<World> {
  const h = await operatorHarness(t, opts.openReads === false ? { auth: { openReads: false } } : {}, {
    harness: { clockStart: Date.now() / 1000 + (opts.clockOffset ?? 0) },
  });
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const arbiterPort = (h.app.server.address() as { port: number }).port;
  // A short path: unix socket paths are limited to ~104 bytes.
  const dir = mkdtempSync('/tmp/hqdoc-');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const stateDir = join(dir, 'state');
  mkdirSync(stateDir, { mode: 0o700 });
  writeFileSync(join(stateDir, 'token'), `${h.tokens.mbp}\n`, { mode: 0o600 });
  writeFileSync(join(stateDir, 'peer-token'), 'a'.repeat(64), { mode: 0o600 });
  writeFileSync(join(stateDir, 'seen-generation'), '0\n', { mode: 0o600 });
  const peer = createServer((req, res) => {
    // The confirmation probe: answered only with the fleet's peer token (this world's is 'a' × 64).
    if (req.url === '/v1/peer/confirm') {
      const ok = req.headers.authorization === `Bearer ${'a'.repeat(64)}`;
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json', 'hq-protocol': '2' });
      res.end(
        JSON.stringify(
          ok
            ? { confirmed: false, generation: 0, reason: 'probe' }
            : { error: 'HQ_ERR_UNAUTHORIZED', message: 'a valid bearer token is required' },
        ),
      );
      return;
    }
    // A current peer says its protocol version; one of hq 0.1.x says none.
    res.writeHead(req.url === '/v1/health' ? 200 : 404, {
      'content-type': 'application/json',
      ...(opts.old === true ? {} : { 'hq-protocol': '2' }),
    });
    res.end(
      JSON.stringify({
        status: 'ok',
        role: 'agent',
        host: 'node-b',
        ...(opts.old === true ? { version: '0.1.0' } : {}),
      }),
    );
  });
  await listen(peer, { port: 0, host: '127.0.0.1' });
  t.teardown(() => close(peer));
  const socketPath = join(stateDir, 'agent.sock');
  const agent = createServer((req, res) => {
    res.writeHead(req.url === '/v1/status' || req.url === '/v1/seen' ? 200 : 404, {
      'content-type': 'application/json',
      ...(opts.old === true ? {} : { 'hq-protocol': '2' }),
    });
    res.end(JSON.stringify(req.url === '/v1/seen' ? { seen: false, generation: 0 } : { holder: null, generation: 0 }));
  });
  await listen(agent, socketPath);
  t.teardown(() => close(agent));
  const unit = join(dir, 'hq-agent.service');
  writeFileSync(unit, '[Service]\nExecStart=/bin/true\n');
  const tailscale = join(dir, 'tailscale');
  writeFileSync(tailscale, '#!/bin/sh\necho \'{"BackendState":"Running","MagicDNSSuffix":"example.ts.net"}\'\n', {
    mode: 0o755,
  });
  const config: Record<string, unknown> = {
    hostName: 'mbp',
    arbiterUrl: `http://127.0.0.1:${arbiterPort}`,
    stateDir,
    peers: { 'node-b': `http://127.0.0.1:${(peer.address() as { port: number }).port}` },
    tailscaleBin: tailscale,
    heartbeatCron: '* * * * * *',
    refreshSeconds: 1,
    requestTimeoutSeconds: 1,
  };
  const configPath = join(dir, 'agent.json');
  const w: World = {
    dir,
    stateDir,
    configPath,
    unit,
    tailscale,
    config,
    peer,
    agent,
    write(extra = {}) {
      writeFileSync(configPath, JSON.stringify({ ...config, ...extra }));
    },
    sync() {
      h.clock.set(Date.now() / 1000 + (opts.clockOffset ?? 0));
    },
    arbiter: h,
  };
  w.write();
  return w;
}

async function doctor(
  w: World,
  args: string[] = [],
  unitPaths: string[] = [w.unit],
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  // The arbiter's clock is a manual one: keep it on this host's clock (plus the case's offset).
  w.sync();
  const follow = setInterval(() => w.sync(), 5);
  try {
    const code = await doctorCommand(['--config', w.configPath, ...args], {
      unitPaths,
      stdout: (s) => (out += s),
      stderr: (s) => (err += s),
      platform: 'linux',
    });
    return { code, out, err };
  } finally {
    clearInterval(follow);
  }
}

function line(out: string, name: string): string {
  return out.split('\n').find((l) => new RegExp(`^[✔✖–] ${name} `).test(l)) ?? '';
}

t.test('peer tokens that differ fail the peers check, though the peer answers its health', async (t) => {
  const w = await world(t);
  writeFileSync(join(w.stateDir, 'peer-token'), 'b'.repeat(64), { mode: 0o600 });
  const r = await doctor(w);
  t.equal(r.code, 1, 'doctor exits 1');
  t.match(
    line(r.out, 'peers'),
    /^✖ peers +the confirmation path is broken — node-b: \S+ refuses this host's peer token \(HTTP 401\): the peer tokens differ/,
    'the mismatch is named',
  );
});

t.test('a healthy host passes every check and exits 0', async (t) => {
  const w = await world(t);
  const r = await doctor(w);
  t.equal(r.code, 0, `doctor exits 0 when every check passes:\n${r.out}`);
  for (const name of [
    'config',
    'arbiter-url',
    'state-dir',
    'token',
    'peer-token',
    'arbiter',
    'clock',
    'peers',
    'versions',
    'tailscale',
    'socket',
    'unit',
  ]) {
    t.match(line(r.out, name), /^✔ /, `${name} passes`);
  }
  t.match(
    line(r.out, 'config'),
    /valid for host mbp \(heartbeat every \S+ s, refresh \S+ s, request timeout \S+ s\)/,
    "the config line states this host's own cadence (the lease timing is the arbiter's)",
  );
  t.match(
    line(r.out, 'clock'),
    /clock is [\d.]+ s (behind|ahead of) the arbiter's/,
    'the clock line states the offset',
  );
  t.notMatch(r.out, /fix:/, 'no fixes are suggested');
});

t.test(
  'a peer and a local daemon of hq 0.1 (protocol 1) fail the versions check, naming what to upgrade',
  async (t) => {
    const w = await world(t, { old: true });
    const r = await doctor(w);
    t.equal(r.code, 1, 'doctor exits 1');
    t.match(
      line(r.out, 'versions'),
      /^✖ versions\s+the hq-agent daemon on this host speaks protocol 1 \(an older hq still running\); restart it; node-b runs hq 0\.1\.0 \(protocol 1\); upgrade it — fix: upgrade one host at a time/,
      'both named, with the order',
    );
    t.match(line(r.out, 'peers'), /^✔ /, 'the peer still answers');
  },
);

t.test('each broken piece is one ✖ line with its fix, and doctor exits 1', async (t) => {
  const w = await world(t);
  chmodSync(join(w.stateDir, 'token'), 0o644);
  chmodSync(w.stateDir, 0o755);
  await close(w.peer);
  await close(w.agent);
  rmSync(join(w.stateDir, 'agent.sock'), { force: true });
  w.write({ tailscaleBin: join(w.dir, 'no-such-tailscale') });
  const r = await doctor(w, [], [join(w.dir, 'missing.service')]);
  t.equal(r.code, 1, 'doctor exits 1 when a check fails');
  const cases: Array<[string, RegExp]> = [
    ['state-dir', /mode 0755, must be 0700 — fix: chmod 700 /],
    ['token', /must be mode 0600 \(is 0644\) — fix: chmod 600 .*token/],
    ['peers', /not answering: node-b .* — fix: check that hq-agent runs/],
    ['tailscale', /is not installed or not on PATH — fix: install tailscale/],
    ['socket', /does not answer on .*agent\.sock .* — fix: start it: systemctl start hq-agent/],
    ['unit', /missing\.service exists — fix: install deploy\/systemd\/hq-agent\.service/],
  ];
  for (const [name, re] of cases)
    t.match(line(r.out, name), new RegExp(`^✖ ${name}\\s+.*${re.source}`), `${name} fails with its fix`);
  t.match(line(r.out, 'config'), /^✔ /, 'the config still passes');
  t.match(line(r.out, 'arbiter'), /^✔ /, 'the arbiter still passes (openReads: the token is not needed to read)');
});

t.test(
  'a reported generation the arbiter refused fails the generation check, naming the command that accepts it',
  async (t) => {
    const w = await world(t);
    const ok = await doctor(w);
    t.match(
      line(ok.out, 'generation'),
      /^✔ generation\s+the arbiter refused no reported generation/,
      'passes while nothing was refused',
    );
    w.sync();
    const h = w.arbiter;
    const r = await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 9_007_199_254_740_990 }, h.tokens.nodeb);
    t.equal(r.json().error, 'HQ_ERR_GENERATION_JUMP', 'the arbiter refuses the report');
    const bad = await doctor(w);
    t.equal(bad.code, 1, 'doctor exits 1');
    t.match(
      line(bad.out, 'generation'),
      /^✖ generation\s+node-b's report of generation 9007199254740990 is refused.* — fix: if node-b really saw generation 9007199254740990 .*hq lease accept 9007199254740990/,
      'one line with the refusal and the fix',
    );
  },
);

t.test('a running agent without hq\'s unit is an explained "–", not a ✖: a healthy install exits 0', async (t) => {
  const w = await world(t);
  const r = await doctor(w, [], [join(w.dir, 'missing.service')]);
  t.match(
    line(r.out, 'unit'),
    /^– unit\s+no hq unit is installed .*the agent answers: it runs under something else/,
    'explained, not failed',
  );
  t.equal(
    r.code,
    0,
    `doctor exits 0 (${r.out
      .split('\n')
      .filter((l) => l.startsWith('✖'))
      .join(' | ')})`,
  );
});

t.test('a token the arbiter does not know fails the arbiter check', async (t) => {
  const w = await world(t);
  writeFileSync(join(w.stateDir, 'token'), `${'0'.repeat(64)}\n`, { mode: 0o600 });
  const r = await doctor(w);
  t.equal(r.code, 1, 'doctor exits 1');
  t.match(
    line(r.out, 'arbiter'),
    /^✖ arbiter .*refuses this host's token .* — fix: .*hq-arbiter join mbp --config \S+, then the hq join line/,
    'the arbiter line says the token is refused and how to join again',
  );
  t.match(line(r.out, 'clock'), /^– clock /, 'the clock check is skipped without a record');
});

t.test('a clock far from the arbiter fails the clock check', async (t) => {
  const w = await world(t, { clockOffset: 100 });
  const r = await doctor(w);
  t.equal(r.code, 1, 'doctor exits 1');
  t.match(
    line(r.out, 'clock'),
    /^✖ clock .*clock is (99|100|101) s behind the arbiter's .*more than 2 s — fix: enable time sync/,
    'the clock line gives the offset and the fix',
  );
  const relaxed = await doctor(w, ['--max-offset', '200']);
  t.match(line(relaxed.out, 'clock'), /^✔ clock /, '--max-offset raises the bound');
});

t.test('an invalid config fails first and skips what needs it', async (t) => {
  const w = await world(t);
  w.write({ ttlSeconds: 1 });
  const r = await doctor(w);
  t.equal(r.code, 1, 'doctor exits 1');
  t.match(
    line(r.out, 'config'),
    /^✖ config .*ttlSeconds: is a key of hq-arbiter's config, not of hq-agent's.* — fix: fix "ttlSeconds"/,
    'the config line names the key and its owner (S6: agents read the lease timing from the record)',
  );
  t.match(line(r.out, 'token'), /^– token\s+needs a valid config/, 'checks that need the config are skipped');
  t.match(line(r.out, 'unit'), /^✔ unit /, 'the unit is still checked');
});

t.test('tailscaleBin "" skips the tailscale check', async (t) => {
  const w = await world(t);
  w.write({ tailscaleBin: '' });
  const r = await doctor(w);
  t.equal(r.code, 0, `doctor exits 0:\n${r.out}`);
  t.match(line(r.out, 'tailscale'), /^– tailscale\s+tailscaleBin is ""/, 'tailscale is skipped');
});

t.test('--json prints every check as data; --help and bad flags', async (t) => {
  const w = await world(t);
  const r = await doctor(w, ['--json']);
  t.equal(r.code, 0, 'exit 0');
  const doc = JSON.parse(r.out) as { ok: boolean; checks: DoctorCheck[] };
  t.equal(doc.ok, true, 'ok is true');
  t.equal(
    doc.checks.length,
    15,
    "fifteen checks (hostname; timing: the arbiter's word on this cadence; generation: a report it refused; versions: every host still to upgrade)",
  );
  t.ok(
    doc.checks.every(
      (c) =>
        typeof c.name === 'string' &&
        ['pass', 'fail', 'skip'].includes(c.status) &&
        typeof c.detail === 'string' &&
        typeof c.fix === 'string',
    ),
    'each check has name, status, detail and fix',
  );
  const help = await doctor(w, ['--help']);
  t.equal(help.code, 0, '--help exits 0');
  t.match(help.out, /^Usage: hq doctor/, '--help prints the usage');
  t.match(help.out, /--max-offset S\s+Fails the clock check/, '--help describes --max-offset');
  const bad = await doctor(w, ['--bogus']);
  t.equal(bad.code, 2, 'an unknown flag exits 2');
  t.match(bad.err, /unknown flag --bogus/, 'with one line');
});
