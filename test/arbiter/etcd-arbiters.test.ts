/**
 * Two arbiters on one etcd prefix, in this process, on real sockets and one real etcd member:
 * one is elected and decides, the other serves reads and forwards mutations to it; /v1/health,
 * /metrics and the status page say who is elected; a takeover is an arbiter restart for the
 * protocol (S2.3's start wait counts from it); with nobody elected a mutation is a 503.
 * The arbiters' decision clock is one manual clock; the election runs on real time.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import pino from 'pino';
import { issueToken } from '../../apps/arbiter/src/auth.js';
import { manualClock } from '../../packages/runtime/src/clock.js';
import { createRuntime, type Runtime } from '../../apps/arbiter/src/server/runtime.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { EtcdRegistryStore } from '../../apps/arbiter/src/store/etcd/registry.js';
import { etcdMembers } from '../etcd/members.js';
import { freePort, sleep } from '../system/harness.js';
import { FakeProber, fastConfig } from './helper.js';

async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

t.test('two arbiters on one etcd', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const clock = manualClock();
  const prefix = `/hq-arbiters-${process.pid}`;
  const arbiters: Array<{ rt: Runtime; url: string; closed: boolean }> = [];
  for (const name of ['a', 'b']) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const config = fastConfig(t.testdir({ [name]: {} }), {
      listen: { host: '127.0.0.1', port },
      store: {
        kind: 'etcd',
        endpoints: etcd.endpoints,
        prefix,
        advertiseUrl: url,
        dialTimeoutSeconds: 0.5,
        requestTimeoutSeconds: 1,
        electionTtlSeconds: 4,
      },
    });
    const rt = await createRuntime({
      config,
      clock,
      log: pino({ level: 'silent' }),
      prober: new FakeProber(),
      processMetrics: false,
      registry: true,
      operator: true,
      elect: true,
    });
    const app = await rt.app();
    await app.listen({ host: '127.0.0.1', port });
    const a = { rt, url, closed: false };
    t.teardown(async () => {
      if (!a.closed) await rt.close();
    });
    arbiters.push(a);
  }
  const [a, b] = arbiters as [(typeof arbiters)[0], (typeof arbiters)[0]];
  const health = async (x: { url: string }) =>
    (await (await fetch(`${x.url}/v1/health`)).json()) as {
      store?: string;
      arbiters?: { elected: boolean; leader: string | null; etcd: { healthy: boolean } };
    };
  a.rt.start();
  await until('a elected', async () => (await health(a)).arbiters?.elected === true);
  b.rt.start();
  await until('b sees a elected', async () => (await health(b)).arbiters?.leader === a.url);

  const now = clock.now();
  const tokens = {
    admin: await issueToken(a.rt.store, 'cloud-vm', 'admin', now),
    mbp: await issueToken(a.rt.store, 'mbp', 'member', now),
    nodeb: await issueToken(b.rt.store, 'node-b', 'member', now),
  };
  const call = async (x: { url: string }, method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${x.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown> & { lease?: { holder: string | null; generation: number } },
    };
  };

  t.match(
    await health(a),
    { store: 'etcd', arbiters: { elected: true, leader: a.url, etcd: { healthy: true } } },
    'a says it is elected, etcd healthy',
  );
  t.match(await health(b), { store: 'etcd', arbiters: { elected: false, leader: a.url } }, 'b says a is elected');
  t.match(await (await fetch(`${a.url}/metrics`)).text(), /^hq_arbiter_elected 1$/m, "a's /metrics: elected 1");
  t.match(await (await fetch(`${b.url}/metrics`)).text(), /^hq_arbiter_elected 0$/m, "b's /metrics: elected 0");
  t.match(
    await (await fetch(`${b.url}/`)).text(),
    new RegExp(`${a.url.replace(/[.:/]/g, '\\$&')} is elected; this arbiter`),
    "b's status page names the elected arbiter",
  );

  // Past a's start wait: both candidates report (through b: forwarded to a).
  clock.advance(2.5);
  for (const [host, token] of [
    ['mbp', tokens.mbp],
    ['node-b', tokens.nodeb],
  ] as const) {
    const r = await call(b, 'POST', '/v1/heartbeat', token, { host, seenGeneration: 0, requestTimeoutSeconds: 1 });
    t.equal(r.status, 200, `${host}'s heartbeat to b is answered (decided by a)`);
  }
  const acq = await call(b, 'POST', '/v1/lease/acquire', tokens.mbp, { host: 'mbp', seenGeneration: 0 });
  t.match(
    acq,
    { status: 200, body: { ok: true, lease: { holder: 'mbp', generation: 1 } } },
    'mbp acquires through b: generation 1',
  );
  t.match(
    await call(b, 'GET', '/v1/lease', tokens.mbp),
    { status: 200, body: { holder: 'mbp', generation: 1 } },
    'b reads it back (linearizable: at once)',
  );
  const port = await call(b, 'POST', '/v1/leases/port', tokens.mbp, { machine: 'mbp', purpose: 'web', ttlMs: 60_000 });
  t.equal(port.status, 200, 'a registry write through b is forwarded too');

  // Survival copies live in etcd: sent through b (forwarded to a), listed by either arbiter.
  const blob = Buffer.from('ledger rows\n');
  const digest = createHash('sha256').update(blob).digest('hex');
  const put = await fetch(`${b.url}/v1/survival/core/20261201T070000Z/blobs/${digest}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${tokens.mbp}`, 'content-type': 'application/octet-stream' },
    body: blob,
  });
  t.equal(put.status, 200, `a survival blob through b is stored (${await put.text()})`);
  const entries = [{ path: 'ledger.db', bytes: blob.length, sha256: digest, kind: 'file', reused: false }];
  const manifest = {
    generation: '20261201T070000Z',
    tier: 'core',
    createdAt: '2026-12-01T07:00:00.000Z',
    source: '/srv/app',
    host: 'mbp',
    leaseGeneration: 1,
    holder: 'mbp',
    entries,
  };
  const published = await call(b, 'PUT', '/v1/survival/core/20261201T070000Z', tokens.mbp, {
    manifest,
    sums: `${digest}  ledger.db\n`,
  });
  t.match(
    published,
    { status: 200, body: { generation: '20261201T070000Z', files: 1 } },
    'and its generation published',
  );
  for (const x of [a, b]) {
    const list = await call(x, 'GET', '/v1/survival', tokens.admin);
    t.match(
      list.body,
      {
        machines: [
          { machine: 'mbp', tiers: [{ tier: 'core', latest: '20261201T070000Z', generations: ['20261201T070000Z'] }] },
        ],
      },
      `${x.url} lists it (one copy, in etcd)`,
    );
  }

  // Later, the elected arbiter stops (it resigns): b is elected, and for the protocol b has just
  // started: its start wait counts from the takeover, not from b's own start.
  clock.advance(10);
  await a.rt.close();
  a.closed = true;
  await until('b elected', async () => (await health(b)).arbiters?.elected === true);
  const takeover = clock.now();
  const status = (await (
    await fetch(`${b.url}/v1/status`, { headers: { authorization: `Bearer ${tokens.admin}` } })
  ).json()) as { arbitersLine?: { text: string; level: string } };
  t.match(
    status.arbitersLine,
    {
      text: new RegExp(
        `^this arbiter \\(${b.url.replace(/[.:/]/g, '\\$&')}\\) is elected and decides · etcd 1/1 members up$`,
      ),
      level: 'ok',
    },
    "b's /v1/status, which the page's refresh shows, now says b decides",
  );
  clock.advance(0.5); // mbp's lease (ttl 6) and its lock-delay have passed; b's start wait (ttl + margin = 7 s) has not
  const early = await call(b, 'POST', '/v1/lease/acquire', tokens.nodeb, { host: 'node-b', seenGeneration: 1 });
  const lease = early.body.lease as { holder: string; generation: number; notBefore: number | null } | undefined;
  t.match(lease, { holder: 'node-b', generation: 2 }, 'node-b is granted generation 2 by b');
  t.ok(
    (lease?.notBefore ?? 0) >= takeover + 7,
    `but may not run before b's start wait ends, counted from the takeover (notBefore ${lease?.notBefore} ≥ ${takeover} + 7)`,
  );
  t.match(
    await call(a.closed ? b : a, 'GET', '/v1/lease', tokens.nodeb),
    { status: 200, body: { holder: 'node-b', generation: 2 } },
    'read back from b',
  );

  // etcd gone: nobody can decide; reads say the store is unavailable.
  await etcd.members[0]!.pause();
  t.teardown(() => etcd.members[0]!.running && etcd.members[0]!.resume());
  await until('b no longer elected', async () => (await health(b)).arbiters?.elected === false, 10_000);
  const refused = await call(b, 'POST', '/v1/lease/renew', tokens.nodeb, { host: 'node-b', generation: 2 });
  t.match(
    refused,
    { status: 503, body: { error: /^HQ_ERR_(NOT_ELECTED|STORE_UNAVAILABLE)$/ } },
    `a mutation is a 503 (${String(refused.body['error'])})`,
  );
  const read = await call(b, 'GET', '/v1/lease', tokens.nodeb);
  t.match(read, { status: 503, body: { error: 'HQ_ERR_STORE_UNAVAILABLE' } }, 'a read says the store is unavailable');
  await etcd.members[0]!.resume();
  await until('b elected again', async () => (await health(b)).arbiters?.elected === true, 20_000);
  t.match(
    await call(b, 'GET', '/v1/lease', tokens.nodeb),
    { status: 200, body: { holder: 'node-b', generation: 2 } },
    'healed: the record is as it was',
  );
});

t.test('only the elected arbiter sweeps: an expiry is a clock decision', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const clock = manualClock();
  const prefix = `/hq-sweep-${process.pid}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = fastConfig(t.testdir(), {
    listen: { host: '127.0.0.1', port },
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix,
      advertiseUrl: url,
      dialTimeoutSeconds: 0.5,
      requestTimeoutSeconds: 1,
      electionTtlSeconds: 4,
    },
  });
  const rt = await createRuntime({
    config,
    clock,
    log: pino({ level: 'silent' }),
    prober: new FakeProber(),
    processMetrics: false,
    registry: true,
    operator: true,
    elect: true,
  });
  t.teardown(() => rt.close());
  // A port lease written by another writer (as the elected arbiter would have), long expired by this clock.
  const client = new EtcdClient({ endpoints: etcd.endpoints, requestTimeoutMs: 3000 });
  t.teardown(() => client.close());
  const other = new EtcdRegistryStore({ client, prefix });
  const nowMs = clock.now() * 1000;
  t.match(
    await other.allocatePort({ machine: 'mbp', purpose: 'web', ttlMs: 1000 }, 'ab'.repeat(16), nowMs),
    { ok: true },
    'a port lease of 1 s',
  );
  clock.advance(3 * 3600);
  t.same(await rt.sweepRegistry(), { resources: 0, leases: 0 }, 'not elected (it never campaigned): nothing swept');
  t.equal(
    (await client.range(`${prefix}/registry/p/`, { prefix: true, keysOnly: true })).kvs.length,
    1,
    'the expired lease is still there',
  );
  rt.start();
  await until('elected', () => rt.leadership?.mayDecide() === true);
  t.same(await rt.sweepRegistry(), { resources: 0, leases: 1 }, 'elected: the expired lease is swept');
});
