/**
 * EventLog, against every store factory: append-only, ascending ids never reused, where a tail
 * or a `since` starts, bounded by age and count.
 */
import t from 'tap';
import { STORE_FACTORIES } from './factories.js';

for (const factory of STORE_FACTORIES) {
  t.test(factory.name, async (t) => {
    t.test('tailAfter and sinceAfter find where to start, sweepEvents bounds age and count without reusing ids', async (t) => {
      const store = factory.lease(t);
      t.equal(store.tailAfter(20), 0, 'an empty log: the tail starts at 0');
      t.equal(store.sinceAfter(100), 0, 'an empty log: since starts at 0');
      t.same(store.appendEvents([]), [], 'appending nothing writes nothing');
      const rows = store.appendEvents(Array.from({ length: 10 }, (_, i) => ({ at: 1000 + i * 10, category: 'control', event: `e${i + 1}`, host: i === 0 ? 'mbp' : null, data: { n: i, ok: true, why: null } })));
      t.same(rows.map((e) => e.id), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'ids ascend from 1');
      t.same(store.listEvents(0, 1), [{ id: 1, at: 1000, category: 'control', event: 'e1', host: 'mbp', data: { n: 0, ok: true, why: null } }], 'a row reads back whole');
      t.same(store.listEvents(store.tailAfter(3), 3).map((e) => e.id), [8, 9, 10], 'the tail of 3 is the newest three, oldest first');
      t.equal(store.tailAfter(50), 0, 'a tail longer than the log starts at 0');
      t.same(store.listEvents(4, 2).map((e) => e.id), [5, 6], 'after 4, two at most');
      t.same(store.listEvents(store.sinceAfter(1035), 100).map((e) => e.id), [5, 6, 7, 8, 9, 10], 'since 1035 starts at the first event at or after it');
      t.same(store.listEvents(store.sinceAfter(1040), 100).map((e) => e.id), [5, 6, 7, 8, 9, 10], 'an event exactly at T is included');
      t.equal(store.sinceAfter(5000), 10, 'since after the newest event starts after it (nothing yet)');
      t.equal(store.sweepEvents(1020, 1000), 2, 'two events older than 1020 are swept');
      t.same(store.listEvents(0, 100).map((e) => e.id), [3, 4, 5, 6, 7, 8, 9, 10], 'the rest stays');
      t.equal(store.sweepEvents(0, 5), 3, 'the count bound keeps the newest five');
      t.same(store.listEvents(0, 100).map((e) => e.id), [6, 7, 8, 9, 10], 'the newest five');
      t.equal(store.sweepEvents(1e12, 5), 5, 'everything older than the cut goes');
      const [next] = store.appendEvents([{ at: 2000, category: 'control', event: 'after-sweep', host: null, data: {} }]);
      t.equal(next?.id, 11, 'ids are never reused after a sweep (an SSE client resuming at 10 misses nothing)');
    });

    t.test("a decision's events and appended ones share one sequence, seen by every handle", async (t) => {
      const a = factory.lease(t);
      const b = factory.again(t, a);
      a.appendEvents([{ at: 1, category: 'control', event: 'first', host: null, data: {} }]);
      const c = b.transact((s) => ({ next: s, events: [{ at: 2, category: 'lease', event: 'second', host: 'mbp', data: {} }], result: null }));
      t.same(c.events.map((e) => e.id), [2], "the decision's event is next in the sequence");
      t.same(a.listEvents(0, 10).map((e) => [e.id, e.event]), [[1, 'first'], [2, 'second']], 'both, in order, from the other handle');
    });
  });
}
