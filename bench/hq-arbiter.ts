/**
 * One real `hq-arbiter serve` for the benches, set up the same way each time: a temp dir with a
 * config (127.0.0.1, port 0, no tailscale, checks far apart), member tokens for both candidates
 * issued with `hq-arbiter token issue`, the admin token from `{dataDir}/admin.token`, the start
 * waits let pass (S2.3/S2.4: both candidates report after 2 × requestTimeout, 10 s by default),
 * both candidates heartbeat, and mbp acquires. `stop()` stops it by PID and removes the dir.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';
import { ROOT, sleep, stopProc, type Daemon, type Req } from './lib.js';

export const ARBITER_CLI = join(ROOT, 'apps/arbiter/dist/cli.js');

export interface HqArbiter {
  readonly daemon: Daemon;
  readonly base: string;
  readonly dir: string;
  readonly tokens: { readonly mbp: string; readonly nodeb: string; readonly admin: string };
  /** mbp's generation after its acquire. */
  readonly generation: number;
  /** The record after the acquire, as `GET /v1/lease` answers it. */
  readonly record: string;
  /** Stops the daemon (SIGTERM, then SIGKILL) and removes the temp dir; safe to call twice. */
  stop(): Promise<void>;
}

export interface ArbiterOptions {
  /** Rebuild apps/arbiter first (`tsc -b`). Default true. */
  readonly build?: boolean;
  /** Extra node flags for the daemon, e.g. `['--cpu-prof', '--cpu-prof-dir=/tmp/p']`. */
  readonly nodeArgs?: readonly string[];
  /**
   * Called at once with this arbiter's `stop`, before anything is started: a caller's cleanup
   * (on SIGINT, say) can then stop it at any stage. After `stop`, nothing more is started.
   */
  readonly onStop?: (stop: () => Promise<void>) => void;
  /** The arbiter's `store` key (default: SQLite in the temp dataDir), e.g. `{kind: "etcd", endpoints, prefix}`. */
  readonly store?: Record<string, unknown>;
}

/**
 * Like lib's `startNode`, but the process is handed to `spawned` at once (so it can be stopped
 * while it is still starting), and past the ready line its stdout — one JSON log line per lease
 * event, so one per renew — is drained unread instead of parsed line by line in this process.
 */
export function spawnDaemon(
  args: readonly string[],
  ready: string,
  spawned: (d: Daemon['proc']) => void,
): Promise<Daemon> {
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  spawned(proc);
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${args.join(' ')} did not start`)), 60_000);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      rej(new Error(`${args.join(' ')} exited ${code ?? signal}`));
    });
    const rl = createInterface({ input: proc.stdout! });
    rl.on('line', (line) => {
      let rec: { msg?: string; port?: number };
      try {
        rec = JSON.parse(line) as { msg?: string; port?: number };
      } catch {
        return; // not JSON
      }
      if (rec.msg === ready && typeof rec.port === 'number') {
        clearTimeout(timer);
        rl.close();
        proc.stdout!.resume();
        res({ proc, base: `http://127.0.0.1:${rec.port}` });
      }
    });
  });
}

export const jsonHeaders = (token: string): Record<string, string> => ({
  authorization: `Bearer ${token}`,
  'content-type': 'application/json',
});

/** The holder's heartbeat as a load request (`POST /v1/heartbeat` of mbp at its generation: outcome `renewed`). */
export function holderHeartbeat(hq: Pick<HqArbiter, 'generation' | 'tokens'>): () => Req {
  const body = JSON.stringify({
    host: 'mbp',
    generation: hq.generation,
    seenGeneration: hq.generation,
    heartbeatSeconds: 600,
  });
  const req: Req = { method: 'POST', path: '/v1/heartbeat', headers: jsonHeaders(hq.tokens.mbp), body };
  return () => req;
}

async function post(base: string, path: string, token: string, body: unknown): Promise<string> {
  const p = new Pool(base);
  try {
    const res = await p.request({ method: 'POST', path, headers: jsonHeaders(token), body: JSON.stringify(body) });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${path} answered ${res.statusCode}: ${text}`);
    return text;
  } finally {
    await p.close();
  }
}

export async function startArbiter(opts: ArbiterOptions = {}): Promise<HqArbiter> {
  let proc: Daemon['proc'] | null = null;
  let dir: string | null = null;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    if (proc !== null) await stopProc(proc);
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
  };
  opts.onStop?.(stop);
  const live = (): void => {
    if (stopped) throw new Error('hq-arbiter: stopped while starting');
  };
  if (opts.build !== false) {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter')], {
      stdio: 'inherit',
    });
  }
  live();
  dir = mkdtempSync(join(tmpdir(), 'hq-bench-arbiter-'));
  try {
    const config = join(dir, 'arbiter.json');
    // Checks and heartbeat schedule far apart: the benches measure requests, not the check loop.
    writeFileSync(
      config,
      JSON.stringify({
        dataDir: join(dir, 'var'),
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        ...(opts.store === undefined ? {} : { store: opts.store }),
      }),
    );
    const issue = (m: string, scope: string): string =>
      execFileSync(process.execPath, [ARBITER_CLI, 'token', 'issue', m, '--scope', scope, '--config', config], {
        encoding: 'utf8',
      }).trim();
    const mbp = issue('mbp', 'member');
    const nodeb = issue('node-b', 'member');
    live();
    const daemon = await spawnDaemon(
      [...(opts.nodeArgs ?? []), ARBITER_CLI, 'serve', '--config', config],
      'hq-arbiter listening',
      (p) => {
        proc = p;
      },
    );
    const admin = readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim();
    process.stderr.write('waiting 10.5 s for the arbiter start waits to pass…\n');
    await sleep(10_500);
    live();
    for (const [host, token] of [
      ['mbp', mbp],
      ['node-b', nodeb],
    ] as const) {
      // Each report declares the agent's default request timeout: only such a report counts for the start wait.
      await post(daemon.base, '/v1/heartbeat', token, { host, seenGeneration: 0, requestTimeoutSeconds: 5 });
    }
    const acq = JSON.parse(await post(daemon.base, '/v1/lease/acquire', mbp, { host: 'mbp' })) as {
      lease: { generation: number };
    };
    const p = new Pool(daemon.base);
    const record = await (await p.request({ method: 'GET', path: '/v1/lease' })).body.text();
    await p.close();
    return {
      daemon,
      base: daemon.base,
      dir,
      tokens: { mbp, nodeb, admin },
      generation: acq.lease.generation,
      record,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
