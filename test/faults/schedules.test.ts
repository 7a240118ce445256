/**
 * The CI slice of the fault harness: a few seeded fault schedules on a real arbiter and two
 * agents in network namespaces, each checked by the history checker (S1–S5 must be OK;
 * UNKNOWN fails like VIOLATION). Needs root and `ip netns`; elsewhere it says why it did not run.
 * The full run is `npm run test:faults` (docs/RELIABILITY.md).
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { destroyAll, faketimeAvailable, netnsUnavailable } from './cluster.js';
import { describe, makeSchedule, runSchedule } from './schedule.js';

const SEED = Number(process.env.HQF_SEED ?? 20261201);
const COUNT = Number(process.env.HQF_SCHEDULES ?? 3);
const WINDOW = 10;

const why = netnsUnavailable();
if (why !== null) {
  t.comment(`fault schedules not run here: ${why}`);
  missingTool(t, `the namespace fault schedules were skipped: ${why}`);
} else {
  t.teardown(destroyAll);
  // Each schedule has its own namespaces and cluster and mostly waits on real time: they run side by side.
  t.jobs = 3;
  const clockJumps = faketimeAvailable();
  if (!clockJumps) t.comment('clock-jump faults left out: libfaketime is not installed (apt-get install -y faketime)');
  for (let i = 0; i < COUNT; i++) {
    const s = makeSchedule(SEED, i, WINDOW, { clockJumps });
    t.test(
      `schedule ${i} of seed ${SEED} (${s.faults.map(describe).join(', ')}) keeps S1, S2, S3, S4 and S5`,
      async (t) => {
        const r = await runSchedule(s, { window: WINDOW, tag: `${process.pid}` });
        t.comment(
          `runs ${r.report.runs.length}, writes ${r.report.writes.accepted} accepted / ${r.report.writes.refused} refused of ${r.report.writes.attempts}, handover gaps [${r.report.L1.handovers.map((x) => x.toFixed(1)).join(', ')}] s, recovery after heal ${r.recovery === null ? 'none within 45 s' : `${r.recovery.toFixed(1)} s`}, ${r.seconds.toFixed(0)} s`,
        );
        t.same(r.errors, [], 'the harness carried out every fault');
        for (const p of ['S1', 'S2', 'S3', 'S4', 'S5'] as const)
          t.equal(r.report[p].verdict, 'OK', `${p} is OK (${r.report[p].detail.join('; ')})`);
        t.ok(r.report.runs.length > 0, 'the workload ran at all');
      },
    );
  }
}
