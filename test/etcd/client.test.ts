/**
 * The etcd client against real members (test/etcd/members.ts): one member for the operations
 * and their errors, three for quorum — one killed changes nothing, two killed make writes fail
 * as `no-quorum` quickly and without a hang, healing brings writes back.
 */
import t from 'tap';
import { createServer } from 'node:http';
import { cmp, EtcdClient, op, type TxnResult } from '../../apps/arbiter/src/store/etcd/client.js';
import { EtcdError, type EtcdErrorKind } from '../../apps/arbiter/src/store/etcd/errors.js';
import { freePort, sleep } from '../system/harness.js';
import { etcdMembers } from './members.js';

/** The error an async call fails with (an assertion failure when it resolves). */
async function failure(p: Promise<unknown>): Promise<EtcdError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof EtcdError) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

async function timed<T>(p: Promise<T>): Promise<{ value: T | EtcdError; ms: number }> {
  const t0 = performance.now();
  try {
    return { value: await p, ms: performance.now() - t0 };
  } catch (err) {
    if (!(err instanceof EtcdError)) throw err;
    return { value: err, ms: performance.now() - t0 };
  }
}

const kindOf = (v: unknown): EtcdErrorKind | 'ok' => (v instanceof EtcdError ? v.kind : 'ok');

t.test('client options are checked with one line each', async (t) => {
  const bad: Array<[string, () => unknown, RegExp]> = [
    ['no endpoints', () => new EtcdClient({ endpoints: [] }), /non-empty list/],
    ['not a URL', () => new EtcdClient({ endpoints: ['127.0.0.1:2379'] }), /not a URL|must be http/],
    ['a path', () => new EtcdClient({ endpoints: ['http://127.0.0.1:2379/v3'] }), /no path/],
    [
      'ftp',
      () => new EtcdClient({ endpoints: ['ftp://127.0.0.1:2379'] }),
      /must be http:\/\/host:port or https:\/\/host:port/,
    ],
    [
      'a certificate without its key',
      () => new EtcdClient({ endpoints: ['https://127.0.0.1:2379'], tls: { cert: 'x' } }),
      /certificate and its key together/,
    ],
    [
      'zero timeout',
      () => new EtcdClient({ endpoints: ['http://127.0.0.1:2379'], requestTimeoutMs: 0 }),
      /requestTimeoutMs must be a positive integer/,
    ],
  ];
  for (const [name, make, re] of bad) t.throws(make, re, `${name} is refused`);
  const c = new EtcdClient({ endpoints: ['http://127.0.0.1:2379/'] });
  t.same(c.endpoints, ['http://127.0.0.1:2379'], 'a trailing slash is fine');
  await c.close();
});

t.test('no member reachable: unavailable within the request timeout, nothing hangs', async (t) => {
  const ports = [await freePort(), await freePort()];
  const c = new EtcdClient({
    endpoints: ports.map((p) => `http://127.0.0.1:${p}`),
    dialTimeoutMs: 500,
    requestTimeoutMs: 1500,
  });
  t.teardown(() => c.close());
  const r = await timed(c.put('k', 'v'));
  t.equal(
    kindOf(r.value),
    'unavailable',
    'a write refused by every member is unavailable (never sent: nothing applied)',
  );
  t.match(
    (r.value as EtcdError).message,
    new RegExp(`${ports[0]}.*ECONNREFUSED.*${ports[1]}.*ECONNREFUSED`),
    'the one line names each member and its answer',
  );
  t.notMatch((r.value as EtcdError).message, /\n/, 'one line');
  t.ok(r.ms < 1500, `within the timeout (${r.ms.toFixed(0)} ms)`);
});

t.test('an endpoint that is not etcd is a bad request, not an outage', async (t) => {
  const srv = createServer((_req, res) =>
    res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found'),
  );
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => srv.close());
  const port = (srv.address() as { port: number }).port;
  const c = new EtcdClient({ endpoints: [`http://127.0.0.1:${port}`], requestTimeoutMs: 1000 });
  t.teardown(() => c.close());
  const e = await failure(c.get('k'));
  t.equal(e.kind, 'bad-request', 'a 404 without JSON');
  t.match(e.message, /is this an etcd client URL/, 'the line says what is probably wrong');
});

t.test('one member', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 2000 });
  t.teardown(() => client.close());

  t.test(
    'gets asked together go as one read, each answered with its own key, none missing a write acknowledged before it',
    async (t) => {
      const puts = await Promise.all(Array.from({ length: 150 }, (_, i) => client.put(`batch/${i}`, String(i))));
      // biome-ignore lint/complexity/useMathMinMax: revisions are bigints, which Math.max does not take
      const last = puts.reduce((m, p) => (p.revision > m ? p.revision : m), 0n);
      const answers = await Promise.all([
        ...Array.from({ length: 150 }, (_, i) => client.get(`batch/${i}`)),
        client.get('batch/absent'),
      ]);
      t.same(
        answers.slice(0, 150).map((a) => a.kv?.value),
        Array.from({ length: 150 }, (_, i) => String(i)),
        "every get has its own key's value",
      );
      t.equal(answers[150]?.kv, undefined, 'an absent key is undefined');
      t.ok(
        answers.every((a) => a.revision >= last),
        'every answer is at or after the last acknowledged put (linearizable)',
      );
      t.ok(
        new Set(answers.map((a) => a.revision)).size <= 2,
        `151 gets went as at most 2 reads (batches of 100): revisions ${[...new Set(answers.map((a) => String(a.revision)))].join(', ')}`,
      );
      // The same key asked for by many in one turn (every lease read asks for the state key): read once.
      const txn = client.txn.bind(client);
      const sent: number[] = [];
      client.txn = (x) => {
        sent.push(x.success.length);
        return txn(x);
      };
      const same = await Promise.all([
        ...Array.from({ length: 50 }, () => client.get('batch/7')),
        ...Array.from({ length: 50 }, () => client.get('batch/8')),
      ]);
      client.txn = txn;
      t.same(sent, [2], '100 gets of two keys: one read of the two keys');
      t.same([...new Set(same.map((a) => a.kv?.value))], ['7', '8'], "each getter has its key's value");
      const p = await client.put('batch/0', 'changed');
      t.equal((await client.get('batch/0')).kv?.value, 'changed', 'a get after a put sees it');
      t.ok((await client.get('batch/0')).revision >= p.revision, 'at its revision or later');
    },
  );

  t.test('put, get, range a prefix, delete: keys and values are UTF-8 strings, revisions bigint', async (t) => {
    const p1 = await client.put('t/a/één', '{"x":"✓"}');
    await client.put('t/a/two', '2');
    await client.put('t/b', 'other');
    t.type(p1.revision, 'bigint', 'revisions are bigint');
    const one = await client.get('t/a/één');
    t.equal(one.kv?.value, '{"x":"✓"}', 'the value comes back as it was put');
    t.equal(one.kv?.createRevision, p1.revision, 'create_revision is the put’s revision');
    t.equal(one.kv?.version, 1n, 'version 1');
    const r = await client.range('t/a/', { prefix: true, sort: { target: 'key', order: 'ascend' } });
    t.same(
      r.kvs.map((k) => k.key),
      ['t/a/two', 't/a/één'],
      'the prefix, sorted by key (bytes)',
    );
    t.equal(r.count, 2, 'count');
    const n = await client.range('t/', { prefix: true, countOnly: true });
    t.equal(n.count, 3, 'count only');
    const d = await client.deleteRange('t/a/', { prefix: true, prevKv: true });
    t.equal(d.deleted, 2, 'the prefix is deleted');
    t.same(d.prevKvs.map((k) => k.value).sort(), ['2', '{"x":"✓"}'], 'with the previous values');
    t.equal((await client.get('t/a/two')).kv, undefined, 'gone');
  });

  t.test('CAS on mod_revision: among concurrent writers at one revision exactly one wins', async (t) => {
    const key = 'cas/record';
    const first = await client.put(key, 'v0');
    const writers = 12;
    const results: TxnResult[] = await Promise.all(
      Array.from({ length: writers }, (_, i) =>
        client.txn({
          compare: [cmp.mod(key, '==', first.revision)],
          success: [op.put(key, `w${i}`)],
          failure: [op.range(key)],
        }),
      ),
    );
    const winners = results.filter((r) => r.succeeded);
    t.equal(winners.length, 1, 'one swap succeeded');
    const now = await client.get(key);
    t.equal(now.kv?.modRevision, winners[0]!.revision, "the key's mod_revision is the winner's write revision");
    for (const r of results.filter((x) => !x.succeeded)) {
      const cur = r.responses[0]?.type === 'range' ? r.responses[0].kvs[0] : undefined;
      t.equal(cur?.modRevision, now.kv?.modRevision, 'a loser’s failure branch reads the current mod_revision');
    }
    t.equal(results.filter((r) => !r.succeeded).length, writers - 1, 'every other writer lost');
  });

  t.test('a stale mod_revision loses; the value stays the winner’s', async (t) => {
    const key = 'cas/stale';
    const a = await client.put(key, 'a');
    const b = await client.txn({ compare: [cmp.mod(key, '==', a.revision)], success: [op.put(key, 'b')] });
    t.ok(b.succeeded, 'the swap at the current revision succeeds');
    const stale = await client.txn({
      compare: [cmp.mod(key, '==', a.revision)],
      success: [op.put(key, 'c')],
      failure: [op.range(key)],
    });
    t.notOk(stale.succeeded, 'the swap at the stale revision fails');
    t.equal((await client.get(key)).kv?.value, 'b', 'nothing written');
  });

  t.test('create_revision == 0 (absent): one creator among concurrent ones; value and version compares', async (t) => {
    const key = 'cas/create';
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => client.txn({ compare: [cmp.absent(key)], success: [op.put(key, `c${i}`)] })),
    );
    t.equal(results.filter((r) => r.succeeded).length, 1, 'exactly one created the key');
    const cur = (await client.get(key)).kv!;
    t.ok(
      (await client.txn({ compare: [cmp.value(key, '==', cur.value), cmp.version(key, '==', 1n)], success: [] }))
        .succeeded,
      'value and version compares hold',
    );
    t.notOk(
      (await client.txn({ compare: [cmp.value(key, '==', 'nope')], success: [] })).succeeded,
      'a wrong value fails',
    );
    t.ok(
      (
        await client.txn({
          compare: [cmp.create(key, '>', 0n), cmp.mod(key, '<', cur.modRevision + 1n), cmp.lease(key, '==', 0n)],
          success: [],
        })
      ).succeeded,
      'create >, mod <, lease == hold',
    );
  });

  t.test('a read-only txn and a txn with several ops answer per op', async (t) => {
    await client.put('multi/a', '1');
    const r = await client.txn({
      compare: [],
      success: [
        op.put('multi/b', '2', { prevKv: true }),
        op.delete('multi/a', { prevKv: true }),
        op.range('multi/', { prefix: true }),
      ],
    });
    t.ok(r.succeeded, 'no compares: success');
    t.same(
      r.responses.map((x) => x.type),
      ['put', 'delete', 'range'],
      'one answer per op, in order',
    );
    const del = r.responses[1];
    t.equal(del?.type === 'delete' ? del.prevKvs[0]?.value : undefined, '1', 'the delete’s previous value');
    const rng = r.responses[2];
    t.same(rng?.type === 'range' ? rng.kvs.map((k) => k.key) : [], ['multi/b'], 'the range sees the txn’s own writes');
  });

  t.test('bad requests are typed, one line', async (t) => {
    const e = await failure(client.txn({ compare: [], success: [op.put('dup', '1'), op.put('dup', '2')] }));
    t.equal(e.kind, 'bad-request', 'a duplicate key in one txn');
    t.match(e.message, /duplicate key/, 'etcd’s reason is in the line');
  });

  t.test('a lease: grant, keep-alive, time-to-live; it expires and its key goes', async (t) => {
    const lease = await client.leaseGrant(2);
    t.equal(lease.ttlSeconds, 2, 'granted for 2 s');
    await client.put('lease/k', 'v', { lease: lease.id });
    t.equal((await client.get('lease/k')).kv?.lease, lease.id, 'the key carries the lease');
    const ka = await client.leaseKeepAlive(lease.id);
    t.same(ka, { alive: true, ttlSeconds: 2 }, 'a keep-alive renews it');
    const ttl = await client.leaseTimeToLive(lease.id, { keys: true });
    t.ok(ttl.ttlSeconds > 0 && ttl.grantedTtlSeconds === 2, 'time-to-live answers');
    t.same(ttl.keys, ['lease/k'], 'with its keys');
    const deadline = Date.now() + 6000;
    while ((await client.get('lease/k')).kv !== undefined && Date.now() < deadline) await sleep(100);
    t.equal((await client.get('lease/k')).kv, undefined, 'the key went with the lease');
    t.same(
      await client.leaseKeepAlive(lease.id),
      { alive: false },
      'a keep-alive of the expired lease says it is gone',
    );
    t.equal((await client.leaseTimeToLive(lease.id)).ttlSeconds, -1, 'time-to-live -1');
    t.equal(
      (await failure(client.put('lease/k2', 'v', { lease: lease.id }))).kind,
      'lease-not-found',
      'a put with it fails lease-not-found',
    );
  });

  t.test('revoke deletes the lease’s keys; revoking again says false', async (t) => {
    const lease = await client.leaseGrant(60);
    await client.put('revoke/k', 'v', { lease: lease.id });
    t.equal(await client.leaseRevoke(lease.id), true, 'revoked');
    t.equal((await client.get('revoke/k')).kv, undefined, 'its key is gone');
    t.equal(await client.leaseRevoke(lease.id), false, 'a second revoke finds nothing');
  });

  t.test('watch: events from a revision; after a compaction, re-read and watch from the header revision', async (t) => {
    const key = 'watch/k';
    const start = (await client.put(key, 'w1')).revision;
    await client.put(key, 'w2');
    await client.deleteRange(key);
    const ac = new AbortController();
    const seen: string[] = [];
    for await (const b of client.watch(key, { startRevision: start, signal: ac.signal })) {
      for (const e of b.events) seen.push(`${e.type}:${e.kv.value}`);
      if (seen.length >= 3) ac.abort();
    }
    t.same(seen, ['put:w1', 'put:w2', 'delete:'], 'history from the start revision, in order');

    // compact past `start`: a watch from there is refused with the compact revision
    const now = (await client.put(key, 'w3')).revision;
    const compacted = await client.range(key, { revision: start });
    t.equal(compacted.kvs[0]?.value, 'w1', 'the old revision is readable before the compaction');
    await fetch(`${etcd.endpoints[0]}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision: String(now) }),
    });
    t.equal(
      (await failure(client.range(key, { revision: start }))).kind,
      'compacted',
      'a read at a compacted revision fails compacted',
    );
    const w = await failure(
      (async () => {
        for await (const _ of client.watch(key, { startRevision: start })) void _;
      })(),
    );
    t.equal(w.kind, 'compacted', 'the watch from a compacted revision fails compacted');
    t.equal(w.compactRevision, now, 'naming the compact revision');
    // resumption: re-read, then watch from the read's header revision + 1
    const read = await client.get(key);
    t.equal(read.kv?.value, 'w3', 're-read');
    const ac2 = new AbortController();
    const it = client.watch(key, { startRevision: read.revision + 1n, signal: ac2.signal });
    const next = it.next();
    await client.put(key, 'w4');
    const b = await next;
    t.same(
      b.done === true ? [] : b.value.events.map((e) => e.kv.value),
      ['w4'],
      'the resumed watch sees the next change and nothing before it',
    );
    ac2.abort();
    t.same(await it.next(), { done: true, value: undefined }, 'abort ends the watch');
  });

  t.test(
    'a stopped member: a write times out as indeterminate, a read as unavailable; both within the timeout',
    async (t) => {
      const c = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 500, requestTimeoutMs: 800 });
      t.teardown(() => c.close());
      await c.put('stop/k', 'before');
      const m = etcd.members[0]!;
      await m.pause();
      try {
        const w = await timed(c.put('stop/k', 'during'));
        t.equal(kindOf(w.value), 'indeterminate', 'the write may have applied: indeterminate, not retried');
        t.match((w.value as EtcdError).message, /may have applied/, 'the line says so');
        t.ok(w.ms < 1300, `within the timeout (${w.ms.toFixed(0)} ms)`);
        const r = await timed(c.get('stop/k'));
        t.equal(kindOf(r.value), 'unavailable', 'the read is unavailable');
        t.ok(r.ms < 1300, `within the timeout (${r.ms.toFixed(0)} ms)`);
      } finally {
        await m.resume();
      }
      const v = (await c.get('stop/k')).kv?.value;
      t.ok(
        v === 'before' || v === 'during',
        `after the wake the key is one of the two (${v}): the caller re-reads to learn which`,
      );
    },
  );

  t.test('an unreachable first endpoint: the next one answers, and is tried first from then on', async (t) => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const c = new EtcdClient({ endpoints: [dead, ...etcd.endpoints], dialTimeoutMs: 500, requestTimeoutMs: 2000 });
    t.teardown(() => c.close());
    const p = await c.put('failover/k', 'v');
    t.type(p.revision, 'bigint', 'the write went to the live member (refused before sending: safe to move on)');
    t.equal(c.endpoint, etcd.endpoints[0], 'the live member is first now');
  });
});

t.test('endpoints of two different clusters are refused', async (t) => {
  const a = await etcdMembers(t, { size: 1, name: 'hq-a' });
  const b = a === null ? null : await etcdMembers(t, { size: 1, name: 'hq-b' });
  if (a === null || b === null) return;
  const c = new EtcdClient({ endpoints: [...a.endpoints, ...b.endpoints], dialTimeoutMs: 500, requestTimeoutMs: 2000 });
  t.teardown(() => c.close());
  await c.put('k', 'a');
  await a.members[0]!.kill();
  const e = await failure(c.get('k'));
  t.equal(e.kind, 'bad-request', 'the second endpoint answers for another cluster: refused');
  t.match(e.message, /another|not .*every endpoint must be a member of one cluster/, 'the line says why');
});

t.test('three members: one killed changes nothing, two killed is no quorum (fast, typed), heal recovers', async (t) => {
  const etcd = await etcdMembers(t, { size: 3 });
  if (etcd === null) return;
  const DIAL = 2000;
  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: DIAL, requestTimeoutMs: DIAL });
  t.teardown(() => client.close());
  const rev = (await client.put('q/k', 'v0')).revision;

  // the member the client talks to first, and not the raft leader: the plain case of "one member dies"
  const leader = await etcd.leader();
  t.ok(leader !== undefined, 'the cluster has a leader');
  const followers = etcd.members.filter((m) => m !== leader);
  const first = followers[0]!;
  const ordered = new EtcdClient({
    endpoints: [first.clientUrl, ...etcd.endpoints.filter((e) => e !== first.clientUrl)],
    dialTimeoutMs: DIAL,
    requestTimeoutMs: DIAL,
  });
  t.teardown(() => ordered.close());
  await first.kill();
  const afterOne = await ordered.txn({ compare: [cmp.mod('q/k', '==', rev)], success: [op.put('q/k', 'v1')] });
  t.ok(afterOne.succeeded, 'one member killed: the CAS still swaps (through the next endpoint)');
  const racers = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      ordered.txn({ compare: [cmp.mod('q/k', '==', afterOne.revision)], success: [op.put('q/k', `r${i}`)] }),
    ),
  );
  t.equal(racers.filter((r) => r.succeeded).length, 1, 'and still exactly one winner among concurrent writers');

  // a second one: no quorum. Every call ends within the timeout with one typed line.
  const second = followers[1] ?? leader!;
  const killedAt = performance.now();
  await second.kill();
  const attempts: Array<{ kind: string; ms: number; message: string }> = [];
  let firstNoQuorum: number | null = null;
  while (performance.now() - killedAt < 4 * DIAL) {
    const r = await timed(client.put('q/k', 'no-quorum'));
    attempts.push({ kind: kindOf(r.value), ms: r.ms, message: r.value instanceof EtcdError ? r.value.message : '' });
    if (kindOf(r.value) === 'no-quorum') {
      firstNoQuorum = performance.now() - killedAt;
      break;
    }
  }
  t.ok(
    attempts.every((a) => a.kind === 'no-quorum' || a.kind === 'indeterminate'),
    `writes fail as no-quorum, or indeterminate while the survivor still thought it had a leader: ${attempts.map((a) => `${a.kind} ${a.ms.toFixed(0)} ms`).join(', ')}`,
  );
  t.ok(
    attempts.every((a) => a.ms < DIAL + 500),
    'no write hangs past the dial timeout',
  );
  t.ok(
    firstNoQuorum !== null && firstNoQuorum < 2 * DIAL,
    `no-quorum within ${(firstNoQuorum ?? NaN).toFixed(0)} ms of the kill`,
  );
  const nq = attempts.at(-1)!;
  t.match(nq.message, /no quorum/, `one clear line: ${nq.message}`);
  t.notMatch(nq.message, /\n/, 'one line');
  const quick = await timed(client.put('q/k', 'again'));
  t.equal(kindOf(quick.value), 'no-quorum', 'the next write: no-quorum again');
  t.ok(quick.ms < 500, `and at once (${quick.ms.toFixed(0)} ms)`);
  t.equal(kindOf((await timed(client.get('q/k'))).value), 'no-quorum', 'a linearizable read: no-quorum');
  const local = await client.range('q/k', { serializable: true });
  t.equal(
    local.kvs.length,
    1,
    'a serializable read (asked for by name) still answers from the survivor, possibly stale',
  );

  // heal
  first.start();
  second.start();
  await etcd.waitHealthy(30_000, true);
  const healed = await client.put('q/k', 'healed');
  t.type(healed.revision, 'bigint', 'healed: writes succeed again');
  t.equal((await client.get('q/k')).kv?.value, 'healed', 'and read back');
});
