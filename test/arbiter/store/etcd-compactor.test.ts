/**
 * The compactor's turns (apps/arbiter/src/store/etcd/compactor.ts) on an in-memory stand-in of
 * etcd's txn and compaction, its timers driven by the test: a compaction goes to the revision
 * noted one interval earlier, never to a fresher one; a turn taken by another compactor (or a
 * first turn) only notes; a non-elected arbiter sends nothing; a failure is counted and the next
 * turn goes on. And etcd's space reading (space.ts): ok below 80 % of the quota, warn from it,
 * bad with the NOSPACE alarm; the members' own quota wins over the configured one.
 */
import t from 'tap';
import pino from 'pino';
import type { Timers } from '../../../packages/runtime/src/clock.js';
import type { MemberStatus, Txn, TxnResult } from '../../../apps/arbiter/src/store/etcd/client.js';
import { Compactor, type Turn } from '../../../apps/arbiter/src/store/etcd/compactor.js';
import { etcdSpace, SPACE_WARN_RATIO } from '../../../apps/arbiter/src/store/etcd/space.js';

const KEY = '/hq/compaction';

/** etcd's revision, one key with its version, and the compactions asked for. */
class FakeEtcd {
  revision = 100n;
  key: { value: string; version: bigint; mod: bigint } | null = null;
  compactions: bigint[] = [];
  failNext = false;

  /** Another process writes something: the revision moves. */
  write(n = 1): void {
    this.revision += BigInt(n);
  }

  async txn(t: Txn): Promise<TxnResult> {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('etcd is unavailable');
    }
    const c = t.compare[0]!;
    const holds = c.target === 'version' && (this.key?.version ?? 0n) === c.against;
    if (holds) {
      const put = t.success[0]!;
      this.revision += 1n;
      if (put.type === 'put')
        this.key = { value: put.value, version: (this.key?.version ?? 0n) + 1n, mod: this.revision };
      return { succeeded: true, revision: this.revision, responses: [{ type: 'put', prevKv: undefined }] };
    }
    const kvs =
      this.key === null
        ? []
        : [
            {
              key: KEY,
              value: this.key.value,
              createRevision: 1n,
              modRevision: this.key.mod,
              version: this.key.version,
              lease: 0n,
            },
          ];
    return {
      succeeded: false,
      revision: this.revision,
      responses: [{ type: 'range', kvs, count: kvs.length, more: false }],
    };
  }

  async compact(revision: bigint): Promise<void> {
    this.compactions.push(revision);
  }
}

/** Timers the test fires by hand. */
function handTimers(): Timers & { fire(): void; pending(): number } {
  const set = new Map<number, () => void>();
  let next = 1;
  return {
    set(fn) {
      set.set(next, fn);
      return next++;
    },
    clear(h) {
      set.delete(h as number);
    },
    fire() {
      const [[h, fn]] = [...set];
      set.delete(h!);
      fn!();
    },
    pending: () => set.size,
  };
}

function compactor(
  etcd: FakeEtcd,
  opts: { elected?: () => boolean; timers?: Timers } = {},
): { c: Compactor; turns: Turn[] } {
  const turns: Turn[] = [];
  const c = new Compactor({
    client: etcd,
    key: KEY,
    intervalMs: 60_000,
    timers: opts.timers ?? handTimers(),
    mayCompact: opts.elected ?? (() => true),
    log: pino({ level: 'silent' }),
    onTurn: (x) => turns.push(x),
  });
  return { c, turns };
}

t.test('a compaction goes to the revision noted one interval earlier', async (t) => {
  const etcd = new FakeEtcd();
  const { c } = compactor(etcd);
  const first = await c.turn();
  t.same(
    first,
    { outcome: 'noted', revision: 101n },
    'the first turn only notes the revision (its own write of the key)',
  );
  t.same(etcd.compactions, [], 'nothing compacted at the first turn');
  etcd.write(50);
  const second = await c.turn();
  t.same(second, { outcome: 'compacted', revision: 101n }, 'the second compacts to what the first noted, not to now');
  t.same(etcd.compactions, [101n], 'etcd was asked to compact to 101');
  t.equal(etcd.key?.value, '101', 'the key says where the last compaction went');
  t.ok(etcd.revision - 101n >= 50n, 'the interval of history since stays');
  etcd.write(10);
  t.same(await c.turn(), { outcome: 'compacted', revision: 152n }, 'the third compacts to the second turn’s revision');
  t.equal(c.revision, 152n, 'the compactor says the revision it last compacted to');
});

t.test('two compactors on one prefix: one compaction per interval, each to a revision one interval old', async (t) => {
  const etcd = new FakeEtcd();
  const a = compactor(etcd).c;
  const b = compactor(etcd).c;
  await a.turn(); // a notes 101 (the key's version 1)
  etcd.write(9);
  t.same(
    await b.turn(),
    { outcome: 'noted', revision: 110n },
    "b's first turn only learns the key's version and notes",
  );
  etcd.write(10);
  t.same(
    await a.turn(),
    { outcome: 'compacted', revision: 101n },
    'a, whose version still holds, compacts to what it noted',
  );
  t.same(
    await b.turn(),
    { outcome: 'noted', revision: 121n },
    'b in the same interval finds the key moved: it only notes',
  );
  t.same(etcd.compactions, [101n], 'one compaction in that interval');
  // a stops compacting (its term ended); b goes on alone from its own note
  etcd.write(9);
  t.same(
    await b.turn(),
    { outcome: 'compacted', revision: 121n },
    'b compacts to the revision it noted one interval earlier',
  );
  t.same(await a.turn(), { outcome: 'noted', revision: 131n }, 'a, back, finds the key moved: it only notes');
});

t.test('only the elected arbiter compacts; a failure is counted and the next turn goes on', async (t) => {
  const etcd = new FakeEtcd();
  let elected = false;
  const { c, turns } = compactor(etcd, { elected: () => elected });
  t.same(await c.turn(), { outcome: 'skipped' }, 'not elected: skipped');
  t.equal(etcd.revision, 100n, 'nothing was sent');
  elected = true;
  await c.turn();
  etcd.failNext = true;
  t.match(await c.turn(), { outcome: 'failed', error: /unavailable/ }, 'etcd down: a failed turn');
  t.same(
    await c.turn(),
    { outcome: 'compacted', revision: 101n },
    'the next turn compacts to the revision noted before the failure',
  );
  t.same(
    turns.map((x) => x.outcome),
    ['noted', 'failed', 'compacted'],
    'every turn that ran reported (the metrics count compacted and failed)',
  );
});

t.test('the schedule: one turn per interval after the last ended; stop ends it', async (t) => {
  const etcd = new FakeEtcd();
  const timers = handTimers();
  const { c, turns } = compactor(etcd, { timers });
  c.start();
  t.equal(timers.pending(), 1, 'one timer set');
  timers.fire();
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  t.equal(turns.length, 1, 'a turn ran');
  t.equal(timers.pending(), 1, 'the next is set once the turn ended');
  await c.stop();
  t.equal(timers.pending(), 0, 'stop clears it');
});

t.test('etcd space: ok, warn from 80 % of the quota, bad on NOSPACE; the members’ quota wins', async (t) => {
  const member = (db: number, quota: number | null, errors: string[] = []): MemberStatus => ({
    endpoint: 'http://e:2379',
    ok: true,
    memberId: '1',
    leader: '1',
    version: '3.6.0',
    raftTerm: 2n,
    errors,
    revision: 10n,
    dbSizeBytes: db,
    dbSizeInUseBytes: db / 2,
    quotaBytes: quota,
  });
  const MiB = 1024 * 1024;
  t.equal(etcdSpace([{ endpoint: 'x', ok: false, error: 'down' }], 100 * MiB), null, 'no member answered: no reading');
  t.match(
    etcdSpace([member(10 * MiB, null)], 100 * MiB),
    { level: 'ok', warning: null, quotaBytes: 100 * MiB, quotaFrom: 'config' },
    '10 % of the configured quota: ok',
  );
  const warn = etcdSpace([member(10 * MiB, null), member(SPACE_WARN_RATIO * 100 * MiB, null)], 100 * MiB);
  t.match(
    warn,
    {
      level: 'warn',
      dbSizeBytes: SPACE_WARN_RATIO * 100 * MiB,
      warning: /80 %.*etcdctl defrag.*--quota-backend-bytes/,
    },
    'the largest member at 80 %: warn, with the fix',
  );
  t.match(
    etcdSpace([member(10 * MiB, 12 * MiB), member(10 * MiB, 16 * MiB)], 2048 * MiB),
    { level: 'warn', quotaBytes: 12 * MiB, quotaFrom: 'members' },
    'the smallest quota a member says wins over the configured one',
  );
  t.match(
    etcdSpace([member(10 * MiB, null, ['memberID:1 alarm:NOSPACE '])], 2048 * MiB),
    { level: 'bad', alarm: true, warning: /NOSPACE.*etcdctl defrag.*etcdctl alarm disarm/ },
    'NOSPACE: bad, whatever the size',
  );
});
