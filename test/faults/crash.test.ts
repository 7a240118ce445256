/**
 * Crash durability (S4), the CI slice: kill -9 of a real arbiter at 40 random points of
 * streams of acknowledged CAS (renew, re-acquire, transfer over HTTP with real tokens); after
 * each kill the database passes `PRAGMA integrity_check` (opened read-only with the process
 * gone) and holds every acknowledged write, and so does the next life's served record.
 * The full run (≥ 1,000 kill points) is `npm run test:faults -- --only crash`.
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { crashRun } from './crash.js';

const KILL_POINTS = Number(process.env.HQF_KILL_POINTS ?? 40);
const SEED = Number(process.env.HQF_SEED ?? 20261201);
const built = existsSync(join(resolve(import.meta.dirname, '../..'), 'apps/arbiter/dist/cli.js'));

if (!built) {
  t.comment('crash durability not run: apps/arbiter/dist is missing (npx tsc -b)');
  missingTool(t, 'crash durability was skipped: the arbiter is not built');
} else {
  t.setTimeout(900_000);
  t.test(
    `kill -9 at ${KILL_POINTS} points of acknowledged CAS streams loses nothing and leaves an intact database`,
    async (t) => {
      const r = await crashRun({ killPoints: KILL_POINTS, seed: SEED, log: (s) => t.comment(s) });
      t.same(r.errors, [], 'no loss, no integrity failure, no 5xx, no harness error');
      t.equal(r.killPoints, KILL_POINTS, `every kill point was reached (${r.killPoints})`);
      t.equal(r.losses, 0, 'no acknowledged write was lost');
      t.equal(r.integrityFailures, 0, 'PRAGMA integrity_check said ok after every kill');
      t.ok(
        r.acknowledged >= KILL_POINTS,
        `writes were acknowledged before the kills (${r.acknowledged}: ${JSON.stringify(r.byOp)})`,
      );
      t.ok(
        r.byOp.transfer! > 0 && r.byOp.acquire! > 0 && r.byOp.renew! > 0,
        'all three kinds of CAS were acknowledged',
      );
    },
  );
}
