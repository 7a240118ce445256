#!/usr/bin/env node
/**
 * `npm run try`: hq in one minute, on loopback. Starts an arbiter and two agents (mbp, node-b)
 * with the fast settings in a temp directory, issues their member tokens and a peer token,
 * prints what to try, and on Ctrl-C (SIGINT) or SIGTERM stops the three daemons and removes the
 * directory. Needs the build (`npm install` made it). Output: the commands to try, then one line
 * starting with "ready"; the daemons' own logs go to DIR/*.log.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSync } from 'node:fs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ARBITER_CLI = join(root, 'apps/arbiter/dist/cli.js');
const AGENT_CLI = join(root, 'apps/agent/dist/daemon-cli.js');
const HQ_BIN = join(root, 'apps/agent/bin/hq.cjs');
const HOSTS = ['mbp', 'node-b'];

// ── The per-daemon config keys: the one place to change them ─────────────────────────────────
// Each daemon's file holds only the keys that daemon owns: the arbiter the lease timing, each
// agent its cadence (agents read the TTL and the margin from the record).

function arbiterConfig({ port, dataDir, health }) {
  return {
    arbiter: 'cloud-vm',
    candidates: HOSTS,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    viewFreshSeconds: 6,
    promoteAfterChecks: 2,
    checkCron: '*/1 * * * * *',
    probeTimeoutSeconds: 0.5,
    tailscaleBin: '',
    healthUrls: health,
    listen: { host: '127.0.0.1', port },
    dataDir,
  };
}

function agentConfig({ host, arbiterPort, port, stateDir, peers, health }) {
  return {
    hostName: host,
    arbiter: 'cloud-vm',
    arbiterUrl: `http://127.0.0.1:${arbiterPort}`,
    heartbeatCron: '*/1 * * * * *',
    refreshSeconds: 1,
    probeTimeoutSeconds: 0.5,
    requestTimeoutSeconds: 1,
    tailscaleBin: '',
    healthUrls: health,
    peers,
    listen: { host: '127.0.0.1', port },
    stateDir,
  };
}
// ──────────────────────────────────────────────────────────────────────────────────────────────

const say = (line = '') => process.stdout.write(`${line}\n`);
const fail = (message) => {
  process.stderr.write(`try: ${message}\n`);
  process.exit(1);
};

if (!existsSync(ARBITER_CLI) || !existsSync(AGENT_CLI))
  fail('the build is missing: run npm install (or npx tsc -b) first');

/** A free loopback port (bound, read, released: good enough for a demo on one machine). */
const freePort = () =>
  new Promise((done, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => done(port));
    });
  });

const dir = mkdtempSync(join(tmpdir(), 'hq-try-'));
const children = new Map(); // name → ChildProcess
let stopping = false;

async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  say('\ntry: stopping the arbiter and the agents…');
  const exits = [...children.values()]
    .filter((c) => c.exitCode === null && c.signalCode === null)
    .map(
      (c) =>
        new Promise((done) => {
          c.once('exit', done);
          c.kill('SIGTERM');
        }),
    );
  const timeout = new Promise((done) => setTimeout(done, 12_000).unref());
  await Promise.race([Promise.all(exits), timeout]);
  for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  say(`try: removed ${dir}`);
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

function start(name, args) {
  const log = openSync(join(dir, `${name}.log`), 'a');
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', log, log],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  children.set(name, child);
  child.once('exit', (code, signal) => {
    if (!stopping)
      say(
        `try: ${name} exited (${signal ?? `code ${code}`}); press Enter here to start it again. Its log: ${join(dir, `${name}.log`)}`,
      );
  });
  return child;
}

async function waitHealthy(url, what, ms = 30_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  say(`try: ${what} did not answer ${url} within ${ms / 1000} s; see the logs in ${dir}`);
  await stopAll(1);
}

try {
  const [arbiterPort, ...peerPorts] = await Promise.all([freePort(), freePort(), freePort()]);
  const portOf = Object.fromEntries(HOSTS.map((h, i) => [h, peerPorts[i]]));
  const health = Object.fromEntries(HOSTS.map((h) => [h, `http://127.0.0.1:${portOf[h]}/v1/health`]));
  const paths = { arbiter: join(dir, 'arbiter.json') };
  writeFileSync(
    paths.arbiter,
    `${JSON.stringify(arbiterConfig({ port: arbiterPort, dataDir: join(dir, 'arbiter'), health }), null, 2)}\n`,
  );

  // Tokens before the start: the member tokens from the arbiter's own CLI, one peer token.
  const peerToken = randomBytes(32).toString('hex');
  for (const h of HOSTS) {
    const stateDir = join(dir, h);
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    chmodSync(stateDir, 0o700);
    const member = execFileSync(
      process.execPath,
      [ARBITER_CLI, 'token', 'issue', h, '--scope', 'member', '--config', paths.arbiter],
      { encoding: 'utf8' },
    );
    writeFileSync(join(stateDir, 'token'), member, { mode: 0o600 });
    writeFileSync(join(stateDir, 'peer-token'), `${peerToken}\n`, { mode: 0o600 });
    const others = HOSTS.filter((o) => o !== h);
    const cfg = agentConfig({
      host: h,
      arbiterPort,
      port: portOf[h],
      stateDir,
      peers: Object.fromEntries(others.map((o) => [o, `http://127.0.0.1:${portOf[o]}`])),
      health: Object.fromEntries(others.map((o) => [o, health[o]])),
    });
    paths[h] = join(dir, `${h}.json`);
    writeFileSync(paths[h], `${JSON.stringify(cfg, null, 2)}\n`);
  }

  start('arbiter', [ARBITER_CLI, 'serve', '--exit-with-parent', '--config', paths.arbiter]);
  await waitHealthy(`http://127.0.0.1:${arbiterPort}/v1/health`, 'the arbiter');
  // The admin token the arbiter wrote on its first start, where hq failover/maintenance look.
  for (const h of HOSTS) copyFileSync(join(dir, 'arbiter', 'admin.token'), join(dir, h, 'admin-token'));
  chmodSync(join(dir, 'mbp', 'admin-token'), 0o600);
  chmodSync(join(dir, 'node-b', 'admin-token'), 0o600);
  for (const h of HOSTS) start(h, [AGENT_CLI, '--config', paths[h]]);
  await Promise.all(HOSTS.map((h) => waitHealthy(health[h], `the agent ${h}`)));

  // Commands that paste into any shell: the absolute hq, each host's own config.
  const hqCmd = (h, rest) => `node ${HQ_BIN} ${rest} --config ${paths[h]}`;
  const pid = (name) => children.get(name)?.pid;
  say(
    `hq on loopback: an arbiter on 127.0.0.1:${arbiterPort} and two agents, mbp and node-b (TTL 6 s, a check every second).`,
  );
  say(`Everything lives in ${dir}; Ctrl-C here stops the three and removes it.`);
  say();
  say('1. Make mbp HQ, and look at the lease:');
  say(`   ${hqCmd('mbp', 'lease acquire')}`);
  say(`   ${hqCmd('mbp', 'lease status')}`);
  say('2. Ask the fence on each host (mbp: run, node-b: skip), and run a job fenced:');
  say(`   ${hqCmd('mbp', 'fence check --role cron')}`);
  say(`   ${hqCmd('node-b', 'fence check --role cron')}`);
  say(`   node ${HQ_BIN} fence run --role cron --config ${paths.mbp} -- echo "mbp is HQ"`);
  say('3. Kill mbp and watch node-b take over (about 10 s; the events as they happen):');
  say(`   kill ${pid('mbp')}`);
  say(`   ${hqCmd('node-b', 'events --follow')}`);
  say('   then press Enter here to start mbp again (it comes back as the standby).');
  say('4. Hand over on purpose, or force it with the admin token:');
  say(`   ${hqCmd('node-b', 'lease release --handover-to mbp')}`);
  say(`   ${hqCmd('mbp', 'failover --to node-b')}`);
  say('5. The status page:');
  say(`   http://127.0.0.1:${arbiterPort}/`);
  say();
  say(`ready: arbiter pid ${pid('arbiter')}, mbp pid ${pid('mbp')}, node-b pid ${pid('node-b')}, dir ${dir}`);

  // Enter restarts whatever has stopped (the "kill a host" step).
  if (process.stdin.isTTY || process.stdin.readable) {
    process.stdin.on('data', () => {
      for (const h of HOSTS) {
        const c = children.get(h);
        if (c !== undefined && (c.exitCode !== null || c.signalCode !== null)) {
          const again = start(h, [AGENT_CLI, '--config', paths[h]]);
          say(`try: ${h} started again (pid ${again.pid})`);
        }
      }
    });
    process.stdin.on('error', () => undefined);
  }
} catch (err) {
  process.stderr.write(`try: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
  await stopAll(1);
}
