/**
 * Real etcd members for tests and the etcd bench: 1 or 3 `etcd` processes on free 127.0.0.1
 * ports (client and peer), data in a temp dir, each stopped by its PID — by `stop()`, on test
 * teardown, at the exit of this process and on SIGINT/SIGTERM (`etcdMembers`), and, on Linux,
 * by the kernel if this process dies without a word (`setpriv --pdeathsig KILL`).
 * One member can be killed (-9), stopped (SIGSTOP), continued and restarted on its data.
 * No etcd on PATH: `etcdMembers` skips with the reason (fails under CI=true: .ci/run installs
 * Debian's etcd-server).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici';
import { missingTool } from '../missing-tool.js';
import { freePort, sleep } from '../system/harness.js';

export function onPath(bin: string): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const p = join(dir, bin);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

export interface ClusterOptions {
  readonly size: 1 | 3;
  /** Parent of the members' data dirs (default: a new temp dir, removed by `stop()`). */
  readonly dir?: string;
  /** etcd's --heartbeat-interval / --election-timeout, ms (etcd's defaults 100 / 1000 when left out). */
  readonly heartbeatMs?: number;
  readonly electionTimeoutMs?: number;
  /** Member names' prefix (default `hq-etcd`). */
  readonly name?: string;
  /** The etcd binary (default: `etcd` on PATH). */
  readonly bin?: string;
  /** More etcd flags for every member (`--quota-backend-bytes N`, …). */
  readonly extraArgs?: readonly string[];
  /** Serve the client URLs over TLS (https://) with this server certificate; `clientCertAuth`: ask clients for one signed by `caFile`. */
  readonly tls?: {
    readonly certFile: string;
    readonly keyFile: string;
    readonly caFile: string;
    readonly clientCertAuth: boolean;
    readonly client?: { readonly ca: string; readonly cert?: string; readonly key?: string };
  };
}

/** Tests' timing: leader loss noticed within ~0.5 s, leases as short as 0.75 s allowed. */
export const FAST_ETCD = Object.freeze({ heartbeatMs: 50, electionTimeoutMs: 500 });

/** Every etcd this process started and has not seen exit, and the temp dirs it made: gone at exit whatever happened. */
const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let exitHooked = false;

function killAllNow(): void {
  for (const p of live) {
    try {
      if (p.pid !== undefined) process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}

/** Waits until the process has exited (after a kill -9 or a stop). */
function exited(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((res) => p.once('exit', () => res()));
}

export class EtcdMember {
  private proc: ChildProcess | null = null;
  private stoppedBySignal = false;

  constructor(
    readonly name: string,
    readonly clientUrl: string,
    readonly peerUrl: string,
    readonly dataDir: string,
    readonly log: string,
    private readonly args: readonly string[],
    private readonly bin: string,
    /** For https:// members: how this harness itself connects (the CA, and a client certificate). */
    private readonly dispatcher: Dispatcher | undefined = undefined,
  ) {}

  private get(
    url: string,
    init: { method?: string; body?: string; timeoutMs: number },
  ): Promise<{ ok: boolean; text(): Promise<string>; json(): Promise<unknown> }> {
    const opts = {
      method: init.method ?? 'GET',
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: AbortSignal.timeout(init.timeoutMs),
    };
    return this.dispatcher === undefined
      ? fetch(url, opts)
      : undiciFetch(url, { ...opts, dispatcher: this.dispatcher });
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Starts the process (again, on the same data dir and ports after a kill). */
  start(): void {
    if (this.running) throw new Error(`etcd ${this.name} is already running (pid ${this.pid})`);
    const fd = openSync(this.log, 'a');
    // ETCD_* variables would override the flags (and could name other addresses): none reach ours.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_')));
    const setpriv = process.platform === 'linux' ? onPath('setpriv') : null;
    const [cmd, argv] =
      setpriv !== null ? [setpriv, ['--pdeathsig', 'KILL', '--', this.bin, ...this.args]] : [this.bin, [...this.args]];
    const proc = spawn(cmd, argv, { stdio: ['ignore', fd, fd], env });
    closeSync(fd);
    live.add(proc);
    proc.once('exit', () => live.delete(proc));
    this.proc = proc;
    this.stoppedBySignal = false;
  }

  /** Sends a signal: SIGKILL (waits for the exit), SIGSTOP, SIGCONT, SIGTERM. */
  async signal(sig: 'SIGKILL' | 'SIGSTOP' | 'SIGCONT' | 'SIGTERM'): Promise<void> {
    const p = this.proc;
    if (p === null || !this.running) throw new Error(`etcd ${this.name} is not running`);
    p.kill(sig);
    if (sig === 'SIGSTOP') this.stoppedBySignal = true;
    if (sig === 'SIGCONT') this.stoppedBySignal = false;
    if (sig === 'SIGKILL') await exited(p);
  }

  kill(): Promise<void> {
    return this.signal('SIGKILL');
  }

  pause(): Promise<void> {
    return this.signal('SIGSTOP');
  }

  resume(): Promise<void> {
    return this.signal('SIGCONT');
  }

  /** SIGTERM (after a SIGCONT if it was stopped), SIGKILL after `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    const p = this.proc;
    if (p === null || !this.running) return;
    if (this.stoppedBySignal) p.kill('SIGCONT');
    const t = setTimeout(() => p.kill('SIGKILL'), graceMs);
    p.kill('SIGTERM');
    await exited(p);
    clearTimeout(t);
  }

  /** This member's /health (true only while it sees a leader). */
  async healthy(timeoutMs = 1000): Promise<boolean> {
    try {
      const res = await this.get(`${this.clientUrl}/health`, { timeoutMs });
      return res.ok && (await res.text()).includes('"health":"true"');
    } catch {
      return false;
    }
  }

  /** The member's own id and the leader it knows ('' when none), from maintenance status. */
  async status(timeoutMs = 1000): Promise<{ memberId: string; leader: string } | null> {
    try {
      const res = await this.get(`${this.clientUrl}/v3/maintenance/status`, { method: 'POST', body: '{}', timeoutMs });
      const j = (await res.json()) as { header?: { member_id?: string }; leader?: string };
      return { memberId: j.header?.member_id ?? '', leader: j.leader ?? '' };
    } catch {
      return null;
    }
  }

  tail(chars = 2000): string {
    try {
      return readFileSync(this.log, 'utf8').slice(-chars);
    } catch {
      return '';
    }
  }
}

export class EtcdCluster {
  constructor(
    readonly members: readonly EtcdMember[],
    readonly version: string,
    private readonly ownDir: string | null,
  ) {}

  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** Until every running member reports a leader (`/health` true); `all`: every member must be running. */
  async waitHealthy(timeoutMs = 30_000, all = false): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const gone = this.members.find((m) => !m.running);
      if (all && gone !== undefined) throw new Error(`etcd ${gone.name} exited; log ${gone.log}:\n${gone.tail()}`);
      const up = this.members.filter((m) => m.running);
      if (up.length === 0) throw new Error('no etcd member is running');
      if ((await Promise.all(up.map((m) => m.healthy()))).every(Boolean)) return;
      if (Date.now() > deadline)
        throw new Error(`etcd not healthy after ${timeoutMs} ms; logs: ${this.members.map((m) => m.log).join(', ')}`);
      await sleep(100);
    }
  }

  /** The member the running members agree is the raft leader, if any. */
  async leader(): Promise<EtcdMember | undefined> {
    const statuses = await Promise.all(this.members.map(async (m) => ({ m, s: m.running ? await m.status() : null })));
    const id = statuses.find((x) => x.s !== null && x.s.leader !== '' && x.s.leader !== '0')?.s?.leader;
    return statuses.find((x) => x.s?.memberId === id)?.m;
  }

  /** Stops every member by PID and removes the temp dir this cluster made. */
  async stop(): Promise<void> {
    await Promise.all(this.members.map((m) => m.stop()));
    if (this.ownDir !== null) {
      rmSync(this.ownDir, { recursive: true, force: true });
      tempDirs.delete(this.ownDir);
    }
  }
}

/** Starts `size` members (concurrently: three need each other for their first election) and waits until healthy. */
export async function startEtcdCluster(opts: ClusterOptions): Promise<EtcdCluster> {
  const bin = opts.bin ?? onPath('etcd');
  if (bin === null) throw new Error('no etcd on PATH (apt-get install etcd-server)');
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', killAllNow);
  }
  const ownDir = opts.dir === undefined ? mkdtempSync(join(tmpdir(), 'hq-etcd-')) : null;
  if (ownDir !== null) tempDirs.add(ownDir);
  const dir = opts.dir ?? ownDir!;
  const prefix = opts.name ?? 'hq-etcd';
  const ports: number[] = [];
  while (ports.length < opts.size * 2) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const names = Array.from({ length: opts.size }, (_, i) => (opts.size === 1 ? prefix : `${prefix}-${i}`));
  const peer = (i: number): string => `http://127.0.0.1:${ports[2 * i + 1]}`;
  const initialCluster = names.map((n, i) => `${n}=${peer(i)}`).join(',');
  const timing = [
    ...(opts.heartbeatMs === undefined ? [] : ['--heartbeat-interval', String(opts.heartbeatMs)]),
    ...(opts.electionTimeoutMs === undefined ? [] : ['--election-timeout', String(opts.electionTimeoutMs)]),
  ];
  const tls = opts.tls;
  const dispatcher =
    tls?.client === undefined
      ? undefined
      : new Agent({
          connect: {
            ca: tls.client.ca,
            ...(tls.client.cert === undefined ? {} : { cert: tls.client.cert, key: tls.client.key }),
          },
        });
  const members = names.map((name, i) => {
    const client = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${ports[2 * i]}`;
    const dataDir = join(dir, name);
    const args = [
      '--name',
      name,
      '--data-dir',
      dataDir,
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer(i),
      '--initial-advertise-peer-urls',
      peer(i),
      '--initial-cluster',
      initialCluster,
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      `${prefix}-${ports[0]}`,
      '--logger',
      'zap',
      ...timing,
      ...(opts.extraArgs ?? []),
      ...(tls === undefined
        ? []
        : [
            '--cert-file',
            tls.certFile,
            '--key-file',
            tls.keyFile,
            '--trusted-ca-file',
            tls.caFile,
            ...(tls.clientCertAuth ? ['--client-cert-auth'] : []),
          ]),
    ];
    return new EtcdMember(name, client, peer(i), dataDir, join(dir, `${name}.log`), args, bin, dispatcher);
  });
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.match(/etcd Version: (\S+)/)?.[1] ?? '?';
  const cluster = new EtcdCluster(members, version, ownDir);
  for (const m of members) m.start();
  try {
    await cluster.waitHealthy(30_000, true);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

interface TapLike {
  teardown(fn: () => unknown): void;
}

let signalsHooked = false;

/** On SIGINT/SIGTERM: kill our members now, then let the signal do what it would have done. */
function hookSignals(): void {
  if (signalsHooked) return;
  signalsHooked = true;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = (): void => {
      killAllNow();
      process.removeListener(sig, onSignal);
      process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

/**
 * Members for one test: started with the tests' fast timing unless told otherwise, stopped on
 * teardown. Null (the test is skipped with the reason) when there is no etcd here.
 */
export async function etcdMembers(
  t: TapLike,
  opts: Partial<ClusterOptions> & { size: 1 | 3 },
): Promise<EtcdCluster | null> {
  if (onPath('etcd') === null && opts.bin === undefined) {
    missingTool(t, 'no etcd on PATH (Debian: apt-get install etcd-server etcd-client)');
    return null;
  }
  hookSignals();
  const cluster = await startEtcdCluster({ ...FAST_ETCD, ...opts });
  t.teardown(() => cluster.stop());
  return cluster;
}
