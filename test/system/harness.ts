/**
 * A real cluster on loopback for the system tests: one arbiter (`apps/arbiter/dist/cli.js
 * serve`) and two agents (`apps/agent/dist/daemon-cli.js`), spawned as processes, each configured
 * as a user would — with the keys it owns only (S6) — at the fast settings of L1 (checks and
 * heartbeats every second, ttl 6 s, margin 1 s, refresh 1 s) or at the defaults (production
 * cadence: every key left out), `tailscaleBin: ""`, health URLs pinned to each agent's peer
 * listener.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createServer } from 'node:net';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { callAgent } from '../../apps/agent/src/cli/local.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const ARBITER_CLI = join(ROOT, 'apps/arbiter/dist/cli.js');
export const AGENT_CLI = join(ROOT, 'apps/agent/dist/daemon-cli.js');
export const HQ_CLI = join(ROOT, 'apps/agent/dist/cli/entry.js');
/** Entries a pinned older build (test/upgrade: 0.1.0) has under another path: `cli.js` became `cli/entry.js` in 0.2.0. */
const ENTRY_BEFORE_RENAME: { readonly [rel: string]: string } = {
  'apps/agent/dist/cli/entry.js': 'apps/agent/dist/cli.js',
};

const execFileAsync = promisify(execFile);

export const HOSTS = ['mbp', 'node-b'] as const;
export type HostName = (typeof HOSTS)[number];

/** Ports this process handed out: clusters started side by side never get the same one. */
const handedOut = new Set<number>();

/**
 * A port free now, for a daemon to listen on soon: picked below the kernel's ephemeral range
 * (32768 and up), where no outgoing connection and no listen on port 0 can take it in between.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if (handedOut.has(port)) continue;
    const free = await new Promise<boolean>((done) => {
      const s = createServer();
      s.once('error', () => done(false));
      s.listen(port, '127.0.0.1', () => s.close(() => done(true)));
    });
    if (!free) continue;
    handedOut.add(port);
    return port;
  }
}

/** Does a process with this pid exist (EPERM: it does, another user's)? */
export { pidAlive as processAlive } from '../../apps/arbiter/src/serve-lock.js';

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Throws when a daemon being started has already exited: its start failed, waiting longer would not help. */
function exitedEarly(name: string, child: ChildProcess): false {
  if (child.exitCode !== null || child.signalCode !== null)
    throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready`);
  return false;
}

export interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function runNode(args: readonly string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30_000): Promise<Run> {
  return new Promise((done) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, NODE_OPTIONS: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}

/** The arbiter's own keys at L1's fast settings. */
export const FAST_ARBITER = Object.freeze({
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  checkCron: '* * * * * *',
  viewFreshSeconds: 6,
  promoteAfterChecks: 2,
  probeTimeoutSeconds: 0.5,
});

/** An agent's own keys at L1's fast settings. */
export const FAST_AGENT = Object.freeze({
  heartbeatCron: '* * * * * *',
  refreshSeconds: 1,
  requestTimeoutSeconds: 1,
  probeTimeoutSeconds: 0.5,
});

export interface ClusterOptions {
  /** `fast` (default): L1's settings; `defaults`: nothing but the wiring, every timing key left to its default. */
  readonly settings?: 'fast' | 'defaults';
  /** Extra keys for the arbiter's file / each agent's file (a test of a mismatch). */
  readonly arbiter?: Record<string, unknown>;
  readonly agent?: Record<string, unknown>;
  /**
   * Store etcd: `arbiters` arbiter processes on these etcd client URLs, one prefix; arbiter i
   * is `arbiter-i` (the first also `arbiter`), and the agents get every arbiter in `arbiterUrls`.
   */
  readonly etcd?: {
    readonly endpoints: readonly string[];
    readonly arbiters: number;
    readonly electionTtlSeconds?: number;
  };
  /**
   * The build whose `hq-arbiter token issue` creates the database and the tokens (default: this
   * checkout). The upgrade test starts the previous release's arbiter first, and it refuses a
   * database this checkout's arbiter already migrated forward.
   */
  readonly tokenRoot?: string;
}

export class Cluster {
  readonly procs = new Map<string, ChildProcess>();
  readonly logs = new Map<string, string>();
  /**
   * Where each daemon's code comes from, by process name (`arbiter`, a host — its `hq` CLI too):
   * this checkout unless set (test/upgrade runs the previous release's build beside it).
   */
  readonly roots = new Map<string, string>();
  adminToken = '';

  private constructor(
    readonly dir: string,
    readonly arbiterPort: number,
    readonly peerPorts: ReadonlyMap<HostName, number>,
    readonly options: ClusterOptions = {},
    /** Every arbiter's port (one without `etcd`); the first is `arbiterPort`. */
    readonly arbiterPorts: readonly number[] = [arbiterPort],
  ) {}

  /**
   * The fleet most system tests start from: arbiter and both agents up, mbp acquired and may run,
   * node-b knows mbp holds; stopped at the test's end. `arbiterStartedAt` is Date.now() just before
   * the arbiter was started.
   */
  static async withHolder(
    t: { teardown(fn: () => unknown): void; equal(a: unknown, b: unknown, m: string): unknown },
    options: ClusterOptions = {},
  ): Promise<Cluster & { readonly arbiterStartedAt: number }> {
    const c = await Cluster.create(options);
    t.teardown(() => c.stopAll());
    const arbiterStartedAt = Date.now();
    await c.startArbiter();
    await c.startAgents();
    const r = await c.hq('mbp', ['lease', 'acquire', '--wait', '30']);
    t.equal(r.code, 0, `mbp acquires (${r.stderr.trim()})`);
    await c.waitFor(async () => (await c.fence('mbp'))?.run === true, 20_000, 'mbp may run');
    await c.waitFor(async () => (await c.fence('node-b'))?.holder === 'mbp', 15_000, 'node-b knows mbp holds');
    return Object.assign(c, { arbiterStartedAt });
  }

  /** The cluster lives in a short temp dir (unix socket paths are limited to ~104 bytes). */
  static async create(options: ClusterOptions = {}): Promise<Cluster> {
    const dir = mkdtempSync(join(tmpdir(), 'hq-sys-'));
    const arbiterPorts: number[] = [];
    while (arbiterPorts.length < (options.etcd?.arbiters ?? 1)) {
      const p = await freePort();
      if (!arbiterPorts.includes(p)) arbiterPorts.push(p);
    }
    const arbiterPort = arbiterPorts[0] as number;
    const peerPorts = new Map<HostName, number>();
    for (const h of HOSTS) peerPorts.set(h, await freePort());
    const c = new Cluster(dir, arbiterPort, peerPorts, options, arbiterPorts);
    c.writeConfigs();
    const issuer =
      options.tokenRoot === undefined ? ARBITER_CLI : join(options.tokenRoot, ARBITER_CLI.slice(ROOT.length + 1));
    const issue = async (name: string, scope: string): Promise<string> =>
      (
        await execFileAsync(
          process.execPath,
          [issuer, 'token', 'issue', name, '--scope', scope, '--config', c.arbiterConfig],
          { encoding: 'utf8' },
        )
      ).stdout.trim();
    // The first issue creates the database; the others then run side by side (each mostly waits on its fsync).
    const [first, ...rest] = HOSTS;
    const tokens = [await issue(first, 'member'), ...(await Promise.all(rest.map((h) => issue(h, 'member'))))];
    for (const [i, h] of HOSTS.entries())
      writeFileSync(join(c.stateDir(h), 'token'), `${tokens[i]}\n`, { mode: 0o600 });
    c.adminToken = await issue('ops', 'admin');
    const peerToken = randomBytes(32).toString('hex');
    for (const h of HOSTS) writeFileSync(join(c.stateDir(h), 'peer-token'), `${peerToken}\n`, { mode: 0o600 });
    return c;
  }

  get arbiterConfig(): string {
    return join(this.dir, 'arbiter.json');
  }

  /** Arbiter i's config (store etcd; `arbiterConfig` is arbiter 0's). */
  arbiterConfigOf(i: number): string {
    return i === 0 ? this.arbiterConfig : join(this.dir, `arbiter-${i}.json`);
  }

  arbiterUrl(i = 0): string {
    return `http://127.0.0.1:${this.arbiterPorts[i]}`;
  }

  agentConfig(h: HostName): string {
    return join(this.dir, `${h}.json`);
  }

  stateDir(h: HostName): string {
    return join(this.dir, h);
  }

  socket(h: HostName): string {
    return join(this.dir, `${h}.sock`);
  }

  other(h: HostName): HostName {
    return h === 'mbp' ? 'node-b' : 'mbp';
  }

  private healthUrl(h: HostName): string {
    return `http://127.0.0.1:${this.peerPorts.get(h)}/v1/health`;
  }

  private writeConfigs(): void {
    const healthUrls = Object.fromEntries(HOSTS.map((h) => [h, this.healthUrl(h)]));
    const fast = (this.options.settings ?? 'fast') === 'fast';
    const etcd = this.options.etcd;
    this.arbiterPorts.forEach((port, i) => {
      writeFileSync(
        this.arbiterConfigOf(i),
        JSON.stringify({
          candidates: [...HOSTS],
          ...(fast ? FAST_ARBITER : {}),
          tailscaleBin: '',
          listen: { host: '127.0.0.1', port },
          dataDir: join(this.dir, i === 0 ? 'arbiter' : `arbiter-${i}`),
          healthUrls,
          ...(etcd === undefined
            ? {}
            : {
                store: {
                  kind: 'etcd',
                  endpoints: [...etcd.endpoints],
                  prefix: `/hq-sys-${process.pid}-${this.arbiterPort}`,
                  advertiseUrl: this.arbiterUrl(i),
                  dialTimeoutSeconds: 0.5,
                  requestTimeoutSeconds: 1,
                  electionTtlSeconds: etcd.electionTtlSeconds ?? 4,
                },
              }),
          ...(this.options.arbiter ?? {}),
        }),
      );
    });
    for (const h of HOSTS) {
      mkdirSync(this.stateDir(h), { recursive: true, mode: 0o700 });
      chmodSync(this.stateDir(h), 0o700);
      const o = this.other(h);
      writeFileSync(
        this.agentConfig(h),
        JSON.stringify({
          hostName: h,
          ...(etcd === undefined
            ? { arbiterUrl: this.arbiterUrl(0) }
            : { arbiterUrls: this.arbiterPorts.map((_, i) => this.arbiterUrl(i)) }),
          stateDir: this.stateDir(h),
          socketPath: this.socket(h),
          listen: { host: '127.0.0.1', port: this.peerPorts.get(h) },
          ...(fast ? FAST_AGENT : {}),
          tailscaleBin: '',
          peers: { [o]: `http://127.0.0.1:${this.peerPorts.get(o)}` },
          healthUrls: { [o]: this.healthUrl(o) },
          ...(this.options.agent ?? {}),
        }),
      );
    }
  }

  private spawnDaemon(name: string, args: readonly string[]): ChildProcess {
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    let log = this.logs.get(name) ?? '';
    const add = (c: Buffer): void => {
      log += c.toString();
      this.logs.set(name, log);
    };
    child.stdout?.on('data', add);
    child.stderr?.on('data', add);
    this.procs.set(name, child);
    child.once('exit', () => {
      if (this.procs.get(name) === child) this.procs.delete(name);
    });
    return child;
  }

  private bin(name: string, path: string): string {
    const root = this.roots.get(name);
    if (root === undefined) return path;
    const rel = path.slice(ROOT.length + 1);
    const mapped = join(root, rel);
    // A pinned older build may have the entry under its name before a rename.
    const before = ENTRY_BEFORE_RENAME[rel];
    return before !== undefined && !existsSync(mapped) ? join(root, before) : mapped;
  }

  /** Starts arbiter i (named `arbiter` for 0, `arbiter-i` otherwise) and waits for its /v1/health. */
  async startArbiter(i = 0): Promise<void> {
    const name = i === 0 ? 'arbiter' : `arbiter-${i}`;
    const child = this.spawnDaemon(name, [this.bin(name, ARBITER_CLI), 'serve', '--config', this.arbiterConfigOf(i)]);
    await this.waitFor(
      async () => {
        exitedEarly(name, child);
        try {
          const r = await fetch(`${this.arbiterUrl(i)}/v1/health`);
          return r.status === 200;
        } catch {
          return false;
        }
      },
      90_000,
      'the arbiter answers /v1/health',
    ).catch((err: Error) => {
      throw new Error(`${err.message}; its output: ${(this.logs.get(name) ?? '').slice(-800)}`);
    });
  }

  async startAgent(h: HostName): Promise<void> {
    const child = this.spawnDaemon(h, [this.bin(h, AGENT_CLI), '--config', this.agentConfig(h)]);
    await this.waitFor(
      async () => exitedEarly(h, child) || (await this.status(h)) !== null,
      90_000,
      `agent ${h} answers on its socket`,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; its output: ${(this.logs.get(h) ?? '').slice(-800)}`);
    });
  }

  /** Starts both agents side by side. */
  async startAgents(): Promise<void> {
    await Promise.all(HOSTS.map((h) => this.startAgent(h)));
  }

  /** Sends `signal` and waits for the process to exit. */
  async kill(
    name: string,
    signal: NodeJS.Signals = 'SIGKILL',
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const p = this.procs.get(name);
    if (p === undefined || p.exitCode !== null || p.signalCode !== null)
      return { code: p?.exitCode ?? null, signal: p?.signalCode ?? null };
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      p.once('exit', (code, sig) => done({ code, signal: sig })),
    );
    p.kill(signal);
    return exited;
  }

  /** Sends `signal` without waiting (SIGSTOP, SIGCONT). */
  signal(name: string, signal: NodeJS.Signals): void {
    const p = this.procs.get(name);
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) throw new Error(`${name} is not running`);
    p.kill(signal);
  }

  /**
   * Samples both fences every 50 ms from now on; `stop()` ends it and gives the first sample in
   * which both hosts said run, or null (also stopped at teardown by the caller's `t`).
   */
  watchOverlap(t: { teardown(fn: () => unknown): void }): { stop(): Promise<string | null> } {
    let overlap: string | null = null;
    let on = true;
    const loop = (async () => {
      while (on) {
        const [a, b] = await Promise.all([this.fence('mbp'), this.fence('node-b')]);
        if (a?.run === true && b?.run === true && overlap === null)
          overlap = `mbp ${a.reason}@${a.generation}, node-b ${b.reason}@${b.generation}`;
        await sleep(50);
      }
    })();
    const stop = async (): Promise<string | null> => {
      on = false;
      await loop;
      return overlap;
    };
    t.teardown(stop);
    return { stop };
  }

  /** Arbiter i's word on the election (store etcd: `arbiters` of its /v1/health), or null when it does not answer. */
  async election(i: number): Promise<{ elected: boolean; leader: string | null } | null> {
    try {
      const r = await fetch(`${this.arbiterUrl(i)}/v1/health`, { signal: AbortSignal.timeout(1500) });
      return ((await r.json()) as { arbiters?: { elected: boolean; leader: string | null } }).arbiters ?? null;
    } catch {
      return null;
    }
  }

  async fence(
    h: HostName,
    role = 'cron',
  ): Promise<{
    run: boolean;
    reason: string;
    generation: number;
    holder: string | null;
    validForSeconds: number | null;
  } | null> {
    const r = await callAgent(this.socket(h), 'GET', `/v1/fence?role=${role}`, 2);
    return r.kind === 'answer' && r.status === 200 ? (r.body as never) : null;
  }

  async status(h: HostName): Promise<{ [k: string]: unknown } | null> {
    const r = await callAgent(this.socket(h), 'GET', '/v1/status', 2);
    return r.kind === 'answer' && r.status === 200 ? (r.body as { [k: string]: unknown }) : null;
  }

  hq(h: HostName, args: readonly string[], env: NodeJS.ProcessEnv = {}, timeoutMs?: number): Promise<Run> {
    return runNode([this.bin(h, HQ_CLI), ...args, '--config', this.agentConfig(h)], env, timeoutMs);
  }

  async waitFor(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
    const start = Date.now();
    for (;;) {
      if (await fn()) return (Date.now() - start) / 1000;
      if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
      await sleep(100);
    }
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.procs.keys()].map((n) => this.kill(n, 'SIGKILL')));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
