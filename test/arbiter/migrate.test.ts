/**
 * `hq-arbiter migrate --from sqlite:PATH --to etcd:URL`: a running SQLite arbiter's state — the
 * lease record, the floor, the views, the tokens (revoked ones stay revoked), the events with
 * their ids, the registry's resources and port leases — lands under a new etcd prefix (one
 * real member), where an etcd arbiter serves it: the same holder and generation, the same
 * tokens, event ids that go on from the SQLite sequence. A second migration into the same
 * prefix writes nothing; bad arguments are one line, exit 2, nothing written.
 */
import t from 'tap';
import pino from 'pino';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex } from '../../apps/arbiter/src/auth.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { EtcdStore } from '../../apps/arbiter/src/store/etcd/lease.js';
import { EtcdRegistryStore } from '../../apps/arbiter/src/store/etcd/registry.js';
import { createRuntime } from '../../apps/arbiter/src/server/runtime.js';
import { etcdMembers } from '../etcd/members.js';
import { sleep } from '../system/harness.js';
import { FakeProber, fastConfig, harness, arbiterCommand } from './helper.js';

t.test('migrate a serving SQLite arbiter into etcd', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const h = await harness(t, {}, { registry: true });
  await h.settle();
  const acq = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(acq.statusCode, 200, 'mbp acquires');
  // A forced transfer and back: generation 3, a lock-delay and views on record.
  h.clock.advance(1);
  t.equal((await h.post('/v1/lease/transfer', { to: 'node-b' })).statusCode, 200, 'transfer to node-b');
  h.clock.advance(10);
  t.equal(
    (
      await h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: 2, generation: 2, requestTimeoutSeconds: 1 },
        h.tokens.nodeb,
      )
    ).statusCode,
    200,
    'node-b renews',
  );
  t.equal(
    (await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 2, requestTimeoutSeconds: 1 }, h.tokens.mbp))
      .statusCode,
    200,
    'mbp reports as a standby',
  );
  const back = await h.post('/v1/lease/transfer', { to: 'mbp' });
  t.equal(back.statusCode, 200, `transfer back to mbp (${back.body.slice(0, 160)})`);
  const registry = h.rt.registry!;
  const nowMs = Date.now();
  const reg = await registry.register(
    {
      id: 'mbp',
      name: 'mbp',
      kind: 'machine',
      machine: 'mbp',
      attrs: new Map([['os', 'darwin']]),
      observedAt: nowMs,
      ttlMs: 3_600_000,
    },
    { machine: 'mbp', admin: false },
    nowMs,
  );
  t.ok(reg.ok, 'a resource registered');
  const port = await registry.allocatePort({ machine: 'mbp', purpose: 'web', ttlMs: 3_600_000 }, 'lease-1', nowMs);
  t.ok(port.ok, 'a port leased');
  // A revoked token must stay revoked in etcd.
  await h.rt.store.revokeToken('grafana', 4, h.clock.now());
  const before = await h.rt.store.read();
  t.equal(before.lease.generation, 3, 'the SQLite arbiter is at generation 3');
  const tokensBefore = await h.rt.store.listTokens();
  const eventsBefore = await h.rt.store.listEvents(0, 10_000);
  t.ok(eventsBefore.length > 3, `events on record (${eventsBefore.length})`);

  const prefix = `/hq-migrated-${process.pid}`;
  const to = `etcd:${etcd.endpoints.join(',')}`;
  // The daemon keeps serving: the command reads an online backup of its database.
  const r = await arbiterCommand(['migrate', '--from', `sqlite:${h.dir}`, '--to', to, '--prefix', prefix, '--json']);
  t.equal(r.code, 0, `migrate exits 0 (${r.stderr.trim()})`);
  const report = JSON.parse(r.stdout) as Record<string, unknown>;
  t.match(
    report,
    {
      from: join(h.dir, 'hq.db'),
      prefix,
      holder: 'mbp',
      generation: 3,
      floor: 3,
      tokens: tokensBefore.length,
      events: eventsBefore.length,
      resources: 1,
      portLeases: 1,
    },
    'the report counts what was copied',
  );

  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 2000 });
  t.teardown(() => client.close());
  const store = await EtcdStore.open({ client, prefix, ttlSeconds: 6 });
  t.equal(store.createdNow, false, 'the etcd store finds the migrated state (it does not start a new one)');
  const after = await store.read();
  t.same(after.lease, before.lease, 'the lease record is the same, field for field');
  t.equal(after.floor, Math.max(before.floor, before.lease.generation), 'the floor is max(floor, generation)');
  t.same([...after.observers.entries()], [...before.observers.entries()], 'the views are the same');
  t.same(await store.listTokens(), tokensBefore, 'every token row, revoked ones included, with its id');
  t.equal((await store.findToken(sha256Hex(h.tokens.mbp)))?.machine, 'mbp', "mbp's token is found by its hash");
  t.same(await store.listEvents(0, 10_000), eventsBefore, 'every event, with its id');
  const next = await store.appendEvents([
    { at: h.clock.now(), category: 'control', event: 'after-migration', host: null, data: {} },
  ]);
  t.ok((next[0]?.id ?? 0) > (eventsBefore.at(-1)?.id ?? 0), 'new event ids go on after the SQLite sequence');
  const etcdRegistry = new EtcdRegistryStore({ client, prefix });
  t.same(
    await etcdRegistry.listResources({}, nowMs),
    await registry.listResources({}, nowMs),
    'the resources are the same',
  );
  t.same(
    await etcdRegistry.listPortLeases(nowMs),
    await registry.listPortLeases(nowMs),
    'the port leases are the same',
  );

  // An etcd arbiter serves it: the holder renews with its old token, on the migrated generation.
  await h.rt.close();
  const etcdDir = join(h.dir, 'etcd-arbiter');
  mkdirSync(etcdDir, { mode: 0o700 });
  const config = fastConfig(etcdDir, {
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix,
      dialTimeoutSeconds: 1,
      requestTimeoutSeconds: 2,
      electionTtlSeconds: 10,
      advertiseUrl: 'http://127.0.0.1:1',
    },
  });
  const rt = await createRuntime({
    config,
    clock: h.clock,
    log: pino({ level: 'silent' }),
    prober: new FakeProber(),
    processMetrics: false,
    elect: true,
  });
  let closed = false;
  t.teardown(() => (closed ? undefined : rt.close()));
  const app = await rt.app();
  rt.start();
  for (let i = 0; i < 200 && rt.leadership?.mayDecide() !== true; i++) await sleep(50);
  t.equal(rt.leadership?.mayDecide(), true, 'the etcd arbiter is elected');
  const lease = await app.inject({
    method: 'GET',
    url: '/v1/lease',
    headers: { authorization: `Bearer ${h.tokens.mbp}` },
  });
  t.match(lease.json(), { holder: 'mbp', generation: 3 }, 'it reads the migrated record, with the migrated token');
  h.clock.advance(3);
  const heartbeat = () =>
    app.inject({
      method: 'POST',
      url: '/v1/heartbeat',
      headers: { authorization: `Bearer ${h.tokens.mbp}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ host: 'mbp', seenGeneration: 3, generation: 3, requestTimeoutSeconds: 1 }),
    });
  // On a loaded machine a term may lapse between the look and the request: then a 503, and again.
  let hb = await heartbeat();
  for (let i = 0; i < 100 && hb.statusCode === 503; i++) {
    await sleep(100);
    hb = await heartbeat();
  }
  t.equal(hb.statusCode, 200, `mbp's heartbeat is answered (${hb.body.slice(0, 200)})`);
  t.match(
    hb.json(),
    { lease: { holder: 'mbp', generation: 3 } },
    'and mbp still holds generation 3: the move cost no HQ',
  );
  const refused = await app.inject({
    method: 'GET',
    url: '/v1/lease',
    headers: { authorization: `Bearer ${h.tokens.query}` },
  });
  t.equal(refused.statusCode, 401, "grafana's revoked token stays refused");

  await rt.close(); // the etcd arbiter writes no more (its views, its events)
  closed = true;
  const keysBefore = (await client.range(`${prefix}/`, { prefix: true, countOnly: true })).count;
  const again = await arbiterCommand(['migrate', '--from', `sqlite:${h.dir}`, '--to', to, '--prefix', prefix]);
  t.equal(again.code, 1, 'a second migration into the same prefix exits 1');
  t.match(
    again.stderr,
    /^hq-arbiter: migrate: etcd prefix \/hq-migrated-\d+ is not empty \(\d+ keys\)[^\n]*nothing was written\n$/,
    'in one line, saying nothing was written',
  );
  t.equal(
    (await client.range(`${prefix}/`, { prefix: true, countOnly: true })).count,
    keysBefore,
    'nothing was added to the prefix',
  );
  t.match(await store.read(), { lease: { holder: 'mbp' } }, 'and it reads as before');
});

t.test('bad arguments: one line, exit 2, nothing written', async (t) => {
  const dir = t.testdir();
  const cases: Array<[string[], RegExp]> = [
    [['migrate'], /migrate needs --from sqlite:PATH/],
    [['migrate', '--from', dir], /migrate needs --from sqlite:PATH/],
    [['migrate', '--from', `sqlite:${dir}`], /migrate needs --to etcd:URL/],
    [
      ['migrate', '--from', `sqlite:${dir}`, '--to', 'etcd:ftp://x:1'],
      /--to: "ftp:\/\/x:1" must be http:\/\/host:port/,
    ],
    [
      ['migrate', '--from', `sqlite:${dir}`, '--to', 'etcd:http://127.0.0.1:1', '--prefix', 'hq/'],
      /--prefix: must look like \/hq/,
    ],
    [
      ['migrate', '--from', `sqlite:${join(dir, 'nope')}`, '--to', 'etcd:http://127.0.0.1:1'],
      /no such file or directory/,
    ],
    [['migrate', '--from', `sqlite:${dir}`, '--to', 'etcd:http://127.0.0.1:1'], /no hq\.db there/],
    [
      ['migrate', '--from', `sqlite:${dir}`, '--to', 'etcd:http://127.0.0.1:1', '--scope', 'admin'],
      /--scope does not apply here/,
    ],
  ];
  for (const [args, message] of cases) {
    const r = await arbiterCommand(args);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    t.match(
      r.stderr,
      new RegExp(`^hq-arbiter: [^\\n]*${message.source}[^\\n]*\\n$`),
      `${args.join(' ')}: one line (${r.stderr.trim()})`,
    );
  }
});
