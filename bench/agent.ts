/**
 * `npm run bench` (second part): the agent's fence path and the daemons' footprint.
 *
 *  1. The fence socket under BENCH_FENCE_CONNECTIONS (default 32) closed-loop clients, against
 *     a real agent that holds the lease (every 200 body is checked: `run: true`, reason holder).
 *  2. `hq fence check` as a whole process beside a bare `node` unix-socket client and
 *     `curl --unix-socket`: BENCH_RUNS (default 30) sequential runs each, interleaved, after
 *     a warm-up; median and p90 wall time.
 *  3. The start-up cost of `hq fence run --role cron -- true` over `true` alone.
 *  4. The footprint with the default settings (heartbeat and checks every 10 minutes): VmRSS of
 *     an idle arbiter and an idle holder agent after BENCH_IDLE_SECONDS (default 60), and the
 *     CPU time (utime + stime) each used over that idle window.
 *
 * Parts 1–3 use the system tests' Cluster (real arbiter and two agents on loopback, fast
 * settings); part 4 starts its own daemons with default settings. Everything is stopped by PID
 * and the temp dirs removed, also on errors. Writes the `fence` and `footprint` sections of
 * docs/BENCH.md (BENCH_WRITE=0 to skip).
 */
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import {
  CLK_TCK,
  ROOT,
  SECONDS,
  cpuSeconds,
  machineLine,
  median,
  quantile,
  sleep,
  startNode,
  stopProc,
  table,
  writeSection,
  startHeldCluster,
  type Daemon,
} from './lib.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 30);
const WARMUP = 5;
const IDLE_SECONDS = Number(process.env['BENCH_IDLE_SECONDS'] ?? 60);
/** The strace window counting an idle daemon's event-loop wake-ups. */
const WAKEUP_SECONDS = Number(process.env['BENCH_WAKEUP_SECONDS'] ?? 60);
/** Seconds between the acquire and the idle window: start-up's garbage collections end first. */
const SETTLE_SECONDS = Number(process.env['BENCH_SETTLE_SECONDS'] ?? 15);
const HQ = join(ROOT, 'apps/agent/bin/hq.cjs');
const ARBITER_CLI = join(ROOT, 'apps/arbiter/dist/cli.js');
const AGENT_CLI = join(ROOT, 'apps/agent/dist/daemon-cli.js');
/** Children run without the bench's loader (tsx) in NODE_OPTIONS: as a user's shell runs them. */
const CHILD_ENV: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };

const FENCE_ROUNDS = Number(process.env['BENCH_FENCE_ROUNDS'] ?? 4);
/** Connections of the lean fence client, and the requests each keeps in flight (pipelined). */
const FENCE_CONNECTIONS = Number(process.env['BENCH_FENCE_CONNECTIONS'] ?? 8);
const FENCE_DEPTH = Number(process.env['BENCH_FENCE_DEPTH'] ?? 16);
const LEAN_CLIENT = join(ROOT, 'bench/lean-client.mjs');
const execFileAsync = promisify(execFile);

const ms = (x: number): string => x.toFixed(1);

/** One round of the lean client against one server: answers, the server's and the client's CPU per answer, the load. */
interface Round {
  readonly name: string;
  readonly answers: number;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  /** Answers that were not a 200 with the holder's `run: true` for cron. */
  readonly bad: number;
  readonly cpuUs: number;
  readonly clientCpuUs: number;
  /** The 1-minute load average, mean of its values at the round's start and end. */
  readonly load: number;
}

/** The rounds of one server: medians of answers/s, p50, p99 and CPU per answer; every round's figures. */
function summarize(rs: readonly Round[]) {
  return {
    name: rs[0]?.name ?? '',
    rps: median(rs.map((x) => x.rps)),
    each: rs.map((x) => Math.round(x.rps)).join(', '),
    p50: median(rs.map((x) => x.p50)),
    p99: median(rs.map((x) => x.p99)),
    cpuUs: median(rs.map((x) => x.cpuUs)),
    cpuEach: rs.map((x) => x.cpuUs.toFixed(1)).join(', '),
    clientCpuUs: median(rs.map((x) => x.clientCpuUs)),
    answers: rs.reduce((n, x) => n + x.answers, 0),
    bad: rs.reduce((n, x) => n + x.bad, 0),
    loads: rs.map((x) => x.load.toFixed(1)).join(', '),
  };
}
const verdict = (ok: boolean): string => (ok ? 'met' : 'missed');

/** Wall time of one process run, in ms; throws unless it exits with `expect`. */
function timeRun(cmd: string, args: readonly string[], expect: number): number {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { env: CHILD_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  const elapsed = performance.now() - t0;
  if (r.status !== expect)
    throw new Error(
      `${cmd} ${args.join(' ')} exited ${r.status} (want ${expect}): ${String(r.stderr).trim()} ${String(r.stdout).trim()}`,
    );
  return elapsed;
}

interface Timed {
  readonly name: string;
  readonly times: number[];
}

/** Runs every command WARMUP times, then RUNS rounds of each in turn (interleaved: noise hits all alike). */
function timeInterleaved(
  cmds: readonly { name: string; cmd: string; args: readonly string[]; expect: number }[],
): Timed[] {
  for (const c of cmds) for (let i = 0; i < WARMUP; i++) timeRun(c.cmd, c.args, c.expect);
  const out = cmds.map((c) => ({ name: c.name, times: [] as number[] }));
  for (let i = 0; i < RUNS; i++)
    for (const [k, c] of cmds.entries()) out[k]!.times.push(timeRun(c.cmd, c.args, c.expect));
  for (const o of out) o.times.sort((a, b) => a - b);
  return out;
}

// ---------------------------------------------------------------------------------------
// parts 1–3: the fence path

async function fencePart(): Promise<void> {
  const c = await startHeldCluster();
  try {
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 20_000, 'mbp may run');
    const socketPath = c.socket('mbp');
    const config = c.agentConfig('mbp');

    // 1. the socket under load; every answer must be the holder's run: true. Beside it, the
    // ceiling: a bare node:http server on a unix socket answering a constant body of the same
    // size (what this machine and this client allow at all).
    const ceilingSock = join(c.dir, 'ceiling.sock');
    const ceilingJs = join(c.dir, 'ceiling.mjs');
    writeFileSync(
      ceilingJs,
      `import http from 'node:http';
const body = process.argv[3];
http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}).listen(process.argv[2], () => process.stdout.write('ready\\n'));
`,
    );
    const sampleBody = JSON.stringify(await c.fence('mbp'));
    const ceiling = spawn(process.execPath, [ceilingJs, ceilingSock, sampleBody], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: CHILD_ENV,
    });
    const agentPid = c.procs.get('mbp')?.pid;
    if (agentPid === undefined) throw new Error("the agent mbp's process is not known");
    // One lean client for both servers (bench/lean-client.mjs: raw sockets, pipelined, so the
    // server is the bottleneck, not the client), in alternating rounds (load on the host hits
    // both alike), with the same check of every body for both.
    const rounds: { ceiling: Round[]; agent: Round[] } = { ceiling: [], agent: [] };
    try {
      await new Promise<void>((res, rej) => {
        ceiling.once('exit', (code) => rej(new Error(`the ceiling server exited ${code}`)));
        ceiling.stdout!.once('data', () => res());
      });
      // Run asynchronously: the cluster's daemons write to pipes this process reads.
      const round = async (name: string, socket: string, pid: number): Promise<Round> => {
        const cpu0 = cpuSeconds(pid);
        const load0 = loadavg()[0]!;
        const { stdout: out } = await execFileAsync(
          process.execPath,
          [LEAN_CLIENT, socket, '/v1/fence?role=cron', String(SECONDS), String(FENCE_CONNECTIONS), String(FENCE_DEPTH)]
            // every answer must hold these (the holder's run for cron)
            .concat(['"run":true', '"reason":"holder"', '"role":"cron"']),
          { env: CHILD_ENV, encoding: 'utf8' },
        );
        const r = JSON.parse(out) as {
          answers: number;
          rps: number;
          p50: number;
          p99: number;
          bad: number;
          clientCpuUs: number;
        };
        const cpuUs = ((cpuSeconds(pid) - cpu0) * 1e6) / Math.max(1, r.answers);
        return { name, ...r, cpuUs, load: (load0 + loadavg()[0]!) / 2 };
      };
      for (let i = 0; i < FENCE_ROUNDS; i++) {
        rounds.ceiling.push(await round('ceiling: bare node:http, constant body', ceilingSock, ceiling.pid!));
        rounds.agent.push(await round('agent: GET /v1/fence?role=cron', socketPath, agentPid));
      }
    } finally {
      await stopProc(ceiling);
    }
    const ceil = summarize(rounds.ceiling);
    const r = summarize(rounds.agent);
    if (ceil.bad > 0) throw new Error(`the ceiling server gave ${ceil.bad} answers that are not its constant body`);
    const wrong = r.bad;
    const sample = sampleBody;
    // Each round's agent ÷ the bare server's just before it (paired: the same load on the host).
    const paired = rounds.agent.map((a, i) => ({
      rps: a.rps / rounds.ceiling[i]!.rps,
      cpu: a.cpuUs / rounds.ceiling[i]!.cpuUs,
    }));
    // Only counted when the lease stayed put the whole run (a slow heartbeat could lose it).
    const socketOk = wrong === 0;

    // 2. whole processes, sequential
    const dir = c.dir;
    const bare = join(dir, 'bare.mjs');
    writeFileSync(
      bare,
      `import http from 'node:http';
http.get({ socketPath: process.argv[2], path: '/v1/fence?role=cron' }, (res) => {
  let t = '';
  res.on('data', (d) => (t += d));
  res.on('end', () => { process.stdout.write(t + '\\n'); process.exitCode = JSON.parse(t).run ? 0 : 1; });
});
`,
    );
    const checks = timeInterleaved([
      {
        name: '`hq fence check --role cron`',
        cmd: process.execPath,
        args: [HQ, 'fence', 'check', '--role', 'cron', '--config', config],
        expect: 0,
      },
      { name: 'bare `node` client (one `http.get`)', cmd: process.execPath, args: [bare, socketPath], expect: 0 },
      {
        name: '`curl --unix-socket`',
        cmd: 'curl',
        args: ['-sf', '--unix-socket', socketPath, 'http://localhost/v1/fence?role=cron'],
        expect: 0,
      },
    ]);
    const [hq, node] = checks as [Timed, Timed, Timed];
    const ratio = median(hq.times) / median(node.times);

    // 3. hq fence run start-up
    const runs = timeInterleaved([
      {
        name: '`hq fence run --role cron -- true`',
        cmd: process.execPath,
        args: [HQ, 'fence', 'run', '--role', 'cron', '--config', config, '--', 'true'],
        expect: 0,
      },
      { name: '`true`', cmd: 'true', args: [], expect: 0 },
    ]);
    const [run, bareTrue] = runs as [Timed, Timed];
    const added = median(run.times) - median(bareTrue.times);

    const machine = machineLine(
      `, ${SECONDS} s of load, ${FENCE_CONNECTIONS} connections × ${FENCE_DEPTH} pipelined, ${RUNS} runs per command after ${WARMUP} warm-up`,
    );
    const socketTable = table(
      [
        'server (medians of the rounds)',
        'server CPU µs per answer',
        'each round',
        'answers/s',
        'each round',
        'p50 ms',
        'p99 ms',
        'client CPU µs per answer',
        'load average, each round',
        'answers (not run:true/holder)',
      ],
      ['l', 'r', 'l', 'r', 'l', 'r', 'r', 'r', 'l', 'r'],
      [ceil, r].map((x) => [
        x.name,
        x.cpuUs.toFixed(1),
        x.cpuEach,
        Math.round(x.rps),
        x.each,
        x.p50.toFixed(3),
        x.p99.toFixed(3),
        x.clientCpuUs.toFixed(1),
        x.loads,
        `${x.answers} (${x.bad})`,
      ]),
    );
    const pairedText = paired.map((p) => `${p.cpu.toFixed(2)} ×`).join(', ');
    const procRows = [...checks, ...runs].map((t) => [
      t.name,
      ms(median(t.times)),
      ms(quantile(t.times, 0.9)),
      ms(t.times[0]!),
    ]);
    const procTable = table(['process', 'median ms', 'p90 ms', 'min ms'], ['l', 'r', 'r', 'r'], procRows);
    const goals = table(
      ['goal', 'measured', ''],
      ['l', 'r', 'l'],
      [
        [
          'socket ≥ 0.8 × the bare node:http server, answers/s',
          `${(r.rps / ceil.rps).toFixed(2)} × (each round ${paired.map((p) => p.rps.toFixed(2)).join(', ')})`,
          verdict(r.rps / ceil.rps >= 0.8 && socketOk),
        ],
        [
          '(context) agent ÷ bare server, server CPU per answer',
          `${(r.cpuUs / ceil.cpuUs).toFixed(2)} × (each round ${pairedText})`,
          '—',
        ],
        ['socket ≥ 40,000 answers/s', `${Math.round(r.rps)}/s`, verdict(r.rps >= 40_000 && socketOk)],
        ['`hq fence check` ≤ 1.2 × the bare node client (medians)', `${ratio.toFixed(2)} ×`, verdict(ratio <= 1.2)],
        ['`hq fence run` adds ≤ 150 ms to `true` (medians)', `${ms(added)} ms`, verdict(added <= 150)],
        [
          '(context) of it Node’s own start-up: the bare node client − `true`',
          `${ms(median(node.times) - median(bareTrue.times))} ms`,
          '—',
        ],
      ],
    );
    process.stdout.write(`${machine}\n\n${socketTable}\n\n${procTable}\n\n${goals}\n\nsample answer: ${sample}\n`);
    writeSection(
      'fence',
      `## The fence path

Command: \`npm run bench\` (this part alone: \`npx tsx bench/agent.ts\`; \`BENCH_SECONDS\`, \`BENCH_FENCE_CONNECTIONS\`,
\`BENCH_RUNS\`, \`BENCH_IDLE_SECONDS\` to change the run; \`BENCH_WRITE=0\` to not rewrite this file).
It builds the apps, starts the system tests' cluster (a real arbiter and two real agents on loopback with
the fast test settings), grants mbp the lease with \`hq lease acquire\`, then:
the agent's unix socket beside a bare node:http server on a unix socket answering a constant body of the same
size, both driven by one lean client (bench/lean-client.mjs: plain node, raw \`node:net\` sockets kept alive,
${FENCE_CONNECTIONS} connections with ${FENCE_DEPTH} requests each in flight, every answer checked for a 200 with \`run: true\`,
reason \`holder\`, role \`cron\`) so that the server, not the client, runs out of CPU first; ${FENCE_ROUNDS} rounds of ${SECONDS} s
each (\`BENCH_FENCE_ROUNDS\`, \`BENCH_FENCE_DEPTH\`), alternating bare server and agent so other load on the host hits
both alike. The figure that judges the server is its CPU per answer (utime + stime from /proc around each round ÷
its answers): less moved by other load on the host than answers/s. The host's 1-minute load average is given for
each round; whole processes run one after another, interleaved, ${RUNS} times each
after ${WARMUP} warm-ups (wall time from spawn to exit, the bench's own spawn cost included alike).

Run: ${new Date().toISOString()} — ${machine}.

${socketTable}

${procTable}

${goals}

Sample answer: \`${sample}\`

The socket answers \`GET /v1/fence?role=R\` (a configured role, spelled exactly so) from a plain node:http
handler in front of Fastify (its \`serverFactory\`, apps/agent/src/daemon/fence.ts); everything else — unknown
roles, other query strings, other paths — goes to the Fastify routes (the fence route sends the same answer, fence.ts), and test/agent/fence-fast-path.test.ts
compares the two byte for byte. A request costs the decision (lease-core \`settle\` + \`fence\`), its
\`JSON.stringify\` and one \`writeHead\` that carries the protocol header too (\`SENDS_VERSION\`,
packages/runtime/src/protocol.ts); the decision and its JSON take about 2 µs of CPU measured in-process,
and node's HTTP internals (request parsing, the \`IncomingMessage\`/\`ServerResponse\` pair, \`writev\`) are
paid by both servers. \`hq fence check|run\` start from bin/hq.cjs (CommonJS) straight into one CommonJS file,
apps/agent/dist/cli/fence-main.cjs (\`npm run build\` bundles the seven light modules of the fence path and the
supervisor into it, scripts/bundle-fence.mjs: no command table, no ES module loader), so the rest of their time
is Node's own start-up.

For shell scripts the fastest path is \`curl --unix-socket\` — no Node start-up at all:

\`\`\`sh
curl -sf --unix-socket ~/.hq/agent.sock 'http://localhost/v1/fence?role=cron' | grep -q '"run":true' && ./job
\`\`\`

\`hq fence check\` costs one Node start-up on top of it and adds the exit codes (0 run, 1 skip, 2 unknown
role or bad config, and "skip" when the agent is down), text or \`--json\` output, and the config lookup
(\`--config\`, \`$HQ_CONFIG\`); \`hq fence run\` also supervises the child (S3).
`,
    );
    if (!socketOk && wrong > 0) process.stderr.write(`warning: ${wrong} fence answers were not run:true/holder\n`);
  } finally {
    await c.stopAll();
  }
}

// ---------------------------------------------------------------------------------------
// part 4: footprint with the default settings

/** VmRSS and its anonymous and file-backed parts (the node binary's pages, shared by every node process), MiB. */
function rssMiB(pid: number): { rss: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB$`, 'm').exec(status)?.[1] ?? NaN) / 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** What importing each library costs a node process (bench/rss-probe.mjs), median of 3 runs each. */
function libraryFootprint(): string {
  const sets: Array<[string, string[]]> = [
    ['bare `node`', []],
    ['fastify', ['fastify']],
    ['undici', ['undici']],
    ['pino', ['pino']],
    ['prom-client', ['prom-client']],
    ['typebox (the schemas of both daemons)', ['typebox']],
    ['better-sqlite3', ['better-sqlite3']],
    [
      'what the agent loads at start (no TypeBox for a valid config): fastify, pino, prom-client, node-cron',
      ['fastify', 'pino', 'prom-client', 'node-cron'],
    ],
  ];
  const rows = sets.map(([name, mods]) => {
    const runs = [0, 1, 2].map(() => {
      const r = spawnSync(process.execPath, [join(ROOT, 'bench/rss-probe.mjs'), ...mods], {
        cwd: ROOT,
        encoding: 'utf8',
      });
      return JSON.parse(r.stdout) as { rss: number; anon: number; file: number };
    });
    const med = (k: 'rss' | 'anon' | 'file') => median(runs.map((x) => x[k])).toFixed(1);
    return [name, `${med('rss')} MiB`, `${med('anon')} MiB`, `${med('file')} MiB`];
  });
  return table(['a node process that imports', 'VmRSS', 'anonymous', 'file-backed'], ['l', 'r', 'r', 'r'], rows);
}

/** One process's event-loop wake-ups over the strace window, and the timeouts it waited with. */
interface Wakeups {
  readonly count: number;
  /** `epoll_pwait`'s timeout argument, rounded to a readable step → how many waits used it. */
  readonly timeouts: ReadonlyMap<string, number>;
}

/** A wait's timeout as a reader wants it: `-1` (none: woken by I/O), `0`, ms under 1 s, else whole seconds. */
function timeoutLabel(ms: number): string {
  if (ms < 0) return 'none (I/O)';
  if (ms === 0) return '0';
  const step = ms <= 10 ? ms : Math.round(ms / 10) * 10; // 995–999 ms is "1 s", not "1000 ms"
  return step < 1000 ? `${step} ms` : `${Math.round(ms / 1000)} s`;
}

/**
 * How often each process's event loop woke up over `seconds` (its main thread's epoll_pwait
 * calls under strace) and with which timeouts (a timer due in 10 s waits ~10,000 ms): the direct
 * test for polling loops. null without strace.
 */
async function loopWakeups(pids: readonly number[], seconds: number): Promise<Array<Wakeups | null>> {
  if (spawnSync('strace', ['-V']).status !== 0) return pids.map(() => null);
  return Promise.all(
    pids.map(
      (pid) =>
        new Promise<Wakeups | null>((done) => {
          const out = join(tmpdir(), `hq-bench-strace-${pid}.txt`);
          const p = spawn('strace', ['-p', String(pid), '-e', 'trace=epoll_wait,epoll_pwait', '-o', out], {
            stdio: 'ignore',
          });
          setTimeout(() => p.kill('SIGINT'), seconds * 1000);
          p.on('exit', () => {
            try {
              const calls = readFileSync(out, 'utf8')
                .split('\n')
                .filter((l) => /^epoll_p?wait\(/.test(l));
              const timeouts = new Map<string, number>();
              for (const l of calls) {
                const m = /^epoll_p?wait\(\d+, .*?, \d+, (-?\d+)/.exec(l);
                const k = m === null ? '?' : timeoutLabel(Number(m[1]));
                timeouts.set(k, (timeouts.get(k) ?? 0) + 1);
              }
              done({ count: calls.length, timeouts });
            } catch {
              done(null);
            } finally {
              rmSync(out, { force: true });
            }
          });
        }),
    ),
  );
}

/** "12 (10 s ×6, none (I/O) ×4, …)": the most used timeouts first. */
function wakeupText(w: Wakeups | null | undefined): string {
  if (w === null || w === undefined) return 'no strace';
  const parts = [...w.timeouts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ×${n}`);
  return `${w.count} (${parts.join(', ')})`;
}

/** Spawns the agent daemon and resolves on its `agent started` log line. */
function startAgent(config: string): Promise<ChildProcess> {
  // BENCH_NODE_FLAGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`) to profile the idle daemons.
  const flags = (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
  const proc = spawn(process.execPath, [...flags, AGENT_CLI, '--config', config], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: CHILD_ENV,
  });
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error('hq-agent did not start')), 60_000);
    proc.on('exit', (code) => rej(new Error(`hq-agent exited ${code}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        if ((JSON.parse(line) as { msg?: string }).msg === 'agent started') {
          clearTimeout(timer);
          res(proc);
        }
      } catch {
        // not JSON
      }
    });
  });
}

async function footprintPart(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hq-bfp-'));
  let arb: Daemon | null = null;
  let agent: ChildProcess | null = null;
  try {
    const arbConfig = join(dir, 'arbiter.json');
    // Defaults except what a loopback run needs: no tailscale, a temp dataDir, a free port, and
    // one candidate so that this one agent can be granted the lease after the start wait.
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
    const flags = (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
    arb = await startNode([...flags, ARBITER_CLI, 'serve', '--config', arbConfig], 'hq-arbiter listening', CHILD_ENV);
    const arbStarted = performance.now();
    const state = join(dir, 'mbp');
    mkdirSync(state, { mode: 0o700 });
    writeFileSync(join(state, 'token'), `${token}\n`, { mode: 0o600 });
    writeFileSync(join(state, 'peer-token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const agentConfig = join(dir, 'mbp.json');
    writeFileSync(
      agentConfig,
      JSON.stringify({
        hostName: 'mbp',
        arbiterUrl: arb.base,
        stateDir: state,
        socketPath: join(dir, 'mbp.sock'),
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        peers: {},
      }),
    );
    const started = performance.now();
    agent = await startAgent(agentConfig);
    // The holder's idle state is the usual one. A grant is immediate (no lock-delay) once the
    // only candidate has reported its seen generation in a request the arbiter counts for its
    // start waits (from 2 × requestTimeoutSeconds = 10 s after its start, S2.3, S2.4).
    await sleep(Math.max(0, arbStarted + 10_500 - performance.now()));
    spawnSync(process.execPath, [HQ, 'heartbeat', '--config', agentConfig], { env: CHILD_ENV });
    const acq = spawnSync(
      process.execPath,
      [HQ, 'lease', 'acquire', '--wait', '30', '--json', '--config', agentConfig],
      { env: CHILD_ENV, encoding: 'utf8' },
    );
    const fence = spawnSync(
      process.execPath,
      [HQ, 'fence', 'check', '--role', 'cron', '--json', '--config', agentConfig],
      { env: CHILD_ENV, encoding: 'utf8' },
    );
    const reason = (JSON.parse(fence.stdout || '{}') as { reason?: string }).reason ?? 'unknown';
    if (process.env['BENCH_DEBUG'] === '1') process.stderr.write(`${acq.stdout}\n${fence.stdout}\n`);
    process.stderr.write(
      `footprint: acquire exited ${acq.status}; the agent's fence says ${reason}; idle for ${IDLE_SECONDS} s…\n`,
    );
    // The acquire's aftermath (the agent's heartbeat, JIT) and V8's post-start-up collections
    // (the memory reducer shrinks the heap some seconds after the start-up work) end first.
    await sleep(SETTLE_SECONDS * 1000);
    const wakeups = await loopWakeups([arb.proc.pid!, agent.pid!], WAKEUP_SECONDS);
    const pids = { arbiter: arb.proc.pid!, agent: agent.pid! };
    const cpu0 = { arbiter: cpuSeconds(pids.arbiter), agent: cpuSeconds(pids.agent) };
    await sleep((IDLE_SECONDS * 1000) / 2);
    const cpuMid = { arbiter: cpuSeconds(pids.arbiter), agent: cpuSeconds(pids.agent) };
    await sleep((IDLE_SECONDS * 1000) / 2);
    const cpu = { arbiter: cpuSeconds(pids.arbiter) - cpu0.arbiter, agent: cpuSeconds(pids.agent) - cpu0.agent };
    // The second half alone: the steady state, after V8's post-start GCs (see the section's note).
    const cpu2 = { arbiter: cpuSeconds(pids.arbiter) - cpuMid.arbiter, agent: cpuSeconds(pids.agent) - cpuMid.agent };
    const mem = { arbiter: rssMiB(pids.arbiter), agent: rssMiB(pids.agent) };
    const rss = { arbiter: mem.arbiter.rss, agent: mem.agent.rss };
    const upSeconds = (performance.now() - started) / 1000;

    const machine = machineLine(`, ${IDLE_SECONDS} s idle`);
    const rows = table(
      [
        'daemon',
        `VmRSS after ${Math.round(upSeconds)} s`,
        'of it anonymous',
        'of it file-backed',
        `CPU (utime+stime) over ${IDLE_SECONDS} s idle`,
        'of it in the second half',
        `event-loop wake-ups in ${WAKEUP_SECONDS} s (by the wait's timeout)`,
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
      (['arbiter', 'agent'] as const).map((d) => [
        d === 'arbiter' ? '`hq-arbiter serve` (defaults)' : `\`hq-agent\` (defaults, ${reason})`,
        `${mem[d].rss.toFixed(1)} MiB`,
        `${mem[d].anon.toFixed(1)} MiB`,
        `${mem[d].file.toFixed(1)} MiB`,
        `${(cpu[d] * 1000).toFixed(0)} ms`,
        `${(cpu2[d] * 1000).toFixed(0)} ms`,
        wakeupText(wakeups[d === 'arbiter' ? 0 : 1]),
      ]),
    );
    const goals = table(
      ['goal', 'measured', ''],
      ['l', 'r', 'l'],
      [
        ['idle arbiter VmRSS ≤ 80 MiB', `${rss.arbiter.toFixed(1)} MiB`, verdict(rss.arbiter <= 80)],
        ['idle agent VmRSS ≤ 60 MiB', `${rss.agent.toFixed(1)} MiB`, verdict(rss.agent <= 60)],
        [
          `idle agent CPU ≤ 0.02 s per 30 s (${(IDLE_SECONDS * 20) / 30} ms in this window)`,
          `${(cpu.agent * 1000).toFixed(0)} ms`,
          verdict(cpu.agent <= (IDLE_SECONDS * 0.02) / 30 + 1e-9),
        ],
      ],
    );
    const libs = libraryFootprint();
    process.stdout.write(`\n${machine}\n\n${rows}\n\n${goals}\n\n${libs}\n`);
    writeSection(
      'footprint',
      `## Footprint of idle daemons

Command: \`npm run bench\` (this part alone: \`npx tsx bench/agent.ts\`; \`BENCH_IDLE_SECONDS\` to shorten the idle window).
Both daemons run with the **default** settings (checks and heartbeats on \`*/10 * * * *\`, TTL 1500 s, refresh
every 60 s, the registry every 30 s), changed only where a loopback run needs it: \`tailscaleBin: ""\`,
temp \`dataDir\`/\`stateDir\`, free ports on 127.0.0.1, and \`candidates: ["mbp"]\` so that the one agent
can take the lease (\`hq lease acquire --wait 30\`) and idle as the holder. RSS is \`VmRSS\` from
\`/proc/PID/status\` at the end of the window, split into \`RssAnon\` (the process's own memory: the V8 heap,
malloc) and \`RssFile\` (mapped files, nearly all of it the pages of the \`node\` binary that the process
touched — shared with every other node process on the host); CPU is utime + stime from \`/proc/PID/stat\` over
the window, which starts ${SETTLE_SECONDS} s (\`BENCH_SETTLE_SECONDS\`) plus a ${WAKEUP_SECONDS} s count of event-loop wake-ups after the acquire (clock ticks of ${1000 / CLK_TCK} ms). A cron minute divisible by 10 inside the window adds one heartbeat and one check.
Wake-ups are the main thread's \`epoll_pwait\` calls under \`strace\` for ${WAKEUP_SECONDS} s (\`BENCH_WAKEUP_SECONDS\`), counted by the timeout each wait
was given (a wait for a timer due in 30 s shows as "30 s"; "none (I/O)" waits for a socket or a signal only): a polling loop shows as
hundreds of short waits (prom-client's event-loop-lag monitor sampled every 10 ms and woke the idle arbiter ~190 times a
second until the arbiter set \`eventLoopMonitoringPrecision: 1000\`).

Run: ${new Date().toISOString()} — ${machine}.

${rows}

${goals}

What the libraries cost before the daemon does anything (each imported by a process that then waits 2 s,
\`bench/rss-probe.mjs\`, same run):

${libs}

What the memory is: the file-backed part is the \`node\` binary's pages (a bare \`node\` that only waits touches about
35 MiB of them and has about 43 MiB of VmRSS; every part of Node a daemon uses — its HTTP server, crypto, streams —
touches more), so a VmRSS of 60 MiB leaves the agent some 17 MiB of its own. The anonymous part is the V8 heap
(the modules' code and data, the apps built at start) and malloc's arenas. Where each MiB goes, library by
library: the next section (\`npx tsx bench/agent-memory.ts\`). Both daemons keep V8's
young generation at its initial size and start without the optimizing compiler, which is back once they listen
(packages/runtime/src/v8-footprint.ts); the arbiter loads etcd's modules and undici (≈ 19 MiB) only for
\`store.kind: "etcd"\`.

What wakes them: the agent's timers are its own — the registry member and its port lease every 30 s, the
refresh every 60 s, the crons. Its waits of "5 s" are the deadline of a request in flight (\`requestTimeoutSeconds\`),
ended by the answer, not a timer that fires. Nothing else fires: Node's HTTP server sweeps its
connections for request deadlines every 30 s from \`listen\` on, so both listeners now sweep only while a
connection is open (packages/runtime/src/idle-server.ts), and a request whose next one comes later than node's
5 s keep-alive closes with its answer instead of leaving a socket whose timer fires 5 s later
(\`keepAlive\` in packages/runtime/src/http.ts). The arbiter's "1 s" waits are prom-client's event-loop-delay
histogram (\`eventLoopMonitoringPrecision: 1000\`) and its 30 s wait Node's sweep of its one listener; it is not a
laptop daemon and keeps both.
`,
    );
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
  const only = process.env['BENCH_AGENT_PART'];
  if (only !== 'footprint') await fencePart();
  if (only !== 'fence') await footprintPart();
}

await main();
