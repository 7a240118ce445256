/**
 * `npx tsx bench/agent-memory.ts`: where the idle agent's MiB go.
 *
 *  1. Each library of the agent imported alone by a fresh node process (bench/memory-probe.mjs,
 *     `--expose-gc`: a full collection before each reading), beside a bare node.
 *  2. One fresh process importing the daemon's libraries and then its own modules one after
 *     another, in the order the daemon first loads them: what each step adds.
 *  3. What running a library costs beyond importing it (node-cron's schedule, an HTTP request).
 *  4. The daemon itself with the default settings (as bench/agent.ts's footprint part: a real
 *     arbiter, the agent granted the lease, idle): its memory after BENCH_IDLE_SECONDS (default
 *     30), then again after one scrape of `GET /metrics` and one `GET /v1/fence` — what the
 *     agent loads only when asked — and the RSS of one `hq fence run` supervisor while its child
 *     runs. The agent runs with `--import bench/heap-report.mjs` (a
 *     SIGUSR2 handler that writes process.memoryUsage() and V8's heap spaces; no timer).
 *
 * Every process is stopped by PID and the temp dir removed, also on errors. Writes the
 * `agent-memory` section of docs/BENCH.md (BENCH_WRITE=0 to skip). BENCH_MEMORY_RUNS (3):
 * runs of parts 1–3, medians. BENCH_MEMORY_PART=daemon: part 4 alone, printed only.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { ROOT, machineLine, median, sleep, startNode, stopProc, table, writeSection, type Daemon } from './lib.js';

const RUNS = Number(process.env['BENCH_MEMORY_RUNS'] ?? 3);
const IDLE_SECONDS = Number(process.env['BENCH_IDLE_SECONDS'] ?? 30);
const HQ = join(ROOT, 'apps/agent/bin/hq.cjs');
const ARBITER_CLI = join(ROOT, 'apps/arbiter/dist/cli.js');
const AGENT_CLI = process.env['BENCH_AGENT_CLI'] ?? join(ROOT, 'apps/agent/dist/daemon-cli.js');
const PROBE = join(ROOT, 'bench/memory-probe.mjs');
const CHILD_ENV: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };

interface Reading {
  step: string;
  rss: number;
  vmrss: number;
  anon: number;
  file: number;
  heapUsed: number;
  heapTotal: number;
  newSpace: number;
}
type Key = Exclude<keyof Reading, 'step'>;

/** Runs the probe RUNS times on `mods`; per step the median of each figure. */
function probe(mods: readonly string[]): Reading[] {
  const runs = Array.from({ length: RUNS }, () => {
    const r = spawnSync(process.execPath, ['--expose-gc', PROBE, ...mods], {
      cwd: ROOT,
      encoding: 'utf8',
      env: CHILD_ENV,
    });
    if (r.status !== 0) throw new Error(`memory-probe ${mods.join(' ')} exited ${r.status}: ${r.stderr.trim()}`);
    return r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Reading);
  });
  return runs[0]!.map((first, i) => {
    const med = (k: Key): number => median(runs.map((run) => run[i]![k]));
    return {
      step: first.step,
      rss: med('rss'),
      vmrss: med('vmrss'),
      anon: med('anon'),
      file: med('file'),
      heapUsed: med('heapUsed'),
      heapTotal: med('heapTotal'),
      newSpace: med('newSpace'),
    };
  });
}

const f1 = (x: number): string => x.toFixed(1);
const plus = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(1)}`;

/** The libraries of the agent (what each of them is for in the agent). */
const LIBRARIES: ReadonlyArray<readonly [string, string]> = [
  ['pino', 'the log'],
  ['typebox', 'not loaded (the schemas are JSON generated from it)'],
  ['typebox/schema', 'only for a config the quick check cannot pass (its message)'],
  ['typebox/value', 'not loaded (the config is checked by generated code)'],
  ['undici', 'not loaded (the HTTP client is node:http)'],
  ['node-cron', 'cron parser (its timer is not used)'],
  ['prom-client', '`/metrics`'],
  ['fastify', 'the socket and the peer listener'],
  ['ajv', "schema validation, loaded at a route's first request with a schema"],
];

/** The daemon's modules in the order it first loads them (libraries first, as it reaches them). */
const DAEMON_ORDER: readonly string[] = [
  './apps/agent/dist/daemon-spec.js',
  'pino',
  'node-cron',
  'prom-client',
  'fastify',
  '@hq/protocol',
  '@hq/lease-core',
  './apps/agent/dist/config.js',
  './apps/agent/dist/daemon/parts.js',
  './apps/agent/dist/daemon/metrics.js',
  './apps/agent/dist/daemon/servers.js',
  './apps/agent/dist/registry-client/member.js',
  './apps/agent/dist/daemon/main.js',
];

function aloneTable(): string {
  const bare = probe([])[0]!;
  const rows = [['bare `node`', '—', f1(bare.vmrss), '—', '—', '—', f1(bare.heapUsed), f1(bare.newSpace)]];
  for (const [lib, what] of LIBRARIES) {
    const r = probe([lib])[1]!;
    rows.push([
      `\`${lib}\``,
      what,
      f1(r.vmrss),
      plus(r.vmrss - bare.vmrss),
      plus(r.anon - bare.anon),
      plus(r.file - bare.file),
      plus(r.heapUsed - bare.heapUsed),
      f1(r.newSpace),
    ]);
  }
  return table(
    [
      'imported alone',
      'in the agent',
      'VmRSS MiB',
      'Δ VmRSS',
      'Δ anonymous',
      'Δ file-backed',
      'Δ V8 heap used',
      'V8 new space MiB',
    ],
    ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows,
  );
}

/** What running a library costs beyond loading it: each sequence in its own fresh process. */
const ACTIONS: ReadonlyArray<readonly [string, readonly string[]]> = [
  [
    'node-cron: load it, then schedule `*/10 * * * *` (node-cron computes each run with `Intl.DateTimeFormat`)',
    ['node-cron', '+cron-schedule'],
  ],
  [
    "hq's schedule: load packages/runtime's schedule.js (lease-core, node-cron for its parser), then run `wallClockSchedule` of the same expression (node-cron's rules on `Date`)",
    ['./packages/runtime/dist/schedule.js', '+hq-schedule'],
  ],
  ['one `Intl.DateTimeFormat(…).formatToParts()` alone', ['+intl']],
  [
    'a node:http server and one node:http request to it, then undici and one undici `request` to it',
    ['+http-request', 'undici', '+undici-request'],
  ],
];

function actionTable(): string {
  const rows: string[][] = [];
  for (const [what, steps] of ACTIONS) {
    const rs = probe(steps);
    rs.forEach((r, i) => {
      if (i === 0) return;
      const prev = rs[i - 1]!;
      rows.push([
        i === 1 ? what : '',
        `\`${r.step}\``,
        f1(r.vmrss),
        plus(r.vmrss - prev.vmrss),
        plus(r.anon - prev.anon),
        plus(r.file - prev.file),
        plus(r.heapUsed - prev.heapUsed),
      ]);
    });
  }
  return table(
    ['fresh process', 'step', 'VmRSS', 'Δ VmRSS', 'Δ anonymous', 'Δ file-backed', 'Δ V8 heap used'],
    ['l', 'l', 'r', 'r', 'r', 'r', 'r'],
    rows,
  );
}

function orderTable(): string {
  const rs = probe(DAEMON_ORDER);
  const rows = rs.map((r, i) => {
    const prev = i === 0 ? null : rs[i - 1]!;
    const d = (k: Key): string => (prev === null ? '—' : plus(r[k] - prev[k]));
    return [
      i === 0 ? 'bare `node`' : `\`${r.step.replace(/^\.\//, '')}\``,
      f1(r.rss),
      f1(r.vmrss),
      d('vmrss'),
      d('anon'),
      d('file'),
      d('heapUsed'),
      f1(r.newSpace),
    ];
  });
  return table(
    [
      'then imports',
      'memoryUsage().rss',
      'VmRSS',
      'Δ VmRSS',
      'Δ anonymous',
      'Δ file-backed',
      'Δ V8 heap used',
      'V8 new space',
    ],
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows,
  );
}

interface HeapReport {
  vmrss: number;
  anon: number;
  file: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  spaces: Record<string, number>;
}

/** VmRSS and its anonymous and file-backed parts of a process, MiB (/proc/PID/status). */
function procMemory(pid: number): { vmrss: number; anon: number; file: number } {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB$`, 'm').exec(st)?.[1] ?? NaN) / 1024;
  return { vmrss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** SIGUSR2 to the agent and its report (bench/heap-report.mjs). */
async function heapReport(proc: ChildProcess, file: string): Promise<HeapReport> {
  rmSync(file, { force: true });
  proc.kill('SIGUSR2');
  for (let i = 0; i < 100; i++) {
    await sleep(50);
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as HeapReport;
    } catch {
      // not written yet
    }
  }
  throw new Error('the agent wrote no heap report');
}

/** Spawns the agent (with the heap report preloaded); resolves with its peer port on `agent started`. */
function startAgent(config: string, report: string): Promise<{ proc: ChildProcess; peerPort: number }> {
  // BENCH_NODE_FLAGS (e.g. `--max-semi-space-size=1`): node flags for the agent, as in bench/agent.ts.
  const flags = (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
  const proc = spawn(
    process.execPath,
    [...flags, '--import', join(ROOT, 'bench/heap-report.mjs'), AGENT_CLI, '--config', config],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...CHILD_ENV, HQ_BENCH_HEAP_REPORT: report },
    },
  );
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error('hq-agent did not start')), 60_000);
    proc.on('exit', (code) => rej(new Error(`hq-agent exited ${code}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string; peerPort?: number };
        if (rec.msg === 'agent started' && typeof rec.peerPort === 'number') {
          clearTimeout(timer);
          res({ proc, peerPort: rec.peerPort });
        }
      } catch {
        // not JSON
      }
    });
  });
}

async function daemonTable(): Promise<{ text: string; idle: HeapReport }> {
  const dir = mkdtempSync(join(tmpdir(), 'hq-bmem-'));
  let arb: Daemon | null = null;
  let agent: ChildProcess | null = null;
  try {
    const arbConfig = join(dir, 'arbiter.json');
    writeFileSync(
      arbConfig,
      JSON.stringify({
        dataDir: join(dir, 'var'),
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        candidates: ['mbp'],
      }),
    );
    const token = execFileSync(
      process.execPath,
      [ARBITER_CLI, 'token', 'issue', 'mbp', '--scope', 'member', '--config', arbConfig],
      { encoding: 'utf8', env: CHILD_ENV },
    ).trim();
    arb = await startNode([ARBITER_CLI, 'serve', '--config', arbConfig], 'hq-arbiter listening', CHILD_ENV);
    const arbStarted = performance.now();
    const state = join(dir, 'mbp');
    mkdirSync(state, { mode: 0o700 });
    writeFileSync(join(state, 'token'), `${token}\n`, { mode: 0o600 });
    writeFileSync(join(state, 'peer-token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const agentConfig = join(dir, 'mbp.json');
    const socketPath = join(dir, 'mbp.sock');
    writeFileSync(
      agentConfig,
      JSON.stringify({
        hostName: 'mbp',
        arbiterUrl: arb.base,
        stateDir: state,
        socketPath,
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        peers: {},
      }),
    );
    const report = join(dir, 'heap.json');
    const started = await startAgent(agentConfig, report);
    agent = started.proc;
    // As bench/agent.ts: the only candidate is granted the lease once the arbiter's start wait is over.
    await sleep(Math.max(0, arbStarted + 10_500 - performance.now()));
    spawnSync(process.execPath, [HQ, 'heartbeat', '--config', agentConfig], { env: CHILD_ENV });
    spawnSync(process.execPath, [HQ, 'lease', 'acquire', '--wait', '30', '--config', agentConfig], { env: CHILD_ENV });
    const fence = spawnSync(
      process.execPath,
      [HQ, 'fence', 'check', '--role', 'cron', '--json', '--config', agentConfig],
      { env: CHILD_ENV, encoding: 'utf8' },
    );
    const reason = (JSON.parse(fence.stdout || '{}') as { reason?: string }).reason ?? 'unknown';
    process.stderr.write(`agent-memory: the agent's fence says ${reason}; idle for ${IDLE_SECONDS} s…\n`);
    await sleep(IDLE_SECONDS * 1000);
    const idle = await heapReport(agent, report);
    const scrape = await request(`http://127.0.0.1:${started.peerPort}/metrics`);
    const metricsText = await scrape.body.text();
    if (scrape.statusCode !== 200 || !metricsText.includes('hq_agent_fence_decisions_total'))
      throw new Error(`/metrics answered ${scrape.statusCode}`);
    await sleep(5000);
    const scraped = await heapReport(agent, report);
    // The supervisor of a fenced job (≤ 45 MiB) while its child runs.
    const sup = spawn(
      process.execPath,
      [HQ, 'fence', 'run', '--role', 'cron', '--config', agentConfig, '--', 'sleep', '4'],
      { env: CHILD_ENV, stdio: 'ignore' },
    );
    await sleep(2000);
    const supervisor = procMemory(sup.pid!);
    await new Promise((r) => sup.once('exit', r));
    const row = (name: string, r: HeapReport): string[] => [
      name,
      f1(r.vmrss),
      f1(r.anon),
      f1(r.file),
      f1(r.heapUsed),
      f1(r.spaces['new_space'] ?? NaN),
      f1(r.spaces['old_space'] ?? NaN),
      f1((r.spaces['code_space'] ?? 0) + (r.spaces['large_object_space'] ?? 0)),
      f1(r.anon - Object.values(r.spaces).reduce((a, b) => a + b, 0)),
    ];
    const text = table(
      [
        `\`hq-agent\` (defaults, ${reason})`,
        'VmRSS MiB',
        'anonymous',
        'file-backed',
        'V8 heap used',
        'new space',
        'old space',
        'code + large objects',
        'anonymous outside the V8 heap',
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      [row(`idle ${IDLE_SECONDS} s after the acquire`, idle), row('5 s after one `GET /metrics`', scraped)],
    );
    const supText = table(
      ['process', 'VmRSS MiB', 'anonymous', 'file-backed'],
      ['l', 'r', 'r', 'r'],
      [
        [
          '`hq fence run --role cron -- sleep 4` (the supervisor, 2 s after its start, its child running)',
          f1(supervisor.vmrss),
          f1(supervisor.anon),
          f1(supervisor.file),
        ],
      ],
    );
    return { text: `${text}\n\n${supText}`, idle };
  } finally {
    if (agent !== null) await stopProc(agent);
    if (arb !== null) await stopProc(arb.proc);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter'), join(ROOT, 'apps/agent')],
    { stdio: 'inherit' },
  );
  // The fence path's CommonJS bundle, as `npm run build` writes it (bin/hq.cjs runs it while it is fresh).
  execFileSync(process.execPath, [join(ROOT, 'scripts/bundle-fence.mjs')], { stdio: 'inherit' });
  const load0 = loadavg()[0]!;
  if (process.env['BENCH_MEMORY_PART'] === 'daemon') {
    // The daemon alone (a quick look while changing it): printed, docs/BENCH.md left alone.
    process.stdout.write(`${(await daemonTable()).text}\n`);
    return;
  }
  const alone = aloneTable();
  const order = orderTable();
  const actions = actionTable();
  const daemon = await daemonTable();
  const uname = execFileSync('uname', ['-a'], { encoding: 'utf8' }).trim();
  const nproc = execFileSync('nproc', { encoding: 'utf8' }).trim();
  const machine = machineLine(
    `, ${RUNS} runs per probe (medians), ${IDLE_SECONDS} s idle, load average ${load0.toFixed(1)} at the start`,
  );
  process.stdout.write(
    `${machine}\n${uname}; nproc ${nproc}\n\n${alone}\n\n${order}\n\n${actions}\n\n${daemon.text}\n`,
  );
  writeSection(
    'agent-memory',
    `## Where the idle agent's memory goes

Command: \`npx tsx bench/agent-memory.ts\` (\`BENCH_MEMORY_RUNS\` (3), \`BENCH_IDLE_SECONDS\` (30); \`BENCH_WRITE=0\` to not rewrite this file).
Each probe is a fresh \`node --expose-gc bench/memory-probe.mjs MODULES…\`: it imports the modules one after another and
after each runs two full collections and reads \`process.memoryUsage()\`, \`/proc/self/status\` (VmRSS, RssAnon, RssFile)
and V8's new space; medians of ${RUNS} runs. The daemon is started as in the footprint section (defaults, a real
arbiter, granted the lease) with \`--import bench/heap-report.mjs\`, which writes the same figures and every V8
space on SIGUSR2.

Run: ${new Date().toISOString()} — ${machine}; \`${uname}\`, nproc ${nproc}.

Each library alone (Δ over a bare node):

${alone}

One process, the daemon's libraries and then its own modules in the order it first loads them (each row: what that
import added to everything above it):

${order}

What running a library costs beyond loading it (steps starting with \`+\` are actions of bench/memory-probe.mjs; each
row: what that step added):

${actions}

The daemon itself:

${daemon.text}

How to read it. File-backed pages are the \`node\` binary's code and data that the process touched (shared with
every node process on the host, but counted in each one's VmRSS); they grow with the parts of Node a daemon
uses (the HTTP server and client, streams, the ESM loader), not with the size of a library. The anonymous part is
the V8 heap — what the modules keep (\`V8 heap used\`), the young generation (\`new space\`, which V8 grows while
start-up allocates and keeps at that size) and the old generation's free room — plus what lives outside it
(malloc: compiled code metadata, module records, buffers).
`,
  );
}

await main();
