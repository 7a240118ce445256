import t from 'tap';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_PLAN,
  DEFAULT_SECRET_PATTERNS,
  REPLICATION_DEFAULTS,
  resolveReplication,
  validateReplication,
} from '../../apps/agent/src/replication/config.js';
import { ConfigError } from '../../apps/agent/src/config-file.js';
import { ROOT } from './helpers.js';

const example = JSON.parse(readFileSync(join(ROOT, 'deploy/replication/example-plan.json'), 'utf8')) as { replication: Record<string, unknown> };

t.test('the shipped example validates and mirrors the built-in seed plan and defaults', async (t) => {
  const c = resolveReplication(validateReplication(example.replication), '/var/lib/hq');
  t.same(example.replication['plan'], DEFAULT_PLAN, 'the example plan is the default plan');
  t.same(example.replication['secretPatterns'], DEFAULT_SECRET_PATTERNS, 'the example secret patterns are the defaults');
  t.same(example.replication['keep'], REPLICATION_DEFAULTS.keep, 'the example keeps the default counts');
  t.same(example.replication['cron'], REPLICATION_DEFAULTS.cron, 'the example cron is the default cron');
  t.equal(c.stateDir, join(homedir(), '.elanous'), 'a ~ path is expanded');
  t.equal(c.smallBytes, 20 * 1024 * 1024, 'smallBytes is 20 MiB');
  t.equal(c.files.length, 9, 'nine canonical files');
  t.equal(c.dirs.length, 10, 'ten canonical directories');
  t.equal(c.obs.length, 2, 'two observation files');
});

t.test('defaults fill every key of a minimal block; relative folders live in the agent state dir', async (t) => {
  const c = resolveReplication(validateReplication({ stateDir: '/srv/app' }), '/var/lib/hq');
  t.equal(c.standbyDir, '/var/lib/hq/standby', 'standbyDir defaults to {agent stateDir}/standby');
  t.equal(c.outboxDir, '/var/lib/hq/replication-out', 'outboxDir defaults to {agent stateDir}/replication-out');
  t.same(c.keep, { core: 36, big: 8, obs: 8 }, 'keep defaults to core 36, big 8, obs 8');
  t.same(c.cron, { core: '*/10 * * * *', big: '15 */6 * * *', obs: '45 */6 * * *' }, 'core every 10 minutes, big and obs four times a day');
  t.same(c.hostLocalKeys, ['hq'], 'the host-local key is hq');
  t.equal(c.pushTo, null, 'pushTo defaults to every peer');
  t.equal(c.files.length, DEFAULT_PLAN.files.length, 'the plan defaults to the seeds');
});

const refusals: readonly [string, unknown, string][] = [
  ['a block without stateDir', {}, 'replication'],
  ['an unknown key', { stateDir: '/a', extra: 1 }, 'replication.extra'],
  ['a keep of zero', { stateDir: '/a', keep: { core: 0 } }, 'replication.keep.core'],
  ['a keep given as text', { stateDir: '/a', keep: { big: '8' } }, 'replication.keep.big'],
  ['a bad cron', { stateDir: '/a', cron: { core: 'every ten minutes' } }, 'replication.cron.core'],
  ['a plan path that climbs out', { stateDir: '/a', plan: { files: [{ path: '../etc/passwd' }] } }, 'replication.plan.files.0.path'],
  ['an absolute plan path', { stateDir: '/a', plan: { dirs: [{ path: '/etc' }] } }, 'replication.plan.dirs.0.path'],
  ['a plan path listed twice', { stateDir: '/a', plan: { files: [{ path: 'x' }, { path: 'x' }] } }, 'replication.plan.files.1.path'],
  ['a match on a file', { stateDir: '/a', plan: { files: [{ path: 'x', match: 'y' }] } }, 'replication.plan.files.0.match'],
  ['a secret pattern that is not a regular expression', { stateDir: '/a', secretPatterns: ['('] }, 'replication.secretPatterns.0'],
  ['a standby folder inside the state it protects', { stateDir: '/a', standbyDir: '/a/standby' }, 'replication.standbyDir'],
  ['an outbox that contains the state', { stateDir: '/a/b', outboxDir: '/a' }, 'replication.outboxDir'],
  ['a pushTo that is not a host', { stateDir: '/a', pushTo: ['Node B'] }, 'replication.pushTo.0'],
];

for (const [name, block, key] of refusals) {
  t.test(`the config refuses ${name}, naming ${key}`, async (t) => {
    let err: unknown = null;
    try {
      resolveReplication(validateReplication(block), '/var/lib/hq');
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof ConfigError, 'a ConfigError is thrown');
    t.equal((err as ConfigError).key, key, `the key is ${key}`);
    t.match((err as Error).message, new RegExp(`^${key.replace(/\./g, '\\.')}`), 'the one line starts with the key');
  });
}
