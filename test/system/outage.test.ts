/**
 * Whole system, real processes: the arbiter killed → the holder keeps running on the standby's
 * peer confirmation (L2, `quorum-standby`) and the standby records the confirmation it gave
 * (S2.2); then a forced transfer stops a `hq fence run` child (it ignores SIGTERM, so the
 * SIGKILL after the grace is needed) with exit 75 before the old validity ends (S3).
 */
import t from 'tap';
import { readFileSync, existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Cluster, HQ_CLI, sleep } from './harness.js';

t.test('an arbiter outage is no outage, and a forced transfer stops the fenced child in time', async (t) => {
  const c = await Cluster.create();
  t.teardown(() => c.stopAll());
  await c.startArbiter();
  await c.startAgents();

  const acquired = await c.hq('mbp', ['lease', 'acquire', '--wait', '20']);
  t.equal(acquired.code, 0, `mbp acquires the lease (stderr: ${acquired.stderr.trim()})`);
  await c.waitFor(async () => (await c.fence('mbp'))?.reason === 'holder', 15_000, 'mbp runs as the holder');

  await t.test('with the arbiter killed the holder keeps running through the peer', async (t) => {
    await c.kill('arbiter', 'SIGKILL');
    await c.waitFor(
      async () => (await c.fence('mbp'))?.reason === 'quorum-standby',
      10_000,
      'mbp runs on the peer confirmation',
    );
    // Longer than a whole TTL: without the peer the validity would have run out.
    for (let i = 0; i < 16; i++) {
      const a = await c.fence('mbp');
      t.equal(a?.run, true, `mbp still runs without the arbiter (sample ${i}: ${a?.reason})`);
      const b = await c.fence('node-b');
      t.equal(b?.run, false, `node-b does not run meanwhile (sample ${i}: ${b?.reason})`);
      await sleep(500);
    }
    const st = await c.status('node-b');
    const gave = st?.['gaveConfirmation'] as { holder: string; generation: number } | null;
    t.equal(gave?.holder, 'mbp', 'node-b reports the confirmation it gave to mbp');
    const local = JSON.parse(readFileSync(join(c.stateDir('node-b'), 'local.json'), 'utf8')) as {
      gaveConfirmation: { holder: string } | null;
    };
    t.equal(local.gaveConfirmation?.holder, 'mbp', 'the confirmation is on disk in local.json');
    const hb = await c.hq('mbp', ['heartbeat']);
    t.equal(hb.code, 3, 'hq heartbeat exits 3 while the arbiter is unreachable');
    const status = await c.hq('mbp', ['lease', 'status']);
    t.equal(status.code, 3, 'hq lease status exits 3 while the arbiter is unreachable');
  });

  await t.test(
    'after the arbiter returns, a forced transfer ends the fenced child with exit 75 before validity ends',
    async (t) => {
      await c.startArbiter();
      await c.waitFor(
        async () => (await c.fence('mbp'))?.reason === 'holder',
        20_000,
        'mbp is renewed by the arbiter again',
      );
      const marker = join(c.dir, 'child.json');
      const childCode = `
      process.on('SIGTERM', () => {});
      require('fs').writeFileSync(${JSON.stringify(marker)}, JSON.stringify({ pid: process.pid, generation: process.env.HQ_GENERATION, holder: process.env.HQ_HOLDER, role: process.env.HQ_ROLE }));
      setInterval(() => {}, 1000);`;
      const run = spawn(
        process.execPath,
        [
          HQ_CLI,
          'fence',
          'run',
          '--verbose',
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
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stderr = '';
      run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<{ code: number | null; at: number }>((done) =>
        run.once('exit', (code) => done({ code, at: Date.now() })),
      );
      await c.waitFor(async () => existsSync(marker), 15_000, 'the fenced child started');
      const child = JSON.parse(readFileSync(marker, 'utf8')) as {
        pid: number;
        generation: string;
        holder: string;
        role: string;
      };
      const before = await c.fence('mbp');
      t.equal(child.generation, String(before?.generation), 'the child gets HQ_GENERATION');
      t.equal(child.holder, 'mbp', 'the child gets HQ_HOLDER');
      t.equal(child.role, 'cron', 'the child gets HQ_ROLE');

      // The transfer goes straight to the API so the clock starts when it is sent: the old
      // holder's validity ends at most ttl − margin (5 s) after its last renewal, before this.
      const transferredAt = Date.now();
      const fo = await fetch(`http://127.0.0.1:${c.arbiterPort}/v1/lease/transfer`, {
        method: 'POST',
        headers: { authorization: `Bearer ${c.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ to: 'node-b' }),
      });
      t.equal(fo.status, 200, 'the forced transfer is accepted');
      const end = await exited;
      t.equal(
        end.code,
        75,
        `hq fence run exits 75 when it stopped the child (log: ${stderr.trim().split('\n').slice(-2).join(' | ')})`,
      );
      t.ok(
        end.at - transferredAt < 5_000,
        `the child is gone within the old validity of at most 5 s (${end.at - transferredAt} ms)`,
      );
      let alive = true;
      try {
        process.kill(child.pid, 0);
      } catch {
        alive = false;
      }
      t.notOk(alive, 'the child process no longer exists');
      t.match(stderr, /"event":"killed"/, 'the child ignored SIGTERM, so the supervisor sent SIGKILL after the grace');
      const nb = await c.fence('node-b');
      t.equal(nb?.run, false, `node-b does not run yet when the child is gone (${nb?.reason})`);
      await c.waitFor(async () => (await c.fence('node-b'))?.run === true, 15_000, 'node-b runs after the lock-delay');
      t.ok(Date.now() - end.at > 0, 'node-b ran only after the child was gone');
      const again = await c.hq('mbp', ['failover', '--to', 'node-b'], { HQ_ADMIN_TOKEN: c.adminToken });
      t.equal(again.code, 1, `hq failover to the current holder is refused with exit 1 (${again.stderr.trim()})`);
      const back = await c.hq('mbp', ['failover', '--to', 'mbp', '--json'], { HQ_ADMIN_TOKEN: c.adminToken });
      t.equal(back.code, 0, `hq failover --to mbp exits 0 (${back.stderr.trim()})`);
      t.equal(
        (JSON.parse(back.stdout) as { lease: { holder: string } }).lease.holder,
        'mbp',
        'the JSON answer names the new holder',
      );
    },
  );
});
