/**
 * A service that follows HQ across a partition, in network namespaces (root, `ip netns`): an
 * `hq fence run --follow` on each host runs the fault harness's worker (writes to one shared
 * SQLite resource through the generation guard). mbp, the holder, is cut off from the arbiter and
 * from node-b: its follower stops its worker before node-b's worker writes its first tick (the
 * lease moves only after the lock-delay), and node-b's follower starts a worker of generation 2
 * without anyone restarting it; mbp's follower keeps waiting.
 */
import t from 'tap';
import { readFileSync, existsSync } from 'node:fs';
import { missingTool } from '../missing-tool.js';
import { NetnsCluster, hr, netnsUnavailable } from './cluster.js';

interface WorkerLine {
  readonly host: string;
  readonly pid: number;
  readonly generation: number | null;
  readonly t: number;
  readonly kind: 'start' | 'tick' | 'end';
  readonly outcome?: string;
}

const lines = (file: string): WorkerLine[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as WorkerLine)
    : [];

const why = netnsUnavailable();
if (why !== null) {
  t.comment(`the partition test of --follow not run: ${why}`);
  missingTool(t, `network namespaces unavailable: ${why}`);
} else {
  t.setTimeout(180_000);
  t.test(
    'the holder cut off: its follower stops the worker before the other host’s first tick, which starts by itself',
    async (t) => {
      const c = await NetnsCluster.create('fol');
      t.teardown(() => c.destroy());
      await c.start();
      await c.acquire('mbp');
      c.startFollowers();
      await c.waitFor(
        async () => lines(c.workerFile('mbp')).some((l) => l.kind === 'tick' && l.outcome === 'accepted'),
        60_000,
        "mbp's worker writes",
      );
      t.same(lines(c.workerFile('node-b')), [], 'node-b’s follower runs nothing while mbp holds');
      const cut = hr();
      await Promise.all([c.linkDown('arb-mbp', true), c.linkDown('mbp-nodeb', true)]);
      await c.waitFor(
        async () => lines(c.workerFile('node-b')).some((l) => l.kind === 'tick' && l.outcome === 'accepted'),
        60_000,
        "node-b's worker writes",
      );
      const mbp = lines(c.workerFile('mbp'));
      const nodeb = lines(c.workerFile('node-b'));
      const lastOld = Math.max(...mbp.filter((l) => l.kind === 'tick').map((l) => l.t));
      const firstNew = Math.min(...nodeb.filter((l) => l.kind === 'tick').map((l) => l.t));
      t.ok(
        lastOld < firstNew,
        `mbp's last tick ${(lastOld - cut).toFixed(2)} s after the cut, node-b's first ${(firstNew - cut).toFixed(2)} s after`,
      );
      // Under load a worker may not write its SIGTERM line within the 1 s grace; then SIGKILL ends it.
      const alive = (pid: number): boolean => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      const mbpPids = [...new Set(mbp.map((l) => l.pid))];
      t.ok(
        mbp.some((l) => l.kind === 'end') || mbpPids.every((pid) => !alive(pid)),
        "mbp's worker was stopped (its SIGTERM line, or gone after the grace's SIGKILL)",
      );
      t.ok(
        nodeb.every((l) => l.generation === 2),
        'node-b’s worker runs at generation 2',
      );
      t.equal(
        mbp.filter((l) => l.outcome === 'refused').length,
        0,
        'no write of mbp’s was refused: it had stopped before node-b wrote',
      );
      t.comment(
        `partition of the holder: its worker's last tick ${(lastOld - cut).toFixed(2)} s after the cut, the new holder's first ${(firstNew - cut).toFixed(2)} s after`,
      );
      await c.stopWorkers();
    },
  );
}
