import t from 'tap';
import { replicationRole } from '../../packages/lease-core/src/index.js';
import type { ReplicationRole, RoleInput, RoleReason } from '../../packages/lease-core/src/index.js';

const base: RoleInput = {
  host: 'node-b',
  defaultSource: ['node-b', 'node-b-old'],
  lease: { holder: null, generation: 0 },
  seenGeneration: 0,
};

const cases: ReadonlyArray<readonly [string, Partial<RoleInput>, ReplicationRole, RoleReason]> = [
  ['a held lease makes the copy fenced', { lease: { holder: 'mbp', generation: 3 } }, 'fenced', 'lease-exists'],
  [
    'a held lease makes the copy fenced on the default source too',
    { lease: { holder: 'node-b', generation: 1 } },
    'fenced',
    'lease-exists',
  ],
  [
    'a released lease (no holder shown, generation > 0) is still a lease',
    { lease: { holder: null, generation: 2 } },
    'fenced',
    'lease-exists',
  ],
  [
    'an unreadable lease (arbiter outage) runs the copy fenced, so the fence decides from its cache',
    { lease: null },
    'fenced',
    'lease-unreadable',
  ],
  [
    'an unreadable lease runs fenced after a seen generation too (the holder keeps replicating on quorum-standby)',
    { lease: null, seenGeneration: 4 },
    'fenced',
    'lease-unreadable',
  ],
  ['no lease and never seen on the default source copies directly', {}, 'direct', 'no-lease-default-source'],
  [
    'no lease and never seen on an alias of the default source copies directly',
    { host: 'node-b-old' },
    'direct',
    'no-lease-default-source',
  ],
  ['no lease on another host skips', { host: 'mbp' }, 'skip', 'no-lease-not-default'],
  ['no lease after a seen generation skips (a wiped arbiter?)', { seenGeneration: 1 }, 'skip', 'no-lease-after-seen'],
  [
    'no lease after a seen generation skips on another host too',
    { host: 'mbp', seenGeneration: 7 },
    'skip',
    'no-lease-after-seen',
  ],
  ['names are compared exactly (no case folding)', { host: 'Node-B' }, 'skip', 'no-lease-not-default'],
  ['an empty default source list never copies directly', { defaultSource: [] }, 'skip', 'no-lease-not-default'],
];

for (const [name, patch, role, reason] of cases) {
  t.test(name, async (t) => {
    const got = replicationRole({ ...base, ...patch });
    t.equal(got.role, role, 'role');
    t.equal(got.reason, reason, 'reason');
  });
}
