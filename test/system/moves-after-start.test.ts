/**
 * Whole system, real processes: the paths on which HQ stopped or waited for nothing.
 *  1. `hq failover --to node-b` right after the arbiter's first start: node-b runs within a few
 *     heartbeats, not at the end of the start wait (every candidate reported never-seen once, a
 *     fact about the previous life that a grant of this life does not undo).
 *  2. The same right after the arbiter restarted on its kept database: mbp ran its generation and
 *     acknowledges its step-down saying so; once every candidate reported, node-b runs — unless
 *     node-b confirmed mbp while the arbiter was down, whose validity node-b still waits out (S2.1).
 *  3. mbp's agent restarted while the arbiter is down: it knows its record again from local.json,
 *     runs again on node-b's confirmation (`quorum-standby`) and never beside node-b.
 * The TTL is 40 s here so that the start wait (ttl + margin = 41 s) stands apart from a few
 * heartbeats; every other key is L1's fast setting.
 */
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, sleep } from './harness.js';

// Each scenario has its own cluster, and each mostly waits on real time: they run side by side.
t.jobs = 3;

const TTL = 40;
const START_WAIT_MS = (TTL + 1) * 1000;
/** A few of the agents' refreshes (1 s), with room for a loaded machine. */
const FEW_HEARTBEATS_MS = 8000;

interface Wait {
  kind: string;
  until: number | null;
  host: string | null;
  text: string;
}

/**
 * `hq failover --to node-b`, then the time until node-b's first `run: true` (ms from the
 * failover's start), and the wait the transfer's record said holds node-b.
 */
async function failoverToNodeB(t: Test, c: Cluster): Promise<{ ms: number; wait: Wait | null }> {
  const overlap = c.watchOverlap(t);
  const started = Date.now();
  const r = await c.hq('node-b', ['failover', '--to', 'node-b', '--json'], { HQ_ADMIN_TOKEN: c.adminToken });
  t.equal(r.code, 0, `hq failover --to node-b exits 0 (${r.stderr.trim()})`);
  const lease = (JSON.parse(r.stdout) as { lease: { notBefore: number | null; wait?: Wait | null } }).lease;
  t.not(lease.wait, undefined, 'the record says which wait holds node-b');
  if (lease.wait !== null && lease.wait !== undefined && lease.wait.until !== null)
    t.equal(lease.wait.until, lease.notBefore, 'until the record’s notBefore');
  await c.waitFor(async () => (await c.fence('node-b'))?.run === true, START_WAIT_MS + 20_000, 'node-b runs');
  const ms = Date.now() - started;
  t.equal(await overlap.stop(), null, 'no sample had both hosts running');
  return { ms, wait: lease.wait ?? null };
}

t.test('a failover right after the arbiter’s first start does not wait out the start wait', async (t) => {
  const c = await Cluster.withHolder(t, { arbiter: { ttlSeconds: TTL, viewFreshSeconds: TTL } });
  const arbiterStart = c.arbiterStartedAt;
  const { ms, wait } = await failoverToNodeB(t, c);
  // Every candidate reported never having seen a generation: no start wait, only mbp's validity.
  t.match(
    wait,
    { kind: 'lock-delay', host: 'mbp', text: /mbp's last possible validity.*acknowledges its step-down/ },
    'the transfer waits for mbp’s lock-delay only, and says what ends it',
  );
  t.ok(
    Date.now() - arbiterStart < START_WAIT_MS,
    `node-b ran ${Date.now() - arbiterStart} ms after the arbiter started, before its start wait (${START_WAIT_MS} ms) would end`,
  );
  t.ok(ms < FEW_HEARTBEATS_MS, `node-b ran ${ms} ms after hq failover started`);
  t.comment(`failover right after a fresh start (ttl ${TTL}): node-b's first run: true ${ms} ms after hq failover`);
  // And back by a handover that waits until mbp may run, saying what it waited for.
  const overlap = c.watchOverlap(t);
  const back = await c.hq('node-b', ['lease', 'release', '--handover-to', 'mbp', '--wait', '30']);
  t.equal(back.code, 0, `hq lease release --handover-to mbp --wait 30 exits 0 (${back.stderr.trim()})`);
  t.match(
    back.stdout,
    /^handed over to mbp at generation 3; waiting up to 30 s until it may run\n(waiting: .*\n)*mbp may run at generation 3 after [0-9.]+ s: node-b stepped down before it handed over: no lock-delay to wait for\n$/,
    `it waited until mbp may run (${back.stdout.trim()})`,
  );
  await c.waitFor(async () => (await c.fence('mbp'))?.run === true, FEW_HEARTBEATS_MS, 'mbp runs');
  t.equal(await overlap.stop(), null, 'no sample had both hosts running');
});

t.test(
  'a failover right after the arbiter restarted on its kept database: mbp ran, acknowledges, node-b runs',
  async (t) => {
    const c = await Cluster.withHolder(t, { arbiter: { ttlSeconds: TTL, viewFreshSeconds: TTL } });
    await c.kill('arbiter', 'SIGTERM');
    const restarted = Date.now();
    await c.startArbiter();
    await c.waitFor(
      async () => (await c.fence('mbp'))?.reason === 'holder',
      20_000,
      'mbp renews with the restarted arbiter',
    );
    // A restart longer than a heartbeat makes mbp ask node-b to confirm it meanwhile; node-b then
    // waits out that confirmation whatever mbp acknowledges (S2.1). Else the move is quick.
    // Whether node-b holds a confirmation it gave, sampled from the restart until it runs.
    let gave: { waitSeconds: number; ageSeconds: number } | null = null;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const g = (await c.status('node-b'))?.['gaveConfirmation'] as
          | { waitSeconds: number; ageSeconds: number }
          | null
          | undefined;
        if (g !== null && g !== undefined && gave === null) gave = g;
        await sleep(100);
      }
    })();
    await sleep(3000);
    const { ms, wait } = await failoverToNodeB(t, c);
    // The start wait holds the move unless mbp's renewal since the restart reaches past it.
    t.match(wait, { kind: /^(start-wait|lock-delay)$/ }, `the transfer names its wait (${wait?.text ?? 'none'})`);
    if (wait?.kind === 'start-wait')
      t.notMatch(wait.text, /mbp's last possible validity/, 'the start wait is not put on mbp’s validity');
    sampling = false;
    await sampler;
    if (gave === null) {
      t.ok(
        Date.now() - restarted < START_WAIT_MS,
        `node-b ran ${Date.now() - restarted} ms after the restart, before its start wait (${START_WAIT_MS} ms) would end`,
      );
      t.ok(
        ms < FEW_HEARTBEATS_MS + 4000,
        `node-b ran ${ms} ms after hq failover started (the reports that count come 2 s after the start)`,
      );
    } else {
      const g = gave as { waitSeconds: number; ageSeconds: number };
      t.ok(
        Date.now() - restarted >= (g.waitSeconds + g.ageSeconds) * 1000 - 1000,
        `node-b confirmed mbp during the restart and ran ${Date.now() - restarted} ms after it, not before its confirmation's ${(g.waitSeconds + g.ageSeconds).toFixed(1)} s had passed (S2.1)`,
      );
    }
    const events = (
      JSON.parse((await c.hq('node-b', ['events', '--json'])).stdout) as {
        events: { event: string; host: string | null; data: { [k: string]: unknown } }[];
      }
    ).events;
    t.ok(
      events.some((e) => e.event === 'stepped-down' && e.host === 'mbp' && e.data['ran'] === true),
      'the arbiter accepted mbp’s acknowledgement saying it ran',
    );
    t.comment(
      `failover right after an arbiter restart (ttl ${TTL}): node-b's first run: true ${ms} ms after hq failover`,
    );
  },
);

t.test('the holder’s agent restarted during an arbiter outage runs again on its peer; node-b never runs', async (t) => {
  const c = await Cluster.withHolder(t, { arbiter: { ttlSeconds: TTL, viewFreshSeconds: TTL } });
  await c.kill('arbiter', 'SIGKILL');
  await c.waitFor(
    async () => (await c.fence('mbp'))?.reason === 'quorum-standby',
    15_000,
    'mbp runs on node-b’s confirmation',
  );
  const overlap = c.watchOverlap(t);
  await c.kill('mbp', 'SIGTERM');
  const restarted = Date.now();
  await c.startAgent('mbp');
  const local = JSON.parse(readFileSync(join(c.stateDir('mbp'), 'local.json'), 'utf8')) as {
    holder: string | null;
    generation: number;
  };
  t.match(local, { holder: 'mbp', generation: 1 }, 'local.json still says mbp holds generation 1');
  const first = await c.fence('mbp');
  t.not(
    first?.reason,
    'no-lease-after-seen',
    `right after the restart the reason is not no-lease-after-seen (${first?.reason})`,
  );
  await c.waitFor(async () => (await c.fence('mbp'))?.run === true, START_WAIT_MS + 10_000, 'mbp runs again');
  const f = await c.fence('mbp');
  t.equal(f?.reason, 'quorum-standby', 'on its peer’s confirmation');
  t.comment(`holder's agent restarted in an arbiter outage: runs again ${Date.now() - restarted} ms after its restart`);
  for (let i = 0; i < 6; i++) {
    t.equal((await c.fence('mbp'))?.run, true, `mbp keeps running (sample ${i})`);
    await sleep(500);
  }
  await c.kill('node-b', 'SIGTERM');
  await c.startAgent('node-b');
  await sleep(3000);
  t.equal((await c.fence('node-b'))?.run, false, 'a restarted standby does not run');
  t.equal(await overlap.stop(), null, 'no sample had both hosts running');
});
