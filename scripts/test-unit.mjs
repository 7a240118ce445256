#!/usr/bin/env node
/**
 * `npm run test:unit`: the inner loop. Every test file except those that start real daemons, built
 * bins, etcd, network namespaces, a browser, promtool or the model checker, or wait seconds of
 * real time; the simulator at 1,000 schedules instead of 10,000 (`HQ_SIM_SCHEDULES` overrides it).
 * No coverage check. `npm test` runs everything and remains the proof; extra arguments go to tap.
 */
import { spawnSync } from 'node:child_process';

/** Whole suites of real processes. */
const SLOW_DIRS = ['system', 'faults', 'etcd', 'upgrade', 'model'];

/** Files elsewhere that start real processes or wait on real time (each several seconds or more). */
const SLOW_FILES = [
  'test/deploy/install.test.ts',
  'test/deploy/join.test.ts',
  'test/agent/cli.test.ts',
  'test/agent/fence-entry.test.ts',
  'test/agent/fence-follow-cli.test.ts',
  'test/agent/fence-run.test.ts',
  'test/agent/footprint.test.ts',
  'test/agent/guard.test.ts',
  'test/agent/import-elanous.test.ts',
  'test/agent/report-wanted.test.ts',
  'test/agent/runs.test.ts',
  'test/arbiter/cli.test.ts',
  'test/arbiter/config.test.ts',
  'test/arbiter/crash.test.ts',
  'test/arbiter/footprint.test.ts',
  'test/arbiter/group-commit.test.ts',
  'test/arbiter/server.test.ts',
  'test/arbiter/start.test.ts',
  'test/operator/dashboards.test.ts',
  'test/operator/doctor.test.ts',
  'test/operator/events-follow.test.ts',
  'test/operator/openapi-fuzz.test.ts',
  'test/operator/status-page.phases.test.ts',
  'test/operator/status-page.test.ts',
  'test/registry/concurrency.test.ts',
  'test/registry/instance-join.test.ts',
  'test/registry/port-run.test.ts',
  'test/replication/events.test.ts',
  'test/replication/promote.test.ts',
  'test/replication/push.test.ts',
  'test/runtime/schedule.test.ts',
  'test/scripts/try.test.ts',
];

const args = [
  'tap',
  '--disable-coverage',
  ...SLOW_DIRS.map((d) => `--exclude=test/${d}/**`),
  // a real etcd member
  '--exclude=test/**/*etcd*',
  '--exclude=test/arbiter/generation-bound.test.ts',
  '--exclude=test/arbiter/leadership.test.ts',
  '--exclude=test/arbiter/migrate.test.ts',
  '--exclude=test/arbiter/survival-store.test.ts',
  ...SLOW_FILES.map((f) => `--exclude=${f}`),
  ...process.argv.slice(2),
];
const env = { ...process.env, HQ_SIM_SCHEDULES: process.env['HQ_SIM_SCHEDULES'] ?? '1000' };
const run = spawnSync('npx', args, { stdio: 'inherit', env });
process.exit(run.status ?? 1);
