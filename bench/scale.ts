/**
 * `npm run bench` (scale): one arbiter (`hq-arbiter serve`, a child on 127.0.0.1, a fresh data
 * dir) carrying a fleet registry of 10,000 resources heartbeating every 30 s and 1,000 port
 * leases renewed every 30 s, while a separate client (a child process of this same file, with
 * its own connections and event loop) samples `GET /v1/lease` at a steady rate.
 *
 *  1. register the 10,000 resources (instances of 10 machines, each with its own member token),
 *     closed loop, 16 in flight — timed;
 *  2. allocate the 1,000 port leases (test band 40000–41999), closed loop, 16 in flight — timed;
 *  3. for BENCH_SCALE_SECONDS (default 60): open loop, every resource heartbeats once per 30 s
 *     (10,000 / 30 s ≈ 333/s spread evenly), every lease is renewed once per 30 s (≈ 33/s), and
 *     the sampler sends `GET /v1/lease` 50 times a second;
 *  4. p50/p99 of each, the statuses (every heartbeat must be 200), and the registry's counts.
 *
 * BENCH_SCALE_PROF=DIR runs the arbiter under `--cpu-prof` and leaves the .cpuprofile in DIR.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';
import {
  ROOT,
  machineLine,
  openLoop,
  quantile,
  startNode,
  statusText,
  stopProc,
  table,
  writeSection,
  type OpenLoopResult,
  type Req,
} from './lib.js';

const SECONDS = Number(process.env['BENCH_SCALE_SECONDS'] ?? 60);
const RESOURCES = 10_000;
const LEASES = 1_000;
const MACHINES = 10;
const PERIOD_S = 30;
const SAMPLE_RATE = 50;
/** Seconds of the same load before the measured window (connections opened, routes warm), not counted. */
const WARMUP_S = 3;
const TTL_MS = 120_000;
const BAND = { from: 40000, to: 41999 };
const GOAL_P99_MS = 50;
const CLI = join(ROOT, 'apps/arbiter/dist/cli.js');

const machineName = (m: number): string => `m${String(m).padStart(2, '0')}`;
const resourceId = (i: number): string => `${machineName(i % MACHINES)}-svc-${Math.floor(i / MACHINES)}`;

/** Runs `count` requests with `concurrency` in flight; returns the statuses, the seconds taken and each answer. */
async function closedBatch(
  base: string,
  count: number,
  concurrency: number,
  next: (i: number) => Req,
  onAnswer?: (i: number, status: number, body: string) => void,
): Promise<{ seconds: number; statuses: Map<number, number>; p50: number; p99: number }> {
  const pool = new Pool(base, { connections: concurrency, pipelining: 1 });
  const statuses = new Map<number, number>();
  const lat: number[] = [];
  let n = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = n++; i < count; i = n++) {
        const r = next(i);
        const s = performance.now();
        const res = await pool.request({
          origin: base,
          method: r.method,
          path: r.path,
          headers: r.headers,
          body: r.body,
        });
        const text = await res.body.text();
        lat.push(performance.now() - s);
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        onAnswer?.(i, res.statusCode, text);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  return { seconds, statuses, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) };
}

/**
 * The sampler's side: `tsx bench/scale.ts --sample BASE SECONDS RATE WARMUP` prints "ready" once
 * loaded, waits for "go" on stdin, sends WARMUP seconds of requests it does not count, then
 * prints one JSON result line.
 */
async function sampler(base: string, seconds: number, rate: number, warmup: number): Promise<void> {
  process.stdout.write('ready\n');
  await new Promise<void>((res) => createInterface({ input: process.stdin }).once('line', () => res()));
  const get = (): Req => ({ method: 'GET', path: '/v1/lease' });
  await openLoop('warm-up', base, get, { rate, seconds: warmup, connections: 8 });
  const r = await openLoop('GET /v1/lease', base, get, { rate, seconds, connections: 8 });
  process.stdout.write(`${JSON.stringify({ ...r, statuses: [...r.statuses] })}\n`);
}

interface Sampler {
  /** Resolves once the child is loaded (tsx compiles this file first: CPU better not spent during the load). */
  readonly ready: Promise<void>;
  go(): void;
  /** SIGKILL by PID if it is still running (errors on the way). */
  stop(): void;
  readonly result: Promise<OpenLoopResult>;
}

function startSampler(base: string, seconds: number, rate: number, warmup: number): Sampler {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', import.meta.filename, '--sample', base, String(seconds), String(rate), String(warmup)],
    {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let ready!: () => void;
  const readyP = new Promise<void>((res) => (ready = res));
  const result = new Promise<OpenLoopResult>((res, rej) => {
    let out: OpenLoopResult | null = null;
    const timer = setTimeout(() => child.kill('SIGKILL'), (warmup + seconds + 120) * 1000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'ready') return ready();
      try {
        const o = JSON.parse(line) as OpenLoopResult & { statuses: [number, number][] };
        out = { ...o, statuses: new Map(o.statuses) };
      } catch {
        // not the result line
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      ready();
      if (out !== null) res(out);
      else rej(new Error(`the sampler exited ${code} without a result`));
    });
  });
  // Awaited only on the happy path; on an error elsewhere the kill in `stop` must not become an unhandled rejection.
  result.catch(() => undefined);
  return {
    ready: readyP,
    go: () => child.stdin!.end('go\n'),
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    result,
  };
}

/** `hq_http_request_duration_seconds` bucket counts by route (method and path, 200s only), from /metrics. */
async function httpBuckets(base: string): Promise<Map<string, Map<number, number>>> {
  const pool = new Pool(base);
  const text = await (await pool.request({ method: 'GET', path: '/metrics' })).body.text();
  await pool.close();
  const out = new Map<string, Map<number, number>>();
  for (const m of text.matchAll(/^hq_http_request_duration_seconds_bucket\{([^}]*)\} (\d+)$/gm)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (labels['status'] !== '200') continue;
    const key = `${labels['method']} ${labels['route']}`;
    const le = labels['le'] === '+Inf' ? Infinity : Number(labels['le']);
    const b = out.get(key) ?? new Map<number, number>();
    b.set(le, (b.get(le) ?? 0) + Number(m[2]));
    out.set(key, b);
  }
  return out;
}

/**
 * The arbiter's own view of a route over the window (bucket counts after − before): the upper
 * bound, in ms, of the histogram bucket holding the q-quantile (onRequest → onResponse, so it
 * leaves out the time a request waits in the socket before the loop reads it).
 */
function serverQuantile(
  before: Map<string, Map<number, number>>,
  after: Map<string, Map<number, number>>,
  route: string,
  q: number,
): string {
  const a = after.get(route);
  if (a === undefined) return '—';
  const b = before.get(route) ?? new Map<number, number>();
  const les = [...a.keys()].sort((x, y) => x - y);
  const total = (a.get(Infinity) ?? 0) - (b.get(Infinity) ?? 0);
  if (total <= 0) return '—';
  for (const le of les) {
    if ((a.get(le) ?? 0) - (b.get(le) ?? 0) >= q * total)
      return le === Infinity ? `> ${les[les.length - 2]! * 1000}` : `≤ ${le * 1000}`;
  }
  return '—';
}

async function main(): Promise<void> {
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter')], {
    stdio: 'inherit',
  });
  const dir = mkdtempSync(join(tmpdir(), 'hq-scale-'));
  let arb: Awaited<ReturnType<typeof startNode>> | null = null;
  let sampler: Sampler | null = null;
  try {
    const config = join(dir, 'arbiter.json');
    // The registry's machines are the candidates: a member token is issued for a candidate only.
    writeFileSync(
      config,
      JSON.stringify({
        dataDir: join(dir, 'var'),
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        portBands: { test: BAND },
        candidates: Array.from({ length: MACHINES }, (_, m) => machineName(m)),
      }),
    );
    const tokens = Array.from({ length: MACHINES }, (_, m) =>
      execFileSync(process.execPath, [CLI, 'token', 'issue', machineName(m), '--scope', 'member', '--config', config], {
        encoding: 'utf8',
      }).trim(),
    );
    const headers = (m: number): Record<string, string> => ({
      authorization: `Bearer ${tokens[m]}`,
      'content-type': 'application/json',
    });
    const prof = process.env['BENCH_SCALE_PROF'];
    const nodeArgs = prof !== undefined && prof !== '' ? ['--cpu-prof', '--cpu-prof-dir', prof] : [];
    arb = await startNode([...nodeArgs, CLI, 'serve', '--config', config], 'hq-arbiter listening');
    const base = arb.base;
    sampler = startSampler(base, SECONDS, SAMPLE_RATE, WARMUP_S);
    await sampler.ready;

    // 1. registration
    const reg = await closedBatch(base, RESOURCES, 16, (i) => {
      const m = i % MACHINES;
      const body = {
        id: resourceId(i),
        name: `service ${i}`,
        kind: 'instance',
        machine: machineName(m),
        attrs: { service: 'svc', n: Math.floor(i / MACHINES), loadAvg: [0.5, 0.4, 0.3] },
        observedAt: Date.now(),
        ttlMs: TTL_MS,
      };
      return { method: 'POST', path: '/v1/resources/register', headers: headers(m), body: JSON.stringify(body) };
    });
    process.stderr.write(`registered ${RESOURCES} in ${reg.seconds.toFixed(1)} s (${statusText(reg.statuses)})\n`);

    // 2. port leases
    const leases: { port: number; leaseId: string; machine: number }[] = [];
    const alloc = await closedBatch(
      base,
      LEASES,
      16,
      (j) => ({
        method: 'POST',
        path: '/v1/leases/port',
        headers: headers(j % MACHINES),
        body: JSON.stringify({ machine: machineName(j % MACHINES), purpose: `bench-${j}`, ttlMs: TTL_MS }),
      }),
      (j, status, text) => {
        if (status === 200) {
          const b = JSON.parse(text) as { port: number; leaseId: string };
          leases.push({ port: b.port, leaseId: b.leaseId, machine: j % MACHINES });
        }
      },
    );
    process.stderr.write(
      `leased ${leases.length} ports in ${alloc.seconds.toFixed(1)} s (${statusText(alloc.statuses)})\n`,
    );
    if (leases.length === 0) throw new Error('no port lease was granted');

    // 3. the load, open loop, with the sampler as a separate process
    process.stderr.write(
      `load for ${SECONDS} s: ${(RESOURCES / PERIOD_S).toFixed(0)} heartbeats/s, ${(leases.length / PERIOD_S).toFixed(0)} lease renewals/s, ${SAMPLE_RATE} GET /v1/lease/s…\n`,
    );
    // BENCH_SCALE_DEBUG=1: the slowest answer of each second, per stream, on stderr afterwards.
    const debug = process.env['BENCH_SCALE_DEBUG'] === '1';
    const slowest = new Map<string, number[]>();
    const track =
      (name: string) =>
      (sentAt: number, ms: number): void => {
        if (!debug) return;
        const a = slowest.get(name) ?? [];
        const sec = Math.floor(sentAt / 1000);
        a[sec] = Math.max(a[sec] ?? 0, ms);
        slowest.set(name, a);
      };
    sampler.go();
    // The schedule runs on through the warm-up into the measured window: resource i is due at
    // (i mod 10,000) × 3 ms of each 30 s period, whichever window it falls in.
    const heartbeat =
      (offset: number) =>
      (i: number): Req => {
        const r = (i + offset) % RESOURCES;
        const m = r % MACHINES;
        return {
          method: 'POST',
          path: `/v1/resources/${resourceId(r)}/heartbeat`,
          headers: headers(m),
          body: JSON.stringify({ attrs: { service: 'svc', n: Math.floor(r / MACHINES), loadAvg: [0.5, 0.4, 0.3] } }),
        };
      };
    const renewal =
      (offset: number) =>
      (i: number): Req => {
        const l = leases[(i + offset) % leases.length]!;
        return {
          method: 'POST',
          path: `/v1/leases/port/${l.port}/heartbeat`,
          headers: { authorization: `Bearer ${tokens[l.machine]}`, 'x-port-lease-id': l.leaseId },
        };
      };
    const hbRate = RESOURCES / PERIOD_S;
    const renewRate = leases.length / PERIOD_S;
    const [hbWarm, renewWarm] = await Promise.all([
      openLoop('warm-up', base, heartbeat(0), { rate: hbRate, seconds: WARMUP_S, connections: 64 }),
      openLoop('warm-up', base, renewal(0), { rate: renewRate, seconds: WARMUP_S, connections: 16 }),
    ]);
    const warmNon200 = [...hbWarm.statuses, ...renewWarm.statuses]
      .filter(([st]) => st !== 200)
      .reduce((a, [, n]) => a + n, 0);
    const before = await httpBuckets(base);
    const [hb, renew] = await Promise.all([
      openLoop('resource heartbeat', base, heartbeat(Math.floor(WARMUP_S * hbRate)), {
        rate: hbRate,
        seconds: SECONDS,
        connections: 64,
        onLatency: track('heartbeat'),
      }),
      openLoop('port lease renewal', base, renewal(Math.floor(WARMUP_S * renewRate)), {
        rate: renewRate,
        seconds: SECONDS,
        connections: 16,
        onLatency: track('renewal'),
      }),
    ]);
    const lease = await sampler.result;
    const after = await httpBuckets(base);
    for (const [name, a] of slowest)
      process.stderr.write(`slowest ${name} per second (ms): ${Array.from(a, (x) => Math.round(x ?? 0)).join(' ')}\n`);

    // 4. the registry afterwards
    const pool = new Pool(base);
    const t0 = performance.now();
    const list = JSON.parse(await (await pool.request({ method: 'GET', path: '/v1/resources' })).body.text()) as {
      resources: unknown[];
    };
    const listMs = performance.now() - t0;
    const ports = JSON.parse(await (await pool.request({ method: 'GET', path: '/v1/leases/port' })).body.text()) as {
      leases: unknown[];
    };
    await pool.close();

    const f = (n: number): string => n.toFixed(2);
    const routes = ['POST /v1/resources/:id/heartbeat', 'POST /v1/leases/port/:port/heartbeat', 'GET /v1/lease'];
    const rows = [hb, renew, lease].map((r, k) => [
      r.name,
      Math.round(r.rps),
      f(r.p50),
      f(r.p99),
      serverQuantile(before, after, routes[k]!, 0.5),
      serverQuantile(before, after, routes[k]!, 0.99),
      f(r.lagP99),
      statusText(r.statuses),
    ]);
    const loadTable = table(
      [
        'during the load',
        'req/s',
        'p50 ms',
        'p99 ms',
        'arbiter p50 ms',
        'arbiter p99 ms',
        'generator lag p99 ms',
        'statuses',
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows,
    );
    const setupTable = table(
      ['setup (closed loop, 16 in flight)', 'count', 'seconds', 'per second', 'p50 ms', 'p99 ms', 'statuses'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'l'],
      [
        [
          'register resources',
          RESOURCES,
          f(reg.seconds),
          Math.round(RESOURCES / reg.seconds),
          f(reg.p50),
          f(reg.p99),
          statusText(reg.statuses),
        ],
        [
          'allocate port leases',
          LEASES,
          f(alloc.seconds),
          Math.round(LEASES / alloc.seconds),
          f(alloc.p50),
          f(alloc.p99),
          statusText(alloc.statuses),
        ],
      ],
    );
    const hbAll200 = hb.statuses.size === 1 && hb.statuses.has(200);
    const renewAll200 = renew.statuses.size === 1 && renew.statuses.has(200);
    const leaseAll200 = lease.statuses.size === 1 && lease.statuses.has(200);
    const mark = (ok: boolean): string => (ok ? '**met**' : '**missed**');
    const goals = [
      `- Every resource heartbeat answered 200 — ${mark(hbAll200)} (${statusText(hb.statuses)}); every lease renewal 200 — ${mark(renewAll200)} (${statusText(renew.statuses)}); every \`GET /v1/lease\` 200 — ${mark(leaseAll200)}.`,
      `- Resource heartbeat p99 ≤ ${GOAL_P99_MS} ms — ${mark(hb.p99 <= GOAL_P99_MS)} (${f(hb.p99)} ms).`,
      `- \`GET /v1/lease\` p99 ≤ ${GOAL_P99_MS} ms under the load — ${mark(lease.p99 <= GOAL_P99_MS)} (${f(lease.p99)} ms).`,
      `- Afterwards the registry lists ${list.resources.length} live resources (\`GET /v1/resources\`, ${listMs.toFixed(0)} ms) and ${ports.leases.length} live port leases.`,
    ].join('\n');
    const machine = machineLine();
    process.stdout.write(`${machine}\n\n${setupTable}\n\n${loadTable}\n\n${goals}\n`);
    writeSection(
      'scale',
      `## Scale: 10,000 resources and 1,000 port leases on one arbiter

Command: \`npx tsx bench/scale.ts\` (part of \`npm run bench\`; \`BENCH_SCALE_SECONDS\`, default 60).
One \`hq-arbiter serve\` child on 127.0.0.1 (fresh data dir, \`synchronous=FULL\`, test band ${BAND.from}–${BAND.to}). ${RESOURCES.toLocaleString('en')} resources
(instances of ${MACHINES} machines, each machine with its own member token, TTL ${TTL_MS / 1000} s) are registered, ${LEASES.toLocaleString('en')} port leases
allocated (TTL ${TTL_MS / 1000} s), then for ${SECONDS} s an open-loop schedule sends every resource's heartbeat once per ${PERIOD_S} s
(${(RESOURCES / PERIOD_S).toFixed(0)}/s spread evenly, with attrs) and renews every lease once per ${PERIOD_S} s (${(LEASES / PERIOD_S).toFixed(0)}/s), while a separate client process sends
\`GET /v1/lease\` ${SAMPLE_RATE} times a second. The first ${WARMUP_S} s of that load are a warm-up, not counted (${warmNon200 === 0 ? 'all 200' : `${warmNon200} answers not 200`}). Latency is send → end of body; "generator lag" is how late the load generator sent
against its schedule (large values mean the client, not the arbiter, fell behind). "arbiter p50/p99" are read from the arbiter's
own \`hq_http_request_duration_seconds\` histogram over the window (the bucket bound holding the quantile; onRequest → onResponse,
so without the wait in the socket before the arbiter's loop reads the request, and without the sampler's share of the CPU).

Run: ${new Date().toISOString()} — ${machine}, ${SECONDS} s of load.

${setupTable}

${loadTable}

${goals}
`,
    );
  } finally {
    sampler?.stop();
    if (arb !== null) await stopProc(arb.proc);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--sample')
  await sampler(process.argv[3]!, Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6]));
else await main();
