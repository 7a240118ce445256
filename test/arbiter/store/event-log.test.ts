/**
 * EventLog, against every store factory: append-only, ascending ids never reused, where a tail
 * or a `since` starts, bounded by age and count.
 */
import t from 'tap';
import { forEachStore } from './factories.js';

forEachStore(t, async (factory, t) => {
  t.test(
    'tailAfter and sinceAfter find where to start, sweepEvents bounds age and count without reusing ids',
    async (t) => {
      const store = await factory.lease(t);
      const ids = async (after: number, limit: number): Promise<number[]> =>
        (await store.listEvents(after, limit)).map((e) => e.id);
      t.equal(await store.tailAfter(20), 0, 'an empty log: the tail starts at 0');
      t.equal(await store.sinceAfter(100), 0, 'an empty log: since starts at 0');
      t.same(await store.appendEvents([]), [], 'appending nothing writes nothing');
      const rows = await store.appendEvents(
        Array.from({ length: 10 }, (_, i) => ({
          at: 1000 + i * 10,
          category: 'control',
          event: `e${i + 1}`,
          host: i === 0 ? 'mbp' : null,
          data: { n: i, ok: true, why: null },
        })),
      );
      t.same(
        rows.map((e) => e.id),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        'ids ascend from 1',
      );
      t.same(
        await store.listEvents(0, 1),
        [{ id: 1, at: 1000, category: 'control', event: 'e1', host: 'mbp', data: { n: 0, ok: true, why: null } }],
        'a row reads back whole',
      );
      t.same(await ids(await store.tailAfter(3), 3), [8, 9, 10], 'the tail of 3 is the newest three, oldest first');
      t.equal(await store.tailAfter(50), 0, 'a tail longer than the log starts at 0');
      t.same(await ids(4, 2), [5, 6], 'after 4, two at most');
      t.same(
        await ids(await store.sinceAfter(1035), 100),
        [5, 6, 7, 8, 9, 10],
        'since 1035 starts at the first event at or after it',
      );
      t.same(await ids(await store.sinceAfter(1040), 100), [5, 6, 7, 8, 9, 10], 'an event exactly at T is included');
      t.equal(await store.sinceAfter(5000), 10, 'since after the newest event starts after it (nothing yet)');
      t.equal(await store.sweepEvents(1020, 1000), 2, 'two events older than 1020 are swept');
      t.same(await ids(0, 100), [3, 4, 5, 6, 7, 8, 9, 10], 'the rest stays');
      t.equal(await store.sweepEvents(0, 5), 3, 'the count bound keeps the newest five');
      t.same(await ids(0, 100), [6, 7, 8, 9, 10], 'the newest five');
      t.equal(await store.sweepEvents(1e12, 5), 5, 'everything older than the cut goes');
      const [next] = await store.appendEvents([
        { at: 2000, category: 'control', event: 'after-sweep', host: null, data: {} },
      ]);
      t.equal(next?.id, 11, 'ids are never reused after a sweep (an SSE client resuming at 10 misses nothing)');
    },
  );

  t.test("a decision's events and appended ones share one sequence, seen by every handle", async (t) => {
    const a = await factory.lease(t);
    const b = await factory.again(t, a);
    await a.appendEvents([{ at: 1, category: 'control', event: 'first', host: null, data: {} }]);
    const c = await b.transact((s) => ({
      next: s,
      events: [{ at: 2, category: 'lease', event: 'second', host: 'mbp', data: {} }],
      result: null,
    }));
    t.same(
      c.events.map((e) => e.id),
      [2],
      "the decision's event is next in the sequence",
    );
    t.same(
      (await a.listEvents(0, 10)).map((e) => [e.id, e.event]),
      [
        [1, 'first'],
        [2, 'second'],
      ],
      'both, in order, from the other handle',
    );
  });
});
