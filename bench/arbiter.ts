/**
 * `npm run bench` (first part): the arbiter's hot paths on loopback, beside a bare Fastify +
 * better-sqlite3 ceiling doing the same row read and synchronous=FULL update. Bounded: every
 * scenario runs BENCH_SECONDS (default 5) with BENCH_CONNECTIONS (default 16) closed-loop clients,
 * then the daemons are stopped. Prints a table and writes its section of docs/BENCH.md
 * (BENCH_WRITE=0 to skip).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { CONNECTIONS, ROOT, SECONDS, load, machineLine, startNode, statusText, stopProc, writeSection, type Daemon, type Result } from './lib.js';

const start = startNode;
const stop = (d: Daemon): Promise<void> => stopProc(d.proc);

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
      { onAnswer: (w, _status, etag) => {
        // 200 and 412 both carry the current revision as the ETag.
        if (etag !== undefined) seen.set(w, Number(etag.replaceAll('"', '')));
      } },
    ),
  );
  await stop(arb);
  await stop(ceiling);
  rmSync(dir, { recursive: true, force: true });

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
