/**
 * The survival stores behind `PUT/GET /v1/survival` — on the arbiter's disk (SQLite
 * installations) and under the etcd prefix (one real member) — keep the same promises
 * (apps/arbiter/src/survival/store.ts): a blob only when it hashes to its name; a generation
 * published whole or not at all (every blob present, of its size and hash), never replaced,
 * never below the highest lease generation accepted (S7, also between two arbiters on one
 * prefix); keep-N. The etcd store also caps sizes (large files belong on the standby) and
 * drops the blobs no kept generation lists, but never one sent for a push still under way.
 */
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { formatSums, type Manifest, type ManifestEntry } from '@hq/protocol';
import { FileSurvivalStore } from '../../apps/arbiter/src/store/sqlite/survival.js';
import type { SurvivalStore } from '../../apps/arbiter/src/survival/store.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { ETCD_SURVIVAL_LIMITS, EtcdSurvivalStore } from '../../apps/arbiter/src/store/etcd/survival.js';
import { etcdMembers } from '../etcd/members.js';

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
async function* chunks(b: Buffer): AsyncIterable<Buffer> {
  yield b.subarray(0, Math.floor(b.length / 2));
  yield b.subarray(Math.floor(b.length / 2));
}

function manifest(
  generation: string,
  leaseGeneration: number,
  files: ReadonlyArray<readonly [string, Buffer]>,
  tier: 'core' | 'big' = 'core',
): Manifest {
  const entries: ManifestEntry[] = files.map(([path, b]) => ({
    path,
    bytes: b.length,
    sha256: sha(b),
    kind: 'file',
    reused: false,
  }));
  return {
    generation,
    tier,
    createdAt: '2026-12-01T07:00:00.000Z',
    source: '/srv/app',
    host: 'mbp',
    leaseGeneration,
    holder: 'mbp',
    entries,
  };
}

async function put(s: SurvivalStore, b: Buffer) {
  return s.putBlob('mbp', sha(b), chunks(b));
}

async function commit(s: SurvivalStore, m: Manifest, keep = 36) {
  return s.commit('mbp', m, formatSums(m.entries), keep);
}

const generations = async (s: SurvivalStore) =>
  (await s.list()).machines.find((x) => x.machine === 'mbp')?.tiers.find((x) => x.tier === 'core');

type Factory = {
  name: string;
  open(t: Test): Promise<{ store: SurvivalStore; second?: SurvivalStore; client?: EtcdClient; prefix?: string } | null>;
};

const FACTORIES: Factory[] = [
  { name: 'files', open: async (t) => ({ store: new FileSurvivalStore(t.testdir(), 2 * 1024 * 1024) }) },
  {
    name: 'etcd',
    open: async (t) => {
      const etcd = await etcdMembers(t, { size: 1 });
      if (etcd === null) return null;
      const client = new EtcdClient({ endpoints: etcd.endpoints, dialTimeoutMs: 1000, requestTimeoutMs: 3000 });
      t.teardown(() => client.close());
      const prefix = `/hq-survival-${process.pid}`;
      return {
        store: new EtcdSurvivalStore(client, prefix),
        second: new EtcdSurvivalStore(client, prefix),
        client,
        prefix,
      };
    },
  },
];

for (const f of FACTORIES) {
  t.test(`${f.name}: blobs, whole generations, S7, keep-N`, async (t) => {
    const o = await f.open(t);
    if (o === null) return;
    const s = o.store;
    const a = Buffer.from('ledger rows\n');
    const b = Buffer.from('decision 1\n');
    t.same(await put(s, a), { ok: true, bytes: a.length }, 'a blob that hashes to its name is kept');
    t.match(
      await s.putBlob('mbp', sha(b), chunks(Buffer.from('other bytes'))),
      { ok: false, error: 'checksum' },
      'one that does not is refused',
    );
    t.match(
      await s.putBlob('mbp', sha(b), chunks(Buffer.alloc(s.maxBlobBytes + 1))),
      { ok: false, error: 'too-large' },
      `one above ${s.maxBlobBytes} bytes is refused`,
    );

    const g1 = manifest('20261201T070000Z', 3, [
      ['ledger.db', a],
      ['decisions/1.md', b],
    ]);
    t.match(
      await commit(s, g1),
      { ok: false, error: 'incomplete', message: /decisions\/1\.md was not sent/ },
      'a generation whose blob was not sent is not published',
    );
    t.same((await generations(s))?.generations ?? [], [], 'nothing is listed');
    t.same(await put(s, b), { ok: true, bytes: b.length }, 'the missing blob is sent');
    const lying = {
      ...g1,
      entries: g1.entries.map((e) => (e.path === 'ledger.db' ? { ...e, bytes: e.bytes + 1 } : e)),
    };
    t.match(
      await commit(s, lying),
      { ok: false, error: 'checksum', message: /ledger\.db does not match/ },
      'an entry whose size does not match its blob is refused',
    );
    t.same(await commit(s, g1), { ok: true, files: 2 }, 'then the generation is published');
    t.match(
      await generations(s),
      { latest: '20261201T070000Z', generations: ['20261201T070000Z'] },
      'listed, and latest',
    );
    t.match(await commit(s, g1), { ok: false, error: 'exists' }, 'a published generation is never replaced');

    await put(s, a);
    await put(s, b);
    t.match(
      await commit(s, manifest('20261201T070100Z', 2, [['ledger.db', a]])),
      { ok: false, error: 'stale', message: /lease generation 2 is lower than 3/ },
      'a lower lease generation is refused (S7)',
    );
    if (o.second !== undefined) {
      // Two arbiters on one prefix: the mark is shared.
      t.same(
        await o.second.commit(
          'mbp',
          manifest('20261201T070200Z', 5, [['ledger.db', a]]),
          formatSums(manifest('x', 5, [['ledger.db', a]]).entries),
          36,
        ),
        { ok: true, files: 1 },
        'the other arbiter accepts lease generation 5',
      );
      await put(s, a);
      t.match(
        await commit(s, manifest('20261201T070300Z', 4, [['ledger.db', a]])),
        { ok: false, error: 'stale', message: /lower than 5/ },
        'and this one then refuses 4: S7 holds across arbiters',
      );
    }
    for (const [i, g] of ['20261201T080000Z', '20261201T080100Z', '20261201T080200Z'].entries()) {
      await put(s, a);
      t.same(
        await commit(s, manifest(g, 6 + i, [['ledger.db', a]]), 2),
        { ok: true, files: 1 },
        `generation ${g} published with keep 2`,
      );
    }
    t.same(
      (await generations(s))?.generations,
      ['20261201T080100Z', '20261201T080200Z'],
      'only the newest two are kept',
    );
  });
}

t.test('etcd: sizes are capped, unlisted blobs go, a push under way keeps its blobs', async (t) => {
  const o = await FACTORIES[1]!.open(t);
  if (o === null) return;
  const s = o.store;
  const client = o.client as EtcdClient;
  const blobs = async () =>
    (await client.range(`${o.prefix}/survival/mbp/blobs/`, { prefix: true, keysOnly: true })).kvs.map((kv) =>
      kv.key.split('/').pop(),
    );
  const big = manifest('20261201T070000Z', 1, [['huge.db', Buffer.alloc(1)]]);
  const huge = { ...big, entries: [{ ...big.entries[0]!, bytes: ETCD_SURVIVAL_LIMITS.generationBytes + 1 }] };
  t.match(
    await commit(s, huge),
    { ok: false, error: 'too-large', message: /standby/ },
    'a generation above 16 MiB is refused, naming where large files go',
  );

  const v1 = Buffer.from('v1');
  const v2 = Buffer.from('v2');
  const v3 = Buffer.from('v3');
  await put(s, v1);
  t.same(
    await commit(s, manifest('20261201T090000Z', 1, [['ledger.db', v1]]), 1),
    { ok: true, files: 1 },
    'v1 published',
  );
  await put(s, v2);
  t.same(
    await commit(s, manifest('20261201T090100Z', 1, [['ledger.db', v2]]), 1),
    { ok: true, files: 1 },
    'v2 published (keep 1: v1 goes)',
  );
  t.same(await blobs(), [sha(v2)], "v1's blob, listed by no kept generation and older than the last commit, is gone");
  await put(s, v3); // a push under way: sent, not committed yet
  await put(s, v2);
  t.same(
    await commit(s, manifest('20261201T090200Z', 1, [['ledger.db', v2]]), 1),
    { ok: true, files: 1 },
    'another generation with v2',
  );
  const left = await blobs();
  t.ok(left.includes(sha(v2)), 'the blob the kept generation lists stays');
  t.ok(left.includes(sha(v3)), 'and the blob of the push under way, sent after the last commit, stays');
  await put(s, v3);
  t.same(
    await commit(s, manifest('20261201T090300Z', 1, [['ledger.db', v3]]), 1),
    { ok: true, files: 1 },
    'which then commits',
  );
});

t.test('etcd: a blob sent again for a push under way is as new as its last sending', async (t) => {
  const o = await FACTORIES[1]!.open(t);
  if (o === null) return;
  const s = o.store;
  const client = o.client as EtcdClient;
  const blobs = async () =>
    (await client.range(`${o.prefix}/survival/mbp/blobs/`, { prefix: true, keysOnly: true })).kvs.map((kv) =>
      kv.key.split('/').pop(),
    );
  const v1 = Buffer.from('w1');
  const v2 = Buffer.from('w2');
  await put(s, v2); // a push that will take a while: its blob, sent first
  await put(s, v1);
  t.same(
    await commit(s, manifest('20261201T100000Z', 1, [['ledger.db', v1]]), 1),
    { ok: true, files: 1 },
    'another push commits meanwhile',
  );
  await put(s, v2); // the slow push sends its blob again (a retry): the key exists, its create revision stays old
  await put(s, v1);
  t.same(
    await commit(s, manifest('20261201T100100Z', 1, [['ledger.db', v1]]), 1),
    { ok: true, files: 1 },
    'and another',
  );
  t.ok((await blobs()).includes(sha(v2)), 'the blob sent again after the last commit stays');
  t.same(
    await commit(s, manifest('20261201T100200Z', 1, [['ledger.db', v2]]), 1),
    { ok: true, files: 1 },
    'so the slow push commits',
  );
});

t.test('etcd: a survival mark that is not a generation is refused loudly, nothing published', async (t) => {
  const o = await FACTORIES[1]!.open(t);
  if (o === null) return;
  const s = o.store;
  const client = o.client as EtcdClient;
  const a = Buffer.from('ledger');
  await put(s, a);
  t.same(
    await commit(s, manifest('20261201T110000Z', 7, [['ledger.db', a]])),
    { ok: true, files: 1 },
    'lease generation 7 accepted',
  );
  await client.put(`${o.prefix}/survival/mbp/core/mark`, 'seven');
  await put(s, a);
  await t.rejects(
    commit(s, manifest('20261201T110100Z', 3, [['ledger.db', a]])),
    {
      name: 'EtcdError',
      kind: 'unavailable',
      message: /survival\/mbp\/core\/mark holds "seven", not a lease generation/,
    },
    'a commit is refused, naming the key (503 on the route), not taken as generation 0',
  );
  t.same((await generations(s))?.generations, ['20261201T110000Z'], 'generation 3 was not published below 7');
});
