/**
 * A takeover (store etcd: this arbiter elected again) while a decision of the last term is still
 * in flight. A takeover is an arbiter restart for the protocol (leadership.ts L3): a new boot at
 * the takeover, from which S2.3's start wait counts. The run in flight began on the old boot;
 * when it commits it must not put that boot back, or the start wait would count from the old
 * life and a promotion could come before it. The store here is the real SQLite store with its
 * commit held open (an etcd transaction takes network round trips: a run is a promise).
 */
import t from 'tap';
import type { Outcome } from '../../apps/arbiter/src/store/store.js';
import { CasError } from '../../apps/arbiter/src/store/store.js';
import { harness } from './helper.js';

t.test('a run in flight across a takeover does not put the old boot back', async (t) => {
  const h = await harness(t);
  const arbiter = h.rt.arbiter;
  const store = arbiter.deps.store;
  const transactAll = store.transactAll.bind(store);
  let open: (() => void) | null = null;
  store.transactAll = (...args: Parameters<typeof transactAll>) =>
    new Promise<readonly Outcome[]>((resolve, reject) => {
      open = () => {
        try {
          resolve(transactAll(...args) as readonly Outcome[]);
        } catch (err) {
          reject(err as Error);
        }
      };
    });

  const oldBoot = arbiter.boot;
  // A decision that keeps the state and the boot it was given: as a renewal does.
  const inFlight = arbiter.decide(
    'probe',
    undefined,
    (state, ctx) => ({ next: state, boot: ctx.boot, events: [], answer: null }),
    () => 'ok',
  );
  t.ok(open !== null, 'the run is waiting for its commit');

  h.clock.advance(30);
  const takeoverAt = h.clock.now();
  const takeover = arbiter.takeOver();
  store.transactAll = transactAll; // the takeover's own restart commits at once
  (open as unknown as () => void)();
  await inFlight;
  await takeover;

  t.not(oldBoot.startAt, takeoverAt, 'the takeover is later than the old boot');
  t.equal(arbiter.boot.startAt, takeoverAt, 'the boot is the takeover’s: the start wait counts from it');
  t.equal(arbiter.context().boot.startAt, takeoverAt, 'and the next decision decides on it');
});

t.test('a takeover whose restart loses its compare-and-swap decides again on the state it returned', async (t) => {
  // With store etcd, a store decides on its own last commit; another arbiter elected meanwhile
  // moved the state, so the restart of this takeover loses its compare once (nothing written).
  const h = await harness(t);
  const arbiter = h.rt.arbiter;
  const store = arbiter.deps.store;
  const transactAll = store.transactAll.bind(store);
  let lost = 0;
  store.transactAll = (...args: Parameters<typeof transactAll>) => {
    if (lost++ === 0) throw new CasError();
    return transactAll(...args);
  };
  h.clock.advance(30);
  const takeoverAt = h.clock.now();
  await arbiter.takeOver();
  t.equal(lost, 2, 'the restart ran again after the lost compare');
  t.equal(arbiter.boot.startAt, takeoverAt, 'and the takeover completed: its boot is the one decisions use');
});
