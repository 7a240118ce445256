/**
 * etcd members lost under a running system, real processes: three etcd members, two arbiters
 * (`store: etcd`), the two agents, and mbp holding the lease with a fenced child under
 * `hq fence run`. kill -9 of one member (a raft follower) changes nothing: the same arbiter
 * stays elected, renewals go on, the agents see no 503, the lease and its generation stay, the
 * child runs on. kill -9 of a second member (no quorum): mutations are 503
 * (`HQ_ERR_NOT_ELECTED` / `HQ_ERR_STORE_UNAVAILABLE`), reads say the store is unavailable, the
 * holder runs on on its validity and node-b's confirmation (L2: `quorum-standby`) and node-b
 * never runs. Both restarted on their data dirs: an arbiter is elected again, the record is as
 * it was, renewals resume. A monitor fails on any sample where both fences run.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { etcdMembers, type EtcdMember } from '../etcd/members.js';
import { Cluster, FAST_ARBITER, HQ_CLI, sleep } from './harness.js';

const ELECTION_TTL = 4;

interface Lease {
  holder: string | null;
  generation: number;
  revision: number;
  renewedAt: number;
}

t.test('etcd members killed under two arbiters and a running holder', async (t) => {
  const etcd = await etcdMembers(t, { size: 3 });
  if (etcd === null) return;
  const c = await Cluster.create({
    etcd: { endpoints: etcd.endpoints, arbiters: 2, electionTtlSeconds: ELECTION_TTL },
  });
  t.teardown(() => c.stopAll());
  const health = (i: number) => c.election(i);
  const call = async (
    i: number,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }> => {
    const r = await fetch(`${c.arbiterUrl(i)}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${c.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(5000),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const lease = async (i: number): Promise<Lease> => (await call(i, 'GET', '/v1/lease')).body as unknown as Lease;
  /** The agents' heartbeat/renewal refusals with a 503 so far (their own log lines). */
  const refused503 = (): number =>
    ['mbp', 'node-b'].reduce(
      (n, h) =>
        n +
        (c.logs.get(h) ?? '')
          .split('\n')
          .filter((l) => l.includes('"event":"arbiter-refused"') && l.includes('"status":503')).length,
      0,
    );

  await c.startArbiter(0);
  await c.waitFor(async () => (await health(0))?.elected === true, 20_000, 'arbiter 0 is elected');
  await c.startArbiter(1);
  // Arbiter 0 campaigned first, but on a busy machine its 4 s term can end before arbiter 1 has
  // started (then arbiter 1 is elected): the claims below are about whichever arbiter decides
  // when the first member is killed, so the start waits until both agree on one.
  let elected = 0;
  await c
    .waitFor(
      async () => {
        const [a, b] = await Promise.all([health(0), health(1)]);
        if (a?.elected === true && b?.leader === c.arbiterUrl(0)) elected = 0;
        else if (b?.elected === true && a?.leader === c.arbiterUrl(1)) elected = 1;
        else return false;
        return true;
      },
      20_000,
      'both arbiters agree on the elected one',
    )
    .catch((err: Error) => {
      const terms = (name: string) =>
        (c.logs.get(name) ?? '')
          .split('\n')
          .filter((l) => l.includes('"component":"election"'))
          .slice(-6)
          .join('\n');
      throw new Error(`${err.message}; arbiter 0's election: ${terms('arbiter')}; arbiter 1's: ${terms('arbiter-1')}`);
    });
  t.comment(`arbiter ${elected} is elected`);
  await c.startAgents();
  const acquired = await c.hq('mbp', ['lease', 'acquire', '--wait', '20']);
  t.equal(acquired.code, 0, `mbp acquires the lease (stderr: ${acquired.stderr.trim()})`);
  await c.waitFor(async () => (await c.fence('mbp'))?.reason === 'holder', 20_000, 'mbp runs as the holder');

  // The fenced child: ticks into a file every 200 ms for as long as it lives, and exits once its
  // supervisor is gone (the teardown kills the supervisor, then removes the directory).
  const ticks = join(c.dir, 'ticks');
  const childCode = `const parent = process.ppid; setInterval(() => { if (process.ppid !== parent) process.exit(0); require('fs').appendFileSync(${JSON.stringify(ticks)}, Date.now() + '\\n'); }, 200);`;
  const run = spawn(
    process.execPath,
    [
      HQ_CLI,
      'fence',
      'run',
      '--role',
      'cron',
      '--recheck',
      '1',
      '--grace',
      '1',
      '--config',
      c.agentConfig('mbp'),
      '--',
      process.execPath,
      '-e',
      childCode,
    ],
    { stdio: 'ignore' },
  );
  let runExit: number | null | undefined;
  run.once('exit', (code) => (runExit = code));
  t.teardown(() => {
    if (runExit === undefined) run.kill('SIGKILL');
  });
  await c.waitFor(async () => existsSync(ticks), 15_000, 'the fenced child ticks');
  const lastTick = (): number => Number(readFileSync(ticks, 'utf8').trim().split('\n').pop());
  const monitor = c.watchOverlap(t);
  const before = await lease(0);
  t.match(before, { holder: 'mbp', generation: 1 }, 'mbp holds generation 1');

  /** Samples both fences for `ms`: every sample of mbp must run, no sample of node-b may. */
  const holdsFor = async (t: Test, ms: number, what: string): Promise<string[]> => {
    const reasons = new Set<string>();
    let bad = 0;
    for (const end = Date.now() + ms; Date.now() < end; ) {
      const [a, b] = await Promise.all([c.fence('mbp'), c.fence('node-b')]);
      if (a?.run !== true || b?.run !== false) {
        bad++;
        if (bad === 1) t.fail(`${what}: mbp ${a?.run}/${a?.reason}, node-b ${b?.run}/${b?.reason}`);
      }
      if (a !== null) reasons.add(a.reason);
      await sleep(250);
    }
    t.equal(bad, 0, `${what}: mbp ran and node-b did not at every sample`);
    return [...reasons];
  };

  let killed: EtcdMember[] = [];
  // A follower: killing the raft leader costs a raft election (~0.5 s at FAST_ETCD), and whether
  // the elected arbiter's keep-alive outlives it is a race its term may lose on a busy machine
  // (then a takeover, as in etcd.test.ts) — not "nothing changes".
  await t.test('kill -9 of one member (a raft follower): nothing changes', async (t) => {
    const leader = await etcd.leader();
    const follower = etcd.members.find((m) => m !== leader) ?? etcd.members[0]!;
    const refusals = refused503();
    await follower.kill();
    killed = [follower];
    t.comment(`killed etcd ${follower.name} (a raft follower)`);
    // Longer than the lease's TTL and the arbiters' election TTL: everything must have renewed.
    const reasons = await holdsFor(t, (FAST_ARBITER.ttlSeconds + 2) * 1000, 'one member down');
    t.same(reasons, ['holder'], 'mbp runs as the holder all along (renewed by the arbiter, not on the peer)');
    t.equal((await health(elected))?.elected, true, `arbiter ${elected} is still elected`);
    const now = await lease(1);
    t.match(now, { holder: 'mbp', generation: 1 }, 'the lease and its generation are unchanged');
    t.ok(
      now.renewedAt > before.renewedAt && now.revision > before.revision,
      `renewals went on (renewedAt ${before.renewedAt} → ${now.renewedAt}, revision ${before.revision} → ${now.revision})`,
    );
    t.ok(refused503() - refusals <= 1, `the agents saw no 503 beyond one retried request (${refused503() - refusals})`);
    t.ok(Date.now() - lastTick() < 1000, 'the fenced child still ticks');
    t.equal(runExit, undefined, 'hq fence run is still running');
  });

  await t.test(
    'kill -9 of a second member (no quorum): mutations 503, reads unavailable, the holder runs on its peer (L2)',
    async (t) => {
      const second = etcd.members.find((m) => m.running)!;
      await second.kill();
      killed.push(second);
      await c.waitFor(
        async () => (await health(0))?.elected === false && (await health(1))?.elected === false,
        (ELECTION_TTL + 4) * 1000,
        'no arbiter is elected',
      );
      for (const i of [0, 1]) {
        const renew = await call(i, 'POST', '/v1/lease/renew', { host: 'mbp', generation: 1 });
        t.match(
          renew,
          { status: 503, body: { error: /^HQ_ERR_(NOT_ELECTED|STORE_UNAVAILABLE)$/ } },
          `arbiter ${i}: a renewal is a 503 (${String(renew.body['error'])})`,
        );
        const port = await call(i, 'POST', '/v1/leases/port', { machine: 'mbp', purpose: 'web', ttlMs: 60_000 });
        t.match(
          port,
          { status: 503, body: { error: /^HQ_ERR_(NOT_ELECTED|STORE_UNAVAILABLE)$/ } },
          `arbiter ${i}: a port allocation is a 503 (${String(port.body['error'])})`,
        );
        const read = await call(i, 'GET', '/v1/lease');
        t.match(
          read,
          { status: 503, body: { error: 'HQ_ERR_STORE_UNAVAILABLE' } },
          `arbiter ${i}: a read says the store is unavailable`,
        );
      }
      await c.waitFor(
        async () => (await c.fence('mbp'))?.reason === 'quorum-standby',
        (FAST_ARBITER.ttlSeconds + 2) * 1000,
        'mbp runs on the peer confirmation',
      );
      // Past a whole TTL on the peer: without node-b's confirmation mbp's validity would have run out.
      const reasons = await holdsFor(t, (FAST_ARBITER.ttlSeconds + 2) * 1000, 'no quorum');
      t.same(reasons, ['quorum-standby'], "mbp runs on its validity and the standby's confirmation (quorum-standby)");
      t.ok(Date.now() - lastTick() < 1000, 'the fenced child still ticks');
      t.equal(runExit, undefined, 'hq fence run is still running');
    },
  );

  await t.test(
    'both members restarted on their data: an arbiter is elected, the record as it was, renewals resume',
    async (t) => {
      t.equal((await call(0, 'GET', '/v1/lease')).status, 503, 'nothing was readable before the heal');
      for (const m of killed) m.start();
      await etcd.waitHealthy(30_000, true);
      const took = await c.waitFor(
        async () => (await health(0))?.elected === true || (await health(1))?.elected === true,
        30_000,
        'an arbiter is elected again',
      );
      t.comment(`an arbiter elected ${took.toFixed(1)} s after the members were healthy`);
      const after = await lease(0);
      t.match(after, { holder: 'mbp', generation: 1 }, 'the record is as it was: mbp, generation 1');
      await c.waitFor(
        async () => (await c.fence('mbp'))?.reason === 'holder',
        30_000,
        'mbp is renewed by the arbiter again',
      );
      const renewed = await lease(1);
      t.ok(
        renewed.renewedAt > after.renewedAt,
        `renewals resumed (renewedAt ${after.renewedAt} → ${renewed.renewedAt})`,
      );
      t.equal(renewed.generation, 1, 'no new generation at any point');
      t.equal((await c.fence('node-b'))?.run, false, 'node-b does not run');
      t.ok(Date.now() - lastTick() < 1000, 'the fenced child still ticks');
      t.equal(runExit, undefined, 'hq fence run ran through it all');
    },
  );

  const overlap = await monitor.stop();
  t.equal(overlap, null, `no sample where both fences said run${overlap === null ? '' : ` (${overlap})`}`);
});
