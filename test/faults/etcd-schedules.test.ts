/**
 * The CI slice of the fault harness on `store: etcd`: a few seeded schedules on two arbiters in
 * front of three etcd members (each schedule's first fault is one of etcd's: kill -9 or SIGSTOP
 * of the elected arbiter, kill -9 of an etcd member, a fault of the arbiters' link to etcd),
 * each checked by the history checker (S1–S5 must be OK; UNKNOWN fails like VIOLATION). Needs
 * root, `ip netns` and etcd; elsewhere it says why it did not run. The full run is
 * `npm run faults:etcd` (docs/RELIABILITY.md).
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { destroyAll, etcdUnavailable, faketimeAvailable, netnsUnavailable } from './cluster.js';
import { describe, makeSchedule, runSchedule } from './schedule.js';

const SEED = Number(process.env.HQF_SEED ?? 20261219);
const COUNT = Number(process.env.HQF_SCHEDULES ?? 2);
const WINDOW = 10;

const why = netnsUnavailable() ?? etcdUnavailable();
if (why !== null) {
  t.comment(`etcd fault schedules not run here: ${why}`);
  missingTool(t, `the etcd namespace fault schedules were skipped: ${why}`);
} else {
  t.teardown(destroyAll);
  // Each schedule has its own namespaces and cluster and mostly waits on real time: they run side by side.
  t.jobs = 2;
  const clockJumps = faketimeAvailable();
  for (let i = 0; i < COUNT; i++) {
    const s = makeSchedule(SEED, i, WINDOW, { clockJumps, store: 'etcd' });
    t.test(
      `store etcd: schedule ${i} of seed ${SEED} (${s.faults.map(describe).join(', ')}) keeps S1, S2, S3, S4 and S5`,
      async (t) => {
        const r = await runSchedule(s, { window: WINDOW, tag: `${process.pid}`, store: 'etcd' });
        t.comment(
          `runs ${r.report.runs.length}, writes ${r.report.writes.accepted} accepted / ${r.report.writes.refused} refused of ${r.report.writes.attempts}, recovery after heal ${r.recovery === null ? 'none within 45 s' : `${r.recovery.toFixed(1)} s`}, ${r.seconds.toFixed(0)} s`,
        );
        t.same(r.errors, [], 'the harness carried out every fault');
        for (const p of ['S1', 'S2', 'S3', 'S4', 'S5'] as const)
          t.equal(r.report[p].verdict, 'OK', `${p} is OK (${r.report[p].detail.join('; ')})`);
        t.ok(r.report.runs.length > 0, 'the workload ran at all');
      },
    );
  }
}
