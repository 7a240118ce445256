/**
 * `npx tsx bench/step-down.ts`: a planned failover with the old holder alive —
 * `hq failover --to H` while the holder runs a fenced child (`hq fence run -- sleep 1000`) — to
 * H's first `run: true` on its own unix socket (polled every ~20 ms), on the system tests'
 * cluster (test/system/harness.ts). The old holder's agent steps down, ends the child and
 * acknowledges; the arbiter ends the lock-delay. Beside it: the lock-delay the transfer would
 * have waited without the acknowledgement (`notBefore` of the `promoted` event), and the child's
 * end (it must be gone before H runs).
 *
 * BENCH_STEP_DOWN_ROUNDS rounds (default 5) at the fast settings, the lease moving back and forth;
 * BENCH_STEP_DOWN_DEFAULTS=N adds N rounds on a cluster with every timing key at its default
 * (ttl 1500 s, margin 30 s, heartbeats every 10 min, refresh 60 s): a round there takes up to two
 * refresh intervals.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { callAgent } from '../apps/agent/src/cli/local.js';
import type { EventRecord } from '@hq/protocol';
import { Cluster, HQ_CLI, processAlive, type HostName } from '../test/system/harness.js';
import { machineLine, median, sleep, table, writeSection } from './lib.js';

const FAST_ROUNDS = Number(process.env['BENCH_STEP_DOWN_ROUNDS'] ?? 5);
const DEFAULT_ROUNDS = Number(process.env['BENCH_STEP_DOWN_DEFAULTS'] ?? 0);
const POLL_MS = 20;

interface Round {
  settings: 'fast' | 'defaults';
  from: HostName;
  to: HostName;
  /** Seconds after `hq failover` was started. */
  transfer: number;
  acknowledged: number | null;
  childGone: number;
  run: number;
  /** Where the lock-delay would have ended without the acknowledgement. */
  lockDelayEnd: number;
  savedSeconds: number | null;
}

async function fenceRuns(c: Cluster, h: HostName): Promise<boolean> {
  const r = await callAgent(c.socket(h), 'GET', '/v1/fence?role=cron', 1);
  return r.kind === 'answer' && r.status === 200 && (r.body as { run?: unknown }).run === true;
}

async function events(c: Cluster, after: number): Promise<EventRecord[]> {
  const r = await fetch(`http://127.0.0.1:${c.arbiterPort}/v1/events?after=${after}&limit=1000`);
  return ((await r.json()) as { events: EventRecord[] }).events;
}

async function lastId(c: Cluster): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${c.arbiterPort}/v1/events?tail=1`);
  return ((await r.json()) as { events: EventRecord[] }).events[0]?.id ?? 0;
}

/** `hq fence run --role cron -- sh -c 'echo $$ > F; exec sleep 1000'` on `h`: the child's pid. */
async function fencedChild(c: Cluster, h: HostName): Promise<{ pid: number; supervisor: ChildProcess }> {
  const file = join(c.dir, `${h}-bench-child.pid`);
  rmSync(file, { force: true });
  const supervisor = spawn(
    process.execPath,
    [
      HQ_CLI,
      'fence',
      'run',
      '--role',
      'cron',
      '--grace',
      '2',
      '--config',
      c.agentConfig(h),
      '--',
      'sh',
      '-c',
      `echo $$ > ${file}; exec sleep 1000`,
    ],
    {
      stdio: 'ignore',
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );
  await c.waitFor(
    async () => existsSync(file) && readFileSync(file, 'utf8').trim() !== '',
    20_000,
    `the fenced child runs on ${h}`,
  );
  return { pid: Number(readFileSync(file, 'utf8').trim()), supervisor };
}

async function round(c: Cluster, from: HostName, settings: Round['settings'], limitMs: number): Promise<Round> {
  const to = c.other(from);
  const child = await fencedChild(c, from);
  const fromId = await lastId(c);
  const started = Date.now();
  const cli = c.hq(to, ['failover', '--to', to], { HQ_ADMIN_TOKEN: c.adminToken });
  let childGone = NaN;
  let run = NaN;
  while (Date.now() - started < limitMs) {
    if (Number.isNaN(childGone) && !processAlive(child.pid)) childGone = Date.now();
    if (await fenceRuns(c, to)) {
      run = Date.now();
      if (Number.isNaN(childGone) && !processAlive(child.pid)) childGone = run;
      break;
    }
    await sleep(POLL_MS);
  }
  const out = await cli;
  // Exit 3 (no answer within the request timeout, a loaded machine) may still have transferred: the event log says.
  if (
    out.code !== 0 &&
    !(out.code === 3 && (await events(c, fromId)).some((e) => e.event === 'promoted' && e.host === to))
  ) {
    throw new Error(`hq failover exited ${out.code}: ${out.stderr.trim()}`);
  }
  if (Number.isNaN(run)) throw new Error(`${to} did not run within ${limitMs} ms`);
  if (Number.isNaN(childGone)) throw new Error(`${from}'s fenced child was still alive when ${to} ran`);
  const ev = await events(c, fromId);
  const promoted = ev.find((e) => e.event === 'promoted' && e.host === to);
  const acked = ev.find((e) => e.event === 'stepped-down' && e.host === from);
  if (promoted === undefined) throw new Error('no promoted event');
  const s = (ms: number): number => (ms - started) / 1000;
  return {
    settings,
    from,
    to,
    transfer: s(promoted.at * 1000),
    acknowledged: acked === undefined ? null : s(acked.at * 1000),
    childGone: s(childGone),
    run: s(run),
    lockDelayEnd: s((promoted.data['notBefore'] as number) * 1000),
    savedSeconds: typeof acked?.data['savedSeconds'] === 'number' ? acked.data['savedSeconds'] : null,
  };
}

async function series(settings: Round['settings'], rounds: number): Promise<Round[]> {
  const c = await Cluster.create({ settings });
  const out: Round[] = [];
  try {
    await c.startArbiter();
    await c.startAgent('mbp');
    await c.startAgent('node-b');
    const acq = await c.hq('mbp', ['lease', 'acquire', '--wait', '60']);
    if (acq.code !== 0) throw new Error(`hq lease acquire exited ${acq.code}: ${acq.stderr.trim()}`);
    const limitMs = settings === 'fast' ? 30_000 : 400_000;
    if (settings === 'defaults') {
      // A grant within ttl + margin (25.5 min) of the arbiter's start waits for its start wait
      // (S2.3), which no acknowledgement ends: the rounds start once the arbiter is older.
      const waitMs = (1500 + 30 + 5) * 1000;
      process.stderr.write(
        `defaults: waiting ${waitMs / 60_000} min for the arbiter's start wait (ttl + margin) to pass…\n`,
      );
      await sleep(waitMs);
    }
    let holder: HostName = 'mbp';
    // A round whose `hq failover` got no answer in time and transferred nothing is tried again (at most 3 times in all).
    for (let i = 0, failed = 0; i < rounds; i++) {
      await c.waitFor(async () => fenceRuns(c, holder), limitMs, `${holder} runs`);
      await sleep(Math.random() * 1000);
      let r: Round;
      try {
        r = await round(c, holder, settings, limitMs);
      } catch (err) {
        if (++failed > 3 || !/hq failover exited 3/.test((err as Error).message)) throw err;
        process.stderr.write(`${settings} round ${i + 1}/${rounds} again: ${(err as Error).message}\n`);
        i--;
        continue;
      }
      out.push(r);
      process.stderr.write(
        `${settings} round ${i + 1}/${rounds}: ${r.from} → ${r.to} runs after ${r.run.toFixed(2)} s (transfer ${r.transfer.toFixed(2)} s, acknowledged ${r.acknowledged?.toFixed(2) ?? '—'} s, lock-delay would end ${r.lockDelayEnd.toFixed(2)} s)\n`,
      );
      holder = r.to;
    }
  } finally {
    await c.stopAll();
  }
  return out;
}

async function main(): Promise<void> {
  const rounds = [
    ...(await series('fast', FAST_ROUNDS)),
    ...(DEFAULT_ROUNDS > 0 ? await series('defaults', DEFAULT_ROUNDS) : []),
  ];
  const f = (n: number | null): string => (n === null ? '—' : n.toFixed(2));
  const perRound = table(
    [
      'settings',
      'from → to',
      'transfer',
      'acknowledged',
      'child gone',
      'first run: true',
      'transfer → run',
      'lock-delay would end',
      'saved',
    ],
    ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rounds.map((r) => [
      r.settings,
      `${r.from} → ${r.to}`,
      f(r.transfer),
      f(r.acknowledged),
      f(r.childGone),
      f(r.run),
      f(r.run - r.transfer),
      f(r.lockDelayEnd),
      f(r.savedSeconds),
    ]),
  );
  const summary = (['fast', 'defaults'] as const)
    .map((s) => rounds.filter((r) => r.settings === s))
    .filter((rs) => rs.length > 0)
    .map((rs) => {
      const run = rs.map((r) => r.run);
      const fromTransfer = rs.map((r) => r.run - r.transfer);
      return `- ${rs[0]?.settings} settings, ${rs.length} rounds: \`hq failover --to\` → first \`run: true\` median **${f(median(run))} s** (max ${f(Math.max(...run))} s); from the transfer itself median ${f(median(fromTransfer))} s; the lock-delay would have ended after median ${f(median(rs.map((r) => r.lockDelayEnd)))} s; every child gone first.`;
    })
    .join('\n');
  const machine = machineLine();
  process.stdout.write(`${machine}\n\n${perRound}\n\n${summary}\n`);
  writeSection(
    'step-down',
    `## Planned failover: \`hq failover --to\` with the old holder alive

Command: \`npx tsx bench/step-down.ts\` (\`BENCH_STEP_DOWN_ROUNDS\`, default 5, at the fast settings;
\`BENCH_STEP_DOWN_DEFAULTS=N\` adds N rounds at the default settings). The system tests' cluster: each round
starts \`hq fence run --role cron -- sleep 1000\` on the holder, runs \`hq failover --to\` the other host and polls the
new holder's \`GET /v1/fence?role=cron\` every ${POLL_MS} ms; times are seconds after \`hq failover\` started (its
own Node start-up included). "transfer", "acknowledged" and "lock-delay would end" are the \`promoted\` event's
\`at\` and \`notBefore\` and the \`stepped-down\` event's \`at\`; "child gone" is when the fenced child's pid
stopped existing. Without the acknowledgement the new holder would run at "lock-delay would end" (about ttl +
margin: 7 s at the fast settings, 25.5 min at the defaults) — the crash failover beside it is the failover
section's (kill → run, median 6.2 s at the fast settings; at the defaults the lock-delay alone is 25.5 min).
A load average far above the 2 CPUs (another session's tests shared the machine) stretches \`hq failover\`'s own
start-up (the "transfer" column) and the agents' 1 s cadence; "transfer → run" is the protocol's part. At the
default settings a round started within ttl + margin (25.5 min) of the arbiter's start waits for the start wait
(S2.3), which the acknowledgement cannot end: \`BENCH_STEP_DOWN_DEFAULTS\` first waits that long, then each round
takes up to two of the agents' refresh intervals (60 s).

Run: ${new Date().toISOString()} — ${machine}.

${perRound}

${summary}
`,
  );
}

await main();
