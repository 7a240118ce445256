/**
 * `npm run bench` (failover): the time from the holder's death (SIGKILL of the holder agent) to
 * the standby's first `run: true` on its own unix socket (`GET /v1/fence?role=cron`, polled every
 * ~20 ms), on the system tests' cluster (test/system/harness.ts: a real arbiter and two real
 * agents on loopback, checks and heartbeats every second, ttl 6 s, margin 1 s, refresh 1 s),
 * beside the worst case the timing rule predicts (`checkTiming` of @hq/lease-core) and the goal.
 *
 * BENCH_FAILOVER_ROUNDS rounds (default 5) on one cluster: each round kills the current holder,
 * waits for the standby to run, restarts the dead agent and waits until it is steady again (it
 * knows the new generation and the arbiter holds a fresh view from it) plus a random 0–1 s so the
 * kill falls at a different phase of the heartbeat each time. The breakdown comes from the
 * arbiter's event log (`promoted`: its time and `notBefore`, the end of the lock-delay) and from
 * the standby's fence answers (when it first names itself the holder).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { checkTiming, failover, type Timing } from '@hq/lease-core';
import { callAgent } from '../apps/agent/src/cli/local.js';
import type { Cluster, HostName } from '../test/system/harness.js';
import { ROOT, machineLine, median, sleep, table, startHeldCluster, writeSection } from './lib.js';

const ROUNDS = Number(process.env['BENCH_FAILOVER_ROUNDS'] ?? 5);
const POLL_MS = 20;
const GOAL_SECONDS = 10;

/** The Cluster's settings (harness.ts FAST_ARBITER / FAST_AGENT), as the timing rule reads them. */
const TIMING: Timing = {
  ttlSeconds: 6,
  heartbeatSeconds: 1,
  checkSeconds: 1,
  viewFreshSeconds: 6,
  probeTimeoutSeconds: 0.5,
  refreshSeconds: 1,
  requestTimeoutSeconds: 1,
  safetyMarginSeconds: 1,
  promoteAfterChecks: 2,
};

interface Fence {
  run: boolean;
  reason: string;
  generation: number;
  holder: string | null;
}

interface LeaseRecord {
  holder: string | null;
  generation: number;
  renewedAt: number | null;
  views: { [observer: string]: { target: string; at: number } };
  now: number;
}

interface EventRow {
  id: number;
  at: number;
  event: string;
  host: string | null;
  data: { [k: string]: unknown };
}

/** One round's times, in seconds after the kill (epoch-ms clocks of one machine). */
interface Round {
  holder: HostName;
  standby: HostName;
  generation: number;
  /** The dead holder's last renewal, before the kill (negative). */
  lastRenewal: number;
  promoted: number;
  lockDelayEnd: number;
  /** The standby's fence first names it the holder. */
  sawPromotion: number;
  run: number;
  runReason: string;
}

async function fence(c: Cluster, h: HostName): Promise<Fence | null> {
  const r = await callAgent(c.socket(h), 'GET', '/v1/fence?role=cron', 1);
  return r.kind === 'answer' && r.status === 200 ? (r.body as Fence) : null;
}

async function getJson<T>(c: Cluster, path: string): Promise<T> {
  const r = await fetch(`http://127.0.0.1:${c.arbiterPort}${path}`);
  if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}`);
  return (await r.json()) as T;
}

async function eventsAfter(c: Cluster, after: number): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (;;) {
    const page = (await getJson<{ events: EventRow[] }>(c, `/v1/events?after=${after}&limit=1000`)).events;
    out.push(...page);
    if (page.length < 1000) return out;
    after = page[page.length - 1]!.id;
  }
}

async function lastEventId(c: Cluster): Promise<number> {
  const all = await eventsAfter(c, 0);
  return all.length === 0 ? 0 : all[all.length - 1]!.id;
}

/** Steady: the holder runs, the standby knows the generation, and the arbiter has a fresh view from the standby. */
async function waitSteady(c: Cluster, holder: HostName, since: number): Promise<number> {
  const standby = c.other(holder);
  let generation = 0;
  await c.waitFor(
    async () => {
      const [h, s] = await Promise.all([fence(c, holder), fence(c, standby)]);
      if (h?.run !== true || s === null || s.run || s.generation !== h.generation || s.holder !== holder) return false;
      const lease = await getJson<LeaseRecord>(c, '/v1/lease');
      const view = lease.views[standby];
      generation = h.generation;
      return lease.holder === holder && view !== undefined && view.at * 1000 > since && lease.now - view.at < 2;
    },
    40_000,
    `${holder} runs and ${standby} is a steady standby`,
  );
  return generation;
}

async function round(c: Cluster, holder: HostName, generation: number): Promise<Round> {
  const standby = c.other(holder);
  const fromId = await lastEventId(c);
  const before = await getJson<LeaseRecord>(c, '/v1/lease');
  const killedAt = Date.now();
  await c.kill(holder, 'SIGKILL');
  // The record right after the kill still carries the dead holder's last renewal (promotion needs ≥ 2 checks).
  const after = await getJson<LeaseRecord>(c, '/v1/lease');
  const lastRenewalS =
    after.holder === holder && after.renewedAt !== null ? after.renewedAt : (before.renewedAt ?? NaN);
  let sawPromotion = NaN;
  let runAt = NaN;
  let runReason = '';
  const deadline = killedAt + 30_000;
  while (Date.now() < deadline) {
    const t0 = Date.now();
    const f = await fence(c, standby);
    const t = Date.now();
    if (f !== null && f.holder === standby && f.generation > generation && Number.isNaN(sawPromotion)) sawPromotion = t;
    if (f?.run === true) {
      runAt = t;
      runReason = f.reason;
      break;
    }
    await sleep(Math.max(0, POLL_MS - (t - t0)));
  }
  if (Number.isNaN(runAt))
    throw new Error(
      `${standby} did not run within 30 s of the kill; its log: ${(c.logs.get(standby) ?? '').slice(-800)}`,
    );
  const events = await eventsAfter(c, fromId);
  const promoted = events.find((e) => e.event === 'promoted' && e.host === standby);
  if (promoted === undefined)
    throw new Error(`no promoted event for ${standby} (events: ${events.map((e) => e.event).join(', ')})`);
  const notBefore = typeof promoted.data['notBefore'] === 'number' ? promoted.data['notBefore'] : NaN;
  const s = (ms: number): number => (ms - killedAt) / 1000;
  return {
    holder,
    standby,
    generation: typeof promoted.data['generation'] === 'number' ? promoted.data['generation'] : generation + 1,
    lastRenewal: s(lastRenewalS * 1000),
    promoted: s(promoted.at * 1000),
    lockDelayEnd: s(notBefore * 1000),
    sawPromotion: s(sawPromotion),
    run: s(runAt),
    runReason,
  };
}

function stats(xs: readonly number[]): { min: number; median: number; max: number } {
  return { min: Math.min(...xs), median: median(xs), max: Math.max(...xs) };
}

async function main(): Promise<void> {
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter'), join(ROOT, 'apps/agent')],
    { stdio: 'inherit' },
  );
  const timing = checkTiming(TIMING);
  if (!timing.ok) throw new Error(`the bench's timing is invalid: ${timing.message}`);
  // The worst case as every place prints it (lease-core failover), plus one refresh for the
  // promoted agent to hear of it.
  const worst = failover(TIMING, TIMING.heartbeatSeconds);
  const predicted = worst.seconds + TIMING.refreshSeconds;
  const lockDelay = worst.lockDelaySeconds;

  const c = await startHeldCluster();
  const rounds: Round[] = [];
  try {
    let holder: HostName = 'mbp';
    let since = Date.now();
    for (let i = 0; i < ROUNDS; i++) {
      const generation = await waitSteady(c, holder, since);
      await sleep(Math.random() * 1000);
      const r = await round(c, holder, generation);
      rounds.push(r);
      process.stderr.write(
        `round ${i + 1}/${ROUNDS}: ${r.holder} killed → ${r.standby} runs after ${r.run.toFixed(2)} s (promoted ${r.promoted.toFixed(2)} s, lock-delay ends ${r.lockDelayEnd.toFixed(2)} s)\n`,
      );
      since = Date.now();
      await c.startAgent(r.holder);
      holder = r.standby;
    }
  } finally {
    await c.stopAll();
  }

  const f = (n: number): string => n.toFixed(2);
  const perRound = table(
    [
      'round',
      'killed',
      'last renewal',
      'promoted',
      'lock-delay ends',
      'standby sees promotion',
      'first run: true',
      'run − lock-delay end',
      'reason',
    ],
    ['r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    rounds.map((r, i) => [
      i + 1,
      r.holder,
      f(r.lastRenewal),
      f(r.promoted),
      f(r.lockDelayEnd),
      f(r.sawPromotion),
      f(r.run),
      f(r.run - r.lockDelayEnd),
      r.runReason,
    ]),
  );
  const run = stats(rounds.map((r) => r.run));
  const summaryRows: (string | number)[][] = [
    ['kill → first run: true', f(run.min), f(run.median), f(run.max)],
    ...(
      [
        ['kill → promoted (arbiter event)', rounds.map((r) => r.promoted)],
        ['kill → lock-delay ends (notBefore)', rounds.map((r) => r.lockDelayEnd)],
        ['kill → standby sees the promotion', rounds.map((r) => r.sawPromotion)],
        ['lock-delay end → first run: true', rounds.map((r) => r.run - r.lockDelayEnd)],
        ['last renewal → kill', rounds.map((r) => -r.lastRenewal)],
      ] as const
    ).map(([name, xs]) => {
      const s = stats(xs);
      return [name, f(s.min), f(s.median), f(s.max)];
    }),
  ];
  const summary = table(['seconds', 'min', 'median', 'max'], ['l', 'r', 'r', 'r'], summaryRows);
  const met = run.max <= GOAL_SECONDS;
  const withinPrediction = run.max <= predicted;
  const machine = machineLine();
  const goals = [
    `- Goal: failover ≤ ${GOAL_SECONDS} s — **${met ? 'met' : 'missed'}** (max ${f(run.max)} s over ${rounds.length} rounds).`,
    `- The timing rule predicts at most **${f(predicted)} s** (\`checkTiming\`: max(${TIMING.promoteAfterChecks} checks × ${TIMING.checkSeconds} s + one heartbeat ${TIMING.heartbeatSeconds} s, lock-delay ttl + margin = ${lockDelay} s) + one refresh ${Math.min(TIMING.refreshSeconds, TIMING.heartbeatSeconds)} s) — ${withinPrediction ? 'every round within it' : `**exceeded** (max ${f(run.max)} s)`}.`,
  ].join('\n');
  process.stdout.write(`${machine}\n\n${summary}\n\n${perRound}\n\n${goals}\n`);
  writeSection(
    'failover',
    `## Failover: holder killed → standby runs

Command: \`npx tsx bench/failover.ts\` (part of \`npm run bench\`; \`BENCH_FAILOVER_ROUNDS\`, default 5).
The system tests' cluster (test/system/harness.ts): a real arbiter and two real agents on loopback, checks and
heartbeats every ${TIMING.checkSeconds} s, ttl ${TIMING.ttlSeconds} s, margin ${TIMING.safetyMarginSeconds} s, refresh ${TIMING.refreshSeconds} s,
promotion after ${TIMING.promoteAfterChecks} checks. Each round SIGKILLs the holder agent and polls the standby's \`GET /v1/fence?role=cron\` on its unix
socket every ${POLL_MS} ms; the figure is kill → first \`run: true\`. The dead agent is then restarted and, once it is a steady
standby, becomes the next round's standby (the holder alternates). Times are seconds after the kill; "promoted" and
"lock-delay ends" are the \`promoted\` event's \`at\` and \`notBefore\` from \`GET /v1/events\`.

Run: ${new Date().toISOString()} — ${machine}, ${rounds.length} rounds.

${summary}

${perRound}

${goals}
`,
  );
}

await main();
