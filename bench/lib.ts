/**
 * What every bench shares: starting and stopping daemons it owns (by PID), one closed-loop
 * HTTP load generator (undici; the same for hq, the ceiling and etcd), percentiles, the machine
 * line, and writing a bench's section of docs/BENCH.md between its markers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

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
export async function load(name: string, base: string, next: (worker: number) => Req, opts: LoadOptions = {}): Promise<Result> {
  const seconds = opts.seconds ?? SECONDS;
  const connections = opts.connections ?? CONNECTIONS;
  const pool = new Pool(base, { connections, pipelining: 1, ...(opts.socketPath !== undefined ? { socketPath: opts.socketPath } : {}) });
  const lat: number[] = [];
  const statuses = new Map<number, number>();
  const end = performance.now() + seconds * 1000;
  const worker = async (w: number): Promise<void> => {
    while (performance.now() < end) {
      const r = next(w);
      const t0 = performance.now();
      const res = await pool.request({ origin: base, method: r.method, path: r.path, headers: r.headers, body: r.body });
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
  return { name, requests: lat.length, statuses, rps: lat.length / elapsed, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) };
}

/** q-quantile of an ascending array (nearest rank); NaN when empty. */
export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

export function median(xs: readonly number[]): number {
  return quantile([...xs].sort((a, b) => a - b), 0.5);
}

export function statusText(statuses: ReadonlyMap<number, number>): string {
  return [...statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ');
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
 * (appended at the end when the markers are missing). BENCH_WRITE=0 leaves the file alone.
 */
export function writeSection(name: string, markdown: string): void {
  if (process.env['BENCH_WRITE'] === '0') return;
  const open = `<!-- bench:${name} -->`;
  const close = `<!-- /bench:${name} -->`;
  const doc = existsSync(BENCH_DOC) ? readFileSync(BENCH_DOC, 'utf8') : '# Benchmarks\n';
  const block = `${open}\n${markdown.trim()}\n${close}`;
  const a = doc.indexOf(open);
  const b = doc.indexOf(close);
  const next = a >= 0 && b > a ? doc.slice(0, a) + block + doc.slice(b + close.length) : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(BENCH_DOC, next);
}

/** A markdown table from a header row and rows of cells. */
export function table(head: readonly string[], align: readonly ('l' | 'r')[], rows: readonly (readonly (string | number)[])[]): string {
  const sep = align.map((a) => (a === 'r' ? '---:' : '---'));
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}
