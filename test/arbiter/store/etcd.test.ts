/**
 * What only the etcd store does beyond its seams (those are the factory-driven tests beside
 * this file), against one real member: the election guard on every decision's write, two
 * processes allocating ports at once (no port twice), appenders racing a decision for event ids,
 * a group with more events than one txn holds, the read-back of a write whose answer never came, the events' keys (several events a key; one-event
 * keys from before read the same), decisions on the store's last commit (one txn
 * each, and nothing committed on a state that moved), and the keys it keeps under its prefix.
 */
import t from 'tap';
import type { ArbiterState } from '@hq/lease-core';
import { cmp, EtcdClient } from '../../../apps/arbiter/src/store/etcd/client.js';
import { EtcdStore, NotElectedError } from '../../../apps/arbiter/src/store/etcd/lease.js';
import { CasError } from '../../../apps/arbiter/src/store/store.js';
import { EtcdError } from '../../../apps/arbiter/src/store/etcd/errors.js';
import { EtcdRegistryStore } from '../../../apps/arbiter/src/store/etcd/registry.js';
import { EVENTS_PER_KEY, MAX_EVENTS_PER_TXN } from '../../../apps/arbiter/src/store/etcd/event-keys.js';
import { etcdMembers } from '../../etcd/members.js';

const NOW = 1_800_000_000_000;
const bump = (s: ArbiterState) => ({
  next: { ...s, lease: { ...s.lease, generation: s.lease.generation + 1, revision: s.lease.revision + 1 } },
  events: [],
  result: null,
});

t.test('the etcd store on one member', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  let n = 0;
  const client = (): EtcdClient => {
    const c = new EtcdClient({ endpoints: etcd.endpoints, requestTimeoutMs: 3000 });
    t.teardown(() => c.close());
    return c;
  };
  const prefix = (): string => `/hq-etcd-test-${++n}`;

  t.test('with a guard set, a write whose election key is gone is refused and writes nothing', async (t) => {
    const c = client();
    const p = prefix();
    const store = await EtcdStore.open({ client: c, prefix: p, ttlSeconds: 6 });
    await c.put(`${p}/election/abc`, 'me');
    const mine = (await c.get(`${p}/election/abc`)).kv!.createRevision;
    store.setGuard(() => cmp.create(`${p}/election/abc`, '==', mine));
    await store.transact(bump);
    t.equal((await store.read()).lease.generation, 1, 'elected: the write goes through');
    await c.deleteRange(`${p}/election/abc`);
    await t.rejects(async () => store.transact(bump), NotElectedError, 'the term ended: NotElectedError');
    t.equal((await store.read()).lease.generation, 1, 'nothing written');
    const registry = new EtcdRegistryStore({ client: c, prefix: p });
    registry.setGuard(() => cmp.create(`${p}/election/abc`, '==', mine));
    await t.rejects(
      async () => registry.allocatePort({ machine: 'mbp', purpose: 'p', ttlMs: 1000 }, '0'.repeat(32), NOW),
      NotElectedError,
      'a registry write too',
    );
    t.same(await registry.listPortLeases(NOW), [], 'no lease written');
    store.setGuard(null);
    await store.transact(bump);
    t.equal((await store.read()).lease.generation, 2, 'without a guard (a one-shot command) it writes again');
  });

  t.test('two processes allocating at once never lease one port twice', async (t) => {
    const p = prefix();
    const a = new EtcdRegistryStore({ client: client(), prefix: p });
    const b = new EtcdRegistryStore({ client: client(), prefix: p });
    const asks = Array.from({ length: 24 }, (_, i) =>
      (i % 2 === 0 ? a : b).allocatePort(
        { machine: 'mbp', purpose: 'p', ttlMs: 60_000 },
        i.toString(16).padStart(32, '0'),
        NOW,
      ),
    );
    const got = await Promise.all(asks);
    const ports = got.map((g) => (g.ok ? g.lease.port : -1));
    t.notOk(ports.includes(-1), 'every allocation got a port');
    t.equal(new Set(ports).size, ports.length, `24 distinct ports (${Math.min(...ports)}–${Math.max(...ports)})`);
    t.same(
      (await a.listPortLeases(NOW)).map((l) => l.port),
      [...ports].sort((x, y) => x - y),
      'as stored',
    );
  });

  t.test('appenders racing a decision: every event gets its own id, ascending, none lost', async (t) => {
    const p = prefix();
    const c1 = client();
    const s1 = await EtcdStore.open({ client: c1, prefix: p, ttlSeconds: 6 });
    const s2 = await EtcdStore.open({ client: client(), prefix: p, ttlSeconds: 6 });
    const ev = (name: string) => ({ at: 1, category: 'control', event: name, host: null, data: {} });
    await Promise.all([
      ...Array.from({ length: 8 }, (_, i) => s2.appendEvents([ev(`append-${i}`)])),
      ...Array.from({ length: 4 }, (_, i) =>
        s1.transact((s) => ({ next: s, events: [ev(`decision-${i}`)], result: null })),
      ),
    ]);
    const rows = await s1.listEvents(0, 100);
    t.same(
      rows.map((r) => r.id),
      Array.from({ length: 12 }, (_, i) => i + 1),
      'ids 1–12, each once',
    );
    t.equal(new Set(rows.map((r) => r.event)).size, 12, 'every event is there');
  });

  t.test('a group with more events than one txn holds is written in parts, in order', async (t) => {
    const store = await EtcdStore.open({ client: client(), prefix: prefix(), ttlSeconds: 6 });
    const decisions = Array.from({ length: 50 }, (_, i) => (s: ArbiterState) => ({
      next: { ...s, lease: { ...s.lease, generation: i + 1, revision: s.lease.revision + 1 } },
      events: Array.from({ length: 25 }, (_, j) => ({
        at: i,
        category: 'hq.lease',
        event: `d${i}-${j}`,
        host: null,
        data: {},
      })),
      result: i,
    }));
    const out = await store.transactAll(decisions);
    t.ok(
      out.every((o) => o.ok),
      'all 50 decisions committed',
    );
    t.match((await store.read()).lease, { generation: 50, revision: 50 }, 'the state of the last one');
    const rows = await store.listEvents(0, 2000);
    t.equal(rows.length, 1250, `all 1,250 events (more than the ${MAX_EVENTS_PER_TXN} of one txn)`);
    t.same(
      rows.map((r) => r.id),
      Array.from({ length: 1250 }, (_, i) => i + 1),
      'ids ascending, none skipped',
    );
    t.same(
      rows.map((r) => r.event).slice(1020, 1030),
      ['d40-20', 'd40-21', 'd40-22', 'd40-23', 'd40-24', 'd41-0', 'd41-1', 'd41-2', 'd41-3', 'd41-4'],
      'in order across the parts',
    );
    const last = out[49];
    t.same(
      last?.ok === true ? last.committed.events.map((e) => e.id) : [],
      Array.from({ length: 25 }, (_, i) => 1226 + i),
      "each decision's events carry their ids",
    );
  });

  t.test(
    "a txn's events share keys (EVENTS_PER_KEY each, named by the newest id); keys of one event each, as written before, read the same",
    async (t) => {
      const c = client();
      const p = prefix();
      const store = await EtcdStore.open({ client: c, prefix: p, ttlSeconds: 6 });
      const eventKeys = async (): Promise<string[]> =>
        (await c.range(`${p}/events/e/`, { prefix: true, keysOnly: true })).kvs.map((kv) =>
          kv.key.slice(`${p}/events/e/`.length),
        );
      const renew = (i: number) => (s: ArbiterState) => ({
        next: { ...s, lease: { ...s.lease, revision: s.lease.revision + 1 } },
        events: [{ at: NOW + i, category: 'hq.lease', event: 'renewed', host: 'mbp', data: { n: i } }],
        result: i,
      });
      // A group of 18 renewals, as a loaded arbiter commits them: one state, one sequence, one events key.
      const out = await store.transactAll(Array.from({ length: 18 }, (_, i) => renew(i)));
      t.ok(
        out.every((o) => o.ok),
        'the 18 decisions committed',
      );
      t.same(await eventKeys(), ['0000000000000018'], "the group's 18 events are one key, under the newest id");
      t.same(
        (await store.listEvents(5, 3)).map((e) => [e.id, e.data['n']]),
        [
          [6, 5],
          [7, 6],
          [8, 7],
        ],
        'read from inside a key',
      );
      t.equal(await store.tailAfter(4), 14, 'the tail of 4 starts after 14');
      // More than one key's worth, appended at once.
      const rows = await store.appendEvents(
        Array.from({ length: 2 * EVENTS_PER_KEY + 8 }, (_, i) => ({
          at: NOW + 100 + i,
          category: 'control',
          event: `a${i}`,
          host: null,
          data: {},
        })),
      );
      t.equal(rows.length, 2 * EVENTS_PER_KEY + 8, 'all appended');
      t.same((await eventKeys()).length, 4, 'in keys of at most EVENTS_PER_KEY: 18 | 64 | 64 | 8');
      t.same(
        (await store.listEvents(80, 5)).map((e) => e.id),
        [81, 82, 83, 84, 85],
        'read across the boundary of two keys',
      );
      // Keys of one event each, with no id in the value (every event before this layout).
      const seq = Number((await c.get(`${p}/events/seq`)).kv!.value);
      for (const id of [seq + 1, seq + 2, seq + 3])
        await c.put(
          `${p}/events/e/${String(id).padStart(16, '0')}`,
          JSON.stringify({ at: NOW + 1000 + id, category: 'control', event: `old${id}`, host: null, data: {} }),
        );
      await c.put(`${p}/events/seq`, String(seq + 3));
      t.same(
        (await store.listEvents(seq - 1, 10)).map((e) => [e.id, e.event]),
        [
          [seq, 'a135'],
          [seq + 1, `old${seq + 1}`],
          [seq + 2, `old${seq + 2}`],
          [seq + 3, `old${seq + 3}`],
        ],
        'one-event keys read in order after a shared one',
      );
      const [next] = await store.appendEvents([
        { at: NOW + 5000, category: 'control', event: 'after', host: null, data: {} },
      ]);
      t.equal(next?.id, seq + 4, 'the sequence goes on');
      // A count bound that cuts a key: the key keeps its newest events, written again under its newest id.
      t.equal(await store.sweepEvents(0, 10), seq + 4 - 10, 'all but the newest ten go');
      t.same(
        (await store.listEvents(0, 100)).map((e) => e.id),
        Array.from({ length: 10 }, (_, i) => seq - 5 + i),
        'the newest ten stay, ids unchanged',
      );
      t.same(
        await eventKeys(),
        [seq, seq + 1, seq + 2, seq + 3, seq + 4].map((id) => String(id).padStart(16, '0')),
        'the cut key holds its newest six',
      );
    },
  );

  t.test(
    'a write whose answer never came is read back: applied (its events key is there) or not, never sent twice',
    async (t) => {
      const p = prefix();
      const c = client();
      const store = await EtcdStore.open({ client: c, prefix: p, ttlSeconds: 6 });
      const txn = c.txn.bind(c);
      let lose: 'after' | 'before' | null = null;
      let writes = 0;
      // The next write's answer is lost: after etcd applied it, or before it reached etcd.
      c.txn = async (req: Parameters<EtcdClient['txn']>[0]) => {
        if (lose === null || !(req.success ?? []).some((o) => o.type === 'put')) return txn(req);
        const how = lose;
        lose = null;
        writes++;
        if (how === 'after') await txn(req);
        throw new EtcdError('indeterminate', 'etcd: no answer (test)');
      };
      const renew = (i: number) => (s: ArbiterState) => ({
        next: { ...s, lease: { ...s.lease, revision: s.lease.revision + 1 } },
        events: [{ at: NOW + i, category: 'hq.lease', event: 'renewed', host: 'mbp', data: { n: i } }],
        result: i,
      });
      lose = 'after';
      const out = await store.transactAll(Array.from({ length: 3 }, (_, i) => renew(i)));
      t.same(
        out.map((o) => (o.ok ? o.committed.events.map((e) => e.id) : 'failed')),
        [[1], [2], [3]],
        'applied: the three decisions stand, with their ids',
      );
      t.equal(writes, 1, 'the write was sent once');
      t.same(
        (await store.listEvents(0, 10)).map((e) => e.id),
        [1, 2, 3],
        'its events are stored once',
      );
      lose = 'before';
      await t.rejects(
        async () => store.transactAll([renew(3), renew(4)]),
        { name: 'EtcdError', kind: 'unavailable', message: /did not apply/ },
        'not applied: the caller is told so (503), nothing resent',
      );
      t.equal(writes, 2, 'that write too was sent once');
      t.same(
        (await store.listEvents(0, 10)).map((e) => e.id),
        [1, 2, 3],
        'and nothing of it is stored',
      );
      const next = await store.transactAll([renew(5)]);
      t.same(
        next[0]?.ok === true ? next[0].committed.events.map((e) => e.id) : [],
        [4],
        'the next decision re-reads and goes on from the stored sequence',
      );
    },
  );

  t.test(
    'a decision stands on the last commit: one txn each, and nothing commits on a state that moved under it',
    async (t) => {
      const p = prefix();
      const c1 = client();
      let txns = 0;
      const txn = c1.txn.bind(c1);
      c1.txn = (req: Parameters<EtcdClient['txn']>[0]) => {
        txns++;
        return txn(req);
      };
      const s1 = await EtcdStore.open({ client: c1, prefix: p, ttlSeconds: 6 });
      const c2 = client();
      // another writer (a one-shot command: a store of its own, opened for one decision)
      const other = async () => (await EtcdStore.open({ client: c2, prefix: p, ttlSeconds: 6 })).transact(bump);
      const seen: number[] = [];
      const watch = (s: ArbiterState) => {
        seen.push(s.lease.generation);
        return bump(s);
      };
      await s1.transact(bump);
      txns = 0;
      await s1.transact(bump);
      await s1.transact(bump);
      t.equal(txns, 2, 'two decisions after a commit: one txn each, no read before them');

      await other();
      await t.rejects(
        async () => s1.transact(watch),
        CasError,
        'another writer moved the state: the write decided on the old one loses its compare',
      );
      t.same(seen, [3], 'it was decided on generation 3, the last commit of its own');
      t.equal((await s1.read()).lease.generation, 4, 'nothing written');
      txns = 0;
      await s1.transact(watch);
      t.same(seen, [3, 4], 'the next decision stands on the state the lost compare returned');
      t.equal(txns, 1, 'with no read before it');

      await other();
      const refuse = (s: ArbiterState): never => {
        seen.push(s.lease.generation);
        throw new Error(`refused at ${s.lease.generation}`);
      };
      await t.rejects(
        async () => s1.transact(refuse),
        CasError,
        'a refusal (nothing to write) on a state that moved is not answered: its compare alone fails',
      );
      await t.rejects(async () => s1.transact(refuse), /refused at 6/, 'decided again, on the current state');
      txns = 0;
      await t.rejects(async () => s1.transact(refuse), /refused at 6/, 'an unchanged state is confirmed');
      t.equal(txns, 1, 'by one compare-only txn');
      t.equal((await s1.read()).lease.generation, 6, 'no refusal wrote anything');
    },
  );

  t.test('a group confirms its tokens: read with the state it decides on, or compared in its write', async (t) => {
    const p = prefix();
    const store = await EtcdStore.open({ client: client(), prefix: p, ttlSeconds: 6 });
    const other = await EtcdStore.open({ client: client(), prefix: p, ttlSeconds: 6 });
    const hash = (i: number): string => i.toString(16).padStart(64, '0');
    await other.insertToken('mbp', 'member', hash(1), NOW);
    t.equal((await store.findToken(hash(1)))?.machine, 'mbp', 'read once: in memory');
    // A decision that reads the token as the arbiter's does, from memory.
    const seen: Array<number | null | undefined> = [];
    const decide = (s: ArbiterState) => {
      seen.push(store.knownToken(hash(1))?.revoked);
      return bump(s);
    };
    // 1. No last commit yet (a fresh store): the group's read brings the token up to date.
    await other.revokeTokens('mbp', NOW + 1);
    await store.transactAll([decide], [hash(1)]);
    t.same(seen, [NOW + 1], 'the decision saw the revocation the read brought');
    // 2. On the last commit: the write compares the token's key; a changed one commits nothing.
    await other.insertToken('node-b', 'member', hash(2), NOW);
    await store.findToken(hash(2));
    await store.transactAll([bump], [hash(2)]);
    const gen = (await store.read()).lease.generation;
    await other.revokeTokens('node-b', NOW + 2);
    await t.rejects(
      async () => store.transactAll([bump], [hash(2)]),
      CasError,
      'the token moved under the write: CasError',
    );
    t.equal((await store.read()).lease.generation, gen, 'nothing written');
    t.equal(store.knownToken(hash(2))?.revoked, NOW + 2, 'the store holds the row as it is now');
    // 3. More tokens than one txn compares: read first, then decided.
    const many = Array.from({ length: 200 }, (_, i) => hash(1000 + i));
    const outcomes = await store.transactAll([bump], many);
    t.equal(outcomes[0]?.ok, true, '200 tokens (none stored) in one group: read in parts, the group commits');
    t.equal(store.knownToken(hash(1000)), undefined, 'an unknown token is not kept');
  });

  t.test('every key is under the prefix; a second installation on another prefix is untouched', async (t) => {
    const c = client();
    const p1 = prefix();
    const p2 = prefix();
    const a = await EtcdStore.open({ client: c, prefix: p1, ttlSeconds: 6 });
    const b = await EtcdStore.open({ client: c, prefix: p2, ttlSeconds: 6 });
    await a.transact(bump);
    await a.insertToken('mbp', 'member', 'a'.repeat(64), 1);
    await a.appendEvents([{ at: 1, category: 'control', event: 'x', host: null, data: {} }]);
    t.equal((await b.read()).lease.generation, 0, 'the other prefix keeps its own record');
    t.equal(await b.findToken('a'.repeat(64)), undefined, 'and its own tokens');
    const keys = (await c.range(`${p1}/`, { prefix: true, keysOnly: true })).kvs.map((kv) => kv.key);
    t.same(
      keys.sort(),
      [
        `${p1}/events/e/0000000000000001`,
        `${p1}/events/seq`,
        `${p1}/state`,
        `${p1}/tokens/h/${'a'.repeat(64)}`,
        `${p1}/tokens/seq`,
      ].sort(),
      'the layout of keys.ts',
    );
  });
});
