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
import { formatSums, type Manifest } from '../../packages/protocol/src/index.js';
import { config, peer, tmp, TOKEN, write } from './helpers.js';

const T0 = Date.parse('2026-12-01T07:00:00.000Z');

async function setup(t: Parameters<Parameters<typeof tap.test>[1]>[0], keep?: { core: number; big: number; obs: number }) {
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'a.txt' }, { path: 'b.bin' }, { path: 'c.txt' }, { path: 'empty.txt' }] } });
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
    return buildSnapshot({ cfg, tier: 'core', host: holder, lease: { generation, holder }, now: () => now, stableMs: 0 });
  };
  const push = (dir: string, chunkBytes = 64 * 1024) => pushGeneration({ dir, baseUrl: p.url, token: TOKEN, timeoutSeconds: 10, chunkBytes });
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
  t.equal(readlinkSync(join(s.standbyDir, 'core', 'latest')), g.manifest.generation, 'latest names the pushed generation');
  const v = await verifyTier(s.standbyDir, 'core');
  t.ok(v.ok, `the standby copy verifies (${v.reason})`);
  t.equal(readFileSync(join(s.standbyDir, 'accepted-generation'), 'utf8'), '3\n', 'the accepted lease generation is recorded');
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
  t.equal(readdirSync(join(s.standbyDir, 'core')).filter((n) => /^\d{8}T/.test(n)).length, 2, 'both generations are kept');
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
  t.equal(readlinkSync(join(s.standbyDir, 'core', 'latest')), g4.manifest.generation, 'latest still names the generation-4 copy');
  t.notOk(existsSync(join(s.standbyDir, 'core', g3.manifest.generation)), 'no folder of the refused generation exists');
  const boot = await s.snap(0, 'mbp');
  const b = await s.push(boot.dir);
  t.equal(b.ok ? 'accepted' : b.error, 'HQ_ERR_STALE_GENERATION', 'a bootstrap push (no lease generation) is refused once one was accepted');
  const g5 = await s.snap(5, 'mbp');
  t.ok((await s.push(g5.dir)).ok, 'a push from a higher lease generation is accepted');
});

t.test('within one lease generation a tier only moves forward', async (t) => {
  const s = await setup(t);
  const g1 = await s.snap(3);
  const g2 = await s.snap(3);
  t.ok((await s.push(g2.dir)).ok, 'the newer generation is accepted');
  const r = await s.push(g1.dir);
  t.equal(r.ok ? 'accepted' : r.error, 'HQ_ERR_OLDER_SNAPSHOT', 'an older snapshot of the same lease generation is refused');
  const again = await s.push(g2.dir);
  t.equal(again.ok ? 'accepted' : again.error, 'HQ_ERR_GENERATION_EXISTS', 'the same generation twice is refused');
});

t.test('a connection killed mid-chunk leaves latest untouched, no partial generation, and the push can resume', async (t) => {
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
      sock.write(Buffer.alloc(150_000, 9), () => setTimeout(() => (sock.destroy(), done()), 50));
    });
  });
  await new Promise((r) => setTimeout(r, 100));
  t.equal(readlinkSync(join(s.standbyDir, 'core', 'latest')), g1.manifest.generation, 'latest is untouched by the cut push');
  t.notOk(existsSync(join(s.standbyDir, 'core', g2.manifest.generation)), 'no folder of the interrupted generation is visible');
  const commit = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/commit`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
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
  const done = await request(`${s.peer.url}/v1/standby/pushes/${body.push}/commit`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  await done.body.text();
  t.equal(done.statusCode, 200, 'the resumed push commits');
  t.equal(readlinkSync(join(s.standbyDir, 'core', 'latest')), g2.manifest.generation, 'latest moves only after the full verification');
  t.ok((await verifyTier(s.standbyDir, 'core')).ok, 'the committed copy verifies');
});

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
  t.equal(((await wrongOffset.body.json()) as { error: string }).error, 'HQ_ERR_BLOB_OFFSET', 'a chunk that does not continue the part is refused');
  t.equal(existsSync(join(s.standbyDir, 'core', 'latest')), false, 'no latest exists');
  t.same(readdirSync(join(s.standbyDir, 'core')), [], 'no generation is visible');
  const del = await request(`${s.peer.url}/v1/standby/pushes/${body.push}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } });
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
    ['a sums file listing another digest', { manifest, sums: formatSums(manifest.entries).replace(/^[0-9a-f]/, (c) => (c === '0' ? '1' : '0')) }, 'HQ_ERR_BAD_MANIFEST'],
    ['a path that climbs out', { manifest: { ...manifest, entries: [{ ...manifest.entries[0], path: '../x' }] }, sums: '' }, 'HQ_ERR_BAD_MANIFEST'],
    ['an absolute path', { manifest: { ...manifest, entries: [{ ...manifest.entries[0], path: '/etc/passwd' }] }, sums: '' }, 'HQ_ERR_BAD_MANIFEST'],
    ['an unknown manifest field', { manifest: { ...manifest, extra: 1 }, sums: formatSums(manifest.entries) }, 'HQ_ERR_BAD_MANIFEST'],
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
    const wrong = await request(`${s.peer.url}${path}`, { method, headers: { authorization: `Bearer ${'b'.repeat(64)}` } });
    await wrong.body.text();
    t.equal(wrong.statusCode, 401, `${method} ${path} with another token is 401`);
  }
  const g = await s.snap(3);
  const r = await pushGeneration({ dir: g.dir, baseUrl: s.peer.url, token: 'c'.repeat(64), timeoutSeconds: 5, chunkBytes: 65536 });
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
    readdirSync(join(s.standbyDir, 'core')).filter((n) => /^\d{8}T/.test(n)).sort(),
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
  const app = Fastify({ logger: false });
  await app.register(replicationPeerRoutes, await standbyPeerOptions({ replication: cfg, peerToken: new TokenFile(tokenFile), seenGeneration: () => 2 }));
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const g = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease: { generation: 1, holder: 'mbp' }, now: () => T0 });
  const stale = await pushGeneration({ dir: g.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 });
  t.equal(stale.ok ? 'accepted' : stale.error, 'HQ_ERR_STALE_GENERATION', "a push below the agent's seen generation is refused");
  const g2 = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease: { generation: 2, holder: 'mbp' }, now: () => T0 + 1000 });
  t.ok((await pushGeneration({ dir: g2.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 })).ok, 'a push at the seen generation is accepted');
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
