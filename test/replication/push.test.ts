import t from 'tap';
import { chmodSync, existsSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import Fastify from 'fastify';
import { replicationPeerRoutes } from '../../apps/agent/src/replication/routes.js';
import { standbyPeerOptions } from '../../apps/agent/src/replication/wire.js';
import { TokenFile } from '../../apps/agent/src/tokens.js';
import { connect } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { buildSnapshot } from '../../apps/agent/src/replication/snapshot.js';
import { pushGeneration } from '../../apps/agent/src/replication/push.js';
import { verifyTier } from '../../apps/agent/src/replication/verify.js';
import {
  PROTOCOL_VERSION,
  formatSums,
  generationId,
  type Chunk,
  type Manifest,
  type ManifestEntry,
} from '../../packages/protocol/src/index.js';
import { randomBytes } from 'node:crypto';
import { chunkFile, encodeRecipe } from '../../apps/agent/src/replication/chunks.js';
import { config, ledger, peer, tmp, TOKEN, write, answerRefusals } from './helpers.js';

const T0 = Date.parse('2026-12-01T07:00:00.000Z');

async function setup(
  t: Parameters<Parameters<typeof tap.test>[1]>[0],
  keep?: { core: number; big: number; obs: number },
) {
  const base = tmp(t);
  const cfg = config(base, {
    plan: { files: [{ path: 'a.txt' }, { path: 'b.bin' }, { path: 'c.txt' }, { path: 'empty.txt' }] },
  });
  write(cfg.stateDir, 'a.txt', 'alpha\n');
  write(cfg.stateDir, 'b.bin', Buffer.alloc(300_000, 7));
  write(cfg.stateDir, 'c.txt', 'gamma\n');
  write(cfg.stateDir, 'empty.txt', '');
  const standbyDir = join(base, 'node-b-standby');
  const p = await peer(t, standbyDir, keep);
  let clock = T0;
  const snap = (generation: number, holder = 'mbp') => {
    clock += 1000;
    const now = clock;
    return buildSnapshot({
      cfg,
      tier: 'core',
      host: holder,
      lease: { generation, holder },
      now: () => now,
      stableMs: 0,
    });
  };
  const push = (dir: string, chunkBytes = 64 * 1024) =>
    pushGeneration({ dir, baseUrl: p.url, token: TOKEN, timeoutSeconds: 10, chunkBytes });
  return { base, cfg, standbyDir, peer: p, snap, push };
}
const tap = t;

t.test('a first push sends every blob, verifies, and moves latest to the new generation', async (t) => {
  const s = await setup(t);
  const g = await s.snap(3);
  const r = await s.push(g.dir);
  t.ok(r.ok, 'the push is accepted');
  if (!r.ok) return;
  t.equal(r.sentBlobs, 4, 'all four blobs are sent, the empty file too');
  t.equal(
    readlinkSync(join(s.standbyDir, 'core', 'latest')),
    g.manifest.generation,
    'latest names the pushed generation',
  );
  const v = await verifyTier(s.standbyDir, 'core');
  t.ok(v.ok, `the standby copy verifies (${v.reason})`);
  t.equal(
    readFileSync(join(s.standbyDir, 'accepted-generation'), 'utf8'),
    '3\n',
    'the accepted lease generation is recorded',
  );
  t.same(readdirSync(join(s.standbyDir, '.staging')), [], 'staging is empty after the commit');
});

t.test('a second push after one small change sends only that blob', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
  write(s.cfg.stateDir, 'c.txt', 'gamma changed\n');
  const g2 = await s.snap(3);
  const r = await s.push(g2.dir);
  t.ok(r.ok, 'the second push is accepted');
  if (!r.ok) return;
  t.equal(r.sentBlobs, 1, 'one blob is sent');
  t.equal(r.haveBlobs, 3, 'the three unchanged blobs are linked on the standby');
  t.ok(r.sentBytes < 10_000, `the second push sends a few kilobytes (${r.sentBytes} bytes)`);
  t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the new latest verifies');
  t.equal(
    readdirSync(join(s.standbyDir, 'core')).filter((n) => /^\d{8}T/.test(n)).length,
    2,
    'both generations are kept',
  );
});

t.test('a push from a lower lease generation than the last accepted is refused and latest stays', async (t) => {
  const s = await setup(t);
  const g4 = await s.snap(4, 'node-c');
  t.ok((await s.push(g4.dir)).ok, 'generation 4 is accepted');
  write(s.cfg.stateDir, 'a.txt', 'alpha from the old holder\n');
  const g3 = await s.snap(3, 'mbp');
  const r = await s.push(g3.dir);
  t.notOk(r.ok, 'the push from lease generation 3 is refused');
  if (r.ok) return;
  t.equal(r.error, 'HQ_ERR_STALE_GENERATION', 'the refusal is a stale generation');
  t.equal(r.status, 409, 'with HTTP 409');
  t.equal(r.kind, 'refused', 'the client reports a refusal, not an outage');
  t.equal(
    readlinkSync(join(s.standbyDir, 'core', 'latest')),
    g4.manifest.generation,
    'latest still names the generation-4 copy',
  );
  t.notOk(existsSync(join(s.standbyDir, 'core', g3.manifest.generation)), 'no folder of the refused generation exists');
  const boot = await s.snap(0, 'mbp');
  const b = await s.push(boot.dir);
  t.equal(
    b.ok ? 'accepted' : b.error,
    'HQ_ERR_STALE_GENERATION',
    'a bootstrap push (no lease generation) is refused once one was accepted',
  );
  const g5 = await s.snap(5, 'mbp');
  t.ok((await s.push(g5.dir)).ok, 'a push from a higher lease generation is accepted');
});

t.test('within one lease generation a tier only moves forward', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  const g2 = await s.snap(3);
  t.ok((await s.push(g2.dir)).ok, 'the newer generation is accepted');
  const r = await s.push(g1.dir);
  t.equal(
    r.ok ? 'accepted' : r.error,
    'HQ_ERR_OLDER_SNAPSHOT',
    'an older snapshot of the same lease generation is refused',
  );
  const again = await s.push(g2.dir);
  t.equal(again.ok ? 'accepted' : again.error, 'HQ_ERR_GENERATION_EXISTS', 'the same generation twice is refused');
});

t.test(
  'a connection killed mid-chunk leaves latest untouched, no partial generation, and the push can resume',
  async (t) => {
    const s = await setup(t);
    const g1 = await s.snap(3);
    t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
    write(s.cfg.stateDir, 'b.bin', Buffer.alloc(300_000, 9));
    const g2 = await s.snap(3);
    const manifest = JSON.parse(readFileSync(join(g2.dir, 'MANIFEST.json'), 'utf8')) as Manifest;
    const begun = await request(`${s.peer.url}/v1/standby/pushes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ manifest, sums: formatSums(manifest.entries) }),
    });
    const body = (await begun.body.json()) as { push: string; missing: string[] };
    t.equal(begun.statusCode, 200, 'the push begins');
    t.equal(body.missing.length, 1, 'only the changed blob is asked for');
    const sha = body.missing[0] as string;
    // Send headers for the whole blob and half of it, then cut the connection.
    const { port } = new URL(s.peer.url);
    await new Promise<void>((done) => {
      const sock = connect(Number(port), '127.0.0.1', () => {
        sock.write(
          `PUT /v1/standby/pushes/${body.push}/blobs/${sha} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: 300000\r\nX-HQ-Offset: 0\r\n\r\n`,
        );
        sock.write(Buffer.alloc(150_000, 9), () =>
          setTimeout(() => {
            sock.destroy();
            done();
          }, 50),
        );
      });
    });
    await new Promise((r) => setTimeout(r, 100));
    t.equal(
      readlinkSync(join(s.standbyDir, 'core', 'latest')),
      g1.manifest.generation,
      'latest is untouched by the cut push',
    );
    t.notOk(
      existsSync(join(s.standbyDir, 'core', g2.manifest.generation)),
      'no folder of the interrupted generation is visible',
    );
    const commit = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/commit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const cb = (await commit.body.json()) as { error: string; missing: string[] };
    t.equal(commit.statusCode, 409, 'a commit with a blob missing is refused');
    t.equal(cb.error, 'HQ_ERR_PUSH_INCOMPLETE', 'the refusal names the incomplete push');
    t.same(cb.missing, [sha], 'and lists the missing blob');
    const resume = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/blobs/${sha}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream', 'x-hq-offset': '0' },
      body: readFileSync(join(g2.dir, 'b.bin')),
    });
    const rb = (await resume.body.json()) as { complete: boolean };
    t.equal(resume.statusCode, 200, 'the blob sent again from the part end (0 after the cut) is accepted');
    t.equal(rb.complete, true, 'and completes the blob');
    const done = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/commit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    await done.body.text();
    t.equal(done.statusCode, 200, 'the resumed push commits');
    t.equal(
      readlinkSync(join(s.standbyDir, 'core', 'latest')),
      g2.manifest.generation,
      'latest moves only after the full verification',
    );
    t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the committed copy verifies');
  },
);

t.test('a client that stops after some chunks and never commits leaves nothing visible', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  const manifest = JSON.parse(readFileSync(join(g1.dir, 'MANIFEST.json'), 'utf8')) as Manifest;
  const begun = await request(`${s.peer.url}/v1/standby/pushes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ manifest, sums: formatSums(manifest.entries) }),
  });
  const body = (await begun.body.json()) as { push: string; missing: string[] };
  const entry = manifest.entries.find((e) => e.path === 'b.bin');
  const part = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/blobs/${entry?.sha256}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream', 'x-hq-offset': '0' },
    body: Buffer.alloc(100_000, 7),
  });
  t.same(await part.body.json(), { received: 100_000, complete: false }, 'a first chunk is stored');
  const wrongOffset = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/blobs/${entry?.sha256}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream', 'x-hq-offset': '5' },
    body: Buffer.alloc(10, 7),
  });
  t.equal(
    ((await wrongOffset.body.json()) as { error: string }).error,
    'HQ_ERR_BLOB_OFFSET',
    'a chunk that does not continue the part is refused',
  );
  t.equal(existsSync(join(s.standbyDir, 'core', 'latest')), false, 'no latest exists');
  t.same(readdirSync(join(s.standbyDir, 'core')), [], 'no generation is visible');
  const del = await request(`${s.peer.url}/v1/standby/pushes/${body.push}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  t.same(await del.body.json(), { aborted: true }, 'the push is aborted');
  t.same(readdirSync(join(s.standbyDir, '.staging')), [], 'an aborted push leaves no staging');
});

t.test('a blob that does not match its sha256 is refused', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  const manifest = JSON.parse(readFileSync(join(g1.dir, 'MANIFEST.json'), 'utf8')) as Manifest;
  const begun = await request(`${s.peer.url}/v1/standby/pushes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ manifest, sums: formatSums(manifest.entries) }),
  });
  const body = (await begun.body.json()) as { push: string };
  const a = manifest.entries.find((e) => e.path === 'a.txt');
  const bad = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/blobs/${a?.sha256}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream' },
    body: 'ALPHA!',
  });
  const bb = (await bad.body.json()) as { error: string };
  t.equal(bad.statusCode, 422, 'the tampered blob is refused with 422');
  t.equal(bb.error, 'HQ_ERR_CHECKSUM', 'as a checksum mismatch');
  const long = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/blobs/${a?.sha256}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream' },
    body: 'alpha\nand much more than the manifest says',
  }).catch(() => null);
  t.ok(long === null || long.statusCode === 400, 'a blob longer than its entry is refused (or its connection cut)');
  if (long !== null) await long.body.text();
});

t.test('a manifest that disagrees with its sums, or a stale manifest field, is refused at begin', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  const manifest = JSON.parse(readFileSync(join(g1.dir, 'MANIFEST.json'), 'utf8')) as Manifest;
  const cases: [string, unknown, string][] = [
    [
      'a sums file listing another digest',
      { manifest, sums: formatSums(manifest.entries).replace(/^[0-9a-f]/, (c) => (c === '0' ? '1' : '0')) },
      'HQ_ERR_BAD_MANIFEST',
    ],
    [
      'a path that climbs out',
      { manifest: { ...manifest, entries: [{ ...manifest.entries[0], path: '../x' }] }, sums: '' },
      'HQ_ERR_BAD_MANIFEST',
    ],
    [
      'an absolute path',
      { manifest: { ...manifest, entries: [{ ...manifest.entries[0], path: '/etc/passwd' }] }, sums: '' },
      'HQ_ERR_BAD_MANIFEST',
    ],
    [
      'an unknown manifest field',
      { manifest: { ...manifest, extra: 1 }, sums: formatSums(manifest.entries) },
      'HQ_ERR_BAD_MANIFEST',
    ],
  ];
  for (const [name, payload, code] of cases) {
    const r = await request(`${s.peer.url}/v1/standby/pushes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    const b = (await r.body.json()) as { error: string };
    t.equal(b.error, code, `${name} is refused as ${code}`);
  }
});

t.test('every standby route needs the peer token', async (t) => {
  const s = await setup(t);
  for (const [method, path] of [
    ['GET', '/v1/standby'],
    ['POST', '/v1/standby/pushes'],
    ['POST', `/v1/standby/pushes/${'0'.repeat(24)}/commit`],
  ] as const) {
    const none = await request(`${s.peer.url}${path}`, { method });
    await none.body.text();
    t.equal(none.statusCode, 401, `${method} ${path} without a token is 401`);
    const wrong = await request(`${s.peer.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${'b'.repeat(64)}` },
    });
    await wrong.body.text();
    t.equal(wrong.statusCode, 401, `${method} ${path} with another token is 401`);
  }
  const g = await s.snap(3);
  const r = await pushGeneration({
    dir: g.dir,
    baseUrl: s.peer.url,
    token: 'c'.repeat(64),
    timeoutSeconds: 5,
    chunkBytes: 65536,
  });
  t.equal(r.ok ? 200 : r.status, 401, 'the push client reports the 401');
  const st = await request(`${s.peer.url}/v1/standby`, { headers: { authorization: `bearer ${TOKEN}` } });
  t.equal(st.statusCode, 200, 'the status answers with the token (scheme case-insensitive)');
  await st.body.text();
});

t.test('the standby keeps at most keep generations and never prunes latest', async (t) => {
  const s = await setup(t, { core: 2, big: 8, obs: 8 });
  const names: string[] = [];
  for (let i = 0; i < 4; i++) {
    write(s.cfg.stateDir, 'c.txt', `round ${i}\n`);
    const g = await s.snap(3);
    t.ok((await s.push(g.dir)).ok, `push ${i} is accepted`);
    names.push(g.manifest.generation);
  }
  t.same(
    readdirSync(join(s.standbyDir, 'core'))
      .filter((n) => /^\d{8}T/.test(n))
      .sort(),
    names.slice(2),
    'only the two newest generations remain',
  );
  t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'latest still verifies after pruning (its links survive)');
});

t.test('a blob damaged on the standby is found at commit and sent again', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
  // Bit rot in the standby's copy of b.bin (shared by hard link with the next generation).
  writeFileSync(join(s.standbyDir, 'core', g1.manifest.generation, 'b.bin'), Buffer.alloc(300_000, 8));
  write(s.cfg.stateDir, 'a.txt', 'alpha 2\n');
  const g2 = await s.snap(3);
  const r = await s.push(g2.dir);
  t.ok(r.ok, 'the push still succeeds');
  if (r.ok) t.equal(r.sentBlobs, 2, 'the changed blob and the damaged one are sent');
  t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the new latest verifies');
});

t.test('standbyPeerOptions wires the receiver to the peer token file, re-read after a rotation', async (t) => {
  const base = tmp(t);
  const tokenFile = write(base, 'peer-token', `${TOKEN}\n`);
  chmodSync(tokenFile, 0o600);
  const cfg = config(base, { plan: { files: [{ path: 'a.txt' }] } });
  write(cfg.stateDir, 'a.txt', 'a\n');
  const app = answerRefusals(Fastify({ logger: false }));
  await app.register(
    replicationPeerRoutes,
    await standbyPeerOptions({ replication: cfg, peerToken: new TokenFile(tokenFile), seenGeneration: () => 2 }),
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const g = await buildSnapshot({
    cfg,
    tier: 'core',
    host: 'mbp',
    lease: { generation: 1, holder: 'mbp' },
    now: () => T0,
  });
  const stale = await pushGeneration({ dir: g.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 });
  t.equal(
    stale.ok ? 'accepted' : stale.error,
    'HQ_ERR_STALE_GENERATION',
    "a push below the agent's seen generation is refused",
  );
  const g2 = await buildSnapshot({
    cfg,
    tier: 'core',
    host: 'mbp',
    lease: { generation: 2, holder: 'mbp' },
    now: () => T0 + 1000,
  });
  t.ok(
    (await pushGeneration({ dir: g2.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 })).ok,
    'a push at the seen generation is accepted',
  );
  const rotated = 'e'.repeat(64);
  writeFileSync(tokenFile, `${rotated}\n`);
  chmodSync(tokenFile, 0o600);
  const old = await request(`${url}/v1/standby`, { headers: { authorization: `Bearer ${TOKEN}` } });
  await old.body.text();
  t.equal(old.statusCode, 401, 'the old token fails after the rotation');
  const fresh = await request(`${url}/v1/standby`, { headers: { authorization: `Bearer ${rotated}` } });
  await fresh.body.text();
  t.equal(fresh.statusCode, 200, 'the new token works without a restart');
});

// ---------------------------------------------------------------------------------------
// chunks

/** A state with one SQLite database of about 2 MiB (1 KiB random rows) and one small file. */
async function setupDb(
  t: Parameters<Parameters<typeof tap.test>[1]>[0],
  keep?: { core: number; big: number; obs: number },
) {
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'ledger.db' }, { path: 'a.txt' }] } });
  write(cfg.stateDir, 'a.txt', 'alpha\n');
  const db = ledger(join(cfg.stateDir, 'ledger.db'), 2000);
  t.teardown(() => db.close());
  const update = (id: number) => {
    db.prepare('UPDATE rows SET payload = ? WHERE id = ?').run(randomBytes(1000), id);
    db.pragma('wal_checkpoint(TRUNCATE)');
  };
  const standbyDir = join(base, 'node-b-standby');
  const p = await peer(t, standbyDir, keep);
  let clock = T0;
  const snap = () => {
    clock += 1000;
    const now = clock;
    return buildSnapshot({
      cfg,
      tier: 'core',
      host: 'mbp',
      lease: { generation: 3, holder: 'mbp' },
      now: () => now,
      stableMs: 0,
    });
  };
  const push = (dir: string) =>
    pushGeneration({ dir, baseUrl: p.url, token: TOKEN, timeoutSeconds: 10, chunkBytes: 256 * 1024 });
  return { base, cfg, db, update, standbyDir, peer: p, snap, push };
}

const auth = { authorization: `Bearer ${TOKEN}` };
async function begin(
  url: string,
  dir: string,
): Promise<{ push: string; missing: string[]; chunked: boolean; manifest: Manifest }> {
  const manifest = JSON.parse(readFileSync(join(dir, 'MANIFEST.json'), 'utf8')) as Manifest;
  const r = await request(`${url}/v1/standby/pushes`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ manifest, sums: formatSums(manifest.entries) }),
  });
  return { ...((await r.body.json()) as { push: string; missing: string[]; chunked: boolean }), manifest };
}
async function put(
  url: string,
  path: string,
  body: Buffer,
): Promise<{ status: number; body: { [k: string]: unknown } }> {
  const r = await request(`${url}${path}`, {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/octet-stream' },
    body,
  });
  return { status: r.statusCode, body: (await r.body.json()) as { [k: string]: unknown } };
}
async function commit(url: string, push: string): Promise<{ status: number; body: { [k: string]: unknown } }> {
  const r = await request(`${url}/v1/standby/pushes/${push}/commit`, { method: 'POST', headers: auth });
  return { status: r.statusCode, body: (await r.body.json()) as { [k: string]: unknown } };
}
/** The batch body of these chunks of a file: each its raw sha256, then its bytes. */
function batch(file: Buffer, chunks: readonly Chunk[], indexes: readonly number[]): Buffer {
  const offsets: number[] = [];
  let at = 0;
  for (const c of chunks) {
    offsets.push(at);
    at += c.bytes;
  }
  return Buffer.concat(
    indexes.flatMap((i) => [
      Buffer.from((chunks[i] as Chunk).sha256, 'hex'),
      file.subarray(offsets[i] as number, (offsets[i] as number) + (chunks[i] as Chunk).bytes),
    ]),
  );
}
const indexesOf = (runs: readonly (readonly [number, number])[]) =>
  runs.flatMap(([first, count]) => Array.from({ length: count }, (_, k) => first + k));

t.test('one updated row sends the chunk list and the changed chunk, not the database', async (t) => {
  const s = await setupDb(t);
  const g1 = await s.snap();
  const first = await s.push(g1.dir);
  t.ok(first.ok, 'the first push is accepted');
  if (!first.ok) return;
  const dbBytes = g1.manifest.entries.find((e) => e.path === 'ledger.db')?.bytes ?? 0;
  t.equal(
    first.sentChunks,
    Math.ceil(dbBytes / 4096) + 1,
    'the first push sends every chunk once (the database page by page, and a.txt)',
  );
  s.update(1000);
  const g2 = await s.snap();
  const r = await s.push(g2.dir);
  t.ok(r.ok, 'the second push is accepted');
  if (!r.ok) return;
  t.equal(r.sentBlobs, 1, 'one file is missing on the standby');
  t.ok(r.sentChunks >= 1 && r.sentChunks <= 2, `one or two chunks are sent (${r.sentChunks})`);
  t.ok(
    r.sentBytes < 20_000 && r.sentBytes < dbBytes / 100,
    `a fraction of the ${dbBytes}-byte database is sent (${r.sentBytes} bytes)`,
  );
  const v = await verifyTier(s.standbyDir, 'core');
  t.ok(v.ok, `the assembled copy verifies (${v.reason})`);
  t.same(
    readFileSync(join(s.standbyDir, 'core', g2.manifest.generation, 'ledger.db')),
    readFileSync(join(g2.dir, 'ledger.db')),
    'byte for byte the snapshot',
  );
  t.same(readdirSync(join(s.standbyDir, '.staging')), [], 'staging is empty after the commit');
});

t.test(
  'chunk lists no kept generation names are collected after a prune, and their chunks are asked for again',
  async (t) => {
    const s = await setupDb(t, { core: 1, big: 8, obs: 8 });
    const g1 = await s.snap();
    t.ok((await s.push(g1.dir)).ok, 'generation 1 is accepted');
    const db1 = g1.manifest.entries.find((e) => e.path === 'ledger.db')?.sha256 as string;
    t.ok(
      existsSync(join(s.standbyDir, '.chunks', db1)),
      'the chunk list of the database is kept beside the generation',
    );
    s.update(10);
    const g2 = await s.snap();
    t.ok((await s.push(g2.dir)).ok, 'generation 2 is accepted and generation 1 pruned (keep 1)');
    const lists = readdirSync(join(s.standbyDir, '.chunks')).sort();
    t.same(lists, g2.manifest.entries.map((e) => e.sha256).sort(), 'exactly the lists of the kept generation remain');
    t.notOk(existsSync(join(s.standbyDir, '.chunks', db1)), "the pruned generation's database list is gone");
    // The chunk that held row 10 before the update is held by no kept generation: asked for again.
    const before = (await chunkFile(join(g1.dir, 'ledger.db'), 'sqlite')).chunks;
    const now = new Set((await chunkFile(join(g2.dir, 'ledger.db'), 'sqlite')).chunks.map((c) => c.sha256));
    const gone = before.filter((c) => !now.has(c.sha256));
    t.ok(gone.length >= 1, 'the update replaced a chunk');
    // A later generation with generation 1's database again: the standby lacks that file.
    const m = { ...g1.manifest, generation: generationId(T0 + 60_000) };
    const begun = await request(`${s.peer.url}/v1/standby/pushes`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ manifest: m, sums: formatSums(m.entries) }),
    });
    const b = (await begun.body.json()) as { push: string; missing: string[]; chunked: boolean };
    t.equal(b.chunked, true, 'the standby takes chunks');
    t.same(b.missing, [db1], "only generation 1's database is missing");
    const list = await put(s.peer.url, `/v1/standby/pushes/${b.push}/recipes/${db1}`, encodeRecipe(before));
    t.equal(list.status, 200, 'the chunk list is taken');
    const asked = indexesOf(list.body['missing'] as [number, number][]).map((i) => before[i]?.sha256);
    t.same(
      asked,
      gone.map((c) => c.sha256),
      'exactly the chunks no kept generation holds are asked for',
    );
    t.equal(list.body['have'], before.length - gone.length, 'every other chunk is held');
  },
);

t.test(
  'a push cut inside a batch of chunks leaves latest and the kept generations intact, and resumes with what is missing',
  async (t) => {
    const s = await setupDb(t);
    const g1 = await s.snap();
    t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
    for (const id of [5, 600, 1200, 1900]) s.update(id);
    const g2 = await s.snap();
    const b = await begin(s.peer.url, g2.dir);
    const e = b.manifest.entries.find((x) => x.path === 'ledger.db') as ManifestEntry;
    t.same(b.missing, [e.sha256], 'the database is missing');
    const file = readFileSync(join(g2.dir, 'ledger.db'));
    const chunks = (await chunkFile(join(g2.dir, 'ledger.db'), 'sqlite')).chunks;
    const list = await put(s.peer.url, `/v1/standby/pushes/${b.push}/recipes/${e.sha256}`, encodeRecipe(chunks));
    const want = indexesOf(list.body['missing'] as [number, number][]);
    t.ok(want.length >= 3, `the changed chunks are asked for (${want.length})`);
    // The first chunk whole and half of the second, then the connection is cut.
    const body = batch(file, chunks, want);
    const cutAt = 32 + (chunks[want[0] as number] as Chunk).bytes + 32 + 1000;
    const { port } = new URL(s.peer.url);
    await new Promise<void>((done) => {
      const sock = connect(Number(port), '127.0.0.1', () => {
        sock.write(
          `PUT /v1/standby/pushes/${b.push}/chunks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`,
        );
        sock.write(body.subarray(0, cutAt), () =>
          setTimeout(() => {
            sock.destroy();
            done();
          }, 50),
        );
      });
    });
    await new Promise((r) => setTimeout(r, 100));
    t.equal(
      readlinkSync(join(s.standbyDir, 'core', 'latest')),
      g1.manifest.generation,
      'latest is untouched by the cut push',
    );
    t.notOk(
      existsSync(join(s.standbyDir, 'core', g2.manifest.generation)),
      'no folder of the interrupted generation is visible',
    );
    t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the kept generation still verifies');
    const c1 = await commit(s.peer.url, b.push);
    t.equal(c1.status, 409, 'a commit with chunks missing is refused');
    t.equal(c1.body['error'], 'HQ_ERR_PUSH_INCOMPLETE', 'as an incomplete push');
    t.same(c1.body['missing'], [e.sha256], 'naming the file');
    const again = await put(s.peer.url, `/v1/standby/pushes/${b.push}/recipes/${e.sha256}`, encodeRecipe(chunks));
    t.same(
      indexesOf(again.body['missing'] as [number, number][]),
      want.slice(1),
      'the list sent again asks only for the chunks the cut lost',
    );
    const rest = await put(s.peer.url, `/v1/standby/pushes/${b.push}/chunks`, batch(file, chunks, want.slice(1)));
    t.same(rest.body, { received: want.length - 1 }, 'the rest is received');
    const c2 = await commit(s.peer.url, b.push);
    t.equal(c2.status, 200, 'the resumed push commits');
    t.equal(
      readlinkSync(join(s.standbyDir, 'core', 'latest')),
      g2.manifest.generation,
      'latest moves only after the full verification',
    );
    t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the committed copy verifies');
  },
);

/** A first push of the database begun by hand: its entry, bytes and chunks. */
async function begunDb(t: Parameters<Parameters<typeof tap.test>[1]>[0]) {
  const s = await setupDb(t);
  const g1 = await s.snap();
  const b = await begin(s.peer.url, g1.dir);
  const e = b.manifest.entries.find((x) => x.path === 'ledger.db') as ManifestEntry;
  const file = readFileSync(join(g1.dir, 'ledger.db'));
  const chunks = (await chunkFile(join(g1.dir, 'ledger.db'), 'sqlite')).chunks;
  return { s, b, e, file, chunks };
}

t.test(
  'a push that stops after its chunk list, or after some chunks, and never commits leaves nothing visible',
  async (t) => {
    const { s, b, e, file, chunks } = await begunDb(t);
    await put(s.peer.url, `/v1/standby/pushes/${b.push}/recipes/${e.sha256}`, encodeRecipe(chunks));
    t.same(
      (await put(s.peer.url, `/v1/standby/pushes/${b.push}/chunks`, batch(file, chunks, [0, 1]))).body,
      { received: 2 },
      'two chunks are stored',
    );
    t.same(readdirSync(join(s.standbyDir, 'core')), [], 'no generation and no latest are visible');
    const del = await request(`${s.peer.url}/v1/standby/pushes/${b.push}`, { method: 'DELETE', headers: auth });
    t.same(await del.body.json(), { aborted: true }, 'the push is aborted');
    t.same(readdirSync(join(s.standbyDir, '.staging')), [], 'an aborted push leaves no staging');
    t.same(readdirSync(join(s.standbyDir, '.chunks')), [], 'and no chunk list');
  },
);

t.test('chunks and chunk lists that do not fit are refused with one line and a 4xx', async (t) => {
  const { s, b, e, file, chunks } = await begunDb(t);
  const base = `/v1/standby/pushes/${b.push}`;
  const cases: [string, string, Buffer, number, string][] = [
    [
      'a list whose chunks do not add up to the file',
      `${base}/recipes/${e.sha256}`,
      encodeRecipe(chunks.slice(1)),
      400,
      'HQ_ERR_BAD_MANIFEST',
    ],
    [
      'a list of a file the push does not need',
      `${base}/recipes/${'f'.repeat(64)}`,
      encodeRecipe(chunks),
      409,
      'HQ_ERR_UNEXPECTED_BLOB',
    ],
    [
      'a list of a length that is not a multiple of 36',
      `${base}/recipes/${e.sha256}`,
      Buffer.alloc(40),
      400,
      'HQ_ERR_BAD_MANIFEST',
    ],
    ['a chunk before its list named it', `${base}/chunks`, batch(file, chunks, [0]), 409, 'HQ_ERR_UNEXPECTED_BLOB'],
  ];
  for (const [name, path, body, status, code] of cases) {
    const r = await put(s.peer.url, path, body);
    t.equal(r.status, status, `${name}: HTTP ${status}`);
    t.equal(r.body['error'], code, `${name}: ${code}`);
    t.match(r.body['message'], /^[^\n]+$/, `${name}: a one-line message`);
  }
  await put(s.peer.url, `${base}/recipes/${e.sha256}`, encodeRecipe(chunks));
  const tampered = batch(file, chunks, [0]);
  tampered[40] = (tampered[40] as number) ^ 1;
  const bad = await put(s.peer.url, `${base}/chunks`, tampered);
  t.equal(bad.status, 422, 'a chunk that does not hash to its name is refused with 422');
  t.equal(bad.body['error'], 'HQ_ERR_CHECKSUM', 'as a checksum mismatch');
  const short = await put(s.peer.url, `${base}/chunks`, batch(file, chunks, [0]).subarray(0, 1000));
  t.equal(short.body['error'], 'HQ_ERR_BLOB_SIZE', 'a batch that ends inside a chunk is refused');
  const wrongType = await request(`${s.peer.url}${base}/chunks`, {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/json' },
    body: '{}',
  });
  t.equal(wrongType.statusCode, 415, 'a batch that is not application/octet-stream is refused with 415');
  await wrongType.body.text();
  t.same(readdirSync(join(s.standbyDir, 'core')), [], 'nothing became visible');
});

t.test('a chunk held on the standby that rotted is found while assembling and sent again', async (t) => {
  const s = await setupDb(t);
  const g1 = await s.snap();
  t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
  // Bit rot in the standby's database at 100 KiB: inside a page the next version shares.
  const held = join(s.standbyDir, 'core', g1.manifest.generation, 'ledger.db');
  const bytes = readFileSync(held);
  bytes[100 * 1024] = (bytes[100 * 1024] as number) ^ 0xff;
  writeFileSync(held, bytes);
  s.update(1900);
  const g2 = await s.snap();
  const r = await s.push(g2.dir);
  t.ok(r.ok, `the push still succeeds (${r.ok ? '' : r.message})`);
  if (r.ok) t.ok(r.sentChunks >= 2, `the changed chunk and the rotted one are sent (${r.sentChunks})`);
  const v = await verifyTier(s.standbyDir, 'core');
  t.ok(v.ok, `the new latest verifies (${v.reason})`);
});

t.test('a standby that does not offer chunks gets every missing file whole', async (t) => {
  const s = await setupDb(t);
  const receiver = s.peer.receiver as unknown as { begin: (b: unknown) => Promise<{ ok: boolean; chunked?: boolean }> };
  const original = receiver.begin.bind(receiver);
  receiver.begin = async (body) => {
    const r = await original(body);
    delete r.chunked;
    return r;
  };
  const g1 = await s.snap();
  const r = await s.push(g1.dir);
  t.ok(r.ok, 'the push is accepted');
  if (!r.ok) return;
  t.equal(r.sentChunks, 0, 'no chunk is sent');
  t.equal(r.sentBlobs, 2, 'both files are sent whole');
  t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the copy verifies');
});

t.test('a commit while a chunk list is still being received waits for it (409 busy), never a 500', async (t) => {
  const s = await setupDb(t);
  const g1 = await s.snap();
  t.ok((await s.push(g1.dir)).ok, 'the first push is accepted');
  for (const id of [7, 700]) s.update(id);
  const g2 = await s.snap();
  const b = await begin(s.peer.url, g2.dir);
  const e = b.manifest.entries.find((x) => x.path === 'ledger.db') as ManifestEntry;
  const chunks = (await chunkFile(join(g2.dir, 'ledger.db'), 'sqlite')).chunks;
  const list = encodeRecipe(chunks);
  const { port } = new URL(s.peer.url);
  // The chunk list, half sent: the standby is taking it.
  const answer = new Promise<string>((done) => {
    let text = '';
    const sock = connect(Number(port), '127.0.0.1', () => {
      sock.write(
        `PUT /v1/standby/pushes/${b.push}/recipes/${e.sha256} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n` +
          `Content-Type: application/octet-stream\r\nContent-Length: ${list.length}\r\n\r\n`,
      );
      sock.write(list.subarray(0, Math.floor(list.length / 2)));
      setTimeout(() => {
        void commit(s.peer.url, b.push).then((c) => {
          during.push(c);
          sock.write(list.subarray(Math.floor(list.length / 2)));
        });
      }, 200);
    });
    sock.on('data', (d: Buffer) => (text += d.toString()));
    sock.on('close', () => done(text));
  });
  const during: Array<{ status: number; body: Record<string, unknown> }> = [];
  const text = await answer;
  t.equal(during[0]?.status, 409, 'the commit during the chunk list is refused');
  t.equal(during[0]?.body['error'], 'HQ_ERR_BLOB_BUSY', 'as busy: the list is still being taken');
  t.match(text, /^HTTP\/1\.1 200/, `the chunk list, once whole, is taken (${JSON.stringify(text.slice(0, 120))})`);
  const want = indexesOf(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).missing as [number, number][]);
  const file = readFileSync(join(g2.dir, 'ledger.db'));
  t.equal(
    (await put(s.peer.url, `/v1/standby/pushes/${b.push}/chunks`, batch(file, chunks, want))).status,
    200,
    'its chunks are received',
  );
  t.equal((await commit(s.peer.url, b.push)).status, 200, 'and the push commits');
});

t.test('the push client and the survival client say the protocol version they speak', async (t) => {
  const { createServer } = await import('node:http');
  const { pushSurvival } = await import('../../apps/agent/src/replication/survival.js');
  const said: Array<[string, string | undefined]> = [];
  const srv = createServer((req, res) => {
    said.push([
      `${req.method} ${(req.url ?? '').split('/').slice(0, 4).join('/')}`,
      req.headers['hq-protocol'] as string | undefined,
    ]);
    req.resume();
    req.on('end', () =>
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"HQ_ERR_INTERNAL","message":"no"}'),
    );
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => srv.close());
  const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  const s = await setupDb(t);
  const g = await s.snap();
  await pushGeneration({ dir: g.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 });
  await pushSurvival({
    dir: g.dir,
    manifest: g.manifest,
    entries: [],
    arbiterUrl: url,
    token: TOKEN,
    timeoutSeconds: 5,
  });
  t.same(
    said,
    [
      ['POST /v1/standby/pushes', String(PROTOCOL_VERSION)],
      ['PUT /v1/survival/core', String(PROTOCOL_VERSION)],
    ],
    `hq-protocol: ${PROTOCOL_VERSION} on both`,
  );
});
