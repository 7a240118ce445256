/**
 * The election over an etcd lease: its clock rule alone (validFor, no etcd), then against real
 * members — two campaigners, one elected; takeover after resign, after a SIGKILL of the
 * elected process, after a SIGSTOP past its lease (which then refuses to decide on wake);
 * `stillElected()` on our clock, not etcd's TTL; three members with one and two killed.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Stamp } from '@hq/lease-core';
import { EtcdClient, op } from '../../apps/arbiter/src/store/etcd/client.js';
import { Election, validFor, type Leader, type StampClock } from '../../apps/arbiter/src/store/etcd/election.js';
import { childEnv } from '../arbiter/child.js';
import { sleep } from '../system/harness.js';
import { etcdMembers } from './members.js';

const CAMPAIGNER = resolve(import.meta.dirname, 'fixtures/campaigner.ts');

t.test('validFor: seconds left by our clock, elapsed = max(monotonic, wall)', async (t) => {
  const at = (wall: number, mono: number): Stamp => ({ wall, mono });
  const renewal = { sent: at(1000, 50), ttlSeconds: 10 };
  const rows: Array<[string, Stamp, number]> = [
    ['at the send time: ttl − margin', at(1000, 50), 8],
    ['3 s later on both clocks', at(1003, 53), 5],
    ['exactly ttl − margin later: lapsed (0)', at(1008, 58), 0],
    ['a forward wall jump shortens it', at(1007, 51), 1],
    ['a backward wall jump does not lengthen it', at(990, 54), 4],
    ['a sleep (monotonic stopped, wall ran) lapses it', at(1020, 50.5), -12],
  ];
  for (const [name, now, left] of rows) t.equal(validFor(renewal, 2, now), left, name);
});

t.test('election options are checked with one line each', async (t) => {
  const c = new EtcdClient({ endpoints: ['http://127.0.0.1:1'] });
  t.teardown(() => c.close());
  const bad: Array<[string, object, RegExp]> = [
    ['empty prefix', { prefix: '', value: 'a' }, /prefix must be a non-empty string/],
    ['ttl below 2', { prefix: 'hq', value: 'a', ttlSeconds: 1 }, /ttlSeconds must be an integer ≥ 2/],
    ['fractional ttl', { prefix: 'hq', value: 'a', ttlSeconds: 2.5 }, /ttlSeconds must be an integer/],
    [
      'margin ≥ ttl',
      { prefix: 'hq', value: 'a', ttlSeconds: 4, marginSeconds: 4 },
      /marginSeconds must be > 0 and below ttlSeconds/,
    ],
    [
      'keep-alive too slow',
      { prefix: 'hq', value: 'a', ttlSeconds: 4, marginSeconds: 1, keepAliveSeconds: 3 },
      /keepAliveSeconds must be > 0 and below/,
    ],
  ];
  for (const [name, o, re] of bad) t.throws(() => new Election(c, o as never), re, `${name} is refused`);
  t.equal(new Election(c, { prefix: 'hq/', value: 'a' }).dir, 'hq/election/', 'keys under {prefix}/election/');
});

/** A spawned campaigner and its output lines, parsed. */
interface Child {
  proc: ChildProcess;
  lines: Array<Record<string, unknown> & { event: string; wall: number }>;
  until(pred: (l: Child['lines'][number]) => boolean, timeoutMs: number, what: string): Promise<Child['lines'][number]>;
}

function campaigner(
  t: { teardown(fn: () => void): void },
  endpoints: string[],
  prefix: string,
  value: string,
  ttl: number,
  margin: number,
): Child {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', CAMPAIGNER, JSON.stringify(endpoints), prefix, value, String(ttl), String(margin)],
    { env: childEnv(), stdio: ['pipe', 'pipe', 'inherit'] },
  );
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGCONT');
      proc.kill('SIGKILL');
    }
  });
  const lines: Child['lines'] = [];
  const waiters = new Set<() => void>();
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    lines.push(JSON.parse(l) as Child['lines'][number]);
    for (const w of waiters) w();
  });
  const until: Child['until'] = (pred, timeoutMs, what) =>
    new Promise((res, rej) => {
      const check = (): void => {
        const hit = lines.find(pred);
        if (hit === undefined) return;
        cleanup();
        res(hit);
      };
      const timer = setTimeout(() => {
        cleanup();
        rej(
          new Error(
            `campaigner ${value}: no ${what} within ${timeoutMs} ms; lines: ${JSON.stringify(lines.slice(-5))}`,
          ),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  return { proc, lines, until };
}

/** A clock the test moves by hand (both readings together). */
function manualClock(): StampClock & { advance(seconds: number): void } {
  let now: Stamp = { wall: 1_800_000_000, mono: 1000 };
  return { now: () => now, advance: (s) => (now = { wall: now.wall + s, mono: now.mono + s }) };
}

// The one-member and three-member runs each start their own etcd and mostly wait out TTLs: side by side.
t.jobs = 2;

t.test('one member', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 2000 });
  t.teardown(() => client.close());
  const elections: Election[] = [];
  const election = (prefix: string, value: string, extra: object = {}): Election => {
    const e = new Election(client, { prefix, value, ttlSeconds: 3, marginSeconds: 1, ...extra });
    elections.push(e);
    return e;
  };
  t.teardown(() => Promise.all(elections.map((e) => e.resign().catch(() => {}))));

  t.test(
    'two campaigners: exactly one elected; the other after a resign; the resigned one’s guard fences its writes',
    async (t) => {
      const a = election('two', 'a');
      const b = election('two', 'b');
      const ra = await a.campaign();
      t.ok(ra.elected, 'a is elected');
      const bDone = b.campaign();
      await sleep(1500);
      t.ok(a.stillElected(), 'a is still elected after a few keep-alives');
      t.notOk(b.stillElected(), 'b is not elected while a is');
      t.equal((await a.leader())?.value, 'a', 'leader() names a');
      t.equal((await b.leader())?.value, 'a', 'and so does b’s view');
      const guardA = a.guard();
      const w = await client.txn({ compare: [guardA], success: [op.put('two/record', 'by a')] });
      t.ok(w.succeeded, 'a write under a’s guard applies while a is elected');

      await a.resign();
      t.notOk(a.stillElected(), 'a is not elected from the moment it resigns');
      const rb = await bDone;
      t.ok(rb.elected, 'b is elected after a resigned');
      t.ok(b.stillElected(), 'b decides now');
      t.equal((await b.leader())?.value, 'b', 'leader() names b');
      const stale = await client.txn({ compare: [guardA], success: [op.put('two/record', 'by a, late')] });
      t.notOk(stale.succeeded, 'a write under a’s old guard no longer applies (E4)');
      t.ok(
        (await client.txn({ compare: [b.guard()], success: [op.put('two/record', 'by b')] })).succeeded,
        'b’s guard holds',
      );
      t.throws(() => a.guard(), /without a campaign/, 'a has no guard to give any more');
      if (ra.elected) t.equal(await ra.term.ended, 'resigned', 'a’s term ended: resigned');
      await b.resign();
    },
  );

  t.test('observe: the elected campaigner, then each change', async (t) => {
    const watcher = election('obs', 'watcher');
    const ac = new AbortController();
    const seen: Array<string | null> = [];
    const done = (async () => {
      for await (const l of watcher.observe(ac.signal)) seen.push((l as Leader | null)?.value ?? null);
    })();
    const until = async (n: number): Promise<void> => {
      const deadline = Date.now() + 5000;
      while (seen.length < n && Date.now() < deadline) await sleep(20);
    };
    await until(1);
    const x = election('obs', 'x');
    const y = election('obs', 'y');
    await x.campaign();
    await until(2);
    const yDone = y.campaign();
    await sleep(300);
    await x.resign();
    await yDone;
    await until(3);
    await y.resign();
    await until(4);
    ac.abort();
    await done;
    t.same(
      seen,
      [null, 'x', 'y', null],
      'nobody, x, y (after x resigned), nobody; y’s campaign behind x changed nothing',
    );
  });

  t.test(
    'stillElected() is decided on our clock: lapsed by it while etcd still keeps the lease, and it stays ended',
    async (t) => {
      const clock = manualClock();
      const e = election('clock', 'c', { ttlSeconds: 6, marginSeconds: 1, clock });
      const r = await e.campaign();
      t.ok(r.elected && e.stillElected(), 'elected');
      t.equal(e.validForSeconds(), 5, 'ttl − margin left at once (the grant’s send time)');
      clock.advance(4.9);
      t.ok(e.stillElected(), 'still elected just before ttl − margin on our clock');
      const lease = r.elected ? r.term.lease : 0n;
      clock.advance(0.2);
      const ttl = await client.leaseTimeToLive(lease);
      t.ok(ttl.ttlSeconds > 0, `etcd still has the lease (${ttl.ttlSeconds} s left by etcd's leader)`);
      t.notOk(e.stillElected(), 'but by our clock the term is over: not elected');
      await sleep(2500); // real keep-alive ticks answered alive by etcd do not revive it (E3)
      t.notOk(e.stillElected(), 'and it stays over');
      if (r.elected) t.equal(await r.term.ended, 'lapsed', 'the term ended: lapsed');
      // ending the term revoked the lease (best effort), so another campaigner is not kept waiting
      const next = election('clock', 'next');
      const t0 = performance.now();
      const rn = await next.campaign();
      t.ok(
        rn.elected,
        `the next campaigner is elected (${(performance.now() - t0).toFixed(0)} ms), without waiting for etcd's TTL`,
      );
      await next.resign();
    },
  );

  t.test('the elected process killed with SIGKILL: the other takes over within the TTL', async (t) => {
    const TTL = 3;
    const child = campaigner(t, etcd.endpoints, 'kill', 'child', TTL, 1);
    await child.until((l) => l.event === 'elected', 20_000, 'election');
    const mine = election('kill', 'parent', { ttlSeconds: TTL, marginSeconds: 1 });
    const p = mine.campaign();
    await sleep(500);
    t.notOk(mine.stillElected(), 'not elected while the child is');
    t.equal((await mine.leader())?.value, 'child', 'the child is the leader');
    const killedAt = performance.now();
    child.proc.kill('SIGKILL');
    const r = await p;
    const took = (performance.now() - killedAt) / 1000;
    t.ok(r.elected, 'the parent is elected');
    // etcd expires a lease at most TTL after the child's last keep-alive, then deletes its keys on
    // its next expiry check (every 0.5 s); the campaign sees the deletion through its watch
    t.ok(
      took <= TTL + 1,
      `takeover ${took.toFixed(2)} s after the SIGKILL (TTL ${TTL} s, + etcd's 0.5 s expiry check)`,
    );
    t.comment(`takeover after SIGKILL: ${took.toFixed(2)} s (TTL ${TTL} s)`);
    await mine.resign();
  });

  t.test(
    'the elected process SIGSTOPped past its lease: another takes over; on wake it refuses before any decision',
    async (t) => {
      const TTL = 3;
      const child = campaigner(t, etcd.endpoints, 'stop', 'child', TTL, 1);
      await child.until((l) => l.event === 'elected', 20_000, 'election');
      await child.until((l) => l.event === 'check' && l['ok'] === true, 5000, 'a check while elected');
      const mine = election('stop', 'parent', { ttlSeconds: TTL, marginSeconds: 1 });
      const p = mine.campaign();
      await sleep(300);
      const stoppedAt = Date.now();
      child.proc.kill('SIGSTOP');
      const r = await p;
      t.ok(
        r.elected,
        `the parent is elected while the child is stopped (${((Date.now() - stoppedAt) / 1000).toFixed(2)} s after the SIGSTOP)`,
      );
      await sleep(300);
      const wokeAt = Date.now();
      child.proc.kill('SIGCONT');
      await child.until((l) => l.event === 'check' && l.wall >= wokeAt, 5000, 'a check after the wake');
      await sleep(200);
      const after = child.lines.filter((l) => l.event === 'check' && l.wall >= wokeAt);
      t.ok(after.length > 0, `${after.length} checks after the wake`);
      t.ok(
        after.every((l) => l['ok'] === false),
        'every one of them says not elected: the first decision after the wake is refused',
      );
      const ended = await child.until((l) => l.event === 'ended', 5000, 'the end of its term');
      t.ok(
        ended['why'] === 'lapsed' || ended['why'] === 'lease-gone',
        `the child's term ended: ${String(ended['why'])}`,
      );
      t.ok(mine.stillElected(), 'the parent stays elected');
      await mine.resign();
    },
  );

  t.test(
    'compaction under the watches: a waiter whose start is compacted away returns for a read; the term and the observer go on',
    async (t) => {
      const prefix = `/elect-compact-${process.pid}`;
      // a 3 s re-check period: a waiter's return on its own timer is told apart from one on `compacted`
      const e = election(prefix, 'a', { ttlSeconds: 10, marginSeconds: 1 });
      const r = await e.campaign();
      t.equal(r.elected, true, 'elected');
      const stop = new AbortController();
      t.teardown(() => stop.abort());
      const seen: Array<string | null> = [];
      const observing = (async () => {
        for await (const l of e.observe(stop.signal)) seen.push(l?.value ?? null);
      })();
      // history, then compacted to now: a watch from an older revision is refused `compacted`
      let now = 0n;
      for (let i = 0; i < 20; i++) now = (await client.put(`${prefix}/x`, String(i))).revision;
      await client.compact(now);
      const waitFor = (
        e as unknown as {
          waitFor(k: string, p: boolean, from: bigint, w: () => boolean, s: AbortSignal): Promise<void>;
        }
      ).waitFor.bind(e);
      const t0 = Date.now();
      await waitFor(`${prefix}/x`, false, 2n, () => true, stop.signal);
      t.ok(
        Date.now() - t0 < 1500,
        `the waiter returned at once, without throwing, for its caller to read again (${Date.now() - t0} ms, its re-check period 3 s): a throw would end the term`,
      );
      // compactions to the newest revision, again and again, for two terms' worth of keep-alives
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        await client.compact((await client.put(`${prefix}/x`, 'y')).revision);
        await sleep(100);
      }
      t.equal(e.stillElected(), true, 'the term survived every compaction');
      const b = election(prefix, 'b', { ttlSeconds: 10, marginSeconds: 1 });
      const won = b.campaign();
      await e.resign();
      t.equal((await won).elected, true, 'b is elected after the resign');
      for (let i = 0; i < 50 && seen.at(-1) !== 'b'; i++) await sleep(50);
      t.equal(seen.at(-1), 'b', `the observer saw the change after the compactions (${JSON.stringify(seen)})`);
      stop.abort();
      await observing;
      await b.resign();
    },
  );
});

t.test(
  'three members: one killed, the term goes on; two killed, it lapses by our clock; healed, a campaign wins again',
  async (t) => {
    const etcd = await etcdMembers(t, { size: 3 });
    if (etcd === null) return;
    const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 1500 });
    t.teardown(() => client.close());
    const e = new Election(client, { prefix: 'q3', value: 'a', ttlSeconds: 4, marginSeconds: 1 });
    t.teardown(() => e.resign().catch(() => {}));
    const r = await e.campaign();
    t.ok(r.elected, 'elected');
    const talking = etcd.members.find((m) => m.clientUrl === client.endpoint)!;
    await talking.kill();
    await sleep(4500); // past the TTL: only keep-alives through another member keep the term
    t.ok(
      e.stillElected(),
      'the member the election talked to was killed: still elected (keep-alives went to the next)',
    );
    const second = etcd.members.find((m) => m.running)!;
    const killedAt = performance.now();
    await second.kill();
    while (e.stillElected() && performance.now() - killedAt < 10_000) await sleep(50);
    const lapsed = (performance.now() - killedAt) / 1000;
    t.notOk(e.stillElected(), `two killed: not elected after ${lapsed.toFixed(2)} s`);
    // the survivor answers keep-alives until it notices it lost the others (≤ 2 election timeouts,
    // 1 s here): the term lapses ttl − margin after the last keep-alive it answered
    t.ok(lapsed <= 4 - 1 + 1 + 0.5, 'within ttl − margin of the last answered keep-alive');
    if (r.elected) t.equal(await r.term.ended, 'lapsed', 'the term lapsed by our clock (no etcd said so)');
    talking.start();
    second.start();
    await etcd.waitHealthy(30_000, true);
    const again = await e.campaign();
    t.ok(again.elected, 'healed: a new campaign wins a new term');
    await e.resign();
  },
);
