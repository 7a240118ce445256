/**
 * Store etcd: a request that decides (acquire, renew, release, the step-down acknowledgement,
 * heartbeat, transfer, maintenance) is let in on its token from the store's memory and the
 * token is confirmed by its decision's commit — read with the state decided on, or compared in
 * the write. What must hold, on one real etcd member, with the revocations made by another
 * process's store on the same prefix (as `hq-arbiter token revoke` makes them):
 *  - a revoked token fails from the next request on (401), for every such route, whether its
 *    decision writes (a renewal), writes nothing (a refusal), or loses on a stale If-Match;
 *  - after its first request a member's requests read no token key (one round trip each).
 */
import t, { type Test } from 'tap';
import { issueToken, sha256Hex } from '../../apps/arbiter/src/auth.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { EtcdStore } from '../../apps/arbiter/src/store/etcd/lease.js';
import { etcdMembers } from '../etcd/members.js';
import { harness, type Harness } from './helper.js';

interface Setup {
  readonly h: Harness;
  /** Another process's store on the same prefix (a one-shot command's). */
  readonly other: EtcdStore;
  readonly prefix: string;
}

async function setup(t: Test): Promise<Setup | null> {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return null;
  const prefix = `/hq-tokens-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const h = await harness(t, {
    store: { kind: 'etcd', endpoints: etcd.endpoints, prefix, dialTimeoutSeconds: 0.5, requestTimeoutSeconds: 2 },
  });
  const client = new EtcdClient({ endpoints: etcd.endpoints, requestTimeoutMs: 3000 });
  const other = await EtcdStore.open({ client, prefix, ttlSeconds: 6, ownsClient: true });
  t.teardown(() => other.close());
  await h.settle();
  return { h, other, prefix };
}

/** Counts the etcd requests of the arbiter's store that read a token key. */
function countTokenReads(t: Test, store: EtcdStore): { readonly count: () => number } {
  const client = store.client;
  const get = client.get.bind(client);
  const txn = client.txn.bind(client);
  let n = 0;
  const isToken = (key: string): boolean => key.startsWith(store.keys.tokenDir);
  client.get = (key, ...rest) => {
    if (isToken(key)) n++;
    return get(key, ...rest);
  };
  client.txn = (req) => {
    if (req.success.some((o) => 'key' in o && isToken(o.key) && o.type === 'range')) n++;
    return txn(req);
  };
  t.teardown(() => {
    client.get = get;
    client.txn = txn;
  });
  return { count: () => n };
}

t.test('a revoked token fails from the next request on, on every route that confirms it in the commit', async (t) => {
  const s = await setup(t);
  if (s === null) return;
  const { h, other } = s;
  const acq = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  t.equal(acq.statusCode, 200, 'mbp holds');
  const gen = (acq.json() as { lease: { generation: number } }).lease.generation;

  // Each case: the scope of its token, a request that answers (not 401) before the revocation.
  const cases: Array<{
    name: string;
    machine: string;
    scope: 'member' | 'admin';
    send: (token: string) => ReturnType<Harness['post']>;
    before: number;
  }> = [
    {
      name: 'renew (writes)',
      machine: 'mbp',
      scope: 'member',
      before: 200,
      send: (k) => h.post('/v1/lease/renew', { host: 'mbp', generation: gen }, k),
    },
    {
      name: 'heartbeat (writes)',
      machine: 'mbp',
      scope: 'member',
      before: 200,
      send: (k) =>
        h.post('/v1/heartbeat', { host: 'mbp', generation: gen, seenGeneration: gen, requestTimeoutSeconds: 1 }, k),
    },
    {
      name: 'acquire refused (writes nothing)',
      machine: 'node-b',
      scope: 'member',
      before: 409,
      send: (k) => h.post('/v1/lease/acquire', { host: 'node-b' }, k),
    },
    {
      name: 'release by a non-holder (a refusal)',
      machine: 'node-b',
      scope: 'member',
      before: 409,
      send: (k) => h.post('/v1/lease/release', { host: 'node-b' }, k),
    },
    {
      name: 'renew with a stale If-Match',
      machine: 'mbp',
      scope: 'member',
      before: 412,
      send: (k) => h.post('/v1/lease/renew', { host: 'mbp', generation: gen }, k, { 'if-match': '"1"' }),
    },
    {
      name: 'the step-down acknowledgement',
      machine: 'mbp',
      scope: 'member',
      before: 200,
      send: (k) => h.post('/v1/lease/stepped-down', { host: 'mbp', generation: gen, revision: 1 }, k),
    },
    {
      name: 'maintenance',
      machine: 'ops',
      scope: 'admin',
      before: 200,
      send: (k) =>
        h.app.inject({
          method: 'PUT',
          url: '/v1/maintenance',
          headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
          payload: '{"enabled":false}',
        }),
    },
  ];
  for (const c of cases) {
    const token = await issueToken(other, c.machine, c.scope, h.clock.now());
    const first = await c.send(token);
    t.equal(
      first.statusCode,
      c.before,
      `${c.name}: answers ${c.before} before the revocation (${first.body.slice(0, 120)})`,
    );
    t.ok(h.rt.store.knownToken?.(sha256Hex(token)), `${c.name}: the arbiter holds the token in memory`);
    const rows = await other.listTokens();
    const row = rows.find((r) => r.sha256 === sha256Hex(token));
    await other.revokeToken(c.machine, (row as { id: number }).id, h.clock.now());
    t.equal(
      h.rt.store.knownToken?.(sha256Hex(token))?.revoked,
      null,
      `${c.name}: the arbiter's memory still says the token stands`,
    );
    const next = await c.send(token);
    t.equal(next.statusCode, 401, `${c.name}: the next request is 401`);
    t.match(next.json(), { error: 'HQ_ERR_UNAUTHORIZED' }, `${c.name}: with the catalog code`);
    t.not(
      h.rt.store.knownToken?.(sha256Hex(token))?.revoked ?? 'gone',
      null,
      `${c.name}: the arbiter learnt the revocation`,
    );
  }
  const still = await h.post('/v1/lease/renew', { host: 'mbp', generation: gen }, h.tokens.mbp);
  t.equal(still.statusCode, 200, "the other tokens are untouched: mbp's own renews");
});

t.test('a revocation between two decisions of one group fails only its own request', async (t) => {
  const s = await setup(t);
  if (s === null) return;
  const { h, other } = s;
  t.equal((await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp)).statusCode, 200, 'mbp holds');
  const nodeb = await issueToken(other, 'node-b', 'member', h.clock.now());
  t.equal(
    (await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 1, requestTimeoutSeconds: 1 }, nodeb)).statusCode,
    200,
    "node-b's token in memory",
  );
  await other.revokeTokens('node-b', h.clock.now());
  // Both in one turn of the event loop: one group, one commit.
  const [a, b] = await Promise.all([
    h.post('/v1/heartbeat', { host: 'mbp', generation: 1, seenGeneration: 1, requestTimeoutSeconds: 1 }, h.tokens.mbp),
    h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 1, requestTimeoutSeconds: 1 }, nodeb),
  ]);
  t.equal(a.statusCode, 200, "mbp's heartbeat in the same group is decided again and renews");
  t.equal(b.statusCode, 401, "node-b's revoked token fails");
});

t.test("after its first request a member's requests read no token key", async (t) => {
  const s = await setup(t);
  if (s === null) return;
  const { h } = s;
  const store = h.rt.store as EtcdStore;
  t.equal((await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp)).statusCode, 200, 'mbp holds');
  const reads = countTokenReads(t, store);
  for (let i = 0; i < 5; i++) {
    const r = await h.post(
      '/v1/heartbeat',
      { host: 'mbp', generation: 1, seenGeneration: 1, requestTimeoutSeconds: 1 },
      h.tokens.mbp,
    );
    t.equal(r.statusCode, 200, `heartbeat ${i + 1} renews`);
  }
  t.equal(reads.count(), 0, 'five heartbeats, no read of a token key: the token is confirmed in each commit');
  // A request that does not decide reads its token as always.
  t.equal((await h.get('/v1/events?limit=1', h.tokens.admin)).statusCode, 200, 'an admin read answers');
  t.equal(reads.count(), 1, 'and it read its token');
});
