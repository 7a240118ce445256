/**
 * Shared helpers of the agent tests: short temp dirs (unix socket paths are limited), a fake
 * agent socket whose fence answer the test sets, a fake arbiter, and running the real CLIs.
 */
import { spawn } from 'node:child_process';
import { resolveConfig } from '../../apps/agent/src/config.js';
import { ensureDir } from '../../packages/runtime/src/files.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
export const HQ_CLI = join(ROOT, 'apps/agent/dist/cli/entry.js');
export const AGENT_CLI = join(ROOT, 'apps/agent/dist/daemon-cli.js');

export function shortDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hq-t-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

export function run(
  args: readonly string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    onSpawn?: (pid: number) => void;
    onOutput?: (stdout: string, stderr: string) => void;
    uid?: number;
    gid?: number;
  } = {},
): Promise<Run> {
  return new Promise((done) => {
    const start = Date.now();
    const child = spawn(process.execPath, args, {
      env: { ...process.env, HQ_CONFIG: '', NODE_OPTIONS: '', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.uid === undefined ? {} : { uid: opts.uid, gid: opts.gid ?? opts.uid }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      opts.onOutput?.(stdout, stderr);
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      opts.onOutput?.(stdout, stderr);
    });
    if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr, ms: Date.now() - start });
    });
  });
}

/** Runs a daemon until its output matches `pattern` (or `ms` passed), then SIGTERMs it; a loaded machine only makes it wait longer. */
export async function runUntil(
  args: readonly string[],
  pattern: RegExp,
  ms = 20_000,
  opts: Parameters<typeof run>[1] = {},
): Promise<Run> {
  let pid = 0;
  let seen: () => void = () => undefined;
  const matched = new Promise<void>((r) => (seen = r));
  const exited = run(args, {
    ...opts,
    timeoutMs: ms + 10_000,
    onSpawn: (n) => (pid = n),
    onOutput: (out, err) => pattern.test(out + err) && seen(),
  });
  const timer = setTimeout(seen, ms);
  await Promise.race([matched, exited]);
  clearTimeout(timer);
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    // it stopped by itself
  }
  return exited;
}

export function hq(args: readonly string[], opts: Parameters<typeof run>[1] = {}): Promise<Run> {
  return run([HQ_CLI, ...args], opts);
}

export interface Fence {
  run: boolean;
  reason: string;
  generation: number;
  holder: string | null;
  role: string;
  validForSeconds: number | null;
}

/** A stand-in for the agent's unix socket: answers `/v1/fence` with `answer` (or 400 for unknown roles). */
export class FakeAgent {
  answer: Omit<Fence, 'role'> = { run: true, reason: 'holder', generation: 3, holder: 'mbp', validForSeconds: 600 };
  seen = 3;
  roles = ['cron', 'ledger-cli'];
  queries = 0;
  /** Set: runs are registered (`POST /v1/runs`, its group, `DELETE` when gone), each supervisor pid kept. */
  runs: { supervisors: number[]; onDone?: (supervisorPid: number) => void | Promise<void> } | null = null;
  /** More answers, by `METHOD /path` (`'hang'`: never answered). */
  routes: { [route: string]: (body: string) => Promise<{ status: number; body: unknown } | 'hang'> } = {};
  private server: Server;
  constructor(readonly socketPath: string) {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => void this.handle(req, res, body));
    });
  }
  private async handle(req: IncomingMessage, res: ServerResponse, body: string): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    res.setHeader('content-type', 'application/json');
    const route = this.routes[`${req.method} ${url.pathname}`];
    if (route !== undefined) {
      const a = await route(body);
      if (a === 'hang') return;
      res.statusCode = a.status;
      res.end(JSON.stringify(a.body));
      return;
    }
    const runs = this.runs;
    if (runs !== null && url.pathname.startsWith('/v1/runs')) {
      if (req.method === 'POST' && url.pathname === '/v1/runs') {
        runs.supervisors.push((JSON.parse(body) as { supervisorPid: number }).supervisorPid);
        res.end(JSON.stringify({ ok: true, id: String(runs.supervisors.length) }));
        return;
      }
      if (req.method === 'DELETE')
        await runs.onDone?.(runs.supervisors[Number(url.pathname.split('/').pop()) - 1] as number);
      res.end(JSON.stringify({ ok: true }));
      return;
    }
    if (url.pathname === '/v1/fence') {
      this.queries++;
      const role = url.searchParams.get('role') ?? '';
      if (!this.roles.includes(role)) {
        res.statusCode = 400;
        res.end(JSON.stringify({ error: 'HQ_ERR_UNKNOWN_ROLE', message: `unknown role "${role}"` }));
        return;
      }
      res.end(JSON.stringify({ ...this.answer, role }));
      return;
    }
    if (url.pathname === '/v1/seen') {
      res.end(JSON.stringify({ seen: this.seen > 0, generation: this.seen }));
      return;
    }
    res.statusCode = 404;
    res.end('{}');
  }
  listen(): Promise<void> {
    return new Promise((r) => this.server.listen(this.socketPath, () => r()));
  }
  close(): Promise<void> {
    return new Promise((r) => {
      this.server.closeAllConnections();
      this.server.close(() => r());
    });
  }
}

/**
 * A resolved agent config with the fast test settings (L1: heartbeats every second, ttl 6,
 * margin 1) for an in-process Agent talking to `arbiterUrl`.
 */
export function fastAgentConfig(
  arbiterUrl: string,
  stateDir: string,
  socketPath: string,
): ReturnType<typeof resolveConfig> & { arbiterUrl: string } {
  return resolveConfig(
    {
      hostName: 'mbp',
      arbiterUrl,
      stateDir,
      socketPath,
      heartbeatCron: '* * * * * *',
      refreshSeconds: 1,
      requestTimeoutSeconds: 1,
      tailscaleBin: '',
      peers: {},
    },
    null,
  ) as ReturnType<typeof resolveConfig> & { arbiterUrl: string };
}

/** The member token and peer token `agentSetup` writes (tests present the peer token). */
const MEMBER_TOKEN = 'cd'.repeat(32);
export const PEER_TOKEN = 'ef'.repeat(32);

/**
 * The ground of an in-process agent test: a FakeArbiter naming `holder` (closed at teardown),
 * `fastAgentConfig` under `dir` (socket at `socketPath`, default `dir/run/a.sock`), its state
 * directory made 0700, the member token written, and the peer token unless `peerToken` is false.
 */
export async function agentSetup(
  t: { teardown(fn: () => void | Promise<void>): void },
  dir: string,
  opts: { holder?: string | null; socketPath?: string; peerToken?: boolean } = {},
): Promise<{ arb: FakeArbiter; config: ReturnType<typeof fastAgentConfig> }> {
  const arb = new FakeArbiter();
  if (opts.holder !== undefined) arb.holder = opts.holder;
  await arb.listen();
  t.teardown(() => arb.close());
  const config = fastAgentConfig(arb.url, join(dir, 'state'), opts.socketPath ?? join(dir, 'run', 'a.sock'));
  await ensureDir(config.stateDir, 0o700);
  writeFileSync(config.tokenFile, `${MEMBER_TOKEN}\n`, { mode: 0o600 });
  if (opts.peerToken !== false) writeFileSync(config.peerTokenFile, `${PEER_TOKEN}\n`, { mode: 0o600 });
  return { arb, config };
}

/** Writes an agent config into `dir` and returns its path. */
export function writeConfig(dir: string, extra: { [k: string]: unknown } = {}): string {
  const path = join(dir, 'agent.json');
  writeFileSync(
    path,
    JSON.stringify({
      hostName: 'mbp',
      arbiterUrl: 'http://127.0.0.1:9',
      stateDir: join(dir, 'state'),
      socketPath: join(dir, 'agent.sock'),
      tailscaleBin: '',
      heartbeatCron: '* * * * * *',
      refreshSeconds: 1,
      requestTimeoutSeconds: 1,
      listen: { host: '127.0.0.1', port: 0 },
      peers: {},
      ...extra,
    }),
  );
  return path;
}

export function record(over: { [k: string]: unknown } = {}): { [k: string]: unknown } {
  const now = Date.now() / 1000;
  return {
    name: 'hq',
    holder: 'mbp',
    generation: 1,
    revision: 1,
    acquiredAt: now,
    renewedAt: now,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    expiresAt: now + 6,
    expired: false,
    released: false,
    notBefore: null,
    views: {},
    dualUnreachableStreak: 0,
    lastCheckAt: null,
    promotedFrom: null,
    maintenance: false,
    floorPending: false,
    now,
    ...over,
  };
}

/** A fake arbiter on loopback: heartbeats answer `renewed` for `holder`, `standby` otherwise. */
export class FakeArbiter {
  holder: string | null = 'mbp';
  generation = 1;
  heartbeats: unknown[] = [];
  down = false;
  /** Extra fields of the lease record `GET /v1/lease` answers (views, maintenance, …). */
  leaseOver: { [k: string]: unknown } = {};
  /** The `hq-protocol` its answers carry (null: none, as hq 0.1.x). */
  protocol: string | null = '2';
  /** Answer 401 to a request without a bearer token, as the real arbiter does. */
  requireToken = false;
  private server: Server;
  port = 0;
  constructor() {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (this.down) {
          res.destroy();
          return;
        }
        res.setHeader('content-type', 'application/json');
        if (this.protocol !== null) res.setHeader('hq-protocol', this.protocol);
        if (this.requireToken && req.headers.authorization === undefined) {
          res.statusCode = 401;
          res.end(JSON.stringify({ error: 'HQ_ERR_UNAUTHORIZED', message: 'a valid bearer token is required' }));
          return;
        }
        const lease = record({ holder: this.holder, generation: this.generation });
        if (req.url === '/v1/heartbeat') {
          const b = JSON.parse(body) as { host: string };
          this.heartbeats.push(b);
          res.end(
            JSON.stringify({
              outcome: b.host === this.holder ? 'renewed' : 'standby',
              reason: null,
              lease,
              hold: null,
            }),
          );
          return;
        }
        if (req.url === '/v1/lease') {
          res.end(JSON.stringify({ ...lease, ...this.leaseOver }));
          return;
        }
        res.statusCode = 404;
        res.end('{}');
      });
    });
  }
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  listen(): Promise<void> {
    return new Promise((r) =>
      this.server.listen(0, '127.0.0.1', () => {
        const a = this.server.address();
        this.port = typeof a === 'object' && a !== null ? a.port : 0;
        r();
      }),
    );
  }
  close(): Promise<void> {
    return new Promise((r) => {
      this.server.closeAllConnections();
      this.server.close(() => r());
    });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
