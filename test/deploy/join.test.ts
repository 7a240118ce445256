/**
 * The deploy guide's first day, literally, as real processes on three loopback hosts (127.0.0.1
 * the arbiter, 127.0.0.2 mbp, 127.0.0.3 node-b): hq-arbiter init, the daemon, hq-arbiter join
 * HOST → hq join … on each candidate, the agents, hq lease acquire, and a fenced job that runs on
 * the holder only. No file is written by hand. It also times the walk and counts the commands
 * typed, the figures deploy/README.md quotes.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_CLI, HQ_CLI, shortDir } from '../agent/helpers.js';
import { ARBITER_CLI, freePort, runNode, sleep } from '../system/harness.js';

t.setTimeout(240_000);

const ENV = { HQ_CONFIG: '', HQ_ARBITER_CONFIG: '', NODE_OPTIONS: '' };

async function waitHttp(url: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not yet
    }
    if (Date.now() > until) throw new Error(`${url} did not answer within ${ms} ms`);
    await sleep(200);
  }
}

t.test('init, join, start, acquire: a fenced job runs on the holder only, no file edited by hand', async (t) => {
  const dir = shortDir(t);
  const [pa, p1, p2] = [await freePort(), await freePort(), await freePort()];
  const arb = join(dir, 'arb', 'arbiter.json');
  const cfg = { mbp: join(dir, 'mbp', 'agent.json'), 'node-b': join(dir, 'nb', 'agent.json') } as const;
  const procs: ChildProcess[] = [];
  t.teardown(() => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  });
  const started = Date.now();
  let typed = 0;
  const arbiter = (args: string[]) => {
    typed++;
    return runNode([ARBITER_CLI, ...args], ENV, 60_000);
  };
  const hq = (args: string[]) => {
    typed++;
    return runNode([HQ_CLI, ...args], ENV, 60_000);
  };
  const daemon = (args: string[]) => {
    typed++;
    const p = spawn(process.execPath, args, { env: { ...process.env, ...ENV }, stdio: ['ignore', 'ignore', 'pipe'] });
    procs.push(p);
    return p;
  };

  const init = await arbiter([
    'init',
    '--config',
    arb,
    '--listen',
    `127.0.0.1:${pa}`,
    '--candidates',
    `mbp=http://127.0.0.2:${p1},node-b=http://127.0.0.3:${p2}`,
    '--arbiter',
    'cloud-vm',
    '--tailscale-bin=',
  ]);
  t.equal(init.code, 0, `hq-arbiter init exits 0 (${init.stderr.trim()})`);
  const dataDir = join(dir, 'arb', 'var');
  t.equal(statSync(dataDir).mode & 0o777, 0o700, 'the data directory is 0700');
  t.equal(statSync(join(dataDir, 'peer-token')).mode & 0o777, 0o600, 'the peer token is 0600');
  t.equal(statSync(join(dataDir, 'identity.key')).mode & 0o777, 0o600, 'the identity key is 0600');
  const again = await runNode([ARBITER_CLI, 'init', '--config', arb, '--candidates', 'mbp'], ENV, 60_000);
  t.equal(again.code, 2, 'init refuses to rewrite an existing config');

  daemon([ARBITER_CLI, 'serve', '--config', arb]);
  await waitHttp(`http://127.0.0.1:${pa}/v1/health`, 60_000);

  const bundles = new Map<string, string>();
  for (const host of ['mbp', 'node-b'] as const) {
    const j = await arbiter(['join', host, '--config', arb]);
    t.equal(j.code, 0, `hq-arbiter join ${host} exits 0 (${j.stderr.trim()})`);
    const m = /^hq join (hq1\.[A-Za-z0-9_-]+)\n$/.exec(j.stdout);
    t.ok(m, `it prints one line "hq join BUNDLE" for ${host}`);
    bundles.set(host, m?.[1] ?? '');
  }

  const dry = await runNode([HQ_CLI, 'join', bundles.get('mbp')!, '--dry-run', '--config', cfg.mbp], ENV, 60_000);
  t.equal(dry.code, 0, `hq join --dry-run exits 0 (${dry.stderr.trim()})`);
  t.match(dry.stdout, /would write .*agent\.json/, 'the dry run prints the config it would write');
  t.notOk(existsSync(cfg.mbp), 'and writes nothing');

  const wrong = await runNode(
    [HQ_CLI, 'join', bundles.get('node-b')!, '--config', join(dir, 'x', 'agent.json')],
    { ...ENV },
    60_000,
  );
  t.equal(wrong.code, 0, "node-b's bundle works (on any machine that holds it: the bundle is the secret)");
  const reuse = await runNode([HQ_CLI, 'join', bundles.get('node-b')!, '--config', cfg['node-b']], ENV, 60_000);
  t.equal(reuse.code, 1, 'a used bundle is refused (exit 1)');
  t.match(reuse.stderr, /used already/, 'saying it was used');
  t.notOk(existsSync(cfg['node-b']), 'nothing written by the refused join');
  const fresh = await runNode([ARBITER_CLI, 'join', 'node-b', '--config', arb], ENV, 60_000);
  bundles.set('node-b', /^hq join (\S+)/.exec(fresh.stdout)?.[1] ?? '');

  for (const host of ['mbp', 'node-b'] as const) {
    const r = await hq(['join', bundles.get(host)!, '--config', cfg[host]]);
    t.equal(r.code, 0, `hq join on ${host} exits 0 (${r.stderr.trim()})`);
    const file = JSON.parse(readFileSync(cfg[host], 'utf8')) as Record<string, unknown>;
    t.equal(file['hostName'], host, `${host}'s config names ${host}`);
    t.notOk(
      'ttlSeconds' in file || 'candidates' in file || 'checkCron' in file,
      `${host}'s config holds none of the arbiter's keys`,
    );
    const other = host === 'mbp' ? 'node-b' : 'mbp';
    t.same(Object.keys(file['peers'] as object), [other], `${host}'s peers are the other candidate`);
    const state = join(cfg[host], '..');
    t.equal(statSync(state).mode & 0o777, 0o700, `${host}'s state directory is 0700`);
    for (const f of ['token', 'peer-token', 'agent.json'])
      t.equal(statSync(join(state, f)).mode & 0o777, 0o600, `${host}'s ${f} is 0600`);
  }
  t.equal(
    readFileSync(join(dir, 'mbp', 'peer-token'), 'utf8'),
    readFileSync(join(dir, 'nb', 'peer-token'), 'utf8'),
    'both agents hold the same peer token',
  );
  t.not(
    readFileSync(join(dir, 'mbp', 'token'), 'utf8'),
    readFileSync(join(dir, 'nb', 'token'), 'utf8'),
    'each has its own member token',
  );

  daemon([AGENT_CLI, '--config', cfg.mbp]);
  daemon([AGENT_CLI, '--config', cfg['node-b']]);
  await waitHttp(`http://127.0.0.2:${p1}/v1/health`, 60_000);
  await waitHttp(`http://127.0.0.3:${p2}/v1/health`, 60_000);

  const acquire = await hq(['lease', 'acquire', '--wait', '30', '--config', cfg.mbp]);
  t.equal(acquire.code, 0, `hq lease acquire exits 0 (${acquire.stderr.trim()} ${acquire.stdout.trim()})`);

  const marker = join(dir, 'ran-on');
  const jobArgs = (host: 'mbp' | 'node-b') => [
    'fence',
    'run',
    '--role',
    'cron',
    '--config',
    cfg[host],
    '--',
    process.execPath,
    '-e',
    `require('fs').appendFileSync(${JSON.stringify(marker)}, ${JSON.stringify(`${host}\n`)})`,
  ];
  const job = (host: 'mbp' | 'node-b') => hq(jobArgs(host));
  let ran = await job('mbp');
  for (let i = 0; i < 30 && !existsSync(marker); i++) {
    await sleep(1000);
    typed--; // a retry while the agent learns of the grant is not a command the guide types
    ran = await job('mbp');
  }
  t.equal(ran.code, 0, `the fenced job exits 0 on the holder (${ran.stderr.trim()})`);
  const seconds = (Date.now() - started) / 1000;
  for (const host of ['mbp', 'node-b'] as const) {
    const d = await runNode([HQ_CLI, 'doctor', '--config', cfg[host]], ENV, 60_000);
    const bad = d.stdout.split('\n').filter((l) => l.startsWith('✖'));
    t.same(bad, [], `hq doctor on ${host}: nothing fails on the install the guide made`);
    t.equal(d.code, 0, `hq doctor on ${host} exits 0`);
    t.match(d.stdout, /^✔ peers /m, `${host}'s confirmation path to its peer is proven`);
  }
  const skipped = await runNode([HQ_CLI, ...jobArgs('node-b')], ENV, 60_000);
  t.equal(skipped.code, 0, 'on the standby the job is skipped with exit 0');
  t.equal(readFileSync(marker, 'utf8'), 'mbp\n', 'the job ran on mbp only');
  t.ok(typed <= 10, `${typed} commands typed after the install (at most 10)`);
  t.comment(`first fenced job ${seconds.toFixed(1)} s after hq-arbiter init, ${typed} commands typed`);
});

t.test(
  'hq join refuses an answer not signed by the pinned arbiter, and an expired or garbled bundle, writing nothing',
  async (t) => {
    const { createServer } = await import('node:http');
    const { generateKeyPairSync, createPublicKey, randomBytes } = await import('node:crypto');
    const { encodeBundle, identityPin } = await import('../../packages/runtime/src/join-bundle.js');
    const { signJoin } = await import('../../apps/arbiter/src/join.js');
    const dir = shortDir(t);
    const key = () => {
      const { privateKey } = generateKeyPairSync('ed25519');
      const publicDer = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
      return { privateKey, publicDer, pin: identityPin(publicDer) };
    };
    const real = key();
    const impostor = key();
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const { nonce } = JSON.parse(body) as { nonce: string };
        const payload = {
          host: 'mbp',
          arbiter: 'cloud-vm',
          arbiterUrl: 'http://10.6.6.6:8470',
          peers: { 'node-b': 'http://10.6.6.7:8471' },
          healthUrls: {},
          address: 'http://127.0.0.2:8471',
          tailnetDomain: null,
          tailscaleBin: '',
          memberToken: 'ab'.repeat(32),
          peerToken: 'cd'.repeat(32),
        };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(signJoin(impostor, nonce, payload)));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const bundle = (expiresAt: number) =>
      encodeBundle({ arbiterUrl: url, host: 'mbp', secret: randomBytes(32).toString('hex'), pin: real.pin, expiresAt });
    const config = join(dir, 'mbp', 'agent.json');
    const r = await runNode([HQ_CLI, 'join', bundle(Date.now() / 1000 + 600), '--config', config], ENV, 60_000);
    t.equal(r.code, 1, 'exit 1');
    t.match(r.stderr, /is not that arbiter.*nothing was written/, 'the answer is refused as not the pinned arbiter');
    t.notOk(existsSync(join(dir, 'mbp')), 'no file, no directory');
    const old = await runNode([HQ_CLI, 'join', bundle(Date.now() / 1000 - 1), '--config', config], ENV, 60_000);
    t.equal(old.code, 1, 'an expired bundle: exit 1');
    t.match(old.stderr, /expired at .*run hq-arbiter join mbp on the arbiter again/, 'saying to print a new one');
    const cut = await runNode(
      [HQ_CLI, 'join', bundle(Date.now() / 1000 + 600).slice(0, 30), '--config', config],
      ENV,
      60_000,
    );
    t.equal(cut.code, 2, 'a garbled bundle: exit 2');
    t.equal(cut.stderr.trim().split('\n').length, 1, 'one line');
    t.notOk(existsSync(join(dir, 'mbp')), 'still nothing written');
  },
);
