/**
 * `npm run test:faults -- [--schedules N] [--seed S] [--window W] [--kill-points K]
 * [--requests R] [--only schedules,crash,hostile] [--from I] [--parallel K] [--kinds sleep,stop,…]
 * [--store sqlite|etcd] [--keep-failed] [--keep-all] [--no-pin] [--json FILE]`
 *
 * By default the run builds the committed HEAD in /tmp/hqf-build-<commit> and tests that build
 * (`--no-pin`: the checkout's apps/<name>/dist as they are).
 *
 * The full fault run: N seeded fault schedules on a real cluster in network
 * namespaces (default 1000, each about 45 s), K kill -9 points of the arbiter during streams of
 * acknowledged CAS (default 1000), and R fuzzed requests plus the hostile-input catalogue against
 * a real arbiter (default 100000). Prints a verdict line per schedule and a summary; exits 1 on
 * any VIOLATION, UNKNOWN, loss or 5xx. Needs root (ip netns) for the schedules.
 *
 * `--parallel K` (default 1) runs K schedules at once, each on its own cluster (own namespaces and
 * directory), handed out from one queue; lines are printed in schedule order. `--kinds` draws the
 * faults only from the kinds named (the same seed then gives other schedules).
 *
 * `--store etcd` (`npm run faults:etcd`): the schedules run on two arbiters in front of three
 * etcd members in a fourth namespace (test/faults/cluster.ts), with etcd's own faults added —
 * kill -9 and SIGSTOP of the elected arbiter, kill -9 of an etcd member, faults of the link
 * between the arbiters and etcd. Needs Debian's etcd-server besides root.
 */
import { writeFileSync } from 'node:fs';

// `npx tap test/faults/` would load this file as a test and start a run of hours: refuse.
if (Object.keys(process.env).some((k) => k === 'TAP' || k.startsWith('TAP_'))) {
  process.stdout.write('1..0 # SKIP run.ts is the fault runner (npm run test:faults), not a test file\n');
  process.exit(0);
}
import { netnsUnavailable, faketimeAvailable, sleep, etcdUnavailable, type StoreKind } from './cluster.js';
import {
  ALL_FAULT_KINDS,
  FAULT_KINDS,
  describe,
  makeSchedule,
  runSchedule,
  type FaultKind,
  type Schedule,
  type ScheduleResult,
} from './schedule.js';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
function num(name: string, dflt: number): number {
  const v = flag(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) {
    process.stderr.write(`test:faults: --${name} must be a number ≥ 0 (got ${v})\n`);
    process.exit(2);
  }
  return n;
}

const schedules = num('schedules', 1000);
const seed = num('seed', Date.now() % 2 ** 31);
const window = num('window', 20);
const killPoints = num('kill-points', 1000);
const requests = num('requests', 100_000);
const only = new Set((flag('only') ?? 'schedules,crash,hostile').split(','));
const keepFailed = process.argv.includes('--keep-failed');
const keepAll = process.argv.includes('--keep-all');
const from = num('from', 0);
const jsonOut = flag('json');
const parallel = Math.max(1, Math.floor(num('parallel', 1)));
const storeFlag = flag('store') ?? 'sqlite';
if (storeFlag !== 'sqlite' && storeFlag !== 'etcd') {
  process.stderr.write(`test:faults: --store takes sqlite or etcd (got ${storeFlag})\n`);
  process.exit(2);
}
const store: StoreKind = storeFlag;
const KINDS = store === 'etcd' ? ALL_FAULT_KINDS : FAULT_KINDS;
const kindsFlag = flag('kinds');
const kinds = kindsFlag === undefined ? undefined : kindsFlag.split(',').filter((k) => k !== '');
for (const k of kinds ?? []) {
  if (!(KINDS as readonly string[]).includes(k)) {
    process.stderr.write(`test:faults: --kinds takes ${KINDS.join(', ')} (got ${k})\n`);
    process.exit(2);
  }
}
const PROPS = ['S1', 'S2', 'S3', 'S4', 'S5'] as const;

function stats(xs: readonly number[]): { n: number; median: number | null; p95: number | null; max: number | null } {
  if (xs.length === 0) return { n: 0, median: null, p95: null, max: null };
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))]! * 100) / 100;
  return { n: s.length, median: q(0.5), p95: q(0.95), max: Math.round(s[s.length - 1]! * 100) / 100 };
}

// A long run tests one committed build, not a dist that other work rewrites meanwhile.
let commit = 'checkout dist';
if (!process.argv.includes('--no-pin')) {
  const { pinBuild } = await import('./build.js');
  commit = pinBuild((s) => process.stdout.write(`${s}\n`));
}

const started = Date.now();
const summary: { [k: string]: unknown } = {
  command: `npm run test:faults -- ${process.argv.slice(2).join(' ')}`.trim(),
  seed,
  commit,
  store,
  startedAt: new Date(started).toISOString(),
};
let failed = false;

if (only.has('schedules') && schedules > 0) {
  const why = netnsUnavailable() ?? (store === 'etcd' ? etcdUnavailable() : null);
  if (why !== null) {
    process.stdout.write(`schedules skipped: ${why}\n`);
    summary.schedules = { skipped: why };
    failed = true;
  } else {
    const clockJumps = faketimeAvailable();
    if (!clockJumps)
      process.stdout.write('clock-jump faults left out: libfaketime is not installed (apt-get install -y faketime)\n');
    if (kinds !== undefined && !clockJumps && kinds.every((k) => k === 'clock-jump')) {
      process.stderr.write('test:faults: --kinds leaves only clock-jump, and libfaketime is not installed\n');
      process.exit(2);
    }
    const byKind = Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<string, number>;
    const verdicts = { OK: 0, VIOLATION: 0, UNKNOWN: 0 };
    const perProperty: Record<string, { VIOLATION: number; UNKNOWN: number }> = {};
    const handovers: number[] = [];
    const recoveries: number[] = [];
    let noRecovery = 0;
    const bad: string[] = [];
    const writes = { attempts: 0, accepted: 0, refused: 0, errors: 0, pastValidity: 0, pastValidityAfterWake: 0 };
    let maxPastValidity: number | null = null;
    const report = (i: number, s: Schedule, r: ScheduleResult): void => {
      for (const f of s.faults) byKind[f.kind] = (byKind[f.kind] ?? 0) + 1;
      verdicts[r.report.verdict]++;
      for (const p of PROPS) {
        const v = r.report[p].verdict;
        if (v !== 'OK') {
          perProperty[p] ??= { VIOLATION: 0, UNKNOWN: 0 };
          perProperty[p][v]++;
        }
      }
      const w = r.report.writes;
      for (const k of Object.keys(writes) as (keyof typeof writes)[]) writes[k] += w[k];
      if (w.maxPastValidity !== null && (maxPastValidity === null || w.maxPastValidity > maxPastValidity))
        maxPastValidity = w.maxPastValidity;
      handovers.push(...r.report.L1.handovers);
      if (r.recovery === null) noRecovery++;
      else recoveries.push(r.recovery);
      const details = PROPS.filter((p) => r.report[p].verdict !== 'OK').map(
        (p) => `${p} ${r.report[p].verdict}: ${r.report[p].detail[0] ?? ''}`,
      );
      const refused =
        w.refused > 0
          ? ` refused=${w.refused}${w.pastValidityAfterWake > 0 ? ` (after wake ${w.pastValidityAfterWake})` : ''}`
          : '';
      const line = `#${i} seed=${s.seed} ${s.faults.map(describe).join(' ')} → ${r.report.verdict} runs=${r.report.runs.length} writes=${w.accepted}/${w.attempts}${refused} handovers=[${r.report.L1.handovers.map((x) => x.toFixed(1)).join(',')}] recovery=${r.recovery === null ? 'none' : `${r.recovery.toFixed(1)}s`} (${r.seconds.toFixed(0)} s: ${Object.entries(
        r.phases,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ', ',
        )})${r.errors.length > 0 ? ` harness: ${r.errors.join('; ')}` : ''}${details.length > 0 ? `\n    ${details.join('\n    ')}` : ''}${r.dir !== null ? `\n    history kept in ${r.dir}` : ''}`;
      process.stdout.write(`${line}\n`);
      if (r.report.verdict !== 'OK') bad.push(line);
    };
    // K clusters at once from one queue; each result waits until every earlier one is printed.
    const done = new Map<number, { s: Schedule; r: ScheduleResult }>();
    let next = from;
    let printed = from;
    const lane = async (): Promise<void> => {
      while (next < from + schedules) {
        const i = next++;
        const s = makeSchedule(seed, i, window, { clockJumps, kinds: kinds as FaultKind[] | undefined, store });
        const r = await runSchedule(s, { window, keepFailed, keepAll, tag: String(process.pid), store });
        done.set(i, { s, r });
        while (done.has(printed)) {
          const d = done.get(printed)!;
          done.delete(printed);
          report(printed, d.s, d.r);
          printed++;
        }
      }
    };
    const lanesStarted = Date.now();
    // Lanes start 3 s apart: K daemons loading node at the same instant is the worst moment.
    await Promise.all(Array.from({ length: Math.min(parallel, schedules) }, (_, k) => sleep(k * 3000).then(lane)));
    const wallPerSchedule = Math.round((Date.now() - lanesStarted) / 10 / schedules) / 100;
    summary.schedules = {
      count: schedules,
      store,
      window,
      parallel,
      kinds: kinds ?? 'all',
      wallSecondsPerSchedule: wallPerSchedule,
      faultsByKind: byKind,
      verdicts,
      perProperty,
      writes: {
        ...writes,
        maxPastValiditySeconds: maxPastValidity === null ? null : Math.round(maxPastValidity * 100) / 100,
      },
      handoverGapSeconds: stats(handovers),
      recoveryAfterHealSeconds: stats(recoveries),
      noRecovery,
      clockJumps,
    };
    if (verdicts.VIOLATION + verdicts.UNKNOWN > 0) failed = true;
  }
}

if (only.has('crash') && killPoints > 0) {
  const { crashRun } = await import('./crash.js');
  const r = await crashRun({ killPoints, seed, log: (s) => process.stdout.write(`${s}\n`) });
  summary.crash = r;
  if (r.losses > 0 || r.integrityFailures > 0 || r.errors.length > 0) failed = true;
}

if (only.has('hostile') && requests >= 0) {
  const { hostileRun } = await import('./hostile.js');
  const r = await hostileRun({ requests, seed, log: (s) => process.stdout.write(`${s}\n`) });
  summary.hostile = r;
  if (r.failures.length > 0) failed = true;
}

summary.minutes = Math.round((Date.now() - started) / 600) / 100;
summary.result = failed ? 'FAIL' : 'PASS';
process.stdout.write(`\nsummary ${JSON.stringify(summary, null, 2)}\n`);
if (jsonOut !== undefined) writeFileSync(jsonOut, `${JSON.stringify(summary, null, 2)}\n`);
process.exit(failed ? 1 : 0);
