/**
 * RegistryStore, against every store factory: resources (register, heartbeat, delete, live
 * listing), port leases (lowest free port, renew, release, never two live leases on a port),
 * `commitAll` (each write decided on the ones before it; a throwing one undone alone) and
 * `sweep`. The decisions themselves are test/registry/decide.test.ts; this is the storage.
 */
import t from 'tap';
import type { Actor, RegisterInput } from '../../../apps/arbiter/src/registry/decide.js';
import { forEachStore } from './factories.js';

const NOW = 1_800_000_000_000;
const admin: Actor = { machine: 'ops', admin: true };
const mbp: Actor = { machine: 'mbp', admin: false };
const id = (n: number): string => n.toString(16).padStart(32, '0');

function machine(name: string, attrs: Record<string, number | string> = {}): RegisterInput {
  return {
    id: name,
    name,
    kind: 'machine',
    machine: name,
    attrs: new Map(Object.entries(attrs)),
    observedAt: NOW,
    ttlMs: 60_000,
  };
}

forEachStore(t, async (factory, t) => {
  t.test('resources: register, heartbeat, list live ones by filter, delete; expired ones are not live', async (t) => {
    const store = await factory.registry(t);
    t.match(
      await store.register(machine('mbp', { os: 'darwin' }), mbp, NOW),
      { ok: true, resource: { id: 'mbp', owner: 'mbp', registeredAt: NOW, expiresAt: NOW + 60_000 } },
      'a member registers its machine',
    );
    t.match(
      await store.register(machine('node-b'), mbp, NOW),
      { ok: false, reason: 'wrong-host' },
      "and not another one's",
    );
    await store.register(machine('node-b'), admin, NOW);
    await store.register({ ...machine('web-1'), kind: 'instance', machine: 'mbp' }, mbp, NOW);
    t.same(
      (await store.listResources({}, NOW)).map((r) => r.id),
      ['mbp', 'node-b', 'web-1'],
      'every live resource, by id',
    );
    t.same(
      (await store.listResources({ kind: 'machine' }, NOW)).map((r) => r.id),
      ['mbp', 'node-b'],
      'by kind',
    );
    t.same(
      (await store.listResources({ machine: 'mbp' }, NOW)).map((r) => r.id),
      ['mbp', 'web-1'],
      'by machine',
    );
    const beat = await store.heartbeatResource(
      'mbp',
      new Map<string, string | number>([
        ['os', 'darwin'],
        ['load', 2],
      ]),
      mbp,
      NOW + 30_000,
    );
    t.match(beat, { ok: true, resource: { renewedAt: NOW + 30_000, expiresAt: NOW + 90_000 } }, 'a heartbeat renews');
    t.same(
      Object.fromEntries(
        (await store.listResources({ machine: 'mbp', kind: 'machine' }, NOW + 30_000))[0]?.attrs ?? [],
      ),
      { os: 'darwin', load: 2 },
      'and replaces the attrs',
    );
    t.same(
      (await store.listResources({}, NOW + 60_000)).map((r) => r.id),
      ['mbp'],
      'at NOW + 60 s only the renewed one is live',
    );
    t.match(
      await store.heartbeatResource('node-b', undefined, admin, NOW + 60_000),
      { ok: false, reason: 'not-found' },
      'an expired one cannot be renewed',
    );
    t.match(
      await store.deleteResource('mbp', { machine: 'node-b', admin: false }, NOW + 1),
      { ok: false, reason: 'wrong-host' },
      'another machine cannot delete it',
    );
    t.match(await store.deleteResource('mbp', mbp, NOW + 1), { ok: true }, 'its machine can');
    t.same(
      (await store.listResources({}, NOW + 1)).map((r) => r.id),
      ['node-b', 'web-1'],
      'gone',
    );
  });

  t.test('port leases: the lowest free port, renew and release by the holder only, reuse after expiry', async (t) => {
    const store = await factory.registry(t);
    const a = await store.allocatePort({ machine: 'mbp', purpose: 'web', ttlMs: 10_000 }, id(1), NOW);
    t.match(
      a,
      { ok: true, lease: { port: 31450, leaseId: id(1), machine: 'mbp', expiresAt: NOW + 10_000 } },
      'the first test port',
    );
    t.match(
      await store.allocatePort({ machine: 'mbp', purpose: 'web', ttlMs: 10_000, excluded: [31451] }, id(2), NOW),
      { ok: true, lease: { port: 31452 } },
      'excluded and live-leased ports are skipped',
    );
    t.match(
      await store.renewPort(31450, id(1), { machine: 'node-b', admin: false }, NOW + 5000),
      { ok: false, reason: 'wrong-owner' },
      'another machine cannot renew it',
    );
    t.match(
      await store.renewPort(31450, id(9), mbp, NOW + 5000),
      { ok: false, reason: 'wrong-id' },
      'nor another lease id',
    );
    t.match(
      await store.renewPort(31450, id(1), mbp, NOW + 5000),
      { ok: true, lease: { renewedAt: NOW + 5000, expiresAt: NOW + 15_000 } },
      'the holder renews',
    );
    t.same(
      (await store.listPortLeases(NOW + 12_000)).map((l) => l.port),
      [31450],
      'at NOW + 12 s the renewed lease alone is live',
    );
    t.match(
      await store.allocatePort({ machine: 'node-b', purpose: 'db', ttlMs: 10_000 }, id(3), NOW + 12_000),
      { ok: true, lease: { port: 31451 } },
      'the lowest free port again',
    );
    t.match(
      await store.allocatePort({ machine: 'node-b', purpose: 'db', ttlMs: 10_000 }, id(4), NOW + 12_000),
      { ok: true, lease: { port: 31452 }, reused: { leaseId: id(2) } },
      "an expired lease's port is reused",
    );
    t.match(await store.releasePort(31450, id(1), mbp, NOW + 13_000), { ok: true }, 'the holder releases');
    t.match(await store.releasePort(31450, id(1), mbp, NOW + 13_000), { ok: false, reason: 'not-found' }, 'once');
    t.same(
      (await store.listPortLeases(NOW + 13_000)).map((l) => [l.port, l.leaseId]),
      [
        [31451, id(3)],
        [31452, id(4)],
      ],
      'live leases, by port',
    );
  });

  t.test('a full band refuses, and no port is ever held by two live leases', async (t) => {
    const store = await factory.registry(t, {
      bands: { reserved: [], test: { from: 40000, to: 40002 }, offline: { from: 40010, to: 40011 } },
    });
    const got = [];
    for (const [n, machine] of [
      [1, 'mbp'],
      [2, 'node-b'],
      [3, 'seed'],
      [4, 'seed-2'],
    ] as const)
      got.push(await store.allocatePort({ machine, purpose: 'p', ttlMs: 60_000 }, id(n), NOW));
    t.same(
      got.map((g) => (g.ok ? g.lease.port : g.reason)),
      [40000, 40001, 40002, 'band-full'],
      'three ports, then band-full',
    );
    const live = await store.listPortLeases(NOW);
    t.equal(new Set(live.map((l) => l.port)).size, live.length, 'distinct ports');
  });

  t.test(
    'commitAll: each write sees the ones before it; a throwing one fails alone; sweep reclaims expired rows',
    async (t) => {
      const store = await factory.registry(t);
      const out = await store.commitAll<unknown>([
        () => store.allocatePort({ machine: 'mbp', purpose: 'p', ttlMs: 1000 }, id(1), NOW),
        () => {
          throw new Error('boom');
        },
        () => store.allocatePort({ machine: 'mbp', purpose: 'p', ttlMs: 1000 }, id(2), NOW),
      ]);
      t.match(
        out,
        [
          { ok: true, value: { ok: true, lease: { port: 31450 } } },
          { ok: false, error: /boom/ },
          { ok: true, value: { ok: true, lease: { port: 31451 } } },
        ],
        'the second allocation saw the first; the throwing write is its own outcome',
      );
      if (factory.groupsCommits) {
        const [undone] = await store.commitAll([
          () => {
            void store.register(machine('node-b'), admin, NOW);
            throw new Error('boom');
          },
        ]);
        t.equal(undone?.ok, false, 'a write that throws after a call of its own fails');
        t.same(
          await store.listResources({}, NOW),
          [],
          "and that call was undone with it (one transaction: the write's savepoint)",
        );
      }
      t.same(await store.commitAll([]), [], 'an empty group commits nothing');
      await store.register(machine('mbp'), admin, NOW);
      t.same(await store.sweep(NOW + 1000), { resources: 0, leases: 2 }, 'two leases expired at NOW + 1 s are swept');
      t.same(await store.sweep(NOW + 120_000), { resources: 1, leases: 0 }, 'then the resource');
      t.same(await store.sweep(NOW + 120_000), { resources: 0, leases: 0 }, 'nothing left to sweep');
    },
  );
});
