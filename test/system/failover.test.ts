/**
 * Whole system, real processes: acquire, fences on both hosts, the holder killed with SIGKILL
 * → promotion → lock-delay observed → the standby runs (L1), and the old holder restarted
 * stays out. A monitor samples both fences all along and fails on any sample where both run.
 */
import t from 'tap';
import { Cluster, sleep } from './harness.js';

t.test('a holder crash moves the lease to the standby without overlap', async (t) => {
  const c = await Cluster.create();
  t.teardown(() => c.stopAll());
  await c.startArbiter();
  await c.startAgents();

  const monitor = c.watchOverlap(t);

  await t.test('hq lease acquire grants mbp the first generation', async (t) => {
    const r = await c.hq('mbp', ['lease', 'acquire', '--wait', '20', '--json']);
    t.equal(r.code, 0, `acquire exits 0 (stderr: ${r.stderr.trim()})`);
    const body = JSON.parse(r.stdout) as { ok: boolean; lease: { holder: string; generation: number } };
    t.equal(body.lease.holder, 'mbp', 'the arbiter names mbp the holder');
    t.equal(body.lease.generation, 1, 'the first grant is generation 1');
  });

  await t.test('the fence says run on the holder and not-holder on the standby', async (t) => {
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 15_000, 'mbp may run');
    const a = await c.fence('mbp');
    t.equal(a?.reason, 'holder', 'mbp runs as the holder');
    t.ok((a?.validForSeconds ?? 0) > 0 && (a?.validForSeconds ?? 99) <= 5, 'validity is at most ttl − margin (5 s)');
    await c.waitFor(async () => (await c.fence('node-b'))?.generation === 1, 10_000, 'node-b knows generation 1');
    const b = await c.fence('node-b');
    t.equal(b?.run, false, 'node-b may not run');
    t.equal(b?.reason, 'not-holder', 'node-b is told it is not the holder');
    const yes = await c.hq('mbp', ['fence', 'check', '--role', 'cron']);
    t.equal(yes.code, 0, `hq fence check exits 0 on the holder (${yes.stdout.trim()})`);
    const no = await c.hq('node-b', ['fence', 'check', '--role', 'cron', '--json']);
    t.equal(no.code, 1, 'hq fence check exits 1 on the standby');
    t.equal((JSON.parse(no.stdout) as { reason: string }).reason, 'not-holder', 'the JSON answer carries the reason');
  });

  await t.test(
    'after SIGKILL of the holder the standby is promoted, waits out the lock-delay, then runs',
    async (t) => {
      const killedAt = Date.now();
      await c.kill('mbp', 'SIGKILL');
      const reasons = new Set<string>();
      let promotedAt = 0;
      await c.waitFor(
        async () => {
          const f = await c.fence('node-b');
          if (f === null) return false;
          if (f.holder === 'node-b') {
            if (promotedAt === 0) promotedAt = Date.now();
            reasons.add(f.reason);
          }
          return f.run;
        },
        20_000,
        'node-b may run',
      );
      const ranAt = Date.now();
      const f = await c.fence('node-b');
      t.equal(f?.generation, 2, 'the promotion is generation 2');
      t.equal(f?.reason, 'holder', 'node-b runs as the holder');
      t.ok(
        reasons.has('lock-delay'),
        `node-b was held behind the lock-delay first (reasons seen: ${[...reasons].join(', ')})`,
      );
      t.ok(ranAt - promotedAt >= 2000, `the lock-delay lasted a while after the promotion (${ranAt - promotedAt} ms)`);
      t.ok(ranAt - killedAt < 15_000, `L1: node-b runs within 15 s of the crash (${ranAt - killedAt} ms)`);
    },
  );

  await t.test('the old holder restarted stays out', async (t) => {
    await c.startAgent('mbp');
    await c.waitFor(async () => (await c.fence('mbp'))?.generation === 2, 10_000, 'mbp learns generation 2');
    for (let i = 0; i < 15; i++) {
      const f = await c.fence('mbp');
      t.equal(f?.run, false, `restarted mbp does not run (sample ${i}: ${f?.reason})`);
      await sleep(200);
    }
    const f = await c.fence('mbp');
    t.equal(f?.reason, 'not-holder', 'mbp knows node-b holds the lease');
    t.equal((await c.fence('node-b'))?.run, true, 'node-b keeps running');
  });

  await t.test('the CLI reads the new state: status, primary, seen, events, maintenance', async (t) => {
    const status = await c.hq('mbp', ['lease', 'status']);
    t.equal(status.code, 0, `lease status exits 0 (${status.stderr.trim()})`);
    t.match(status.stdout, /holder\s+node-b/, 'status prints the holder');
    t.match(status.stdout, /generation\s+2/, 'status prints the generation');
    t.match(
      status.stdout,
      /^observer\s+target\s+reachable\s+ping\s+health\s+age$/m,
      'status prints the observer table header',
    );
    t.match(
      status.stdout,
      /^node-b\s+\S+\s+(yes|no)\s+(ok|no)\s+(ok|no)\s+\d/m,
      "status prints node-b's view as a row",
    );
    t.match(status.stdout, /failover\s+\S+ \S+ worst case: the later of/, 'status prints the worst-case failover time');
    const primary = await c.hq('mbp', ['primary', '--json']);
    t.equal(primary.code, 0, 'primary exits 0');
    t.match(
      JSON.parse(primary.stdout),
      { known: true, holder: 'node-b', generation: 2 },
      'primary finds node-b at generation 2',
    );
    const seen = await c.hq('mbp', ['seen', '--json']);
    t.equal(seen.code, 0, 'seen exits 0 on a host that has seen generation 2');
    t.match(JSON.parse(seen.stdout), { seen: true, generation: 2 }, 'seen tells generation 2');
    const events = await c.hq('mbp', ['events', '--json']);
    t.equal(events.code, 0, 'events exits 0');
    const names = (JSON.parse(events.stdout) as { events: { event: string }[] }).events.map((e) => e.event);
    t.ok(names.includes('promoted'), `the event log holds the promotion (${[...new Set(names)].join(', ')})`);
    const on = await c.hq('mbp', ['maintenance', 'on', '--reason', 'system test'], { HQ_ADMIN_TOKEN: c.adminToken });
    t.equal(on.code, 0, `maintenance on exits 0 (${on.stderr.trim()})`);
    const st = await c.hq('mbp', ['lease', 'status', '--json']);
    t.equal((JSON.parse(st.stdout) as { maintenance: boolean }).maintenance, true, 'status shows maintenance on');
    const off = await c.hq('mbp', ['maintenance', 'off'], { HQ_ADMIN_TOKEN: c.adminToken });
    t.equal(off.code, 0, 'maintenance off exits 0');
    const refused = await c.hq('mbp', ['lease', 'renew']);
    t.equal(
      refused.code,
      1,
      `renew by a host that does not hold the lease is refused with exit 1 (${refused.stderr.trim()})`,
    );
  });

  await t.test('a handover moves the lease without lock-delay after the holder stepped down', async (t) => {
    const r = await c.hq('node-b', ['lease', 'release', '--handover-to', 'mbp']);
    t.equal(r.code, 0, `release --handover-to exits 0 (${r.stderr.trim()})`);
    t.equal((await c.fence('node-b'))?.run, false, 'the old holder stopped at once (stepped down before the release)');
    const waited = await c.waitFor(
      async () => (await c.fence('mbp'))?.run === true,
      10_000,
      'mbp runs after the handover',
    );
    t.equal((await c.fence('mbp'))?.generation, 3, 'the handover is generation 3');
    t.ok(waited < 5, `no lock-delay after a handover (${waited.toFixed(1)} s)`);
  });

  const overlap = await monitor.stop();
  t.equal(overlap, null, `no sample ever saw both hosts run (${overlap ?? 'none'})`);
});
