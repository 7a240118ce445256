/**
 * The join bundle's guarantees, in-process: single use, expiry, bound to its host, signed by the
 * arbiter whose pin it carries, and a newer bundle replacing an older unused one. The whole
 * path through real processes is test/deploy/join.test.ts.
 */
import t from 'tap';
import { generateKeyPairSync, createPublicKey } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { decodeBundle, identityPin, verifyJoinAnswer } from '../../packages/runtime/src/join-bundle.js';
import {
  createJoin,
  fleetFiles,
  fleetPayload,
  loadIdentity,
  parseTtl,
  redeemTicket,
  signJoin,
} from '../../apps/arbiter/src/join.js';
import { arbiterCommand, fastConfig } from './helper.js';
import { writeConfig } from './child.js';

const NOW = 1_800_000_000;

function setup(t: Tap.Test) {
  const dir = t.testdir();
  const cfg = fastConfig(join(dir, 'var'), {
    healthUrls: { mbp: 'http://127.0.0.2:8471/v1/health', 'node-b': 'http://127.0.0.3:8471/v1/health' },
  });
  return { dir, cfg };
}

t.test('a bundle is redeemed once, only for its host, only before it expires', async (t) => {
  const { cfg } = setup(t);
  const a = await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW);
  const b = decodeBundle(a.bundle);
  if (!b.ok) throw new Error(b.problem);
  t.equal(b.bundle.host, 'mbp', 'the bundle names its host');
  t.equal(b.bundle.expiresAt, NOW + 900, 'and its expiry');
  const tickets = readdirSync(fleetFiles(cfg.dataDir).joins);
  t.equal(tickets.length, 1, 'one ticket is kept');
  t.notOk(
    readFileSync(join(fleetFiles(cfg.dataDir).joins, tickets[0]!), 'utf8').includes(b.bundle.secret),
    'the ticket does not hold the secret',
  );
  t.notOk((tickets[0] as string).includes(b.bundle.secret), 'nor does its name');
  t.equal(statSync(join(fleetFiles(cfg.dataDir).joins, tickets[0]!)).mode & 0o777, 0o600, 'the ticket is 0600');
  t.equal(statSync(fleetFiles(cfg.dataDir).peerToken).mode & 0o777, 0o600, 'the peer token is 0600');
  t.equal(statSync(fleetFiles(cfg.dataDir).identity).mode & 0o777, 0o600, 'the identity key is 0600');

  t.match(
    await redeemTicket(cfg.dataDir, 'node-b', b.bundle.secret, NOW, false),
    { ok: false },
    'another host cannot redeem it',
  );
  t.match(await redeemTicket(cfg.dataDir, 'mbp', b.bundle.secret, NOW, true), { ok: true }, 'a dry run is answered');
  t.match(
    await redeemTicket(cfg.dataDir, 'mbp', b.bundle.secret, NOW + 900, false),
    { ok: false, problem: /expired/ },
    'at its expiry it is refused',
  );
  const c = decodeBundle((await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW)).bundle);
  if (!c.ok) throw new Error(c.problem);
  const [one, two] = await Promise.all([
    redeemTicket(cfg.dataDir, 'mbp', c.bundle.secret, NOW, false),
    redeemTicket(cfg.dataDir, 'mbp', c.bundle.secret, NOW, false),
  ]);
  t.equal([one, two].filter((r) => r.ok).length, 1, 'of two concurrent redemptions exactly one wins');
  t.match(
    await redeemTicket(cfg.dataDir, 'mbp', c.bundle.secret, NOW, false),
    { ok: false, problem: /used already/ },
    'a used bundle is refused',
  );
});

t.test('a newer bundle for a host replaces its unused older one', async (t) => {
  const { cfg } = setup(t);
  const first = decodeBundle((await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW)).bundle);
  const other = decodeBundle((await createJoin(cfg, 'node-b', 'http://127.0.0.1:8470', 900, NOW)).bundle);
  await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW);
  if (!first.ok || !other.ok) throw new Error('bundle');
  t.match(
    await redeemTicket(cfg.dataDir, 'mbp', first.bundle.secret, NOW, false),
    { ok: false },
    "mbp's first bundle no longer works",
  );
  t.match(
    await redeemTicket(cfg.dataDir, 'node-b', other.bundle.secret, NOW, false),
    { ok: true },
    "node-b's bundle still does",
  );
});

t.test('the answer verifies only with the pinned identity and the nonce sent', async (t) => {
  const { cfg } = setup(t);
  const b = decodeBundle((await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW)).bundle);
  if (!b.ok) throw new Error(b.problem);
  const identity = await loadIdentity(cfg.dataDir);
  if (identity === null) throw new Error('no identity');
  t.equal(identity.pin, b.bundle.pin, "the bundle pins this arbiter's key");
  const payload = fleetPayload(cfg, 'mbp', 'http://127.0.0.1:8470', {
    memberToken: 'a'.repeat(64),
    peerToken: 'b'.repeat(64),
  });
  t.same(payload.peers, { 'node-b': 'http://127.0.0.3:8471' }, 'the peers are the other candidates only');
  t.equal(payload.address, 'http://127.0.0.2:8471', "the host's own address");
  const answer = signJoin(identity, 'ab'.repeat(16), payload);
  t.match(
    verifyJoinAnswer(answer, b.bundle.pin, 'ab'.repeat(16)),
    { ok: true, payload: { host: 'mbp' } },
    'the genuine answer verifies',
  );
  t.match(
    verifyJoinAnswer(answer, b.bundle.pin, 'cd'.repeat(16)),
    { ok: false, problem: /signature/ },
    'an answer replayed for another nonce does not',
  );
  const tampered = { ...answer, payload: answer.payload.replace('127.0.0.3', '10.6.6.6') };
  t.match(
    verifyJoinAnswer(tampered, b.bundle.pin, 'ab'.repeat(16)),
    { ok: false, problem: /signature/ },
    'an altered payload does not',
  );
  const { privateKey } = generateKeyPairSync('ed25519');
  const publicDer = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  const impostor = signJoin({ privateKey, publicDer, pin: identityPin(publicDer) }, 'ab'.repeat(16), payload);
  t.match(
    verifyJoinAnswer(impostor, b.bundle.pin, 'ab'.repeat(16)),
    { ok: false, problem: /not that arbiter/ },
    'another key, however well it signs, is refused',
  );
});

t.test('bundles that are not whole are refused with one line', async (t) => {
  t.match(decodeBundle('hq1.'), { ok: false }, 'empty');
  t.match(decodeBundle('hq2.abc'), { ok: false, problem: /hq1\./ }, 'wrong prefix');
  const { cfg } = setup(t);
  const whole = (await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW)).bundle;
  t.match(decodeBundle(whole.slice(0, -10)), { ok: false, problem: /cut short|no / }, 'cut short');
  t.equal(parseTtl('15m'), 900, '15m');
  t.equal(parseTtl('2h'), 7200, '2h');
  t.equal(parseTtl('90'), 90, 'plain seconds');
  t.equal(parseTtl('25h'), null, 'more than a day is refused');
  t.equal(parseTtl('0'), null, 'zero is refused');
});

t.test('hq-arbiter join prints one line, refuses a non-candidate, and needs a config file', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir, {
    healthUrls: { mbp: 'http://127.0.0.2:8471/v1/health', 'node-b': 'http://127.0.0.3:8471/v1/health' },
  });
  const r = await arbiterCommand(['join', 'mbp', '--config', config, '--url', 'http://127.0.0.1:8470', '--ttl', '10m']);
  t.equal(r.code, 0, `join exits 0 (${r.stderr.trim()})`);
  t.match(r.stdout, /^hq join hq1\.[A-Za-z0-9_-]+\n$/, 'one line: the command to run on the host');
  t.match(
    r.stderr,
    /works once, for mbp only, and is not shown again/,
    'stderr says it is single use and not shown again',
  );
  const bad = await arbiterCommand(['join', 'ops', '--config', config, '--url', 'http://127.0.0.1:8470']);
  t.equal(bad.code, 2, 'a non-candidate is a usage error');
  t.match(bad.stderr, /"ops" is not a candidate \(candidates: mbp, node-b\)/, 'naming the candidates');
  const noUrl = await arbiterCommand(['join', 'mbp', '--config', config, '--ttl', 'soon']);
  t.equal(noUrl.code, 2, 'a bad --ttl is a usage error');
});

t.test('a one-shot command without a config file never creates a database', async (t) => {
  const dir = t.testdir();
  const cwd = process.cwd();
  const home = process.env['HOME'];
  process.chdir(dir);
  process.env['HOME'] = dir;
  t.teardown(() => {
    process.chdir(cwd);
    process.env['HOME'] = home;
  });
  for (const args of [['token', 'issue', 'mbp'], ['token', 'list'], ['backup', '--to', join(dir, 'b.db')], ['check']]) {
    const r = await arbiterCommand(args);
    t.equal(r.code, 2, `${args.join(' ')} exits 2`);
    t.match(
      r.stderr,
      /no config file found .* pass the daemon's --config .*nothing was created/,
      `${args.join(' ')} says to pass --config`,
    );
  }
  t.notOk(existsSync(join(dir, 'var')), 'no ./var was created');
});

t.test('a ticket the daemon may not trust is refused naming why, not as an unknown bundle', async (t) => {
  const { chmodSync } = await import('node:fs');
  const { cfg } = setup(t);
  const b = decodeBundle((await createJoin(cfg, 'mbp', 'http://127.0.0.1:8470', 900, NOW)).bundle);
  if (!b.ok) throw new Error(b.problem);
  const dir = fleetFiles(cfg.dataDir).joins;
  chmodSync(join(dir, readdirSync(dir)[0]!), 0o644);
  t.match(
    await redeemTicket(cfg.dataDir, 'mbp', b.bundle.secret, NOW, false),
    { ok: false, problem: /must be mode 0600 .*as the daemon's user/ },
    'the mode is named',
  );
});

t.test(
  "the agent config a join writes: only the host's keys; tailnet names left to the arbiter's candidates",
  async (t) => {
    const { agentConfigFor } = await import('../../apps/agent/src/cli/join-fleet.js');
    const { cfg } = setup(t);
    const pinned = agentConfigFor(
      fleetPayload(cfg, 'mbp', 'http://127.0.0.1:8470', { memberToken: null, peerToken: null }),
      '/s',
      undefined,
    );
    t.same(
      Object.keys(pinned).sort(),
      ['arbiter', 'arbiterUrl', 'healthUrls', 'hostName', 'listen', 'peers', 'stateDir', 'tailscaleBin'],
      'pinned addresses are written, and nothing the arbiter owns',
    );
    t.same(pinned['listen'], { host: '127.0.0.2', port: 8471 }, 'an IP address is listened on as it is');
    const tailnet = fastConfig(join(t.testdir(), 'var'), {
      tailnetDomain: 'your-tailnet.ts.net',
      tailscaleBin: 'tailscale',
    });
    const byName = agentConfigFor(
      fleetPayload(tailnet, 'mbp', 'http://cloud-vm.your-tailnet.ts.net:8470', { memberToken: null, peerToken: null }),
      '/s',
      '/run/hq-agent/agent.sock',
    );
    t.notOk(
      'peers' in byName || 'healthUrls' in byName,
      'tailnet names are not written: a later candidate is followed without an edit',
    );
    t.same(byName['listen'], { host: '127.0.0.1', port: 8471 }, 'a name is published from loopback by tailscale serve');
    t.equal(byName['socketPath'], '/run/hq-agent/agent.sock', '--socket is written');
    t.notOk('tailscaleBin' in byName, "the agent's own tailscale default is kept when the fleet pings");
  },
);
