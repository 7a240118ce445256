/**
 * Whole system on etcd, real processes: three etcd members (test/etcd/members.ts), two
 * arbiters (`store: etcd`, one prefix) and the two agents with both arbiters in `arbiterUrls`.
 * Acquire; kill -9 the elected arbiter → the other takes over as a restarted arbiter (no new
 * grant, the record as it was); the lease still fails over (kill -9 the holder → the standby is
 * promoted by the new elected arbiter after the lock-delay); SIGSTOP the elected arbiter past
 * its etcd lease → the other takes over, and once continued the stopped one does not act (no
 * decision, no promotion, its term ended). A monitor fails on any sample where both fences run.
 */
import t from 'tap';
import { etcdMembers } from '../etcd/members.js';
import { Cluster, FAST_ARBITER, sleep } from './harness.js';

const ELECTION_TTL = 4;

t.test('two arbiters on three etcd members', async (t) => {
  const etcd = await etcdMembers(t, { size: 3 });
  if (etcd === null) return;
  const c = await Cluster.create({
    etcd: { endpoints: etcd.endpoints, arbiters: 2, electionTtlSeconds: ELECTION_TTL },
  });
  t.teardown(() => c.stopAll());
  const health = (i: number) => c.election(i);
  const metric = async (i: number, name: string): Promise<number> => {
    const text = await (await fetch(`${c.arbiterUrl(i)}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith(name))
      .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
  };
  const lease = async (i: number): Promise<{ holder: string | null; generation: number }> =>
    (await (await fetch(`${c.arbiterUrl(i)}/v1/lease`)).json()) as { holder: string | null; generation: number };

  await c.startArbiter(0);
  await c.waitFor(async () => (await health(0))?.elected === true, 20_000, 'arbiter 0 is elected');
  await c.startArbiter(1);
  await c.waitFor(
    async () => (await health(1))?.leader === c.arbiterUrl(0),
    20_000,
    'arbiter 1 sees arbiter 0 elected',
  );
  await c.startAgents();

  const monitor = c.watchOverlap(t);

  await t.test('hq lease acquire (through arbiterUrls) grants mbp the first generation', async (t) => {
    const r = await c.hq('mbp', ['lease', 'acquire', '--wait', '20', '--json']);
    t.equal(r.code, 0, `acquire exits 0 (stderr: ${r.stderr.trim()})`);
    t.match(JSON.parse(r.stdout), { ok: true, lease: { holder: 'mbp', generation: 1 } }, 'mbp holds generation 1');
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 15_000, 'mbp may run');
    t.match(await lease(1), { holder: 'mbp', generation: 1 }, 'the non-elected arbiter reads the same record');
    const doctor = JSON.parse((await c.hq('node-b', ['doctor', '--json'])).stdout) as {
      checks: Array<{ name: string; status: string; detail: string }>;
    };
    t.match(
      doctor.checks.find((x) => x.name === 'arbiter'),
      { detail: /; store etcd: this arbiter is elected, etcd 3\/3 members up$/ },
      'hq doctor names the elected arbiter and the members up',
    );
  });

  await t.test('kill -9 of the elected arbiter: the other takes over as a restarted arbiter', async (t) => {
    const killedAt = Date.now();
    await c.kill('arbiter', 'SIGKILL');
    const took = await c.waitFor(async () => (await health(1))?.elected === true, 30_000, 'arbiter 1 is elected');
    t.comment(`takeover after kill -9 of the elected arbiter: ${took.toFixed(1)} s (election TTL ${ELECTION_TTL} s)`);
    t.ok(took <= ELECTION_TTL + 3, `within the election TTL and etcd's expiry (${took.toFixed(1)} s)`);
    t.match(await lease(1), { holder: 'mbp', generation: 1 }, 'no new grant at the takeover: the record as it was');
    // Within the new arbiter's start wait the lease is not given to anyone else.
    const within = Date.now() - killedAt;
    t.match(
      await lease(1),
      { holder: 'mbp', generation: 1 },
      `still mbp's ${(within / 1000).toFixed(1)} s after the kill`,
    );
    await c.waitFor(
      async () => (await c.fence('mbp'))?.run === true,
      20_000,
      'mbp runs on (renewing through arbiter 1)',
    );
    t.pass('the holder renews through the new elected arbiter');
    await c.startArbiter(0);
    await c.waitFor(
      async () => (await health(0))?.leader === c.arbiterUrl(1),
      20_000,
      'arbiter 0, restarted, sees arbiter 1 elected',
    );
  });

  await t.test(
    'the lease still fails over: kill -9 of the holder, the standby promoted by the new elected arbiter',
    async (t) => {
      const killedAt = Date.now();
      await c.kill('mbp', 'SIGKILL');
      const secs = await c.waitFor(async () => (await c.fence('node-b'))?.run === true, 60_000, 'node-b runs');
      const bound =
        FAST_ARBITER.ttlSeconds + FAST_ARBITER.safetyMarginSeconds + FAST_ARBITER.promoteAfterChecks * 1 + 3;
      t.comment(`lease failover on etcd: ${secs.toFixed(1)} s from kill -9 of the holder to the standby running`);
      t.ok(
        secs < bound + ELECTION_TTL,
        `within L1 + the takeover time (${secs.toFixed(1)} s < ${bound + ELECTION_TTL} s)`,
      );
      t.match(await lease(0), { holder: 'node-b', generation: 2 }, 'node-b holds generation 2');
      t.ok(
        Date.now() - killedAt >= (FAST_ARBITER.ttlSeconds - 1) * 1000,
        'not before the old validity could have run out',
      );
    },
  );

  await t.test('SIGSTOP of the elected arbiter past its etcd lease, then SIGCONT: it does not act', async (t) => {
    const ops = await metric(1, 'hq_lease_operations_total');
    const promotions = await metric(1, 'hq_promotions_total');
    c.signal('arbiter-1', 'SIGSTOP');
    t.teardown(() => {
      try {
        c.signal('arbiter-1', 'SIGCONT');
      } catch {
        // gone already
      }
    });
    const took = await c.waitFor(async () => (await health(0))?.elected === true, 30_000, 'arbiter 0 takes over');
    t.comment(`takeover after SIGSTOP of the elected arbiter: ${took.toFixed(1)} s`);
    await sleep(ELECTION_TTL * 1000);
    c.signal('arbiter-1', 'SIGCONT');
    await sleep(3000);
    t.equal(
      (await health(1))?.elected,
      false,
      'continued, it knows it is not elected (its term lapsed on its own clock)',
    );
    t.equal((await health(1))?.leader, c.arbiterUrl(0), 'and names arbiter 0');
    t.equal(await metric(1, 'hq_lease_operations_total'), ops, 'it made no decision after it was continued');
    t.equal(await metric(1, 'hq_promotions_total'), promotions, 'and no promotion');
    t.match(await lease(1), { holder: 'node-b', generation: 2 }, 'the record is unchanged');
    await c.waitFor(async () => (await c.fence('node-b'))?.run === true, 20_000, 'node-b runs on');
  });

  const overlap = await monitor.stop();
  t.equal(overlap, null, `no sample where both fences said run${overlap === null ? '' : ` (${overlap})`}`);
});
