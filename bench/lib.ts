/**
 * What every bench shares: starting and stopping daemons it owns (by PID), one closed-loop
 * HTTP load generator (undici; the same for hq, the ceiling and etcd), percentiles, the machine
 * line, and writing a bench's section of docs/BENCH.md between its markers.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';
import { Cluster } from '../test/system/harness.js';
import { onPath, startEtcdCluster, type EtcdCluster } from '../test/etcd/members.js';

export const ROOT = resolve(import.meta.dirname, '..');
export const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
export const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 16);
export const BENCH_DOC = join(ROOT, 'docs/BENCH.md');

export interface Daemon {
  proc: ChildProcess;
  base: string;
}

/** Spawns `node args…` and resolves when a pino JSON line with msg === ready and a port appears. */
export function startNode(args: string[], ready: string, env: NodeJS.ProcessEnv = process.env): Promise<Daemon> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
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

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
export function stopProc(proc: ChildProcess, graceMs = 10_000): Promise<void> {
  return new Promise((res) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return res();
    proc.removeAllListeners('exit');
    const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    proc.on('exit', () => {
      clearTimeout(t);
      res();
    });
    proc.kill('SIGTERM');
  });
}

export interface Result {
  name: string;
  requests: number;
  statuses: Map<number, number>;
  rps: number;
  p50: number;
  p99: number;
}

export type Req = { method: 'GET' | 'POST' | 'PUT'; path: string; headers?: Record<string, string>; body?: string };

export interface LoadOptions {
  seconds?: number;
  connections?: number;
  /** a unix socket instead of TCP (base is then only the Host header's origin) */
  socketPath?: string;
  /** called with each answer: its worker, status, ETag and body text */
  onAnswer?: (worker: number, status: number, etag: string | undefined, body: string) => void;
}

/** Closed loop: `connections` workers, each sending its next request when the last answer is read. */
export async function load(
  name: string,
  base: string,
  next: (worker: number) => Req,
  opts: LoadOptions = {},
): Promise<Result> {
  const seconds = opts.seconds ?? SECONDS;
  const connections = opts.connections ?? CONNECTIONS;
  const pool = new Pool(base, {
    connections,
    pipelining: 1,
    ...(opts.socketPath !== undefined ? { socketPath: opts.socketPath } : {}),
  });
  const lat: number[] = [];
  const statuses = new Map<number, number>();
  const end = performance.now() + seconds * 1000;
  const worker = async (w: number): Promise<void> => {
    while (performance.now() < end) {
      const r = next(w);
      const t0 = performance.now();
      const res = await pool.request({
        origin: base,
        method: r.method,
        path: r.path,
        headers: r.headers,
        body: r.body,
      });
      const text = await res.body.text();
      lat.push(performance.now() - t0);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      const etag = res.headers['etag'];
      opts.onAnswer?.(w, res.statusCode, typeof etag === 'string' ? etag : undefined, text);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: connections }, (_, w) => worker(w)));
  const elapsed = (performance.now() - t0) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  return {
    name,
    requests: lat.length,
    statuses,
    rps: lat.length / elapsed,
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
  };
}

/** q-quantile of an ascending array (nearest rank); NaN when empty. */
export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

export function median(xs: readonly number[]): number {
  return quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
}

export function statusText(statuses: ReadonlyMap<number, number>): string {
  return [...statuses]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
}

export function machineLine(extra = ''): string {
  const c = cpus();
  const mem = (totalmem() / 2 ** 30).toFixed(0);
  return `${c.length} × ${c[0]?.model ?? 'cpu'}, ${mem} GiB, Node ${process.version}${extra}, load average ${loadavg()[0]?.toFixed(1) ?? '?'} at the end`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Replaces the part of docs/BENCH.md between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`
 * (when the markers are missing: placed at the end of section `within` when given and present,
 * else appended at the end). BENCH_WRITE=0 leaves the file alone.
 */
export function writeSection(name: string, markdown: string, within?: string): void {
  if (process.env['BENCH_WRITE'] === '0') return;
  const open = `<!-- bench:${name} -->`;
  const close = `<!-- /bench:${name} -->`;
  const doc = existsSync(BENCH_DOC) ? readFileSync(BENCH_DOC, 'utf8') : '# Benchmarks\n';
  const block = `${open}\n${markdown.trim()}\n${close}`;
  const a = doc.indexOf(open);
  const b = doc.indexOf(close);
  const outer = within === undefined ? -1 : doc.indexOf(`<!-- /bench:${within} -->`);
  const next =
    a >= 0 && b > a
      ? doc.slice(0, a) + block + doc.slice(b + close.length)
      : outer >= 0
        ? `${doc.slice(0, outer).trimEnd()}\n\n${block}\n${doc.slice(outer)}`
        : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(BENCH_DOC, next);
}

/** A markdown table from a header row and rows of cells. */
export function table(
  head: readonly string[],
  align: readonly ('l' | 'r')[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const sep = align.map((a) => (a === 'r' ? '---:' : '---'));
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

export interface OpenLoopOptions {
  /** Requests per second, spread evenly (request i is due at start + i / rate). */
  rate: number;
  seconds?: number;
  /** The most requests in flight on this client's pool (beyond, undici queues them; the wait counts). */
  connections?: number;
  socketPath?: string;
  /** How long to wait for the answers still in flight at the end. */
  drainMs?: number;
  /** Called with each answered request's send time (ms since the start) and latency (ms). */
  onLatency?: (sentAt: number, ms: number) => void;
}

export interface OpenLoopResult extends Result {
  /** How late the generator sent its requests against the schedule, ms (p99 and max). */
  lagP99: number;
  lagMax: number;
  /** Requests without an answer (connection errors, or still open after the drain): status 0. */
  failed: number;
}

/**
 * Open loop: request i is sent at its scheduled time whether or not the earlier ones were
 * answered (a slow server builds a queue instead of slowing the generator down, so the
 * latencies are not flattered). Latency is from the send to the end of the body.
 */
export async function openLoop(
  name: string,
  base: string,
  next: (i: number) => Req,
  opts: OpenLoopOptions,
): Promise<OpenLoopResult> {
  const seconds = opts.seconds ?? SECONDS;
  const total = Math.floor(seconds * opts.rate);
  const pool = new Pool(base, {
    connections: opts.connections ?? 64,
    pipelining: 1,
    ...(opts.socketPath !== undefined ? { socketPath: opts.socketPath } : {}),
  });
  const lat: number[] = [];
  const lags: number[] = [];
  const statuses = new Map<number, number>();
  const inFlight = new Set<Promise<void>>();
  let failed = 0;
  let closed = false;
  const send = (i: number, due: number): void => {
    const r = next(i);
    const t0 = performance.now();
    lags.push(t0 - due);
    const p = (async () => {
      try {
        const res = await pool.request({
          origin: base,
          method: r.method,
          path: r.path,
          headers: r.headers,
          body: r.body,
        });
        await res.body.text();
        const ms = performance.now() - t0;
        lat.push(ms);
        opts.onLatency?.(t0 - start, ms);
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      } catch {
        // After the drain the pool is destroyed: those are counted once, as still open.
        if (closed) return;
        failed++;
        statuses.set(0, (statuses.get(0) ?? 0) + 1);
      }
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };
  const start = performance.now();
  let i = 0;
  while (i < total) {
    const now = performance.now();
    while (i < total && start + (i * 1000) / opts.rate <= now) {
      send(i, start + (i * 1000) / opts.rate);
      i++;
    }
    if (i < total) await sleep(Math.max(0, Math.min(5, start + (i * 1000) / opts.rate - performance.now())));
  }
  const elapsed = (performance.now() - start) / 1000;
  const drained = Promise.all([...inFlight]);
  await Promise.race([drained, sleep(opts.drainMs ?? 10_000)]);
  const open = inFlight.size;
  closed = true;
  if (open > 0) statuses.set(0, (statuses.get(0) ?? 0) + open);
  await pool.destroy();
  lat.sort((a, b) => a - b);
  lags.sort((a, b) => a - b);
  return {
    name,
    requests: lat.length,
    statuses,
    rps: lat.length / elapsed,
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
    lagP99: quantile(lags, 0.99),
    lagMax: lags[lags.length - 1] ?? NaN,
    failed: failed + open,
  };
}

/** The harness's loopback cluster (fast settings) started, with mbp holding the lease. */
export async function startHeldCluster(): Promise<Cluster> {
  const c = await Cluster.create();
  await c.startArbiter();
  await c.startAgent('mbp');
  await c.startAgent('node-b');
  const acq = await c.hq('mbp', ['lease', 'acquire', '--wait', '30', '--json']);
  if (acq.code !== 0) throw new Error(`hq lease acquire exited ${acq.code}: ${acq.stderr.trim()}`);
  return c;
}

/**
 * One etcd member at etcd's default timing for a bench of the etcd store's write path: its data
 * in a temp dir that `stop()` removes (and killed at exit, whatever happened). Without etcd on
 * PATH: one line naming the package, exit 2.
 */
export async function oneEtcdMember(bench: string, name: string): Promise<EtcdCluster> {
  const bin = onPath('etcd');
  if (bin === null) {
    process.stderr.write(`${bench}: no etcd on PATH (apt-get install -y etcd-server)\n`);
    process.exit(2);
  }
  return startEtcdCluster({ size: 1, name, bin });
}

/** Clock ticks per second of /proc's CPU times. */
export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** utime + stime in seconds (fields 14 and 15 of /proc/PID/stat, after the parenthesised name). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}
