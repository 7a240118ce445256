/**
 * S4 on etcd, real processes: kill -9 of the elected arbiter, five times, during streams of
 * acknowledged CAS writes — the holder's renewals and registry port allocations that a client
 * driven here sends to the arbiters in turn (the next on no answer or a 503, as `arbiterUrls`
 * does) — then every write answered 200 is looked up in etcd's own history (a watch of the
 * prefix from revision 1: every put of the state key and of every port key): zero acknowledged
 * writes lost, and no port ever held by two live leases. Three etcd members and two arbiters;
 * no agents (the client is the only writer besides the arbiters' own checks: mbp's lease is kept
 * by the renewals sent here; test/system/etcd.test.ts and etcd-members.test.ts run the agents).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { etcdKeys } from '../../apps/arbiter/src/store/etcd/keys.js';
import { etcdMembers } from '../etcd/members.js';
import { Cluster, sleep } from './harness.js';

const ELECTION_TTL = 4;
const KILLS = 5;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}
interface RenewAck {
  revision: number;
  generation: number;
  renewedAt: number;
}
interface PortAck {
  port: number;
  leaseId: string;
  expiresAt: number;
}

t.test('kill -9 of the elected arbiter during acknowledged CAS: nothing acknowledged is lost', async (t) => {
  const etcd = await etcdMembers(t, { size: 3 });
  if (etcd === null) return;
  const c = await Cluster.create({
    etcd: { endpoints: etcd.endpoints, arbiters: 2, electionTtlSeconds: ELECTION_TTL },
  });
  t.teardown(() => c.stopAll());
  const names = ['arbiter', 'arbiter-1'];
  const health = (i: number) => c.election(i);
  const elected = async (): Promise<number | null> => {
    for (const i of [0, 1]) if ((await health(i))?.elected === true) return i;
    return null;
  };
  /** One request to arbiter 0, then 1: the next on no answer or a 503 (what `arbiterUrls` does). */
  const send = async (method: string, path: string, token: string, body: unknown): Promise<Answer | null> => {
    for (const i of [0, 1]) {
      try {
        const r = await fetch(`${c.arbiterUrl(i)}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(3000),
        });
        const a = { status: r.status, body: (await r.json()) as Record<string, unknown> };
        if (a.status !== 503) return a;
      } catch {
        // no answer: the next arbiter
      }
    }
    return null;
  };
  const memberToken = readFileSync(join(c.stateDir('mbp'), 'token'), 'utf8').trim();

  await c.startArbiter(0);
  await c.waitFor(async () => (await health(0))?.elected === true, 20_000, 'arbiter 0 is elected');
  await c.startArbiter(1);
  // mbp's acquire as `hq lease acquire` sends it, until granted (after the start wait)
  let acquired: Answer | null = null;
  await c.waitFor(
    async () => {
      acquired = await send('POST', '/v1/lease/acquire', memberToken, { host: 'mbp', seenGeneration: 0 });
      return acquired?.status === 200;
    },
    30_000,
    'mbp is granted the lease',
  );
  t.match(acquired, { status: 200, body: { lease: { holder: 'mbp', generation: 1 } } }, 'mbp holds generation 1');

  // The streams: renewals of mbp's lease (admin token, as an operator's script would) and port
  // allocations (mbp's member token), each on its own loop, until the kills are done.
  const renewals: RenewAck[] = [];
  const ports: PortAck[] = [];
  const refused: string[] = [];
  let unanswered = 0;
  let on = true;
  const renewLoop = async (): Promise<void> => {
    while (on) {
      const a = await send('POST', '/v1/lease/renew', c.adminToken, { host: 'mbp', generation: 1 });
      if (a === null) unanswered++;
      else if (a.status === 200) {
        const l = a.body['lease'] as RenewAck;
        renewals.push({ revision: l.revision, generation: l.generation, renewedAt: l.renewedAt });
      } else refused.push(`renew ${a.status} ${String(a.body['error'])}`);
      await sleep(20);
    }
  };
  let n = 0;
  const portLoop = async (): Promise<void> => {
    while (on) {
      const a = await send('POST', '/v1/leases/port', memberToken, {
        machine: 'mbp',
        purpose: `durability-${n++}`,
        ttlMs: 600_000,
      });
      if (a === null) unanswered++;
      else if (a.status === 200) ports.push(a.body as unknown as PortAck);
      else refused.push(`port ${a.status} ${String(a.body['error'])}`);
      await sleep(20);
    }
  };
  const streams = Promise.all([renewLoop(), renewLoop(), portLoop(), portLoop()]);
  const began = Date.now();

  const takeovers: number[] = [];
  for (let k = 0; k < KILLS; k++) {
    await sleep(1000 + Math.random() * 1500);
    const i = await elected();
    if (i === null) {
      k--;
      continue;
    }
    const before = renewals.length + ports.length;
    await c.kill(names[i]!, 'SIGKILL');
    const took = await c.waitFor(
      async () => (await health(1 - i))?.elected === true,
      30_000,
      `arbiter ${1 - i} takes over`,
    );
    takeovers.push(took);
    await c.startArbiter(i);
    // the stream goes on through the new elected arbiter before the next kill
    await c.waitFor(async () => renewals.length + ports.length > before + 4, 30_000, 'writes are acknowledged again');
  }
  await sleep(1000);
  on = false;
  await streams;
  t.comment(
    `${((Date.now() - began) / 1000).toFixed(0)} s of streams, ${KILLS} kills; takeovers ${takeovers.map((x) => x.toFixed(1)).join(', ')} s; acknowledged ${renewals.length} renewals and ${ports.length} port allocations; ${unanswered} unanswered, ${refused.length} refused`,
  );
  t.ok(renewals.length >= 20 && ports.length >= 20, 'the streams were acknowledged throughout');
  t.same(refused, [], 'no write was refused (every non-answer was a 503 or no answer, tried again)');

  // etcd's own history: every put under the prefix since revision 1 (nothing is compacted here).
  const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 5000 });
  t.teardown(() => client.close());
  const keys = etcdKeys(`/hq-sys-${process.pid}-${c.arbiterPort}`);
  const head = (await client.range(keys.state)).revision;
  const states: RenewAck[] = [];
  const portPuts = new Map<number, Array<PortAck & { createdAt: number; rev: bigint }>>();
  const abort = new AbortController();
  let seen = 0n;
  for await (const batch of client.watch(`${keys.prefix}/`, {
    prefix: true,
    startRevision: 1n,
    signal: abort.signal,
  })) {
    for (const e of batch.events) {
      seen = e.kv.modRevision;
      if (e.type !== 'put') continue;
      if (e.kv.key === keys.state) {
        const l = (JSON.parse(e.kv.value) as { lease: RenewAck }).lease;
        states.push({ revision: l.revision, generation: l.generation, renewedAt: l.renewedAt });
      } else if (e.kv.key.startsWith(keys.portDir)) {
        const p = JSON.parse(e.kv.value) as PortAck & { createdAt: number };
        const l = portPuts.get(p.port) ?? [];
        l.push({ ...p, rev: e.kv.modRevision });
        portPuts.set(p.port, l);
      }
    }
    if (seen >= head) abort.abort();
  }
  t.ok(seen >= head, `the watch read the history up to revision ${head}`);

  // Every put of the state key starts from the one before it: the record's revision rises with
  // every lease write and stays with a put of views only — never falls, and a revision is never
  // reused for another lease (a write decided on a stale read would, and lose what was acknowledged).
  const reused = states.filter((s, i) => {
    const prev = states[i - 1];
    return (
      prev !== undefined &&
      (s.revision < prev.revision ||
        (s.revision === prev.revision && (s.renewedAt !== prev.renewedAt || s.generation !== prev.generation)))
    );
  });
  t.same(reused, [], `the state key's record revision never falls nor is reused (${states.length} puts)`);
  // One put may carry several decisions (group commit: a batch's renewals are one txn, the put
  // shows the last one's revision), so an acknowledged renewal at revision r is kept when the
  // first put at r or above has its renewal or a later one — and, when it is at r itself, is it.
  const lostRenewals = renewals.filter((a) => {
    const p = states.find((s) => s.revision >= a.revision);
    if (p === undefined || p.generation !== a.generation) return true;
    return p.revision === a.revision ? p.renewedAt !== a.renewedAt : p.renewedAt < a.renewedAt;
  });
  t.same(
    lostRenewals,
    [],
    `every acknowledged renewal is in a put of the state key in etcd's history (${renewals.length} checked, ${states.length} puts)`,
  );
  const lostPorts = ports.filter((a) => !(portPuts.get(a.port) ?? []).some((p) => p.leaseId === a.leaseId));
  t.same(
    lostPorts,
    [],
    `every acknowledged port allocation is a put of its port key in etcd's history (${ports.length} checked)`,
  );
  const final = (await client.range(keys.state)).kvs[0];
  const finalLease = (JSON.parse(final!.value) as { lease: RenewAck }).lease;
  t.ok(
    renewals.every((a) => a.revision <= finalLease.revision),
    `the record now is at or past every acknowledged revision (${finalLease.revision})`,
  );
  t.equal(finalLease.generation, 1, 'and still generation 1 (no grant at any takeover)');

  // No port handed to two live leases: on each port key, a put of another lease id only after the one before expired.
  const twice: string[] = [];
  for (const [port, puts] of portPuts) {
    for (let i = 1; i < puts.length; i++) {
      const a = puts[i - 1]!;
      const b = puts[i]!;
      if (a.leaseId !== b.leaseId && b.createdAt < a.expiresAt)
        twice.push(`port ${port}: ${a.leaseId} (to ${a.expiresAt}) and ${b.leaseId} (from ${b.createdAt})`);
    }
  }
  t.same(twice, [], 'no port was held by two live leases at any revision');
  const acked = new Map<number, string>();
  for (const p of ports) {
    const other = acked.get(p.port);
    if (other !== undefined && other !== p.leaseId) twice.push(`port ${p.port} answered to ${other} and ${p.leaseId}`);
    acked.set(p.port, p.leaseId);
  }
  t.same(twice, [], 'no port was answered to two allocations (every lease lives 10 min)');
});
