/**
 * The record's `wait` on the real arbiter, on both stores: a new database's pending floor (who has
 * not reported), the old holder's lock-delay after a transfer, and the start wait after a restart
 * on the kept store — in GET /v1/lease, the answers that carry the record, and the status page's
 * phase line. The stores keep what the wait is computed from (the record, its displaced holder);
 * the arbiter's life (its start, the reports) is the arbiter's own.
 */
import t, { type Test } from 'tap';
import { etcdMembers } from '../etcd/members.js';
import { AGENT_REQUEST_TIMEOUT, harness } from './helper.js';

type Store = () => Record<string, unknown>;

function waitTests(t: Test, store: Store): void {
  t.test(
    'a new store: the grant waits for the floor and names who has not reported; then nothing holds it',
    async (t) => {
      const h = await harness(t, store());
      const a = await h.post(
        '/v1/lease/acquire',
        { host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.mbp,
      );
      t.equal(a.statusCode, 200, 'granted');
      t.match(
        a.json().lease.wait,
        {
          kind: 'floor-pending',
          until: null,
          host: null,
          unreported: ['mbp', 'node-b'],
          text: /database is new.*mbp, node-b have not yet/,
        },
        'the grant’s answer says the floor holds mbp, and who has not reported',
      );
      await h.settle();
      const rec = (await h.get('/v1/lease')).json();
      t.equal(rec.floorPending, false, 'the floor is complete');
      t.equal(rec.wait, null, 'and nothing holds mbp any more');
    },
  );

  t.test(
    'a transfer: the old holder’s lock-delay until notBefore, in every answer carrying the record and on the status page',
    async (t) => {
      const h = await harness(t, store(), { operator: true });
      await h.settle();
      await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
      const moved = await h.post('/v1/lease/transfer', { to: 'node-b', force: true });
      t.equal(moved.statusCode, 200, 'transferred');
      const lease = moved.json().lease;
      t.match(
        lease.wait,
        {
          kind: 'lock-delay',
          host: 'mbp',
          until: lease.notBefore,
          text: /mbp's last possible validity.*acknowledges its step-down from generation 1/,
        },
        'the transfer’s answer',
      );
      t.same((await h.get('/v1/lease')).json().wait, lease.wait, 'GET /v1/lease says the same');
      const hb = await h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: 2, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.nodeb,
      );
      t.equal(hb.json().lease.wait.kind, 'lock-delay', 'and the heartbeat’s answer');
      const status = (await h.get('/v1/status', h.tokens.admin)).json();
      t.match(
        status.phase,
        { name: 'lock-delay', text: /^node-b was promoted from mbp and may not run yet: lock-delay until / },
        'the status page’s phase line says it',
      );
      h.clock.advance(lease.notBefore - (await h.get('/v1/lease')).json().now + 0.1);
      t.equal((await h.get('/v1/lease')).json().wait, null, 'past notBefore nothing holds node-b');
    },
  );

  t.test(
    'a restart on the kept store: a transfer is held by the start wait, which the status page no longer puts on the old holder',
    async (t) => {
      const config = store();
      const h = await harness(t, config);
      await h.settle();
      await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
      await h.post(
        '/v1/heartbeat',
        { host: 'mbp', generation: 1, seenGeneration: 1, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.mbp,
      );
      const restartAt = h.clock.now() + 1;
      await h.rt.close();
      const h2 = await harness(t, config, { dir: h.dir, clockStart: restartAt, operator: true });
      await h2.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: 1, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h2.tokens.nodeb,
      );
      const moved = await h2.post('/v1/lease/transfer', { to: 'node-b', force: true });
      t.equal(moved.statusCode, 200, 'transferred');
      const lease = moved.json().lease;
      t.match(
        lease.wait,
        { kind: 'start-wait', host: null, until: lease.notBefore, unreported: ['mbp', 'node-b'] },
        'the start wait holds node-b; nobody has reported in a request that counts yet',
      );
      t.match(
        lease.wait.text,
        /start wait until .*it ends sooner once every candidate has reported.*and mbp acknowledges its step-down saying it ran generation 1/,
        'and says what ends it sooner',
      );
      const phase = (await h2.get('/v1/status', h2.tokens.admin)).json().phase;
      t.match(
        phase.text,
        /^node-b was promoted from mbp and may not run yet: the arbiter's start wait until /,
        'the phase line names the start wait',
      );
      t.notMatch(phase.text, /old holder's validity|mbp's last possible validity/, 'and does not blame mbp’s validity');
    },
  );
}

t.test('store sqlite', async (t) => waitTests(t, () => ({})));

t.test('store etcd', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  let n = 0;
  waitTests(t, () => ({
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix: `/hq-wait-${process.pid}-${n++}`,
      dialTimeoutSeconds: 0.5,
      requestTimeoutSeconds: 2,
    },
  }));
});
