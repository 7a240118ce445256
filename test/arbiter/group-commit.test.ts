/**
 * Group commit (Arbiter.submit): requests decided in the same turn of the event loop share one
 * transaction, and the result is exactly that of deciding them one after another.
 */
import t from 'tap';
import { harness } from './helper.js';
import { FakeTime } from '../registry/fake-time.js';
import { ifMatchStale, PreconditionFailed } from '../../apps/arbiter/src/if-match.js';

t.test(
  'concurrent renewals share one transaction and come out as if serial; a stale If-Match fails alone',
  async (t) => {
    const h = await harness(t);
    await h.settle();
    const acq = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    t.equal(acq.statusCode, 200, 'mbp holds');
    const { generation, revision } = acq.json().lease as { generation: number; revision: number };

    const store = h.rt.store;
    const batches: number[] = [];
    const original = store.transactAll.bind(store);
    store.transactAll = (decisions) => {
      batches.push(decisions.length);
      return original(decisions);
    };
    const renew = (headers: Record<string, string> = {}) =>
      h.post('/v1/lease/renew', { host: 'mbp', generation }, h.tokens.mbp, headers);
    const answers = await Promise.all([
      ...Array.from({ length: 9 }, () => renew()),
      renew({ 'if-match': `"${revision}"` }), // decided after nine renewals: stale
      h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: generation }, h.tokens.nodeb),
    ]);
    t.same(batches, [11], 'eleven requests, one transaction');
    t.same(
      answers.slice(0, 9).map((a) => a.statusCode),
      Array(9).fill(200),
      'every renewal granted',
    );
    const revisions = answers.slice(0, 9).map((a) => (a.json().lease as { revision: number }).revision);
    t.same(
      revisions,
      Array.from({ length: 9 }, (_, i) => revision + 1 + i),
      'each renewal saw the one before it: consecutive revisions',
    );
    t.same(
      answers.slice(0, 9).map((a) => a.headers.etag),
      revisions.map((r) => `"${r}"`),
      'each ETag is its own revision',
    );
    t.equal(answers[9]?.statusCode, 412, 'the stale If-Match is refused');
    t.equal(answers[9]?.headers.etag, `"${revision + 9}"`, 'with the revision it was compared with');
    t.equal(answers[10]?.statusCode, 200, 'the heartbeat in the same batch answered');

    const lease = (await h.get('/v1/lease')).json() as { revision: number; generation: number };
    const last = (answers[10]!.json() as { lease: { revision: number } }).lease.revision;
    t.ok(last >= revision + 9, 'the heartbeat, last in the batch, saw all nine renewals');
    t.equal(lease.revision, last, 'the stored revision is the one the last decision of the batch left');
    const events = (await h.get('/v1/events?limit=100', h.tokens.admin)).json() as {
      events: Array<{ id: number; event: string }>;
    };
    const renewed = events.events.filter((e) => e.event === 'renewed');
    t.ok(renewed.length >= 9, 'the renewals are in the event log');
    t.same(
      renewed.map((e) => e.id),
      [...renewed.map((e) => e.id)].sort((a, b) => a - b),
      'in ascending order',
    );

    const one = await renew();
    t.equal(one.statusCode, 200, 'a lone request is its own batch');
    t.same(batches, [11, 1], 'of one');
  },
);

t.test('a failing commit fails every request of its batch with 500 and writes nothing', async (t) => {
  const h = await harness(t);
  await h.settle();
  const acq = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const { generation, revision } = acq.json().lease as { generation: number; revision: number };
  const store = h.rt.store;
  const original = store.transactAll.bind(store);
  store.transactAll = () => {
    throw new Error('disk I/O error');
  };
  const answers = await Promise.all(
    [1, 2, 3].map(() => h.post('/v1/lease/renew', { host: 'mbp', generation }, h.tokens.mbp)),
  );
  t.same(
    answers.map((a) => a.statusCode),
    [500, 500, 500],
    'all refused',
  );
  t.same(
    answers.map((a) => a.json().error),
    ['HQ_ERR_INTERNAL', 'HQ_ERR_INTERNAL', 'HQ_ERR_INTERNAL'],
    'with the catalog code and no detail',
  );
  t.notOk(
    answers.some((a) => a.body.includes('disk I/O')),
    'no detail leaks',
  );
  store.transactAll = original;
  t.equal(((await h.get('/v1/lease')).json() as { revision: number }).revision, revision, 'nothing was written');
});

t.test(
  'a stale If-Match is refused before the write lock; a current, future or * one waits for its turn',
  async (t) => {
    t.equal(ifMatchStale('"3"', 5), true, 'below the revision: stale');
    t.equal(ifMatchStale('W/"3", "4"', 5), true, 'every tag below: stale');
    t.equal(ifMatchStale('"3", "5"', 5), false, 'one tag current: not stale');
    t.equal(ifMatchStale('"9"', 5), false, 'a future revision may still match after the queued decisions');
    t.equal(ifMatchStale('*', 5), false, '* always waits');
    t.equal(ifMatchStale('junk', 5), false, 'unparsable: left to the decision (which refuses it)');
    t.ok(new PreconditionFailed(4).stack?.split('\n').length === 1, 'a lost CAS is an answer: no stack trace is built');

    const h = await harness(t);
    await h.settle();
    const acq = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    const { generation, revision } = acq.json().lease as { generation: number; revision: number };
    const store = h.rt.store;
    let transactions = 0;
    const original = store.transactAll.bind(store);
    store.transactAll = (decisions) => {
      transactions++;
      return original(decisions);
    };
    const stale = await h.post('/v1/lease/renew', { host: 'mbp', generation }, h.tokens.mbp, {
      'if-match': `"${revision - 1}"`,
    });
    t.equal(stale.statusCode, 412, 'stale: 412');
    t.equal(stale.headers.etag, `"${revision}"`, 'with the current revision');
    t.equal(transactions, 0, 'without a transaction');
    const current = await h.post('/v1/lease/renew', { host: 'mbp', generation }, h.tokens.mbp, {
      'if-match': `"${revision}"`,
    });
    t.equal(current.statusCode, 200, 'current: granted');
    t.equal(transactions, 1, 'in its transaction');
  },
);

t.test(
  'after a network commit the next group waits for its callers (up to the linger), never for a lone caller, never after a synchronous one',
  async (t) => {
    const { GroupCommitQueue } = await import('../../apps/arbiter/src/group-commit.js');
    const turns = (n: number): Promise<void> =>
      n === 0 ? Promise.resolve() : new Promise((r) => setImmediate(() => void turns(n - 1).then(r)));
    const ok = (items: readonly number[]) => items.map((i) => ({ ok: true as const, value: i }));
    // The linger runs on the test's timers, which never fire unless advanced: a promise still
    // pending after the event loop drains is one that waits for the linger.
    const time = new FakeTime();
    const now = <T>(p: Promise<T>): Promise<T | 'late'> => Promise.race([p, turns(200).then(() => 'late' as const)]);

    // A network store (runAll answers later), a long linger: a split group would show, a wait past the last caller would be late.
    const groups: number[][] = [];
    const net = new GroupCommitQueue<number, number>(
      async (items) => {
        groups.push([...items]);
        await turns(1);
        return ok(items);
      },
      256,
      10_000,
      time,
    );
    // Four callers, each sending its next item a different number of event-loop turns after its answer.
    const caller = async (id: number, rounds: number): Promise<void> => {
      for (let r = 0; r < rounds; r++) {
        await net.submit(id);
        await turns(id);
      }
    };
    t.not(
      await now(Promise.all([1, 2, 3, 4].map((id) => caller(id, 3)))),
      'late',
      'the callers came back in time: no wait past the last one',
    );
    t.same(
      groups.map((g) => g.length),
      [4, 4, 4],
      'three rounds, three groups of all four: none split by the first caller back',
    );

    // A lone caller never waits for the linger (its last group was itself).
    const lone: number[][] = [];
    const alone = new GroupCommitQueue<number, number>(
      async (items) => {
        lone.push([...items]);
        await turns(1);
        return ok(items);
      },
      256,
      10_000,
      time,
    );
    const by = async (rounds: number): Promise<void> => {
      for (let r = 0; r < rounds; r++) await alone.submit(1);
    };
    t.not(await now(by(3)), 'late', 'a lone caller is not held back');
    t.same(lone, [[1], [1], [1]], 'one item each');

    // Callers that do not come back: the group goes at the linger with those that did.
    const short = new GroupCommitQueue<number, number>(
      async (items) => {
        groups.push([...items]);
        await turns(1);
        return ok(items);
      },
      256,
      30,
      time,
    );
    groups.length = 0;
    await Promise.all([1, 2, 3].map((i) => short.submit(i)));
    const nine = short.submit(9);
    t.equal(await now(nine), 'late', 'one of three back: it waits for the others');
    t.same(time.pending(), [30], 'at most the linger');
    await time.advance(30);
    t.equal(await now(nine), 9, 'and goes after the linger');
    t.same(groups, [[1, 2, 3], [9]], 'alone');

    // A synchronous store (SQLite) never waits: items of later turns are their own groups.
    const sync: number[][] = [];
    const local = new GroupCommitQueue<number, number>(
      (items) => {
        sync.push([...items]);
        return ok(items);
      },
      256,
      10_000,
      time,
    );
    await Promise.all([1, 2, 3].map((i) => local.submit(i)));
    t.not(await now(local.submit(4)), 'late', 'after a synchronous commit the next item is not held back');
    t.same(sync, [[1, 2, 3], [4]], 'as before');
  },
);
