/**
 * etcd's history against its space quota, on a real etcd member started with a small
 * `--quota-backend-bytes`: the elected arbiter (in this process; its own timers follow real
 * time as the run samples it, and etcd and the election are real) takes
 * heartbeats as fast as it answers them — every one rewrites the state key and adds an event,
 * the event log swept every second — and compacts every second
 * (`store.compactionIntervalSeconds: 1`). It stays writable for the whole run, etcd raises
 * no alarm, and both the database file and the history kept (current revision − compacted
 * revision) stay bounded by a few intervals of writes, not by the run's length.
 * The mutant is the same run with compaction off (`compactionIntervalSeconds: 0`) on a smaller
 * quota: etcd raises NOSPACE, the heartbeats become 503s, and every watcher says so — /v1/health,
 * the status page, `hq_etcd_nospace_alarm`, the log and `hq doctor`'s etcd-space check.
 * Each run is bounded in time: 150 s at most (a loaded machine writes slower; an idle one is done in well under a minute), and 30 s for the mutant.
 */
import t from 'tap';
import pino from 'pino';
import { Writable } from 'node:stream';
import { issueToken } from '../../apps/arbiter/src/auth.js';
import { createRuntime, type Runtime } from '../../apps/arbiter/src/server/runtime.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { etcdKeys } from '../../apps/arbiter/src/store/etcd/keys.js';
import { etcdSpaceCheck } from '../../apps/agent/src/cli/doctor.js';
import { etcdMembers } from '../etcd/members.js';
import { freePort, sleep } from '../system/harness.js';
import { FakeProber, fastConfig } from './helper.js';
import { eventually, FakeTime } from '../registry/fake-time.js';
import type { Timers } from '../../packages/runtime/src/clock.js';

interface Run {
  /** Heartbeats answered 200, and the other answers by status. */
  readonly ok: number;
  readonly refused: Record<number, number>;
  /** The largest member database file seen, bytes. */
  readonly maxDbSize: number;
  /** Revisions written during the run. */
  readonly revisions: bigint;
  /** A lower bound of what the run added to etcd without compaction: revisions × the state value's size. */
  readonly writtenBytes: number;
  /** The most history etcd held at a sample: current revision − the revision compacted to. */
  readonly maxHistory: bigint;
  /** The revision compacted to at the end (0 when none). */
  readonly compacted: bigint;
  readonly alarm: boolean;
  readonly health: {
    arbiters?: { elected?: boolean; etcd?: { space?: { level: string; warning: string | null; quotaBytes: number } } };
  };
  readonly metrics: string;
  readonly page: string;
  /** The arbiter's log lines about etcd's space. */
  readonly spaceLog: Array<{ level: number; msg: string }>;
}

async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * One etcd member with `quota` bytes, one elected arbiter compacting every `interval` seconds
 * (0: never); heartbeats from both candidates until the run has written `fill` × the quota (at
 * least: each revision holds the state's value), etcd refuses them, or `maxSeconds` passed.
 */
async function run(
  t: Tap.Test,
  quota: number,
  interval: number,
  fill: number,
  maxSeconds: number,
): Promise<Run | null> {
  const etcd = await etcdMembers(t, { size: 1, extraArgs: ['--quota-backend-bytes', String(quota)] });
  if (etcd === null) return null;
  const client = new EtcdClient({ endpoints: etcd.endpoints });
  t.teardown(() => client.close());
  const prefix = `/hq-compaction-${process.pid}`;
  const port = await freePort();
  const config = fastConfig(t.testdir(), {
    listen: { host: '127.0.0.1', port },
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix,
      advertiseUrl: `http://127.0.0.1:${port}`,
      dialTimeoutSeconds: 0.5,
      requestTimeoutSeconds: 1,
      electionTtlSeconds: 4,
      compactionIntervalSeconds: interval,
      quotaBackendBytes: quota,
    },
    events: { maxCount: 100 },
  });
  const lines: Array<{ level: number; msg: string }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  // The arbiter's compactor, health reading and checks run on these; `follow` moves them as far as
  // real time went, so a compaction interval is still a second of the run's writes.
  const time = new FakeTime();
  let followed = Date.now();
  const follow = async (): Promise<void> => {
    const now = Date.now();
    await time.advance(now - followed);
    followed = now;
  };
  // The health reading's waits (the only 2 s timer here), counted as they begin.
  let healthWaits = 0;
  const timers: Timers = {
    set: (fn, ms) => {
      if (ms === 2000) healthWaits++;
      return time.set(fn, ms);
    },
    clear: (h) => time.clear(h),
  };
  const rt: Runtime = await createRuntime({
    config,
    timers,
    wallClockMs: time.clock,
    log: pino({ level: 'warn' }, sink),
    prober: new FakeProber(),
    processMetrics: false,
    operator: true,
    elect: true,
  });
  const app = await rt.app();
  t.teardown(() => rt.close());
  rt.start();
  const health = async (): Promise<Run['health']> => (await app.inject({ method: 'GET', url: '/v1/health' })).json();
  // The campaign's retry pauses are on `time` too: each poll moves it, so a retry after a transient
  // etcd error still comes.
  await until('the arbiter is elected', async () => {
    await follow();
    return (await health()).arbiters?.elected === true;
  });
  const now = rt.arbiter.now();
  const tokens = {
    mbp: await issueToken(rt.store, 'mbp', 'member', now),
    'node-b': await issueToken(rt.store, 'node-b', 'member', now),
  };

  const first = (await client.status())[0];
  const startRevision = first?.ok === true ? first.revision : 0n;
  let ok = 0;
  const refused: Record<number, number> = {};
  let maxDbSize = 0;
  let alarm = false;
  let revisions = 0n;
  let maxHistory = 0n;
  const keys = etcdKeys(prefix);
  const stateBytes = Buffer.byteLength((await client.get(keys.state)).kv?.value ?? '');
  const compactedTo = async (): Promise<bigint> => BigInt((await client.get(keys.compaction)).kv?.value ?? '0');
  const sample = async (): Promise<void> => {
    const compacted = await compactedTo();
    for (const m of await client.status()) {
      if (!m.ok) continue;
      maxDbSize = Math.max(maxDbSize, m.dbSizeBytes);
      alarm ||= m.errors.some((e) => e.includes('NOSPACE'));
      revisions = m.revision - startRevision;
      if (m.revision - compacted > maxHistory) maxHistory = m.revision - compacted;
    }
  };
  const deadline = Date.now() + maxSeconds * 1000;
  const enough = (): boolean => Number(revisions) * stateBytes >= fill * quota;
  let lastSample = 0;
  // The event log (each of these heartbeats adds a no-lease event) is bounded by its own sweep,
  // hourly in the daemon: every second here, keeping events.maxCount of them.
  const sweeps = setInterval(() => void rt.sweepEvents().catch(() => undefined), 1000);
  t.teardown(() => clearInterval(sweeps));
  // Two candidates, each heartbeating as fast as the arbiter answers: every answer is one
  // state write (the views carry the arbiter's time).
  const beat = async (host: 'mbp' | 'node-b'): Promise<void> => {
    while (Date.now() < deadline && !enough() && (refused[503] ?? 0) < 20) {
      const r = await app.inject({
        method: 'POST',
        url: '/v1/heartbeat',
        headers: { authorization: `Bearer ${tokens[host]}` },
        payload: { host, seenGeneration: 0, requestTimeoutSeconds: 1 },
      });
      if (r.statusCode === 200) ok++;
      else refused[r.statusCode] = (refused[r.statusCode] ?? 0) + 1;
      if (Date.now() - lastSample > 250) {
        lastSample = Date.now();
        await follow();
        await sample();
      }
    }
  };
  await Promise.all([beat('mbp'), beat('node-b')]);
  clearInterval(sweeps);
  await sample();
  // The arbiter's own health reading (every 2 s) catches up with the end of the run: its wait is
  // ended, and it reads the members (real I/O) until it waits anew; twice, so that the second read
  // began after the run.
  for (let i = 0; i < 2; i++) {
    const waits = healthWaits;
    await time.advance(2000);
    await eventually('a health reading after the run', () => healthWaits > waits);
  }
  return {
    ok,
    refused,
    maxDbSize,
    revisions,
    writtenBytes: Number(revisions) * stateBytes,
    maxHistory,
    compacted: await compactedTo(),
    alarm,
    health: await health(),
    metrics: (await app.inject({ method: 'GET', url: '/metrics' })).body,
    page: (await app.inject({ method: 'GET', url: '/' })).body,
    spaceLog: lines.filter((l) => /etcd (database|refuses)/.test(l.msg)),
  };
}

const MiB = 1024 * 1024;

t.test('compacting every second, a fast-cadence run stays writable and etcd stays small', async (t) => {
  const quota = 5 * MiB;
  const r = await run(t, quota, 1, 1.25, 150);
  if (r === null) return;
  t.comment(
    `${r.ok} heartbeats answered, ${r.revisions} revisions (≥ ${(r.writtenBytes / MiB).toFixed(1)} MiB written), database at most ${(r.maxDbSize / MiB).toFixed(2)} MiB of ${quota / MiB} MiB, at most ${r.maxHistory} revisions of history`,
  );
  t.ok(
    r.writtenBytes >= 1.25 * quota,
    `the run wrote more than the quota: without compaction etcd would have refused it (≥ ${(r.writtenBytes / MiB).toFixed(1)} MiB)`,
  );
  t.same(r.refused, {}, 'every heartbeat was answered 200: etcd never refused a write');
  t.equal(r.alarm, false, 'etcd raised no NOSPACE alarm');
  t.ok(
    r.maxDbSize < 0.8 * quota,
    `the database file stayed below the warning mark, 80 % of the quota (${(r.maxDbSize / MiB).toFixed(2)} MiB)`,
  );
  t.ok(r.compacted > 0n, `the elected arbiter compacted (last to revision ${r.compacted})`);
  t.ok(
    r.maxHistory * 4n < r.revisions,
    `the history held (at most ${r.maxHistory} revisions) is a few intervals of writes, not the run's ${r.revisions}`,
  );
  t.match(
    r.health,
    { arbiters: { elected: true, etcd: { space: { level: 'ok', warning: null, quotaBytes: quota } } } },
    '/v1/health: still elected (its watches survived the compactions), space ok',
  );
  t.match(
    r.metrics,
    /^hq_etcd_compactions_total\{outcome="compacted"\} [1-9]\d*$/m,
    'hq_etcd_compactions_total counts the compactions',
  );
  t.match(r.metrics, /^hq_etcd_nospace_alarm 0$/m, 'hq_etcd_nospace_alarm 0');
  t.match(r.metrics, new RegExp(`^hq_etcd_quota_bytes ${quota}$`, 'm'), 'hq_etcd_quota_bytes is the configured quota');
  t.match(r.metrics, /^hq_etcd_db_size_bytes\{endpoint="[^"]+"\} \d+$/m, 'hq_etcd_db_size_bytes per member');
  t.match(
    etcdSpaceCheck(r.health.arbiters as never),
    { name: 'etcd-space', status: 'pass' },
    "hq doctor's etcd-space check passes",
  );
  t.same(r.spaceLog, [], 'the log has no space warning');
});

t.test('mutant: no compaction fills the quota, and everything that watches says so', async (t) => {
  const quota = 2 * MiB;
  const r = await run(t, quota, 0, 3, 30);
  if (r === null) return;
  t.comment(
    `${r.ok} heartbeats answered before etcd refused; refused ${JSON.stringify(r.refused)}; database ${(r.maxDbSize / MiB).toFixed(2)} MiB of ${quota / MiB} MiB`,
  );
  t.ok((r.refused[503] ?? 0) > 0, 'writes were refused (503): the run did not stay writable');
  t.equal(r.alarm, true, 'etcd raised the NOSPACE alarm');
  t.equal(r.compacted, 0n, 'nothing compacted');
  t.match(
    r.health,
    { arbiters: { etcd: { space: { level: 'bad', warning: /NOSPACE.*etcdctl defrag.*etcdctl alarm disarm/ } } } },
    '/v1/health: space bad, with the fix',
  );
  t.match(r.metrics, /^hq_etcd_nospace_alarm 1$/m, 'hq_etcd_nospace_alarm 1');
  t.match(r.page, /NOSPACE/, 'the status page names the alarm');
  t.match(
    etcdSpaceCheck(r.health.arbiters as never),
    { name: 'etcd-space', status: 'fail', detail: /NOSPACE/, fix: /etcdctl defrag/ },
    "hq doctor's etcd-space check fails with the fix",
  );
  const alarmLines = r.spaceLog.filter((l) => l.msg === 'etcd refuses every write: NOSPACE alarm');
  t.equal(alarmLines.length, 1, 'the log says so once');
  t.equal(alarmLines[0]?.level, 40, 'as a warning');
});
