/**
 * LeaseRecords, against every store factory: one read → decide → compare-and-swap write, group
 * commit as if the decisions ran one after another, reads that see every writer's commit.
 */
import t from 'tap';
import type { ArbiterState, Observer } from '@hq/lease-core';
import { emptyLease } from '@hq/lease-core';
import { CasError } from '../../../apps/arbiter/src/store/store.js';
import type { Decision } from '../../../apps/arbiter/src/store/store.js';
import { forEachStore } from './factories.js';

const NODE_B: Observer = {
  view: { target: 'mbp', reachable: false, ping: false, health: true, at: 5 },
  confirmation: { holder: 'mbp', generation: 2, at: 4 },
  lastHeartbeatAt: 5,
  heartbeatSeconds: 1,
  refreshSeconds: 30,
  requestTimeoutSeconds: 2.5,
};

const bump = (s: ArbiterState, generation: number): Decision<null> => ({
  next: { ...s, lease: { ...s.lease, generation, revision: s.lease.revision + 1 } },
  events: [],
  result: null,
});

forEachStore(t, async (factory, t) => {
  t.test('a new store holds the empty record with the floor pending (S2.4)', async (t) => {
    const store = await factory.lease(t, { ttlSeconds: 6 });
    t.equal(store.createdNow, true, 'created now');
    const s = await store.read();
    t.same(s.lease, { ...emptyLease(6), floorPending: true }, 'the first record has floorPending');
    t.equal(s.floor, 0, 'floor 0');
    t.equal(s.observers.size, 0, 'no observers yet');
    t.equal((await factory.again(t, store)).createdNow, false, 'a second open of the same data is not created now');
  });

  t.test(
    'transact writes lease, floor, observers and events at once and detects a lost compare-and-swap',
    async (t) => {
      const store = await factory.lease(t);
      const c = await store.transact((s) => {
        const observers = new Map(s.observers);
        observers.set('node-b', NODE_B);
        return {
          next: {
            lease: { ...s.lease, holder: 'mbp', generation: 3, revision: s.lease.revision + 1 },
            observers,
            floor: 2,
          },
          events: [{ at: 5, category: 'hq.lease', event: 'acquired', host: 'mbp', data: { generation: 3 } }],
          result: 'done',
        };
      });
      t.equal(c.result, 'done', 'the result comes back');
      t.equal(c.events[0]?.id, 1, 'the event got an id');
      const s = await store.read();
      t.match(s.lease, { holder: 'mbp', generation: 3, revision: 1 }, 'lease written');
      t.equal(s.floor, 2, 'floor written');
      t.same(s.observers.get('node-b'), NODE_B, 'the observer reads back');
      const other = await factory.again(t, store);
      t.same(
        (await other.read()).observers.get('node-b'),
        NODE_B,
        'also from another handle (from storage, not a cache)',
      );
      t.same(
        (await store.listEvents(0, 10)).map((e) => e.event),
        ['acquired'],
        'event row',
      );

      await t.rejects(
        async () =>
          store.transact((outer) => {
            // Someone else writes the record between our read and our write: the CAS must notice.
            factory.interleave(store, (same) => same.transact((inner) => bump(inner, inner.lease.generation)));
            return {
              next: { ...outer, lease: { ...outer.lease, generation: 9, revision: outer.lease.revision + 1 } },
              events: [{ at: 6, category: 'x', event: 'y', host: null, data: {} }],
              result: null,
            };
          }),
        CasError,
        'a stale revision throws CasError',
      );
      t.equal((await store.read()).lease.generation, 3, 'nothing of the failed transaction was written');
      t.equal((await other.read()).lease.generation, 3, 'as another handle reads it too');
      t.equal((await store.listEvents(0, 10)).length, 1, 'not even its events');
      const moved = (await store.read()).lease.revision;
      await t.rejects(
        async () =>
          store.transact((s) => ({ next: { ...s, lease: { ...s.lease, generation: 4 } }, events: [], result: null })),
        /revision/,
        'a change without a new revision is refused',
      );
      await t.rejects(
        async () =>
          store.transact(() => {
            throw new Error('refused by the decision');
          }),
        /refused by the decision/,
        "a decision's error comes back",
      );
      t.equal((await store.read()).lease.revision, moved, 'and nothing was written');
      const floor = await store.transact((s) => ({ next: { ...s, floor: 5 }, events: [], result: null }));
      t.same(
        [floor.state.floor, floor.state.lease.revision],
        [5, moved],
        'the floor may move alone, keeping the revision',
      );
      const same = await store.transact((s) => ({ next: s, events: [], result: 'nothing' }));
      t.equal(same.state.lease.revision, moved, 'an unchanged state writes nothing');
    },
  );

  t.test("read sees another handle's commit at once, both ways", async (t) => {
    const a = await factory.lease(t);
    const b = await factory.again(t, a);
    t.equal((await a.read()).lease.generation, 0, 'read once (a store may cache it)');
    await b.transact((s) => bump(s, 5));
    t.equal((await a.read()).lease.generation, 5, "another writer's commit (check, token in another process) is seen");
    await a.transact((s) => bump(s, 6));
    t.equal((await b.read()).lease.generation, 6, 'and the other way round');
    t.equal((await a.read()).lease.generation, 6, 'the own commit is seen');
  });

  t.test('transactAll: each decision on the state the one before left; a throwing one is left out', async (t) => {
    const store = await factory.lease(t);
    const seen: number[] = [];
    const step =
      (n: number) =>
      (s: ArbiterState): Decision<number> => {
        seen.push(s.lease.revision);
        return {
          next: { ...s, lease: { ...s.lease, generation: n, revision: s.lease.revision + 1 } },
          events: [{ at: n, category: 'hq.lease', event: `e${n}`, host: null, data: {} }],
          result: n,
        };
      };
    const boom = new Error('refused');
    const out = await store.transactAll([
      step(1),
      () => {
        throw boom;
      },
      step(3),
    ]);
    t.same(seen, [0, 1], "the third decided on the first one's state");
    t.match(
      out[0],
      { ok: true, committed: { result: 1, state: { lease: { generation: 1, revision: 1 } } } },
      'first committed',
    );
    t.same(out[1], { ok: false, error: boom }, 'the second carries its error');
    t.match(
      out[2],
      { ok: true, committed: { result: 3, state: { lease: { generation: 3, revision: 2 } } } },
      'third committed',
    );
    t.same(
      (await store.listEvents(0, 10)).map((e) => [e.id, e.event]),
      [
        [1, 'e1'],
        [2, 'e3'],
      ],
      'events of the committed ones, in order',
    );
    t.match((await store.read()).lease, { generation: 3, revision: 2 }, 'the last state is the stored one');
    await t.rejects(
      async () =>
        store.transactAll([
          step(4),
          (s) => ({ next: { ...s, lease: { ...s.lease, generation: 9 } }, events: [], result: null }),
        ]),
      /revision/,
      'a change without a new revision fails the whole transaction',
    );
    t.match((await store.read()).lease, { generation: 3, revision: 2 }, 'and nothing of it was written');
    t.equal((await store.listEvents(0, 10)).length, 2, "not even the first one's event");
    t.same(await store.transactAll([]), [], 'an empty group commits nothing');
  });
  t.test('the displaced holder reads back from storage, from another handle and from a backup', async (t) => {
    const store = await factory.lease(t);
    const displaced = {
      host: 'mbp',
      generation: 3,
      revision: 7,
      floor: null,
      acknowledgedAt: 1005.5,
      savedSeconds: 55,
    };
    await store.transact((s) => ({
      next: { ...s, lease: { ...s.lease, holder: 'node-b', generation: 4, revision: s.lease.revision + 1, displaced } },
      events: [],
      result: null,
    }));
    t.same(
      (await (await factory.again(t, store)).read()).lease.displaced,
      displaced,
      'another handle reads it as written',
    );
    const to = factory.backupTarget(t);
    await store.backup(to);
    t.same(
      (await (await factory.fromBackup(t, to)).read()).lease.displaced,
      displaced,
      'and so does a store opened on a backup',
    );
    const cleared = await store.transact((s) => ({
      next: { ...s, lease: { ...s.lease, revision: s.lease.revision + 1, displaced: null } },
      events: [],
      result: null,
    }));
    t.equal(cleared.state.lease.displaced, null, 'cleared');
    t.equal((await (await factory.again(t, store)).read()).lease.displaced, null, 'and cleared in storage');
  });
});
