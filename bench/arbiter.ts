/**
 * `npm run bench`: the arbiter's hot paths on loopback, beside a bare Fastify + better-sqlite3
 * ceiling doing the same row read and synchronous=FULL update. Bounded: every scenario runs
 * BENCH_SECONDS (default 5) with BENCH_CONNECTIONS (default 16) closed-loop clients, then the
 * daemons are stopped. Prints a table and writes it to docs/BENCH.md (BENCH_WRITE=0 to skip).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const ROOT = resolve(import.meta.dirname, '..');
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 16);

interface Daemon {
  proc: ChildProcess;
  base: string;
}

function start(args: string[], ready: string): Promise<Daemon> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${args[0]} did not start`)), 60_000);
    proc.on('exit', (code) => rej(new Error(`${args[0]} exited ${code}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string; port?: number };
        if (rec.msg === ready && typeof rec.port === 'number') {
          clearTimeout(timer);
          res({ proc, base: `http://127.0.0.1:${rec.port}` });
        }
      } catch {
        // not JSON
      }
    });
  });
}

function stop(d: Daemon): Promise<void> {
  return new Promise((res) => {
    if (d.proc.exitCode !== null) return res();
    d.proc.removeAllListeners('exit');
    d.proc.on('exit', () => res());
    d.proc.kill('SIGTERM');
  });
}

interface Result {
  name: string;
  requests: number;
  statuses: Map<number, number>;
  rps: number;
  p50: number;
  p99: number;
}

type Req = { method: 'GET' | 'POST'; path: string; headers?: Record<string, string>; body?: string };

/** Closed loop: CONNECTIONS workers, each sending the next request when the last answer is read. */
async function load(name: string, base: string, next: (worker: number) => Req, onBody?: (worker: number, status: number, etag: string | undefined) => void): Promise<Result> {
  const pool = new Pool(base, { connections: CONNECTIONS, pipelining: 1 });
  const lat: number[] = [];
  const statuses = new Map<number, number>();
  const end = performance.now() + SECONDS * 1000;
  const worker = async (w: number) => {
    while (performance.now() < end) {
      const r = next(w);
      const t0 = performance.now();
      const res = await pool.request({ origin: base, method: r.method, path: r.path, headers: r.headers, body: r.body });
      const text = await res.body.text();
      lat.push(performance.now() - t0);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      void text;
      const etag = res.headers['etag'];
      onBody?.(w, res.statusCode, typeof etag === 'string' ? etag : undefined);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => worker(w)));
  const elapsed = (performance.now() - t0) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { name, requests: lat.length, statuses, rps: lat.length / elapsed, p50: q(0.5), p99: q(0.99) };
}

async function main(): Promise<void> {
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter')], { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'hq-bench-'));
  const config = join(dir, 'arbiter.json');
  // Checks and heartbeat schedule far apart: the bench measures requests, not the check loop.
  writeFileSync(config, JSON.stringify({ dataDir: join(dir, 'var'), listen: { host: '127.0.0.1', port: 0 }, tailscaleBin: '' }));
  const cli = join(ROOT, 'apps/arbiter/dist/cli.js');
  const issue = (m: string, scope: string) => execFileSync(process.execPath, [cli, 'token', 'issue', m, '--scope', scope, '--config', config], { encoding: 'utf8' }).trim();
  const mbp = issue('mbp', 'member');
  const nodeb = issue('node-b', 'member');
  const arb = await start([cli, 'serve', '--config', config], 'hq-arbiter listening');
  const ceiling = await start([join(ROOT, 'bench/ceiling.mjs'), join(dir, 'ceiling')], 'ceiling listening');
  const admin = readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim();
  const json = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });

  // Past the start waits (S2.3/S2.4): both candidates report after 2 × requestTimeout (10 s by default).
  process.stderr.write('waiting 10.5 s for the start waits to pass…\n');
  await new Promise((r) => setTimeout(r, 10_500));
  for (const [host, token] of [['mbp', mbp], ['node-b', nodeb]] as const) {
    const p = new Pool(arb.base);
    await (await p.request({ method: 'POST', path: '/v1/heartbeat', headers: json(token), body: JSON.stringify({ host, seenGeneration: 0 }) })).body.text();
    await p.close();
  }
  const p = new Pool(arb.base);
  const acq = JSON.parse(await (await p.request({ method: 'POST', path: '/v1/lease/acquire', headers: json(mbp), body: '{"host":"mbp"}' })).body.text()) as { lease: { generation: number; revision: number } };
  await p.close();
  const generation = acq.lease.generation;

  const results: Result[] = [];
  results.push(await load('ceiling: GET row', ceiling.base, () => ({ method: 'GET', path: '/v1/lease' })));
  results.push(await load('arbiter: GET /v1/lease', arb.base, () => ({ method: 'GET', path: '/v1/lease' })));
  results.push(await load('ceiling: FULL update', ceiling.base, () => ({ method: 'POST', path: '/v1/lease/renew', headers: { 'content-type': 'application/json' }, body: '{}' })));
  const hb = JSON.stringify({ host: 'mbp', generation, seenGeneration: generation, heartbeatSeconds: 600 });
  results.push(await load('arbiter: heartbeat (durable renew)', arb.base, () => ({ method: 'POST', path: '/v1/heartbeat', headers: json(mbp), body: hb })));
  const renew = JSON.stringify({ host: 'mbp', generation });
  results.push(await load('arbiter: renew', arb.base, () => ({ method: 'POST', path: '/v1/lease/renew', headers: json(mbp), body: renew })));
  // Contention: half the clients renew as mbp, half try to acquire as node-b (409 held).
  const acquire = JSON.stringify({ host: 'node-b', seenGeneration: generation });
  results.push(
    await load('arbiter: renew ∥ acquire (contention)', arb.base, (w) =>
      w % 2 === 0 ? { method: 'POST', path: '/v1/lease/renew', headers: json(mbp), body: renew } : { method: 'POST', path: '/v1/lease/acquire', headers: json(nodeb), body: acquire },
    ),
  );
  // CAS: every client renews with If-Match of the last revision it saw; losers get 412.
  const seen = new Map<number, number>();
  results.push(
    await load(
      'arbiter: renew with If-Match (CAS race)',
      arb.base,
      (w) => ({ method: 'POST', path: '/v1/lease/renew', headers: { ...json(admin), 'if-match': `"${seen.get(w) ?? 0}"` }, body: renew }),
      (w, _status, etag) => {
        // 200 and 412 both carry the current revision as the ETag.
        if (etag !== undefined) seen.set(w, Number(etag.replaceAll('"', '')));
      },
    ),
  );
  await stop(arb);
  await stop(ceiling);
  rmSync(dir, { recursive: true, force: true });

  const readCeil = results[0]!.rps;
  const writeCeil = results[2]!.rps;
  const rows = results.map((r) => {
    const ceil = r.name.startsWith('ceiling') ? null : r.name.includes('GET') ? readCeil : writeCeil;
    const st = [...r.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ');
    return `| ${r.name} | ${Math.round(r.rps)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${ceil === null ? '—' : (r.rps / ceil).toFixed(2)} | ${st} |`;
  });
  const table = [
    `| scenario | req/s | p50 ms | p99 ms | × ceiling | statuses |`,
    `|---|---:|---:|---:|---:|---|`,
    ...rows,
  ].join('\n');
  const load1 = loadavg()[0]?.toFixed(1) ?? '?';
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, ${SECONDS} s per scenario, ${CONNECTIONS} connections, load average ${load1} at the end`;
  process.stdout.write(`${machine}\n\n${table}\n`);
  if (process.env['BENCH_WRITE'] !== '0') {
    const doc = `# Arbiter benchmark

Command: \`npm run bench\` (\`BENCH_SECONDS\`, \`BENCH_CONNECTIONS\` to change the run; \`BENCH_WRITE=0\` to not rewrite this file).
It builds the arbiter, starts it as a child (\`hq-arbiter serve\` on 127.0.0.1, a fresh \`var\` in a temp dir,
pino JSON logs on its stdout discarded by the pipe reader), starts \`bench/ceiling.mjs\` — bare Fastify +
better-sqlite3, the same row read and a \`synchronous=FULL\` CAS update, nothing else — and drives both with
undici closed-loop clients on loopback. The "× ceiling" column compares reads with the ceiling's read and
writes with the ceiling's update.

Run: ${new Date().toISOString()} — ${machine}.

${table}

A load average well above the number of CPUs means other work shared the machine during the run: the
numbers are then noise-dominated (the ceiling may even come out slower than the arbiter) and only the
statuses column is meaningful; re-run on an idle machine to compare with the ceiling (targets: reads and
durable renews ≥ 0.8 × the ceiling).

Notes: every arbiter write is one immediate transaction with an fsync of the WAL (\`synchronous=FULL\`), so
durable renewals are bounded by the disk's fsync rate exactly as the ceiling's update is. The heartbeat
writes the lease row, the observer row and one event row in that transaction; the arbiter also
authenticates every request against the token table, validates the body with ajv and serializes a
response schema. "renew ∥ acquire" mixes writes (renew) and refusals that write only their event row
(acquire → 409 held). In the If-Match race, clients that lost the compare-and-swap get 412 and retry
with the next revision.
`;
    writeFileSync(join(ROOT, 'docs/BENCH.md'), doc);
  }
}

await main();
