/**
 * `npm run bench` (first part): the arbiter's hot paths on loopback, beside a bare Fastify +
 * better-sqlite3 ceiling doing the same row read and synchronous=FULL update. Bounded: every
 * scenario runs BENCH_SECONDS (default 5) with BENCH_CONNECTIONS (default 16) closed-loop clients,
 * then the daemons are stopped. Prints a table and writes its section of docs/BENCH.md
 * (BENCH_WRITE=0 to skip).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startArbiter, jsonHeaders as json } from './hq-arbiter.js';
import {
  CONNECTIONS,
  ROOT,
  SECONDS,
  load,
  machineLine,
  startNode,
  statusText,
  stopProc,
  writeSection,
  type Daemon,
  type Result,
} from './lib.js';

async function main(): Promise<void> {
  const hq = await startArbiter();
  const arb = hq.daemon;
  const ceilingDir = mkdtempSync(join(tmpdir(), 'hq-bench-ceiling-'));
  const { mbp, nodeb, admin } = hq.tokens;
  const generation = hq.generation;

  const results: Result[] = [];
  let ceiling: Daemon | null = null;
  try {
    ceiling = await startNode([join(ROOT, 'bench/ceiling.mjs'), join(ceilingDir, 'ceiling')], 'ceiling listening');
    results.push(await load('ceiling: GET row', ceiling.base, () => ({ method: 'GET', path: '/v1/lease' })));
    results.push(await load('arbiter: GET /v1/lease', arb.base, () => ({ method: 'GET', path: '/v1/lease' })));
    results.push(
      await load('ceiling: FULL update', ceiling.base, () => ({
        method: 'POST',
        path: '/v1/lease/renew',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })),
    );
    const hb = JSON.stringify({ host: 'mbp', generation, seenGeneration: generation, heartbeatSeconds: 600 });
    results.push(
      await load('arbiter: heartbeat (durable renew)', arb.base, () => ({
        method: 'POST',
        path: '/v1/heartbeat',
        headers: json(mbp),
        body: hb,
      })),
    );
    const renew = JSON.stringify({ host: 'mbp', generation });
    results.push(
      await load('arbiter: renew', arb.base, () => ({
        method: 'POST',
        path: '/v1/lease/renew',
        headers: json(mbp),
        body: renew,
      })),
    );
    // Contention: half the clients renew as mbp, half try to acquire as node-b (409 held).
    const acquire = JSON.stringify({ host: 'node-b', seenGeneration: generation });
    results.push(
      await load('arbiter: renew ∥ acquire (contention)', arb.base, (w) =>
        w % 2 === 0
          ? { method: 'POST', path: '/v1/lease/renew', headers: json(mbp), body: renew }
          : { method: 'POST', path: '/v1/lease/acquire', headers: json(nodeb), body: acquire },
      ),
    );
    // CAS: every client renews with If-Match of the last revision it saw; losers get 412.
    const seen = new Map<number, number>();
    results.push(
      await load(
        'arbiter: renew with If-Match (CAS race)',
        arb.base,
        (w) => ({
          method: 'POST',
          path: '/v1/lease/renew',
          headers: { ...json(admin), 'if-match': `"${seen.get(w) ?? 0}"` },
          body: renew,
        }),
        {
          onAnswer: (w, _status, etag) => {
            // 200 and 412 both carry the current revision as the ETag.
            if (etag !== undefined) seen.set(w, Number(etag.replaceAll('"', '')));
          },
        },
      ),
    );
  } finally {
    await hq.stop();
    if (ceiling !== null) await stopProc(ceiling.proc);
    rmSync(ceilingDir, { recursive: true, force: true });
  }

  const readCeil = results[0]!.rps;
  const writeCeil = results[2]!.rps;
  const rows = results.map((r) => {
    const ceil = r.name.startsWith('ceiling') ? null : r.name.includes('GET') ? readCeil : writeCeil;
    const st = statusText(r.statuses);
    return `| ${r.name} | ${Math.round(r.rps)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${ceil === null ? '—' : (r.rps / ceil).toFixed(2)} | ${st} |`;
  });
  const table = [
    `| scenario | req/s | p50 ms | p99 ms | × ceiling | statuses |`,
    `|---|---:|---:|---:|---:|---|`,
    ...rows,
  ].join('\n');
  const machine = machineLine(`, ${SECONDS} s per scenario, ${CONNECTIONS} connections`);
  process.stdout.write(`${machine}\n\n${table}\n`);
  writeSection(
    'arbiter',
    `## The arbiter beside its ceiling

Command: \`npm run bench\` (\`BENCH_SECONDS\`, \`BENCH_CONNECTIONS\` to change the run; \`BENCH_WRITE=0\` to not rewrite this file).
It builds the arbiter, starts it as a child (\`hq-arbiter serve\` on 127.0.0.1, a fresh \`var\` in a temp dir,
pino JSON logs on its stdout discarded by the pipe reader), starts \`bench/ceiling.mjs\` — bare Fastify +
better-sqlite3, the same row read and a \`synchronous=FULL\` CAS update, nothing else — and drives both with
undici closed-loop clients on loopback. The "× ceiling" column compares reads with the ceiling's read and
writes with the ceiling's update. Targets: reads and durable renews ≥ 0.8 × the ceiling.

Run: ${new Date().toISOString()} — ${machine}.

${table}
`,
  );
}

await main();
