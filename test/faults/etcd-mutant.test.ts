/**
 * A mutant the fault harness must catch on store etcd (test/faults/mutants.ts): the built
 * arbiter with every check that its term is still its own removed — the election compare on
 * the store's writes, runOnce's mayDecide, stillElected's and live()'s clock — run on the
 * harness's etcd cluster (three members, two arbiters) with one targeted schedule: SIGSTOP of
 * the elected arbiter past its etcd lease (the other takes over; mbp asleep meanwhile, so the
 * new one promotes node-b), then SIGCONT. The same schedule on the real build must be OK.
 * The mutant's VIOLATION is a todo: it is not caught (docs/RELIABILITY.md, "Mutants", says why).
 * Needs root, `ip netns` and etcd (a skip with the reason, a failure under CI=true). A patch
 * anchor missing from the build fails the test, naming the anchor.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { destroyAll, etcdUnavailable, netnsUnavailable } from './cluster.js';
import { buildMutant, mutant } from './mutants.js';
import { describe, runSchedule, type Schedule, type ScheduleResult } from './schedule.js';

const WINDOW = 12;
const SCHEDULE: Schedule = {
  index: 0,
  seed: 20261220,
  faults: [
    // past the 4 s election TTL and the new term's 7 s start wait: the other arbiter takes over and promotes
    { kind: 'stop-elected', start: 1, length: 10 },
    { kind: 'sleep', host: 'mbp', start: 1.5, length: 8 },
  ],
};
const PROPS = ['S1', 'S2', 'S3', 'S4', 'S5'] as const;

/** What the stopped arbiter logged between its SIGCONT and its "term ended" line (its decisions on the stale term). */
function afterWake(dir: string): { arbiter: string | null; lines: string[] } {
  const recs = readFileSync(join(dir, 'harness.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const cont = recs.find(
    (r) =>
      r['kind'] === 'action' && typeof r['what'] === 'string' && (r['what'] as string).startsWith('SIGCONT arbiter'),
  );
  if (cont === undefined) return { arbiter: null, lines: [] };
  const d = (cont['what'] as string).slice('SIGCONT '.length);
  const lines: string[] = [];
  for (const r of recs) {
    if (r['src'] !== 'daemon' || r['name'] !== d || (r['t'] as number) < (cont['t'] as number)) continue;
    const line = typeof r['line'] === 'string' ? r['line'] : JSON.stringify(r['line']);
    if (line.includes('term ended')) break;
    lines.push(line.slice(0, 240));
  }
  return { arbiter: d, lines };
}

async function run(root: string | undefined): Promise<{ r: ScheduleResult; woke: ReturnType<typeof afterWake> }> {
  const r = await runSchedule(SCHEDULE, {
    window: WINDOW,
    tag: `${process.pid}`,
    store: 'etcd',
    keepAll: true,
    ...(root === undefined ? {} : { root }),
  });
  const woke = r.dir === null ? { arbiter: null, lines: [] } : afterWake(r.dir);
  if (r.dir !== null) rmSync(r.dir, { recursive: true, force: true });
  return { r, woke };
}

const why = netnsUnavailable() ?? etcdUnavailable();
if (why !== null) {
  t.comment(`etcd mutant not run here: ${why}`);
  missingTool(t, `the etcd mutant schedule was skipped: ${why}`);
} else {
  t.teardown(destroyAll);
  // The real build and the mutant each run on their own namespaces and cluster, side by side.
  t.jobs = 2;
  const m = mutant('no-term-check');
  const label = SCHEDULE.faults.map(describe).join(', ');

  t.test(`real build: ${label} keeps S1–S5`, async (t) => {
    const { r, woke } = await run(undefined);
    t.comment(
      `woken ${woke.arbiter ?? '?'} logged ${woke.lines.length} lines before its term ended; runs ${r.report.runs.length}, writes ${r.report.writes.accepted} accepted of ${r.report.writes.attempts}, ${r.seconds.toFixed(0)} s`,
    );
    t.same(r.errors, [], 'the harness carried out every fault');
    for (const p of PROPS) t.equal(r.report[p].verdict, 'OK', `${p} is OK (${r.report[p].detail.join('; ')})`);
  });

  t.test(`mutant ${m.name} (${m.removes}): ${label} — is it caught?`, async (t) => {
    const built = buildMutant(m); // throws, naming the anchor, when the build no longer has it
    t.teardown(built.remove);
    const { r, woke } = await run(built.root);
    t.comment(
      `woken ${woke.arbiter ?? '?'} logged ${woke.lines.length} lines before its term ended:\n${woke.lines.join('\n')}`,
    );
    t.same(r.errors, [], 'the harness carried out every fault');
    const verdicts = PROPS.map((p) => `${p} ${r.report[p].verdict}`).join(', ');
    t.comment(
      `verdicts: ${verdicts}; ${PROPS.flatMap((p) => r.report[p].detail)
        .slice(0, 8)
        .join('; ')}`,
    );
    // Not caught (2026-12-02, see docs/RELIABILITY.md "Mutants"): every decision is written with a
    // compare of the state's mod_revision, the record's times are absolute (a woken arbiter's
    // grant is never earlier than the lock-delay in the elected one's terms), the agents ask the
    // arbiter that last answered (not the woken one), and both arbiters share one clock here.
    // Kept as a todo: catching it needs an agent that asks the woken arbiter.
    t.ok(
      PROPS.some((p) => r.report[p].verdict === 'VIOLATION'),
      `the checker reports a VIOLATION (${verdicts})`,
      { todo: 'the CAS on the state key still stops this mutant on one shared clock (docs/RELIABILITY.md, Mutants)' },
    );
  });
}
