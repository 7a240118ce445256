/**
 * Whole system, real processes: a service that follows HQ. An arbiter and two agents on
 * loopback (fast settings), and on each host `hq fence run --follow --role cron` running a worker
 * that appends a tick (host, pid, generation, time) to one shared log every 50 ms. After the
 * acquire exactly one worker ticks; `hq failover --to` moves it in seconds; kill -9 of the
 * holder's agent moves it back after the lock-delay, and the old worker's last tick is before the
 * new one's first; the follower waits through its agent's restart; SIGTERM to a follower stops its
 * worker and exits 0. A worker that crashes is started again on the same host with a growing
 * back-off, never on the other.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, FAST_ARBITER, HQ_CLI, ROOT, processAlive, sleep, type HostName } from './harness.js';

// Each scenario has its own cluster, and each mostly waits on real time: they run side by side.
t.jobs = 3;

const LOCK_DELAY_SECONDS = FAST_ARBITER.ttlSeconds + FAST_ARBITER.safetyMarginSeconds;

interface Tick {
  readonly host: HostName;
  readonly pid: number;
  readonly generation: string;
  readonly t: number;
  readonly kind: 'start' | 'tick';
}

/** The worker: a start line, then a tick every 50 ms, each one appendFileSync (one write) to the shared log. */
const WORKER = `
const { appendFileSync } = require('node:fs');
const [log, host, crash] = process.argv.slice(1);
const line = (kind) => appendFileSync(log, JSON.stringify({ host, pid: process.pid, generation: process.env.HQ_GENERATION, t: Date.now(), kind }) + '\\n');
line('start');
if (crash === 'crash') process.exit(1);
setInterval(() => line('tick'), 50);
`;

function ticks(log: string): Tick[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Tick);
}

interface Follower {
  readonly proc: ChildProcess;
  readonly exit: Promise<number | null>;
  stderr: string;
}

function follow(c: Cluster, host: HostName, log: string, crash = false): Follower {
  const proc = spawn(
    process.execPath,
    [
      HQ_CLI,
      'fence',
      'run',
      '--follow',
      '--role',
      'cron',
      '--grace',
      '1',
      '--config',
      c.agentConfig(host),
      '--',
      process.execPath,
      '-e',
      WORKER,
      log,
      host,
      crash ? 'crash' : 'run',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } },
  );
  const f: Follower = { proc, exit: new Promise((done) => proc.once('exit', (code) => done(code))), stderr: '' };
  proc.stderr?.on('data', (b: Buffer) => (f.stderr += b.toString()));
  return f;
}

/** Every tick of `from` precedes every tick of `to` in the window given: never both at once. */
function handover(
  all: readonly Tick[],
  from: HostName,
  to: HostName,
  after: number,
): { lastOld: number; firstNew: number } {
  const old = all.filter((x) => x.host === from && x.t >= after);
  const fresh = all.filter((x) => x.host === to && x.t >= after);
  return { lastOld: Math.max(...old.map((x) => x.t), after), firstNew: Math.min(...fresh.map((x) => x.t)) };
}

t.test(
  'one worker fleet-wide: acquire, failover --to, kill -9 of the holder’s agent, an agent restart, SIGTERM',
  async (t) => {
    const c = await Cluster.withHolder(t);
    const log = join(c.dir, 'ticks.log');
    writeFileSync(log, '');
    const fm = follow(c, 'mbp', log);
    const fb = follow(c, 'node-b', log);
    t.teardown(() => {
      fm.proc.kill('SIGKILL');
      fb.proc.kill('SIGKILL');
    });

    // 1. After the acquire exactly one worker runs: mbp's.
    await c.waitFor(
      async () => ticks(log).some((x) => x.host === 'mbp' && x.kind === 'tick'),
      20_000,
      "mbp's worker ticks",
    );
    await sleep(2_000);
    const first = ticks(log);
    t.equal(first.filter((x) => x.host === 'node-b').length, 0, 'node-b’s worker never started');
    t.equal(new Set(first.map((x) => x.pid)).size, 1, 'one worker, started once');
    t.equal(first[0]?.generation, '1', 'it runs with HQ_GENERATION=1');

    // 2. hq failover --to node-b: the worker moves in seconds, the old one stopped first.
    const before = Date.now();
    const r = await c.hq('node-b', ['failover', '--to', 'node-b', '--json'], { HQ_ADMIN_TOKEN: c.adminToken });
    t.equal(r.code, 0, `failover exits 0 (${r.stderr.trim()})`);
    const moved = await c.waitFor(
      async () => ticks(log).some((x) => x.host === 'node-b' && x.kind === 'tick'),
      20_000,
      "node-b's worker ticks",
    );
    const h1 = handover(ticks(log), 'mbp', 'node-b', before);
    t.ok(
      h1.lastOld < h1.firstNew,
      `mbp's last tick (${h1.lastOld - before} ms) is before node-b's first (${h1.firstNew - before} ms)`,
    );
    t.ok(moved < LOCK_DELAY_SECONDS, `moved in ${moved.toFixed(1)} s, inside the ${LOCK_DELAY_SECONDS} s lock-delay`);
    t.comment(
      `failover --to: node-b's first tick ${h1.firstNew - before} ms after hq failover started; mbp's last ${h1.lastOld - before} ms`,
    );
    t.equal(
      ticks(log).filter((x) => x.host === 'node-b' && x.kind === 'start')[0]?.generation,
      '2',
      'node-b’s worker runs with generation 2',
    );
    t.equal(fm.proc.exitCode, null, "mbp's follower waits on");

    // 3. kill -9 of the holder's agent (node-b): back to mbp after the lock-delay, node-b's worker stopped first.
    const killed = Date.now();
    await c.kill('node-b', 'SIGKILL');
    await c.waitFor(
      async () => ticks(log).some((x) => x.host === 'mbp' && x.t > killed && x.kind === 'tick'),
      40_000,
      "mbp's worker ticks again",
    );
    const h2 = handover(ticks(log), 'node-b', 'mbp', killed);
    t.ok(
      h2.lastOld < h2.firstNew,
      `node-b's last tick (${h2.lastOld - killed} ms after the kill) is before mbp's first (${h2.firstNew - killed} ms)`,
    );
    t.ok(
      h2.firstNew - killed >= (LOCK_DELAY_SECONDS - 2) * 1000,
      `mbp waited out the lock-delay (${h2.firstNew - killed} ms)`,
    );
    t.comment(
      `kill -9 of the holder's agent: its worker's last tick ${h2.lastOld - killed} ms after, the new holder's first ${h2.firstNew - killed} ms after`,
    );
    t.equal(fb.proc.exitCode, null, "node-b's follower waits on without its agent");

    // 4. node-b's agent comes back: its follower still waits, and runs nothing.
    await c.startAgent('node-b');
    await sleep(3_000);
    t.equal(fb.proc.exitCode, null, "node-b's follower survived its agent's restart");
    const since = Date.now() - 3_000;
    t.equal(
      ticks(log).filter((x) => x.host === 'node-b' && x.t > since).length,
      0,
      'and runs no worker while mbp holds',
    );

    // 5. SIGTERM to the followers: the worker stops, both exit 0.
    const workers = new Set(ticks(log).map((x) => x.pid));
    fm.proc.kill('SIGTERM');
    fb.proc.kill('SIGTERM');
    t.equal(await fm.exit, 0, `mbp's follower exits 0 on SIGTERM (${fm.stderr.trim()})`);
    t.equal(await fb.exit, 0, `node-b's follower exits 0 on SIGTERM (${fb.stderr.trim()})`);
    t.same(
      [...workers].filter((pid) => processAlive(pid)),
      [],
      'no worker is left',
    );
  },
);

t.test(
  'a worker that crashes is started again on the same host with a growing back-off, never on the other',
  async (t) => {
    const c = await Cluster.withHolder(t);
    const log = join(c.dir, 'ticks.log');
    writeFileSync(log, '');
    const fm = follow(c, 'mbp', log, true);
    const fb = follow(c, 'node-b', log, true);
    t.teardown(() => {
      fm.proc.kill('SIGKILL');
      fb.proc.kill('SIGKILL');
    });
    await c.waitFor(async () => ticks(log).filter((x) => x.kind === 'start').length >= 4, 30_000, 'four starts');
    const starts = ticks(log).filter((x) => x.kind === 'start');
    t.same([...new Set(starts.map((x) => x.host))], ['mbp'], 'every start is on mbp');
    const gaps = starts.slice(1).map((x, i) => x.t - (starts[i] as Tick).t);
    t.ok(
      gaps.every((g, i) => i === 0 || g > (gaps[i - 1] as number)),
      `the gaps grow: ${gaps.join(', ')} ms`,
    );
    t.ok((gaps[0] as number) >= 900, `the first restart waits about 1 s (${gaps[0]} ms)`);
    t.match(fm.stderr, /exited with 1: starting it again in 1 s/, 'the follower says so on stderr');
    fm.proc.kill('SIGTERM');
    t.equal(await fm.exit, 0, 'SIGTERM in the back-off: exit 0');
  },
);

t.test(
  '@hq/agent/client in a real process: kill -9 of its agent aborts the tenure before the other host may run',
  async (t) => {
    const c = await Cluster.withHolder(t);
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 15_000, 'mbp may run');
    const client = join(ROOT, 'apps/agent/dist/client/index.js');
    const script = `
    const { tenures } = await import(${JSON.stringify(client)});
    for await (const t of tenures('cron', { config: ${JSON.stringify(c.agentConfig('mbp'))} })) {
      console.log(JSON.stringify({ kind: 'tenure', generation: t.generation, at: Date.now() }));
      await new Promise((r) => t.signal.addEventListener('abort', r, { once: true }));
      console.log(JSON.stringify({ kind: 'aborted', why: t.signal.reason.why, at: Date.now() }));
      break;
    }`;
    const proc = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    t.teardown(() => proc.kill('SIGKILL'));
    let out = '';
    proc.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    const said = (kind: string): { kind: string; generation?: number; why?: string; at: number } | undefined =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { kind: string; at: number })
        .find((x) => x.kind === kind);
    await c.waitFor(async () => said('tenure') !== undefined, 15_000, `the client holds a tenure (${out})`);
    t.equal(said('tenure')?.generation, 1, 'a tenure of generation 1');
    let nodeBRuns: number | null = null;
    let on = true;
    const watch = (async () => {
      while (on && nodeBRuns === null) {
        if ((await c.fence('node-b'))?.run === true) nodeBRuns = Date.now();
        await sleep(20);
      }
    })();
    const killed = Date.now();
    await c.kill('mbp', 'SIGKILL');
    await c.waitFor(async () => said('aborted') !== undefined, 15_000, 'the tenure aborts');
    await c.waitFor(async () => nodeBRuns !== null, 40_000, 'node-b may run');
    on = false;
    await watch;
    const aborted = said('aborted') as { why: string; at: number };
    t.equal(aborted.why, 'validity', 'with its agent gone, the validity ran out: the abort is the client’s own timer');
    t.ok(
      aborted.at < (nodeBRuns as unknown as number),
      `aborted ${aborted.at - killed} ms after the kill, before node-b may run (${(nodeBRuns as unknown as number) - killed} ms)`,
    );
    t.ok(
      aborted.at - killed < FAST_ARBITER.ttlSeconds * 1000,
      `within the ${FAST_ARBITER.ttlSeconds} s ttl of the kill`,
    );
  },
);
