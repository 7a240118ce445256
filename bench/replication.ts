/**
 * Standby replication figures (SPEC §6, issue 6), on loopback with two real peer servers:
 *  1. bytes sent by the second snapshot push after changing one small file in a 200 MiB state
 *     (goal: ≤ 1 % of the state);
 *  2. the time to promote 200 MiB (verification of every checksum, then the copy, hashed and
 *     fsync'd).
 * The state is all `core` (every file ≤ 20 MiB) so the whole 200 MiB rides each core push:
 * 9 SQLite databases of about 19 MiB, plain files of 1 MiB up to 200 MiB, one small file.
 *
 *   npx tsx bench/replication.ts            (BENCH_MIB=200; BENCH_WRITE=0 skips the doc)
 *
 * Writes docs/BENCH-replication.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import { resolveReplication, validateReplication } from '../apps/agent/src/replication/config.js';
import { StandbyReceiver } from '../apps/agent/src/replication/receiver.js';
import { replicationPeerRoutes } from '../apps/agent/src/replication/routes.js';
import { buildSnapshot } from '../apps/agent/src/replication/snapshot.js';
import { pushGeneration } from '../apps/agent/src/replication/push.js';
import { promote } from '../apps/agent/src/replication/promote.js';

const ROOT = resolve(import.meta.dirname, '..');
const MIB = 1024 * 1024;
const TOTAL_MIB = Number(process.env['BENCH_MIB'] ?? 200);
const TOKEN = 'b'.repeat(64);

function sqlite(path: string, bytes: number): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE rows (id INTEGER PRIMARY KEY, payload BLOB)');
  const ins = db.prepare('INSERT INTO rows (payload) VALUES (?)');
  // ~1 KiB rows: four to a 4 KiB page, no overflow pages, so the file is close to `bytes`.
  const rows = Math.floor(bytes / 1030);
  db.transaction(() => {
    for (let i = 0; i < rows; i++) ins.run(randomBytes(1000));
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), 'hq-bench-rep-'));
  try {
    const state = join(base, 'state');
    mkdirSync(join(state, 'db'), { recursive: true });
    mkdirSync(join(state, 'files'), { recursive: true });
    const dbs = Math.floor((TOTAL_MIB * 0.9) / 20);
    for (let i = 0; i < dbs; i++) sqlite(join(state, 'db', `ledger-${i}.db`), 19 * MIB);
    const { statSync, readdirSync } = await import('node:fs');
    const dbBytes = readdirSync(join(state, 'db')).reduce((n, f) => n + statSync(join(state, 'db', f)).size, 0);
    const plain = Math.max(0, Math.round((TOTAL_MIB * MIB - dbBytes) / MIB) - 1);
    for (let i = 0; i < plain; i++) writeFileSync(join(state, 'files', `blob-${i}.bin`), randomBytes(MIB));
    writeFileSync(join(state, 'files', 'small.json'), JSON.stringify({ counter: 1 }));
    const cfg = resolveReplication(
      validateReplication({ stateDir: state, standbyDir: join(base, 'standby-self'), outboxDir: join(base, 'outbox'), plan: { dirs: [{ path: 'db' }, { path: 'files' }] } }),
      base,
    );
    const standbyDir = join(base, 'standby-b');
    const receiver = await StandbyReceiver.open({ standbyDir, keep: cfg.keep });
    const app = Fastify({ logger: false, bodyLimit: 64 * 1024, requestTimeout: 10_000, connectionTimeout: 10_000 });
    await app.register(replicationPeerRoutes, { receiver, verifyPeer: (h) => h === `Bearer ${TOKEN}` });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    // Files must be quiet for 2 s before a snapshot to be reused by the next one.
    await new Promise((r) => setTimeout(r, 2500));
    const lease = { generation: 7, holder: 'mbp' };
    const t0 = Date.now();
    const g1 = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => t0 });
    const snap1Ms = Date.now() - t0;
    const p1Start = Date.now();
    const p1 = await pushGeneration({ dir: g1.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 30, chunkBytes: cfg.chunkBytes });
    const push1Ms = Date.now() - p1Start;
    if (!p1.ok) throw new Error(`first push failed: ${p1.message}`);
    writeFileSync(join(state, 'files', 'small.json'), JSON.stringify({ counter: 2 }));
    const t1 = Date.now();
    const g2 = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => Math.max(t1, t0 + 1000) });
    const snap2Ms = Date.now() - t1;
    const p2Start = Date.now();
    const p2 = await pushGeneration({ dir: g2.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 30, chunkBytes: cfg.chunkBytes });
    const push2Ms = Date.now() - p2Start;
    if (!p2.ok) throw new Error(`second push failed: ${p2.message}`);
    await app.close();
    const stateBytes = g2.bytes;
    const to = join(base, 'promoted');
    const pr0 = Date.now();
    const summary = await promote({ standbyDir, to, tiers: ['core'] });
    const promoteMs = Date.now() - pr0;
    const pct = (100 * p2.sentBytes) / stateBytes;
    const rows: [string, string][] = [
      ['state (core tier)', `${(stateBytes / MIB).toFixed(1)} MiB in ${g2.manifest.entries.length} files (${dbs} SQLite databases)`],
      ['first snapshot (build)', `${snap1Ms} ms`],
      ['first push', `${(p1.sentBytes / MIB).toFixed(1)} MiB, ${p1.sentBlobs} blobs, ${push1Ms} ms`],
      ['second snapshot after changing one small file (build)', `${snap2Ms} ms, ${g2.reused} of ${g2.manifest.entries.length} files reused`],
      ['**second push: bytes sent**', `**${p2.sentBytes} bytes = ${pct.toFixed(4)} % of the state** (goal ≤ 1 %), ${p2.sentBlobs} blob, ${push2Ms} ms`],
      ['**promote 200 MiB** (verify every checksum, copy hashed + fsync)', `**${(promoteMs / 1000).toFixed(2)} s** for ${summary.files} files, ${(summary.bytes / MIB).toFixed(1)} MiB`],
    ];
    const table = ['| measure | result |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
    process.stdout.write(`${table}\n`);
    if (process.env['BENCH_WRITE'] !== '0') {
      const doc = `# Replication benchmark

Command: \`npx tsx bench/replication.ts\` (BENCH_MIB=${TOTAL_MIB}). Two real peer servers on
127.0.0.1 in one process (Fastify + \`replicationPeerRoutes\`), the real snapshot builder, push
client, receiver and promote; ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.version},
measured ${new Date().toISOString().slice(0, 16)}Z.

The state is all \`core\` (every file ≤ 20 MiB), so the whole of it rides each core push. Between
the two snapshots one small file (\`files/small.json\`, ~13 bytes) changes; every other file is
reused (hard-linked from the previous generation, not read again) and its blob is already on the
standby, so the second push sends the manifest, SHA256SUMS and that one blob.

${table}

The second push's time is the standby re-hashing the whole generation (hard-linked blobs too)
before \`latest\` moves. Promotion time is dominated by reading the 200 MiB twice (checksum verification before DIR
exists, then the hashed copy) and the fsync of every file.
`;
      writeFileSync(join(ROOT, 'docs/BENCH-replication.md'), doc);
    }
    if (pct > 1) process.exitCode = 1;
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
