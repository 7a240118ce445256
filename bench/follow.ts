/**
 * `npx tsx bench/follow.ts`: services that follow HQ, on the system tests' cluster at the fast
 * settings (test/system/harness.ts). On each host `hq fence run --follow --role cron` runs a
 * worker that writes a `start` line when it runs and an `end` line on SIGTERM; the lease moves by
 * `hq failover --to` (BENCH_FOLLOW_ROUNDS rounds, default 3, back and forth). Per round:
 *  - fence change → child running: the new holder's agent's first `allowed` log line (its decision
 *    turned to run; a waiting follower's long poll is answered in that instant) to its worker's
 *    `start` line;
 *  - loss → child stopped: the old holder's agent's first `skipped` line to its worker's `end` line.
 * Then the standby agent's CPU time over BENCH_FOLLOW_IDLE_S seconds (default 20) with no
 * follower, and with ten followers waiting on it (from /proc/PID/stat: Linux only).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Cluster, HQ_CLI, type HostName } from '../test/system/harness.js';
import { machineLine, median, sleep, startHeldCluster, table, writeSection } from './lib.js';

const ROUNDS = Number(process.env['BENCH_FOLLOW_ROUNDS'] ?? 3);
const IDLE_S = Number(process.env['BENCH_FOLLOW_IDLE_S'] ?? 20);

const WORKER = `
const { appendFileSync } = require('node:fs');
const [log, host] = process.argv.slice(1);
const line = (kind) => appendFileSync(log, JSON.stringify({ host, pid: process.pid, t: Date.now(), kind }) + '\\n');
line('start');
process.on('SIGTERM', () => { line('end'); process.exit(0); });
setInterval(() => {}, 1000);
`;

interface Line {
  host: HostName;
  pid: number;
  t: number;
  kind: 'start' | 'end';
}

const lines = (log: string): Line[] =>
  existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Line)
    : [];

function follower(c: Cluster, h: HostName, argv: readonly string[]): ChildProcess {
  return spawn(
    process.execPath,
    [HQ_CLI, 'fence', 'run', '--follow', '--role', 'cron', '--grace', '2', '--config', c.agentConfig(h), '--', ...argv],
    {
      stdio: 'ignore',
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );
}

/** The `time` of the first agent log line of `event` for role cron at or after `since` (ms). */
function firstEvent(c: Cluster, h: HostName, event: string, since: number): number {
  for (const l of (c.logs.get(h) ?? '').split('\n')) {
    if (!l.includes(`"event":"${event}"`) || !l.includes('"role":"cron"')) continue;
    const time = (JSON.parse(l) as { time: number }).time;
    if (time >= since) return time;
  }
  return NaN;
}

function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const after = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(after[11]) + Number(after[12])) / 100; // utime + stime, in clock ticks of 1/100 s
}

const c = await startHeldCluster();
const procs: ChildProcess[] = [];
try {
  const log = join(c.dir, 'follow.log');
  writeFileSync(log, '');
  for (const h of ['mbp', 'node-b'] as const) procs.push(follower(c, h, [process.execPath, '-e', WORKER, log, h]));
  await c.waitFor(
    async () => lines(log).some((l) => l.host === 'mbp' && l.kind === 'start'),
    30_000,
    "mbp's worker runs",
  );
  const rows: (string | number)[][] = [];
  const starts: number[] = [];
  const stops: number[] = [];
  let from: HostName = 'mbp';
  for (let i = 0; i < ROUNDS; i++) {
    const to = c.other(from);
    await sleep(2_000);
    const since = Date.now();
    const r = await c.hq(to, ['failover', '--to', to], { HQ_ADMIN_TOKEN: c.adminToken });
    if (r.code !== 0) throw new Error(`hq failover exited ${r.code}: ${r.stderr.trim()}`);
    await c.waitFor(
      async () => lines(log).some((l) => l.host === to && l.kind === 'start' && l.t >= since),
      30_000,
      `${to}'s worker runs`,
    );
    const started = lines(log).find((l) => l.host === to && l.kind === 'start' && l.t >= since) as Line;
    const ended = lines(log).find((l) => l.host === from && l.kind === 'end' && l.t >= since);
    const allowed = firstEvent(c, to, 'allowed', since);
    const skipped = firstEvent(c, from, 'skipped', since);
    const toRun = (started.t - allowed) / 1000;
    const toStop = ended === undefined ? NaN : (ended.t - skipped) / 1000;
    starts.push(toRun);
    stops.push(toStop);
    rows.push([
      `${from} → ${to}`,
      toStop.toFixed(3),
      toRun.toFixed(3),
      ended !== undefined && ended.t < started.t ? 'yes' : 'no',
    ]);
    from = to;
  }
  for (const p of procs.splice(0)) p.kill('SIGTERM');
  await sleep(3_000);
  // The standby's agent: CPU with no follower, then with ten waiting.
  const standby = c.other(from);
  const pid = c.procs.get(standby)?.pid as number;
  const idle = async (): Promise<number> => {
    const a = cpuSeconds(pid);
    await sleep(IDLE_S * 1000);
    return cpuSeconds(pid) - a;
  };
  const none = await idle();
  for (let i = 0; i < 10; i++) procs.push(follower(c, standby, ['sleep', '1000']));
  await sleep(5_000);
  const ten = await idle();
  const md = `Command: \`npx tsx bench/follow.ts\` (\`BENCH_FOLLOW_ROUNDS\`, default 3; \`BENCH_FOLLOW_IDLE_S\`, default 20).
The system tests' cluster at the fast settings (heartbeats every second, ttl 6 s). On each host \`hq fence run --follow
--role cron\` runs a worker that writes a \`start\` line when it runs and an \`end\` line on SIGTERM; \`hq failover --to\`
moves the lease back and forth. "loss → child stopped": the old holder's agent's first \`skipped\` log line (its
decision turned) to the worker's \`end\`; "fence change → child running": the new holder's agent's first
\`allowed\` line to the new worker's \`start\` (the follower's re-check, its registration, the spawn and Node's own
start-up of the worker included). Then the standby agent's CPU time (utime + stime, /proc) over ${IDLE_S} s, with no
follower and with ten followers waiting on it (the agent heartbeats every second throughout).

Run: ${new Date().toISOString()} — ${machineLine()}.

${table(['round', 'loss → child stopped (s)', 'fence change → child running (s)', 'old stopped before new started'], ['l', 'r', 'r', 'l'], rows)}

- fence change → child running: median **${median(starts).toFixed(3)} s** (max ${Math.max(...starts).toFixed(3)} s); loss → child stopped: median **${median(stops.filter((x) => !Number.isNaN(x))).toFixed(3)} s**.
- the standby agent's CPU over ${IDLE_S} s: **${none.toFixed(2)} s** with no follower, **${ten.toFixed(2)} s** with ten followers waiting.
`;
  process.stdout.write(`${md}\n`);
  writeSection('follow', `## Services that follow HQ: \`hq fence run --follow\`\n\n${md}`);
} finally {
  for (const p of procs) p.kill('SIGKILL');
  await c.stopAll();
}
