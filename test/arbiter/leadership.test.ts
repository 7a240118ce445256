/**
 * The campaign loop's failure paths (apps/arbiter/src/leadership.ts), against one real etcd
 * member: a takeover that fails is retried after a pause, not as fast as etcd answers (a state
 * key that is missing for good would otherwise hammer etcd and the log); an error that is not
 * etcd's (a bug) is loud and leaves the election, instead of an unhandled rejection.
 */
import t from 'tap';
import pino from 'pino';
import { Writable } from 'node:stream';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { Leadership } from '../../apps/arbiter/src/leadership.js';
import { etcdMembers } from '../etcd/members.js';
import { sleep } from '../system/harness.js';
import { FakeTime } from '../registry/fake-time.js';

/** A pino logger whose lines are kept. */
function capture(): { log: pino.Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

t.test('leadership on one member', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 2000 });
  t.teardown(() => client.close());

  t.test('a takeover that fails is tried again after a pause', async (t) => {
    const { log } = capture();
    let takeovers = 0;
    // The pauses run on the test's timers; the election and etcd stay real.
    const time = new FakeTime();
    const l = new Leadership({
      client,
      prefix: `/hq-leadership-${process.pid}-a`,
      advertiseUrl: 'http://127.0.0.1:1',
      ttlSeconds: 3,
      guarded: [],
      log,
      onElected: async () => {
        takeovers++;
        throw new Error('the state key is missing');
      },
      onEnded: async () => undefined,
      healthEveryMs: 60_000,
      timers: time,
    });
    l.start();
    // Wait (on etcd) for the first takeover and the pause after it.
    const pausing = (): boolean => time.pending().includes(1000);
    for (let i = 0; i < 100 && !pausing(); i++) await sleep(50);
    t.equal(takeovers, 1, 'elected, the takeover ran and failed');
    t.ok(pausing(), 'then a pause of 1 s');
    await time.advance(999);
    t.equal(takeovers, 1, 'no second takeover before the pause is over');
    await time.advance(1);
    for (let i = 0; i < 100 && takeovers === 1; i++) await sleep(50);
    t.equal(takeovers, 2, 'after it, the campaign and the takeover again');
    await l.close();
    t.equal(l.mayDecide(), false, 'it never decided');
  });

  t.test('an error that is not etcd’s stops the campaign loudly and leaves the election', async (t) => {
    const { log, lines } = capture();
    let ended = 0;
    const l = new Leadership({
      client,
      prefix: `/hq-leadership-${process.pid}-b`,
      advertiseUrl: 'http://127.0.0.1:2',
      ttlSeconds: 3,
      guarded: [],
      log,
      onElected: async () => undefined,
      onEnded: async () => {
        ended++;
        throw new TypeError('a bug in stopping the checks');
      },
      healthEveryMs: 60_000,
    });
    // The campaign itself throws a non-etcd error on the second campaign (after the first term).
    const election = (l as unknown as { election: { campaign: (s?: AbortSignal) => Promise<unknown> } }).election;
    const campaign = election.campaign.bind(election);
    let campaigns = 0;
    election.campaign = async (s) => {
      if (++campaigns > 1) throw new TypeError('not an etcd error');
      return campaign(s);
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown): void => void unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    t.teardown(() => process.off('unhandledRejection', onUnhandled));
    l.start();
    for (let i = 0; i < 100 && !l.mayDecide(); i++) await sleep(50);
    t.equal(l.mayDecide(), true, 'elected and deciding');
    await (l as unknown as { election: { resign(): Promise<void> } }).election.resign(); // the term ends
    for (let i = 0; i < 100 && !lines.some((x) => x.msg.startsWith('campaigning stopped')); i++) await sleep(50);
    t.ok(
      lines.some(
        (x) => x.level === 50 && x.msg === 'campaigning stopped on an unexpected error; this arbiter no longer decides',
      ),
      'logged as an error',
    );
    t.equal(ended, 1, 'the checks were told to stop (their failure logged, not thrown)');
    t.equal(l.mayDecide(), false, 'it does not decide');
    t.same(unhandled, [], 'no unhandled rejection');
    await l.close();
  });
});
