/**
 * GroupCommit: the writes of one event-loop turn share one transaction, each decided as alone;
 * a throwing write fails alone; a failed commit fails the group and writes nothing.
 */
import t from 'tap';
import { GroupCommit } from '../../apps/arbiter/src/registry/group-commit.js';
import type { RegistryStore } from '../../apps/arbiter/src/registry/store.js';
import { forEachStore } from '../arbiter/store/factories.js';
import type { Actor } from '../../apps/arbiter/src/registry/decide.js';

const NOW = 1_800_000_000_000;
const admin: Actor = { machine: 'ops', admin: true };

function machine(id: string) {
  return { id, name: id, kind: 'machine' as const, machine: id, attrs: new Map(), observedAt: NOW, ttlMs: 60_000 };
}

/** Calls `seen` with the writes of every `commitAll` (one call per group). */
function groups(store: RegistryStore, seen: (size: number) => void): void {
  const commitAll = store.commitAll.bind(store);
  store.commitAll = (writes) => {
    seen(writes.length);
    return commitAll(writes);
  };
}

forEachStore(t, async (factory, t) => {
  t.test('allocations submitted in one turn share a group and still get distinct ports', async (t) => {
    const store = await factory.registry(t);
    const group = new GroupCommit(store);
    let commits = 0;
    groups(store, () => commits++);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        group.submit(() =>
          store.allocatePort({ machine: 'mbp', purpose: 'p', ttlMs: 60_000 }, `${String(i).padStart(32, '0')}`, NOW),
        ),
      ),
    );
    const ports = answers.map((a) => (a.ok ? a.lease.port : -1));
    t.equal(commits, 1, `ten writes of one turn are one group${factory.groupsCommits ? ' (one transaction)' : ''}`);
    t.same(
      ports,
      Array.from({ length: 10 }, (_, i) => 31450 + i),
      'each allocation saw the ones before it in the group',
    );
    t.equal((await store.listPortLeases(NOW)).length, 10, 'all ten are committed');
  });

  t.test('a write that throws fails alone; the rest of its group commits', async (t) => {
    const store = await factory.registry(t);
    const group = new GroupCommit(store);
    const a = group.submit(() => store.register(machine('mbp'), admin, NOW));
    const bad = group.submit((): never => {
      if (factory.groupsCommits) void store.register(machine('node-b'), admin, NOW);
      throw new Error('boom');
    });
    const c = group.submit(() => store.register(machine('cloud-vm'), admin, NOW));
    t.equal((await a).ok, true, 'the write before succeeds');
    await t.rejects(bad, /boom/, 'the throwing write rejects');
    t.equal((await c).ok, true, 'the write after succeeds');
    t.same(
      (await store.listResources({}, NOW)).map((r) => r.id),
      ['cloud-vm', 'mbp'],
      factory.groupsCommits
        ? "the throwing write's own register was rolled back to its savepoint"
        : 'the throwing write wrote nothing',
    );
  });

  t.test('a failed transaction rejects every write of the group and writes nothing', async (t) => {
    const store = await factory.registry(t);
    const group = new GroupCommit(store);
    store.commitAll = (): never => {
      throw new Error('SQLITE_BUSY: database is locked');
    };
    const all = [
      group.submit(() => store.register(machine('mbp'), admin, NOW)),
      group.submit(() => store.register(machine('node-b'), admin, NOW)),
    ];
    for (const p of all) await t.rejects(p, /SQLITE_BUSY/, 'each write of the group rejects with the error');
    t.same(await store.listResources({}, NOW), [], 'nothing was written');
  });

  t.test('a group is capped; the rest run in the next group', async (t) => {
    const store = await factory.registry(t);
    const group = new GroupCommit(store, 3);
    const sizes: number[] = [];
    groups(store, (n) => sizes.push(n));
    await Promise.all(
      Array.from({ length: 7 }, (_, i) => group.submit(() => store.register(machine(`h${i}`), admin, NOW))),
    );
    t.same(sizes, [3, 3, 1], 'seven writes with a cap of three are three groups');
  });
});
