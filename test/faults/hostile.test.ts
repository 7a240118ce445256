/**
 * Hostile input against a real arbiter over real HTTP on 127.0.0.1 (the CI slice): the whole
 * catalogue (≥ 300 named cases over every route) and 5,000 seeded fuzzed requests. Zero 5xx,
 * zero stack traces, zero state changes from rejected requests, the server alive at the end.
 * The full run (`--requests 100000`) is `npm run test:faults -- --only hostile`.
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { catalogue, hostileRun } from './hostile.js';

const REQUESTS = Number(process.env.HQF_REQUESTS ?? 5000);
const SEED = Number(process.env.HQF_SEED ?? 20261201);
const built = existsSync(join(resolve(import.meta.dirname, '../..'), 'apps/arbiter/dist/cli.js'));

t.test('the catalogue has at least 300 distinct cases over every route', async (t) => {
  const cases = catalogue({ admin: 'a'.repeat(64), mbp: 'b'.repeat(64), nodeb: 'c'.repeat(64), query: 'd'.repeat(64) });
  t.ok(cases.length >= 300, `${cases.length} cases`);
  t.equal(new Set(cases.map((c) => c.name)).size, cases.length, 'every case has its own name');
  for (const route of [
    '/v1/health',
    '/v1/lease',
    '/v1/primary',
    '/v1/events',
    '/metrics',
    '/v1/status',
    '/v1/lease/acquire',
    '/v1/lease/renew',
    '/v1/lease/release',
    '/v1/heartbeat',
    '/v1/check',
    '/v1/lease/transfer',
    '/v1/maintenance',
  ]) {
    t.ok(
      cases.some((c) => c.req.path === route),
      `${route} is covered`,
    );
  }
});

if (!built) {
  t.comment('hostile input not run: apps/arbiter/dist is missing (npx tsc -b)');
  missingTool(t, 'the hostile-input run was skipped: the arbiter is not built');
} else {
  t.setTimeout(900_000);
  t.test(
    `the catalogue and ${REQUESTS} fuzzed requests get no 5xx, no stack trace and change nothing when rejected`,
    async (t) => {
      const r = await hostileRun({ requests: REQUESTS, seed: SEED, log: (s) => t.comment(s) });
      t.same(r.failures, [], 'no case failed');
      t.ok(r.catalogue >= 300, `the whole catalogue ran (${r.catalogue} cases)`);
      t.equal(r.fuzzed, REQUESTS, `every fuzzed request was sent (${r.fuzzed})`);
      t.notOk(
        Object.keys(r.byStatus).some((s) => s.startsWith('5')),
        `no 5xx at all (${JSON.stringify(r.byStatus)})`,
      );
      t.ok(r.alive, 'the server is alive at the end');
    },
  );
}
