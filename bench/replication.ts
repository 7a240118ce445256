/**
 * Standby replication figures, on loopback with a real peer server,
 * beside `rsync --inplace --no-whole-file` on the same generation folders:
 *  (a) one row updated in a 200 MiB SQLite database (goal: ≤ 1 MiB sent);
 *  (b) 1 MiB of rows appended;  (c) rows deleted and the database VACUUMed (worst case);
 *  (d) one small file changed;  (e) nothing changed;
 * each goal ≤ 1.1 × rsync's bytes; (d), (e) no slower than before chunking. Then the receiver's
 * verification cost per MiB and the time to promote the state.
 *
 * hq's bytes are counted on the standby's sockets (HTTP headers and bodies, both directions);
 * rsync's are its `--stats` "Total bytes sent" + "Total bytes received" (its protocol both
 * ways), run to a local path — local rsync copies whole files unless `--no-whole-file` is given,
 * so it is forced here, and the delta algorithm runs as it would over a network.
 *
 *   npx tsx bench/replication.ts      (BENCH_MIB=200, BENCH_REPEAT=5 runs of (d) and (e); BENCH_WRITE=0 skips the doc)
 *
 * Writes docs/BENCH-replication.md.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
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
import { checkGenerationDir } from '../apps/agent/src/replication/verify.js';

const ROOT = resolve(import.meta.dirname, '..');
const MIB = 1024 * 1024;
const TOTAL_MIB = Number(process.env['BENCH_MIB'] ?? 200);
const TOKEN = 'b'.repeat(64);
const ROW = 1000;
const REPEAT = Number(process.env['BENCH_REPEAT'] ?? 5);
const KEPT = '<!-- bench/replication.ts rewrites the doc above this line and keeps what follows -->';

function rsyncVersion(): string | null {
  try {
    return (
      (execFileSync('rsync', ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? '').replace(/\s+/g, ' ') || null
    );
  } catch {
    return null;
  }
}

/** rsync of one generation folder onto the copy of the previous one; protocol bytes both ways. */
function rsync(from: string, to: string): { bytes: number; ms: number } {
  const t0 = process.hrtime.bigint();
  const out = execFileSync(
    'rsync',
    ['-a', '--delete', '--inplace', '--no-whole-file', '--stats', `${from}/`, `${to}/`],
    { encoding: 'utf8' },
  );
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const num = (label: string) => Number((new RegExp(`${label}: ([0-9,]+)`).exec(out)?.[1] ?? 'NaN').replace(/,/g, ''));
  return { bytes: num('Total bytes sent') + num('Total bytes received'), ms };
}

interface Row {
  readonly name: string;
  readonly hqBytes: number;
  readonly hqBody: number;
  readonly hqMs: number;
  /** CPU time of the process (sender and receiver both) during the push: less bent by a busy machine than the wall time. */
  readonly cpuMs: number;
  readonly snapMs: number;
  readonly rsync: { bytes: number; ms: number } | null;
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), 'hq-bench-rep-'));
  const rsyncSeen = rsyncVersion();
  try {
    const state = join(base, 'state');
    mkdirSync(join(state, 'db'), { recursive: true });
    mkdirSync(join(state, 'files'), { recursive: true });
    const dbPath = join(state, 'db', 'ledger.db');
    const db = new Database(dbPath);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE rows (id INTEGER PRIMARY KEY, payload BLOB)');
    const ins = db.prepare('INSERT INTO rows (payload) VALUES (?)');
    // ~1 KiB rows of random bytes (incompressible): four to a 4 KiB page, no overflow pages.
    const insert = db.transaction((n: number) => {
      for (let i = 0; i < n; i++) ins.run(randomBytes(ROW));
    });
    insert(Math.floor((TOTAL_MIB * MIB) / 1030));
    const checkpoint = () => db.pragma('wal_checkpoint(TRUNCATE)');
    checkpoint();
    for (let i = 0; i < 8; i++)
      writeFileSync(join(state, 'files', `notes-${i}.txt`), `${randomBytes(2048).toString('base64')}\n`);
    writeFileSync(join(state, 'files', 'small.json'), JSON.stringify({ counter: 1 }));
    const cfg = resolveReplication(
      validateReplication({
        stateDir: state,
        standbyDir: join(base, 'standby-self'),
        outboxDir: join(base, 'outbox'),
        smallBytes: 1024 * MIB,
        plan: { dirs: [{ path: 'db' }, { path: 'files' }] },
      }),
      base,
    );
    const standbyDir = join(base, 'standby-b');
    // The standby has seen the generation the holder pushes from (below: 7).
    const receiver = await StandbyReceiver.open({ standbyDir, keep: cfg.keep, knownGeneration: () => 7 });
    const app = Fastify({ logger: false, bodyLimit: 64 * 1024, requestTimeout: 60_000, connectionTimeout: 60_000 });
    await app.register(replicationPeerRoutes, { receiver, verifyPeer: (h) => h === `Bearer ${TOKEN}` });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    // Bytes on the standby's sockets, both directions, headers included.
    const live = new Set<Socket>();
    let closedBytes = 0;
    app.server.on('connection', (s: Socket) => {
      live.add(s);
      s.on('close', () => {
        live.delete(s);
        closedBytes += s.bytesRead + s.bytesWritten;
      });
    });
    const wire = () => closedBytes + [...live].reduce((n, s) => n + s.bytesRead + s.bytesWritten, 0);
    const rsyncDest = join(base, 'rsync-standby');
    mkdirSync(rsyncDest);
    const lease = { generation: 7, holder: 'mbp' };
    let clock = Date.now();
    const rows: Row[] = [];
    const step = async (name: string, change: () => void): Promise<void> => {
      // rsync's quick check compares whole-second mtimes: a file rewritten within the second of the
      // previous copy, at the same size, would look unchanged to it. Start each change on a new second.
      await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 10));
      change();
      clock += 1000;
      const t = clock;
      const s0 = Date.now();
      // stableMs 0: the bench changes files well apart; reuse need not wait the 2 s tick.
      const g = await buildSnapshot({ cfg, tier: 'core', host: 'mbp', lease, now: () => t, stableMs: 0 });
      const snapMs = Date.now() - s0;
      const w0 = wire();
      const p0 = process.hrtime.bigint();
      const c0 = process.cpuUsage();
      const p = await pushGeneration({
        dir: g.dir,
        baseUrl: url,
        token: TOKEN,
        timeoutSeconds: 120,
        chunkBytes: cfg.chunkBytes,
      });
      const hqMs = Number(process.hrtime.bigint() - p0) / 1e6;
      const c1 = process.cpuUsage(c0);
      const cpuMs = (c1.user + c1.system) / 1000;
      if (!p.ok) throw new Error(`push ${name} failed: ${p.message}`);
      const hqBytes = wire() - w0;
      rows.push({
        name,
        hqBytes,
        hqBody: p.sentBytes,
        hqMs,
        cpuMs,
        snapMs,
        rsync: rsyncSeen === null ? null : rsync(g.dir, rsyncDest),
      });
      process.stdout.write(
        `${name}: hq ${hqBytes} B ${hqMs.toFixed(0)} ms; rsync ${rows.at(-1)?.rsync?.bytes ?? '-'} B\n`,
      );
    };
    await step('first push (everything)', () => undefined);
    await step('(a) one row updated', () => {
      db.prepare('UPDATE rows SET payload = ? WHERE id = ?').run(randomBytes(ROW), 12345);
      checkpoint();
    });
    await step('(b) 1 MiB of rows appended', () => {
      insert(1024);
      checkpoint();
    });
    await step('(c) 2 % of rows deleted, then VACUUM', () => {
      db.exec('DELETE FROM rows WHERE id % 50 = 0');
      db.exec('VACUUM');
      checkpoint();
    });
    // (d) and (e) are quick and the machine is shared: each runs REPEAT times, the median is kept.
    const median = (name: string, rs: Row[]): Row => {
      const mid = <T>(xs: T[], key: (x: T) => number) =>
        [...xs].sort((a, b) => key(a) - key(b))[Math.floor(xs.length / 2)] as T;
      const m = mid(rs, (r) => r.hqMs);
      return {
        ...m,
        name: `${name} (median of ${rs.length})`,
        rsync: rs[0]?.rsync === null ? null : mid(rs, (r) => r.rsync?.ms ?? 0).rsync,
      };
    };
    for (const [name, change] of [
      [
        '(d) one small file changed',
        (i: number) => writeFileSync(join(state, 'files', 'small.json'), JSON.stringify({ counter: 2 + i })),
      ],
      ['(e) nothing changed', () => undefined],
    ] as const) {
      const from = rows.length;
      for (let i = 0; i < REPEAT; i++) await step(name, () => change(i));
      rows.push(median(name, rows.splice(from)));
    }
    db.close();
    await app.close();
    const status = await receiver.status();
    const latest = status.tiers.find((t) => t.tier === 'core')?.latest as string;
    const v0 = process.hrtime.bigint();
    const check = await checkGenerationDir(join(standbyDir, 'core', latest), { generation: latest, tier: 'core' });
    const verifyMs = Number(process.hrtime.bigint() - v0) / 1e6;
    if (!check.ok) throw new Error(`standby copy does not verify: ${check.reason}`);
    const stateBytes = check.files.reduce((n, f) => n + f.bytes, 0);
    const to = join(base, 'promoted');
    const pr0 = Date.now();
    const summary = await promote({ standbyDir, to, tiers: ['core'] });
    const promoteMs = Date.now() - pr0;

    const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
    const ratio = (r: Row) => (r.rsync === null ? 'n/a' : `${(r.hqBytes / r.rsync.bytes).toFixed(2)}`);
    const table = [
      '| case | hq bytes (wire) | hq request bodies | hq push time | hq push CPU | snapshot build | rsync bytes | rsync time | hq / rsync bytes |',
      '|---|---|---|---|---|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.name} | ${kb(r.hqBytes)} | ${kb(r.hqBody)} | ${r.hqMs.toFixed(0)} ms | ${r.cpuMs.toFixed(0)} ms | ${r.snapMs} ms | ${r.rsync === null ? 'n/a' : kb(r.rsync.bytes)} | ${r.rsync === null ? 'n/a' : `${r.rsync.ms.toFixed(0)} ms`} | ${ratio(r)} |`,
      ),
    ].join('\n');
    const extra = [
      `state: ${(stateBytes / MIB).toFixed(1)} MiB in ${check.files.length} files (one SQLite database, ${check.files.length - 1} small files)`,
      `receiver verification of the whole generation (every sha256): ${verifyMs.toFixed(0)} ms = ${(verifyMs / (stateBytes / MIB)).toFixed(2)} ms per MiB`,
      `promote (verify every checksum, copy hashed + fsync): ${(promoteMs / 1000).toFixed(2)} s for ${summary.files} files, ${(summary.bytes / MIB).toFixed(1)} MiB`,
    ];
    process.stdout.write(`${table}\n\n${extra.map((l) => `- ${l}`).join('\n')}\n`);
    if (process.env['BENCH_WRITE'] !== '0') {
      const doc = `# Replication benchmark

Command: \`npx tsx bench/replication.ts\` (BENCH_MIB=${TOTAL_MIB}). One real peer server on
127.0.0.1 (Fastify + \`replicationPeerRoutes\`), the real snapshot builder, push client, receiver
and promote; beside it ${rsyncSeen ?? 'rsync (not installed: its columns are n/a)'} run as
\`rsync -a --delete --inplace --no-whole-file --stats GEN/ COPY/\` from the same generation
folder onto a copy of the previous one (a local path: rsync copies whole files locally unless
\`--no-whole-file\` is given, so it is forced and the delta algorithm runs as over a network).
${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), shared; Node ${process.version}; measured ${new Date().toISOString().slice(0, 16)}Z.

hq bytes are counted on the standby's sockets: HTTP headers and bodies, both directions. rsync
bytes are its "Total bytes sent" + "Total bytes received" (its protocol, both directions).

${table}

${extra.map((l) => `- ${l}`).join('\n')}
`;
      // What follows the marker in the doc (the figures before chunking, notes) is kept as written.
      const path = join(ROOT, 'docs/BENCH-replication.md');
      const old = existsSync(path) ? readFileSync(path, 'utf8') : '';
      const kept = old.indexOf(KEPT);
      writeFileSync(path, kept < 0 ? doc : `${doc}\n${old.slice(kept)}`);
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
