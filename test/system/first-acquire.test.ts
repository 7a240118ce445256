/**
 * The first grant, with the agents at the default cadence (a heartbeat every ten minutes, a lease
 * read every minute), with real processes: the standby's agent, which knows of no holder, reads
 * the lease every few seconds, so within seconds of `hq lease acquire` on mbp node-b answers
 * `not-holder` naming mbp — not `no-lease … holder none` until its next minute's read.
 *
 * The arbiter runs at the fast settings (ttl 6 s) so that its start wait, during which it asks
 * every candidate for an early report (a heartbeat that would also tell node-b), is over before
 * the acquire, as on an arbiter that has run for a while.
 */
import t from 'tap';
import { Cluster, FAST_ARBITER, sleep } from './harness.js';

t.test('after the first acquire the standby names the holder within seconds, at the defaults', async (t) => {
  const c = await Cluster.create({ settings: 'defaults', arbiter: { ...FAST_ARBITER } });
  t.teardown(() => c.stopAll());
  await c.startArbiter();
  await Promise.all([c.startAgent('mbp'), c.startAgent('node-b')]);
  await c.waitFor(
    async () => (await c.fence('node-b'))?.reason === 'no-lease',
    30_000,
    'node-b has heard from the arbiter: no lease yet',
  );
  // Past the start wait (ttl + margin = 7 s) and its report window: nothing asks node-b to heartbeat now.
  await sleep(10_000);
  const before = await c.fence('node-b');
  t.match(before, { run: false, reason: 'no-lease', holder: null }, 'before the acquire node-b knows of no holder');
  const acquired = await c.hq('mbp', ['lease', 'acquire']);
  t.equal(acquired.code, 0, `mbp acquires (${acquired.stderr.trim()})`);
  const started = Date.now();
  // At the old cadence the next lease read came up to refreshSeconds (60 s) later.
  await c.waitFor(async () => (await c.fence('node-b'))?.holder === 'mbp', 15_000, 'node-b names mbp as the holder');
  t.comment(`node-b named mbp ${((Date.now() - started) / 1000).toFixed(1)} s after hq lease acquire returned`);
  t.match(
    await c.fence('node-b'),
    { run: false, reason: 'not-holder', holder: 'mbp' },
    'node-b answers not-holder, naming mbp',
  );
});
