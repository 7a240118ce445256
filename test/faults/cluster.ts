/**
 * A real hq cluster in three Linux network namespaces, made and removed by the harness:
 * `hqf-<tag>-<n>-arb`, `-mbp`, `-nodeb` (`n` counts the clusters of this process, so clusters
 * running side by side never share a namespace; addresses repeat, the namespaces keep them
 * apart), one veth pair per link, each link its own
 * /30 in 10.213.0.0/24 that exists only inside the namespaces (no forwarding, no default route:
 * a cut link is really cut, and nothing can reach the host's network). Real `hq-arbiter` and
 * `hq-agent` processes run inside them under `ip netns exec`, with the fast settings of L1;
 * every daemon runs with libfaketime preloaded (when installed) so a fault can jump its wall
 * clock; fenced workers run under `hq fence run` and are restarted whenever they exit. The
 * workers of both hosts write to one shared resource, `resource.db` in the cluster's directory,
 * through lease-core's SQLite guard (S7); its table is read back into the history at the end.
 *
 * Everything the cluster records goes to one JSONL history (`harness.jsonl`) plus one worker
 * file per host, stamped with CLOCK_MONOTONIC seconds (the checker's input).
 *
 * Cleanup: `destroy()` kills every process it started by PID and deletes the namespaces; it is
 * also registered on process 'exit', SIGINT and SIGTERM, so a thrown error or Ctrl-C leaves
 * nothing behind.
 */
import { spawn, spawnSync, execFile, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { request } from 'node:http';

import Database from 'better-sqlite3';
import { sqliteGuard } from '@hq/lease-core/sqlite-guard';

import { buildRoot } from './build.js';

export const ROOT = resolve(import.meta.dirname, '../..');
const WORKER = join(ROOT, 'test/faults/worker.mjs');
const RELAY = join(ROOT, 'test/faults/relay.mjs');
// Resolved at each use: a run may pin its build (HQF_ROOT) after this module loaded, and a
// cluster may run a build of its own (a mutant beside the real build).
const ARBITER_CLI_ = (root = buildRoot()): string => join(root, 'apps/arbiter/dist/cli.js');
const AGENT_DAEMON_ = (root = buildRoot()): string => join(root, 'apps/agent/dist/daemon-cli.js');
const HQ_CLI_ = (root = buildRoot()): string => join(root, 'apps/agent/dist/cli/entry.js');
const ISSUE_TOKENS = join(ROOT, 'test/faults/issue-tokens.mjs');
/** The etcd binary (Debian's etcd-server; `etcdUnavailable` says when there is none). */
export const ETCD_BIN = ['/usr/bin/etcd', '/usr/local/bin/etcd'].find((p) => existsSync(p)) ?? '/usr/bin/etcd';
const LEASE_CORE_ = (root = buildRoot()): string => join(root, 'packages/lease-core/dist/shell/sqlite-guard.js');
export const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

export type Host = 'mbp' | 'node-b';
export const HOSTS: readonly Host[] = ['mbp', 'node-b'];
export type Node = 'arb' | 'mbp' | 'nodeb' | 'etcd';
export type Link = 'arb-mbp' | 'arb-nodeb' | 'mbp-nodeb' | 'arb-etcd';
export const LINKS: readonly Link[] = ['arb-mbp', 'arb-nodeb', 'mbp-nodeb'];
export type Daemon = 'arbiter' | 'arbiter-1' | Host;
export const DAEMONS: readonly Daemon[] = ['arbiter', 'mbp', 'node-b'];

/**
 * `store: etcd`: a fourth namespace `-etcd` holds three etcd members (Debian's etcd-server),
 * reached from the arbiters' namespace over one more link, `arb-etcd`; the arbiters' namespace
 * holds two arbiters (`arbiter` on 8470, `arbiter-1` on 8472), one prefix, one elected to decide;
 * the agents have both in `arbiterUrls`. A cut of `arb-etcd` partitions both arbiters from etcd.
 */
export type StoreKind = 'sqlite' | 'etcd';
export const ETCD_LINKS: readonly Link[] = [...LINKS, 'arb-etcd'];
export const ETCD_DAEMONS: readonly Daemon[] = ['arbiter', 'arbiter-1', 'mbp', 'node-b'];
export const ARBITERS: readonly Daemon[] = ['arbiter', 'arbiter-1'];
/** etcd members: client port on the `arb-etcd` address, peer port on the etcd namespace's loopback. */
export const ETCD_MEMBERS = [
  { name: 'hqf-etcd-0', client: 2379, peer: 2380 },
  { name: 'hqf-etcd-1', client: 2389, peer: 2390 },
  { name: 'hqf-etcd-2', client: 2399, peer: 2400 },
] as const;
/** The etcd store's timing for the harness: a killed elected arbiter is replaced after about 4 s. */
export const FAST_ETCD_STORE = { dialTimeoutSeconds: 0.5, requestTimeoutSeconds: 1, electionTtlSeconds: 4 } as const;
/** etcd's raft timing (test/etcd/members.ts FAST_ETCD): leader loss noticed within ~0.5 s. */
const ETCD_RAFT = ['--heartbeat-interval', '50', '--election-timeout', '500'] as const;

/** Per link: the two ends (namespace, device, address). Devices are named after the far end. */
export const LINK_ENDS: Record<
  Link,
  readonly [{ node: Node; dev: string; ip: string }, { node: Node; dev: string; ip: string }]
> = {
  'arb-mbp': [
    { node: 'arb', dev: 'to-mbp', ip: '10.213.0.1' },
    { node: 'mbp', dev: 'to-arb', ip: '10.213.0.2' },
  ],
  'arb-nodeb': [
    { node: 'arb', dev: 'to-nodeb', ip: '10.213.0.5' },
    { node: 'nodeb', dev: 'to-arb', ip: '10.213.0.6' },
  ],
  'mbp-nodeb': [
    { node: 'mbp', dev: 'to-nodeb', ip: '10.213.0.9' },
    { node: 'nodeb', dev: 'to-mbp', ip: '10.213.0.10' },
  ],
  'arb-etcd': [
    { node: 'arb', dev: 'to-etcd', ip: '10.213.0.13' },
    { node: 'etcd', dev: 'to-arb', ip: '10.213.0.14' },
  ],
};

const NODE_OF: Record<Daemon, Node> = { arbiter: 'arb', 'arbiter-1': 'arb', mbp: 'mbp', 'node-b': 'nodeb' };
const ARBITER_PORT = 8470;
/** Arbiter i's port (store etcd: two arbiters in one namespace). */
const arbiterPort = (d: Daemon): number => (d === 'arbiter-1' ? ARBITER_PORT + 2 : ARBITER_PORT);
const PEER_PORT = 8471;

/** The fast settings of L1, with the brief's timeouts. */
export const FAST = {
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  checkCron: '* * * * * *',
  heartbeatCron: '* * * * * *',
  refreshSeconds: 1,
  requestTimeoutSeconds: 2,
  probeTimeoutSeconds: 0.5,
  viewFreshSeconds: 3,
  promoteAfterChecks: 2,
} as const;

/** `hq fence run` flags of the workers (the checker's S3 bound uses them). */
export const FENCE_RUN = { recheckSeconds: 1, graceSeconds: 1 } as const;

/** Root qdiscs of the network faults: 100 % loss, and a slow token bucket (delay, drops on overflow). */
const DROP = ['pfifo', 'limit', '0'] as const;
const SLOW = ['tbf', 'rate', '64kbit', 'burst', '4kb', 'latency', '300ms'] as const;

/** How often a host's worker is started again while the sampler has not seen the host allowed. */
const WORKER_IDLE_RETRY_S = 2;

/** How long a daemon may take to start: with 6 clusters side by side on 2 busy cores a cluster's
 * start phase took up to 35 s (node loading fastify, pino, better-sqlite3); 20 s was too close. */
const START_WAIT_MS = 60_000;

/** Clusters made by this process: part of every namespace name. */
let clusterCount = 0;

export function hr(): number {
  return Number(process.hrtime.bigint()) / 1e9;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Why namespaces cannot be used here, or null when they can (root, `ip netns` works). */
export function netnsUnavailable(): string | null {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return 'not running as root (ip netns needs CAP_SYS_ADMIN)';
  const name = `hqf-${process.pid}-probe`;
  const add = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (add.error !== undefined) return `ip is not installed (${add.error.message})`;
  if (add.status !== 0) return `ip netns add fails: ${add.stderr.trim()}`;
  const veth = spawnSync('ip', ['-n', name, 'link', 'add', 'hqfa', 'type', 'veth', 'peer', 'name', 'hqfb'], {
    encoding: 'utf8',
  });
  spawnSync('ip', ['netns', 'del', name]);
  if (veth.status !== 0) return `veth pairs cannot be made: ${veth.stderr.trim()}`;
  if (!existsSync(ARBITER_CLI_()) || !existsSync(AGENT_DAEMON_())) return 'the daemons are not built (npx tsc -b)';
  return null;
}

/** Why store etcd cannot run here (no etcd binary), or null. */
export function etcdUnavailable(): string | null {
  return existsSync(ETCD_BIN) ? null : 'no etcd (Debian: apt-get install etcd-server)';
}

export function faketimeAvailable(): boolean {
  return existsSync(FAKETIME_LIB);
}

/** One command, asynchronously: several clusters share this process's event loop, and a blocking
 * exec on a loaded machine takes 50–250 ms — two dozen of them in one cluster's set-up stalled the
 * fence sampler of every other cluster for seconds (#306 of seed 9100, docs/RELIABILITY.md). */
function runAsync(cmd: string, args: readonly string[]): Promise<{ ok: boolean; err: string; out: string }> {
  return new Promise((done) =>
    execFile(cmd, args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      done({ ok: err === null, err: (stderr ?? '').trim() || (err?.message ?? ''), out: stdout ?? '' }),
    ),
  );
}

async function ipAsync(args: readonly string[]): Promise<void> {
  const r = await runAsync('ip', args);
  if (!r.ok) throw new Error(`ip ${args.join(' ')}: ${r.err}`);
}

const live = new Set<NetnsCluster>();
let hooked = false;
function hookCleanup(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const c of live) c.destroySync();
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      for (const c of live) c.destroySync();
      process.exit(130);
    });
  }
}

/** GET on an agent's unix socket (the harness's own client: no dependency on the code under test). */
export function askSocket(
  socketPath: string,
  path: string,
  timeoutMs: number,
): Promise<{ status: number; body: unknown } | null> {
  return new Promise((done) => {
    const req = request({ socketPath, path, method: 'GET', timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        try {
          done({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch {
          done(null);
        }
      });
      res.on('error', () => done(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(null));
    req.end();
  });
}

/** Destroys every cluster still alive (a test's teardown). */
export async function destroyAll(): Promise<void> {
  await Promise.all([...live].map((c) => c.destroy()));
}

interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  exited: boolean;
}

export interface RelayAnswer {
  readonly status?: number;
  readonly body?: unknown;
  readonly error?: string;
  readonly t0: number;
  readonly t1: number;
}

export class NetnsCluster {
  readonly ns: Record<Node, string>;
  readonly dir: string;
  readonly history: string;
  /** The shared resource both hosts' workers write to (SQLite, guarded by generation). */
  readonly resource: string;
  adminToken = '';
  private readonly daemons = new Map<Daemon, Proc>();
  private readonly all = new Map<number, Proc>();
  private readonly workerSup = new Map<Host, Proc | null>();
  private readonly paused = new Set<Host>();
  private workersOn = false;
  private relay: Proc | null = null;
  private relayWaiters = new Map<number, (a: RelayAnswer) => void>();
  private relayId = 0;
  private seqs = new Map<number, number>();
  private destroyed = false;
  /** The namespaces and the directory are gone (by `destroy` or `destroySync`). */
  private removed = false;
  private readonly faketime: boolean;
  /** Every worker supervisor spawn, for the summary. */
  workerSpawns = 0;

  /** Every etcd member this cluster runs (store etcd), by index into ETCD_MEMBERS. */
  private readonly etcdProcs = new Map<number, Proc>();

  private constructor(
    readonly tag: string,
    readonly store: StoreKind,
    /** The build whose daemons and CLI this cluster runs; unset: `buildRoot()` at each use. */
    private readonly root?: string,
  ) {
    const n = clusterCount++;
    this.ns = {
      arb: `hqf-${tag}-${n}-arb`,
      mbp: `hqf-${tag}-${n}-mbp`,
      nodeb: `hqf-${tag}-${n}-nodeb`,
      etcd: `hqf-${tag}-${n}-etcd`,
    };
    this.dir = mkdtempSync(join(tmpdir(), 'hqf-'));
    this.history = join(this.dir, 'harness.jsonl');
    this.resource = join(this.dir, 'resource.db');
    this.faketime = faketimeAvailable();
  }

  private build(): string {
    return this.root ?? buildRoot();
  }

  /** Makes the namespaces, links, configs and the shared resource (no daemon runs yet; `start()` issues the tokens first). */
  static async create(tag = String(process.pid), store: StoreKind = 'sqlite', root?: string): Promise<NetnsCluster> {
    hookCleanup();
    const c = new NetnsCluster(tag, store, root);
    live.add(c);
    try {
      await c.makeNetwork();
      c.writeConfigs();
      c.makeResource();
    } catch (err) {
      c.destroySync();
      throw err;
    }
    c.record({
      src: 'harness',
      kind: 'config',
      hosts: HOSTS,
      promoteAfterChecks: FAST.promoteAfterChecks,
      ttlSeconds: FAST.ttlSeconds,
      recheckSeconds: FENCE_RUN.recheckSeconds,
      graceSeconds: FENCE_RUN.graceSeconds,
      faketime: c.faketime,
      store,
      t: hr(),
    });
    return c;
  }

  /** This mode's namespaces, links and daemons. */
  get nodes(): readonly Node[] {
    return this.store === 'etcd' ? ['arb', 'mbp', 'nodeb', 'etcd'] : ['arb', 'mbp', 'nodeb'];
  }
  get links(): readonly Link[] {
    return this.store === 'etcd' ? ETCD_LINKS : LINKS;
  }
  get daemonNames(): readonly Daemon[] {
    return this.store === 'etcd' ? ETCD_DAEMONS : DAEMONS;
  }
  get arbiters(): readonly Daemon[] {
    return this.store === 'etcd' ? ARBITERS : ['arbiter'];
  }

  record(r: { [k: string]: unknown }): void {
    appendFileSync(this.history, `${JSON.stringify(r)}\n`);
  }

  /** The shared resource: WAL (readers never block the writer), the writes table and the guard's mark. */
  private makeResource(): void {
    const db = new Database(this.resource);
    try {
      db.pragma('journal_mode = WAL');
      db.exec(
        'CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, host TEXT NOT NULL, pid INTEGER NOT NULL, seq INTEGER NOT NULL, generation INTEGER NOT NULL, t REAL NOT NULL) STRICT',
      );
      sqliteGuard(db); // creates the guard's table, so the workers never race to
    } finally {
      db.close();
    }
  }

  /** The resource's whole history at the end: every accepted write in commit order, and the guard's mark. */
  recordResource(): void {
    try {
      const db = new Database(this.resource, { readonly: true, fileMustExist: true });
      try {
        const rows = db.prepare('SELECT id, host, pid, seq, generation, t FROM writes ORDER BY id').all();
        const highest = sqliteGuard(db as never).highest('work');
        this.record({ src: 'resource', t: hr(), complete: true, highest, rows });
      } finally {
        db.close();
      }
    } catch (err) {
      this.record({ src: 'resource', t: hr(), complete: false, error: (err as Error).message.slice(0, 200) });
    }
  }

  workerFile(h: Host): string {
    return join(this.dir, `worker-${h}.jsonl`);
  }

  /** The whole history: the harness's file and every worker file. */
  readHistory(): string {
    const parts = [this.history, ...HOSTS.map((h) => this.workerFile(h))]
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f, 'utf8'));
    return parts.map((p) => (p.endsWith('\n') || p === '' ? p : `${p}\n`)).join('');
  }

  private async makeNetwork(): Promise<void> {
    await Promise.all(
      this.nodes
        .map((node) => this.ns[node])
        .map(async (n) => {
          await runAsync('ip', ['netns', 'del', n]); // a leftover of a killed earlier run with this pid
          await ipAsync(['netns', 'add', n]);
          await ipAsync(['-n', n, 'link', 'set', 'lo', 'up']);
        }),
    );
    // One link at a time: two `ip link add` into the same namespace at once can race on netlink.
    for (const link of this.links) {
      const [a, b] = LINK_ENDS[link];
      // Made inside the first namespace and moved: the host's namespace never sees the pair.
      await ipAsync([
        '-n',
        this.ns[a.node],
        'link',
        'add',
        a.dev,
        'type',
        'veth',
        'peer',
        'name',
        b.dev,
        'netns',
        this.ns[b.node],
      ]);
      for (const end of [a, b]) {
        await ipAsync(['-n', this.ns[end.node], 'addr', 'add', `${end.ip}/30`, 'dev', end.dev]);
        await ipAsync(['-n', this.ns[end.node], 'link', 'set', end.dev, 'up']);
      }
    }
  }

  get arbiterConfig(): string {
    return join(this.dir, 'arbiter.json');
  }
  agentConfig(h: Host): string {
    return join(this.dir, `${h}.json`);
  }
  stateDir(h: Host): string {
    return join(this.dir, h);
  }
  socket(h: Host): string {
    return join(this.dir, `${h}.sock`);
  }
  timeFile(d: Daemon): string {
    return join(this.dir, `faketime-${d}`);
  }
  other(h: Host): Host {
    return h === 'mbp' ? 'node-b' : 'mbp';
  }
  /** An agent's address on its link to the arbiter (the arbiter probes it there). */
  arbLinkIp(h: Host): string {
    return h === 'mbp' ? LINK_ENDS['arb-mbp'][1].ip : LINK_ENDS['arb-nodeb'][1].ip;
  }
  /** An agent's address on the mbp↔node-b link (its peer reaches it there). */
  peerLinkIp(h: Host): string {
    return h === 'mbp' ? LINK_ENDS['mbp-nodeb'][0].ip : LINK_ENDS['mbp-nodeb'][1].ip;
  }
  arbiterIpFor(h: Host): string {
    return h === 'mbp' ? LINK_ENDS['arb-mbp'][0].ip : LINK_ENDS['arb-nodeb'][0].ip;
  }

  /** Arbiter `d`'s config file (`arbiterConfig` is the first's). */
  configOf(d: Daemon): string {
    return d === 'arbiter-1' ? join(this.dir, 'arbiter-1.json') : this.arbiterConfig;
  }

  /** etcd member i's client URL, as the arbiters' namespace reaches it. */
  etcdUrl(i: number): string {
    return `http://${LINK_ENDS['arb-etcd'][1].ip}:${ETCD_MEMBERS[i]!.client}`;
  }

  private writeConfigs(): void {
    for (const d of this.arbiters)
      writeFileSync(
        this.configOf(d),
        JSON.stringify({
          candidates: [...HOSTS],
          // The arbiter's own keys only (S6: one owner per setting).
          ttlSeconds: FAST.ttlSeconds,
          safetyMarginSeconds: FAST.safetyMarginSeconds,
          checkCron: FAST.checkCron,
          viewFreshSeconds: FAST.viewFreshSeconds,
          promoteAfterChecks: FAST.promoteAfterChecks,
          tailscaleBin: '',
          probeTimeoutSeconds: FAST.probeTimeoutSeconds,
          listen: { host: '0.0.0.0', port: arbiterPort(d) },
          dataDir: join(this.dir, d),
          healthUrls: Object.fromEntries(HOSTS.map((h) => [h, `http://${this.arbLinkIp(h)}:${PEER_PORT}/v1/health`])),
          ...(this.store === 'etcd'
            ? {
                store: {
                  kind: 'etcd',
                  endpoints: ETCD_MEMBERS.map((_, i) => this.etcdUrl(i)),
                  prefix: '/hqf',
                  advertiseUrl: `http://127.0.0.1:${arbiterPort(d)}`,
                  ...FAST_ETCD_STORE,
                },
              }
            : {}),
        }),
      );
    for (const h of HOSTS) {
      mkdirSync(this.stateDir(h), { recursive: true, mode: 0o700 });
      chmodSync(this.stateDir(h), 0o700);
      const o = this.other(h);
      writeFileSync(
        this.agentConfig(h),
        JSON.stringify({
          hostName: h,
          ...(this.store === 'etcd'
            ? { arbiterUrls: this.arbiters.map((d) => `http://${this.arbiterIpFor(h)}:${arbiterPort(d)}`) }
            : { arbiterUrl: `http://${this.arbiterIpFor(h)}:${ARBITER_PORT}` }),
          stateDir: this.stateDir(h),
          socketPath: this.socket(h),
          listen: { host: '0.0.0.0', port: PEER_PORT },
          // The agent's own keys only: it reads the lease timing from the record.
          heartbeatCron: FAST.heartbeatCron,
          refreshSeconds: FAST.refreshSeconds,
          requestTimeoutSeconds: FAST.requestTimeoutSeconds,
          probeTimeoutSeconds: FAST.probeTimeoutSeconds,
          tailscaleBin: '',
          peers: { [o]: `http://${this.peerLinkIp(o)}:${PEER_PORT}` },
          // The other agent as this agent can reach it: over the mbp↔node-b link (its
          // arbiter-link address has no route from here).
          healthUrls: { [o]: `http://${this.peerLinkIp(o)}:${PEER_PORT}/v1/health` },
        }),
      );
    }
    for (const d of this.daemonNames) writeFileSync(this.timeFile(d), '+0s\n');
  }

  /** Issued in this process with the tested build's own store and `issueToken` (what
   * `hq-arbiter token issue` runs): three node starts per schedule cost ~2.5 s of CPU, which six
   * clusters side by side on two cores could not spare. */
  private async issueTokens(): Promise<void> {
    if (this.store === 'etcd') return this.issueEtcdTokens();
    const { SqliteStore } = (await import(
      pathToFileURL(join(this.build(), 'apps/arbiter/dist/store/sqlite/lease.js')).href
    )) as { SqliteStore: new (o: { dataDir: string; ttlSeconds: number }) => { close(): void } };
    // issueToken is async since the store seam serves etcd too: awaited (a Promise written as the token was the harness's bug)
    const { issueToken } = (await import(pathToFileURL(join(this.build(), 'apps/arbiter/dist/auth.js')).href)) as {
      issueToken: (store: unknown, machine: string, scope: string, now: number) => Promise<string>;
    };
    const store = new SqliteStore({ dataDir: join(this.dir, 'arbiter'), ttlSeconds: FAST.ttlSeconds });
    try {
      const issue = (machine: string, scope: string): Promise<string> =>
        issueToken(store, machine, scope, Date.now() / 1000);
      for (const h of HOSTS)
        writeFileSync(join(this.stateDir(h), 'token'), `${await issue(h, 'member')}\n`, { mode: 0o600 });
      this.adminToken = await issue('ops', 'admin');
    } finally {
      store.close();
    }
    const peer = randomBytes(32).toString('hex');
    for (const h of HOSTS) writeFileSync(join(this.stateDir(h), 'peer-token'), `${peer}\n`, { mode: 0o600 });
  }

  /** Store etcd: the tokens go into the prefix, written from inside the arbiters' namespace. */
  private async issueEtcdTokens(): Promise<void> {
    // Tried three times: on a loaded machine one etcd call can miss the 1 s request timeout (a
    // token written by a try that failed is never handed out: harmless).
    let r = { ok: false, err: '', out: '' };
    for (let i = 0; i < 3 && !r.ok; i++)
      r = await runAsync('ip', [
        'netns',
        'exec',
        this.ns.arb,
        process.execPath,
        ISSUE_TOKENS,
        this.build(),
        this.arbiterConfig,
        ...HOSTS.map((h) => `${h}:member`),
        'ops:admin',
      ]);
    if (!r.ok) throw new Error(`issuing the tokens into etcd: ${r.err.slice(0, 300)}`);
    const tokens = JSON.parse(r.out) as Record<string, string>;
    for (const h of HOSTS) writeFileSync(join(this.stateDir(h), 'token'), `${tokens[h]}\n`, { mode: 0o600 });
    this.adminToken = tokens['ops']!;
    const peer = randomBytes(32).toString('hex');
    for (const h of HOSTS) writeFileSync(join(this.stateDir(h), 'peer-token'), `${peer}\n`, { mode: 0o600 });
  }

  private env(d: Daemon | null): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };
    delete env.LD_PRELOAD;
    if (d !== null && this.faketime) {
      env.LD_PRELOAD = FAKETIME_LIB;
      env.FAKETIME_NO_CACHE = '1';
      env.FAKETIME_TIMESTAMP_FILE = this.timeFile(d);
      env.DONT_FAKE_MONOTONIC = '1';
    }
    return env;
  }

  /** Spawns `ip netns exec NS node ARGS…` (ip execs node: the PID is node's); `bin` another program. */
  private spawnIn(
    node: Node,
    name: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    logged: boolean,
    bin: string = process.execPath,
  ): Proc {
    const child = spawn('ip', ['netns', 'exec', this.ns[node], bin, ...args], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    if (child.pid === undefined) throw new Error(`cannot spawn ${name}`);
    const p: Proc = { name, child, pid: child.pid, exited: false };
    this.all.set(p.pid, p);
    child.on('error', () => undefined);
    child.once('exit', (code, signal) => {
      p.exited = true;
      if (logged && !this.destroyed)
        this.record({ src: 'harness', kind: 'exit', name, pid: p.pid, code, signal, t: hr() });
    });
    if (logged) {
      this.record({ src: 'harness', kind: 'spawn', name, pid: p.pid, t: hr() });
      for (const stream of [child.stdout, child.stderr]) {
        if (stream === null) continue;
        createInterface({ input: stream }).on('line', (raw) => {
          if (this.destroyed) return;
          const seq = this.seqs.get(p.pid) ?? 0;
          this.seqs.set(p.pid, seq + 1);
          let line: unknown = raw;
          try {
            line = JSON.parse(raw);
          } catch {
            /* kept as text */
          }
          this.record({ src: 'daemon', name, pid: p.pid, seq, t: hr(), line });
        });
      }
    } else {
      child.stdout?.resume();
      child.stderr?.resume();
    }
    return p;
  }

  daemonPid(d: Daemon): number | null {
    const p = this.daemons.get(d);
    return p !== undefined && !p.exited ? p.pid : null;
  }

  async startArbiter(d: Daemon = 'arbiter'): Promise<void> {
    this.daemons.set(
      d,
      this.spawnIn('arb', d, [ARBITER_CLI_(this.build()), 'serve', '--config', this.configOf(d)], this.env(d), true),
    );
    if (this.relay === null || this.relay.exited) this.startRelay();
    const base = `http://127.0.0.1:${arbiterPort(d)}`;
    await this.waitFor(
      async () => (await this.http('GET', '/v1/health', undefined, 1000, undefined, base)).status === 200,
      START_WAIT_MS,
      `${d} answers /v1/health`,
    );
  }

  // ---------------------------------------------------------------- store etcd

  /** Starts etcd member i in the etcd namespace (again on its data dir after a kill); its log is a file. */
  startEtcdMember(i: number): void {
    const m = ETCD_MEMBERS[i]!;
    const old = this.etcdProcs.get(i);
    if (old !== undefined && !old.exited) return;
    const peer = (x: (typeof ETCD_MEMBERS)[number]): string => `http://127.0.0.1:${x.peer}`;
    const client = this.etcdUrl(i);
    const args = [
      '--name',
      m.name,
      '--data-dir',
      join(this.dir, 'etcd', m.name),
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer(m),
      '--initial-advertise-peer-urls',
      peer(m),
      '--initial-cluster',
      ETCD_MEMBERS.map((x) => `${x.name}=${peer(x)}`).join(','),
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      `hqf-${this.ns.etcd}`,
      '--log-outputs',
      join(this.dir, 'etcd', `${m.name}.log`),
      '--logger',
      'zap',
      ...ETCD_RAFT,
    ];
    // ETCD_* variables would override the flags: none reach the members.
    const env = Object.fromEntries(Object.entries(this.env(null)).filter(([k]) => !k.startsWith('ETCD_')));
    const p = this.spawnIn('etcd', m.name, args, env, false, ETCD_BIN);
    this.etcdProcs.set(i, p);
    this.record({ src: 'harness', kind: 'etcd-start', member: i, pid: p.pid, t: hr() });
  }

  etcdRunning(i: number): boolean {
    const p = this.etcdProcs.get(i);
    return p !== undefined && !p.exited;
  }

  /** kill -9 of etcd member i; resolves when it is gone. */
  async killEtcdMember(i: number): Promise<void> {
    const p = this.etcdProcs.get(i);
    if (p === undefined || p.exited) return;
    const gone = new Promise<void>((r) => p.child.once('exit', () => r()));
    this.signal(p.pid, 'SIGKILL');
    await Promise.race([gone, sleep(5000)]);
    this.record({ src: 'harness', kind: 'etcd-kill', member: i, pid: p.pid, t: hr() });
  }

  /** Until every running member answers /health true (asked from the arbiters' namespace). */
  async waitEtcdHealthy(timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      async () => {
        const up = ETCD_MEMBERS.map((_, i) => i).filter((i) => this.etcdRunning(i));
        const answers = await Promise.all(
          up.map((i) => this.http('GET', '/health', undefined, 1000, undefined, this.etcdUrl(i))),
        );
        return answers.every((a) => a.status === 200 && JSON.stringify(a.body).includes('"health":"true"'));
      },
      timeoutMs,
      'the etcd members are healthy',
    );
  }

  /** The arbiter that says it is elected now (store etcd), or null. */
  async elected(): Promise<Daemon | null> {
    for (const d of this.arbiters) {
      if (this.daemonPid(d) === null) continue;
      const a = await this.http('GET', '/v1/health', undefined, 1000, undefined, `http://127.0.0.1:${arbiterPort(d)}`);
      if ((a.body as { arbiters?: { elected?: boolean } } | undefined)?.arbiters?.elected === true) return d;
    }
    return null;
  }

  async startAgent(h: Host): Promise<void> {
    this.daemons.set(
      h,
      this.spawnIn(NODE_OF[h], h, [AGENT_DAEMON_(this.build()), '--config', this.agentConfig(h)], this.env(h), true),
    );
    await this.waitFor(async () => existsSync(this.socket(h)), START_WAIT_MS, `agent ${h} opens its socket`);
  }

  async start(): Promise<void> {
    if (this.store === 'etcd') {
      mkdirSync(join(this.dir, 'etcd'), { recursive: true, mode: 0o700 });
      for (const i of ETCD_MEMBERS.keys()) this.startEtcdMember(i);
      if (this.relay === null || this.relay.exited) this.startRelay();
      await this.waitEtcdHealthy();
    }
    if (this.adminToken === '') await this.issueTokens();
    // All at once: node takes seconds to load on a small machine.
    await Promise.all([...this.arbiters.map((d) => this.startArbiter(d)), ...HOSTS.map((h) => this.startAgent(h))]);
  }

  private startRelay(): void {
    const p = this.spawnIn('arb', 'relay', [RELAY, `http://127.0.0.1:${ARBITER_PORT}`], this.env(null), false);
    this.relay = p;
    createInterface({ input: p.child.stdout! }).on('line', (raw) => {
      try {
        const a = JSON.parse(raw) as RelayAnswer & { id: number };
        this.relayWaiters.get(a.id)?.(a);
        this.relayWaiters.delete(a.id);
      } catch {
        /* not an answer */
      }
    });
  }

  /**
   * One HTTP request to the arbiter from inside its namespace (`base`: to that URL only). Store
   * etcd: to each arbiter in turn, the next when one does not answer or answers 503 — what an
   * agent with `arbiterUrls` does.
   */
  async http(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = 3000,
    token?: string,
    base?: string,
  ): Promise<RelayAnswer> {
    if (base !== undefined || this.store === 'sqlite') return this.httpTo(method, path, body, timeoutMs, token, base);
    let a: RelayAnswer = { error: 'no arbiter', t0: hr(), t1: hr() };
    for (const d of this.arbiters) {
      const t0 = hr();
      a = await this.httpTo(method, path, body, timeoutMs, token, `http://127.0.0.1:${arbiterPort(d)}`);
      // t0 of the whole try: an acknowledgement's interval covers every arbiter asked
      a = { ...a, t0: Math.min(a.t0, t0) };
      if (a.error === undefined && a.status !== 503) return a;
    }
    return a;
  }

  private httpTo(
    method: string,
    path: string,
    body: unknown,
    timeoutMs: number,
    token: string | undefined,
    base: string | undefined,
  ): Promise<RelayAnswer> {
    const relay = this.relay;
    if (relay === null || relay.exited) return Promise.resolve({ error: 'no relay', t0: hr(), t1: hr() });
    const id = ++this.relayId;
    return new Promise((done) => {
      const guard = setTimeout(() => {
        this.relayWaiters.delete(id);
        done({ error: 'relay timeout', t0: hr(), t1: hr() });
      }, timeoutMs + 2000);
      this.relayWaiters.set(id, (a) => {
        clearTimeout(guard);
        done(a);
      });
      const headers = token !== undefined ? { authorization: `Bearer ${token}` } : undefined;
      relay.child.stdin!.write(`${JSON.stringify({ id, method, path, body, headers, timeoutMs, base })}\n`);
    });
  }

  /** `GET /v1/lease`, recorded as a read for S4. */
  async readLease(): Promise<{ holder: string | null; generation: number; revision: number } | null> {
    const a = await this.http('GET', '/v1/lease');
    const b = a.body as { holder?: string | null; generation?: number; revision?: number } | undefined;
    if (a.status !== 200 || typeof b?.generation !== 'number' || typeof b.revision !== 'number') return null;
    this.record({
      src: 'read',
      generation: b.generation,
      revision: b.revision,
      holder: b.holder ?? null,
      t0: a.t0,
      t1: a.t1,
    });
    return { holder: b.holder ?? null, generation: b.generation, revision: b.revision };
  }

  /** An acknowledged CAS for S4: the holder's renewal with the admin token (recorded when 200). */
  async renewAsHolder(): Promise<boolean> {
    const lease = await this.readLease();
    if (lease === null || lease.holder === null) return false;
    const a = await this.http(
      'POST',
      '/v1/lease/renew',
      { host: lease.holder, generation: lease.generation },
      3000,
      this.adminToken,
    );
    const l = (a.body as { lease?: { generation?: number; revision?: number } } | undefined)?.lease;
    this.record({
      src: 'client',
      op: 'renew',
      host: lease.holder,
      status: a.status ?? null,
      generation: l?.generation ?? null,
      revision: l?.revision ?? null,
      t0: a.t0,
      t1: a.t1,
    });
    return a.status === 200;
  }

  /** The first lease: what `hq lease acquire` sends (the host's member token, seen generation 0),
   * from the harness through the relay, retried until granted; recorded as an acknowledged CAS.
   * (The CLI itself is tested in test/system; starting it here cost 1.3 s of CPU per schedule.) */
  async acquire(h: Host = 'mbp', waitSeconds = 30): Promise<void> {
    const token = readFileSync(join(this.stateDir(h), 'token'), 'utf8').trim();
    const deadline = hr() + waitSeconds;
    let last = '';
    for (;;) {
      const a = await this.http('POST', '/v1/lease/acquire', { host: h, seenGeneration: 0 }, 3000, token);
      const lease = (a.body as { lease?: { generation?: number; revision?: number } } | undefined)?.lease;
      if (a.status === 200) {
        this.record({
          src: 'client',
          op: 'acquire',
          host: h,
          status: 200,
          generation: lease?.generation ?? null,
          revision: lease?.revision ?? null,
          t0: a.t0,
          t1: a.t1,
        });
        return;
      }
      last = a.error ?? `${a.status} ${JSON.stringify(a.body)}`;
      if (hr() > deadline) throw new Error(`acquire for ${h} not granted in ${waitSeconds} s: ${last.slice(0, 200)}`);
      await sleep(250);
    }
  }

  // ---------------------------------------------------------------- workload

  /** Starts the fenced worker loop on both hosts: a worker that exits is started again. */
  startWorkers(): void {
    this.workersOn = true;
    for (const h of HOSTS) this.spawnWorker(h);
  }

  private spawnWorker(h: Host): void {
    if (!this.workersOn || this.destroyed) return;
    if (this.paused.has(h)) {
      this.workerSup.set(h, null);
      return;
    }
    const env = { ...this.env(null), HQF_HOST: h, HQF_LEASE_CORE: LEASE_CORE_(this.build()) };
    const p = this.spawnIn(
      NODE_OF[h],
      `fence-${h}`,
      [
        HQ_CLI_(this.build()),
        'fence',
        'run',
        '--verbose',
        '--role',
        'cron',
        '--recheck',
        String(FENCE_RUN.recheckSeconds),
        '--grace',
        String(FENCE_RUN.graceSeconds),
        '--config',
        this.agentConfig(h),
        '--',
        process.execPath,
        WORKER,
        this.workerFile(h),
        this.resource,
      ],
      env,
      false,
    );
    this.workerSpawns++;
    this.workerSup.set(h, p);
    // Again after 300 ms once the sampler has seen this host allowed since the exit, else after
    // WORKER_IDLE_RETRY_S: a standby's `hq fence run` exits at once (skip), and starting node
    // every 300 ms on both standbys of six clusters was a third of the run's CPU.
    p.child.once('exit', () => {
      if (this.workerSup.get(h) !== p) return;
      const exited = hr();
      const again = (): void => {
        if (this.workerSup.get(h) !== p || !this.workersOn || this.destroyed) return;
        const f = this.lastFence.get(h);
        const waited = hr() - exited;
        if ((f?.run && f.t > exited) || waited >= WORKER_IDLE_RETRY_S) this.spawnWorker(h);
        else setTimeout(again, 100);
      };
      setTimeout(again, 300);
    });
  }

  /**
   * Instead of `startWorkers`: one `hq fence run --follow` per host running the same worker, and
   * nothing else restarting it (the follower waits, runs, stops and waits again by itself).
   */
  startFollowers(): void {
    this.workersOn = true;
    for (const h of HOSTS) {
      const env = { ...this.env(null), HQF_HOST: h, HQF_LEASE_CORE: LEASE_CORE_(this.build()) };
      const args = [
        HQ_CLI_(this.build()),
        'fence',
        'run',
        '--follow',
        '--verbose',
        '--role',
        'cron',
        '--recheck',
        String(FENCE_RUN.recheckSeconds),
        '--grace',
        String(FENCE_RUN.graceSeconds),
      ];
      const p = this.spawnIn(
        NODE_OF[h],
        `follow-${h}`,
        [...args, '--config', this.agentConfig(h), '--', process.execPath, WORKER, this.workerFile(h), this.resource],
        env,
        false,
      );
      this.workerSpawns++;
      this.workerSup.set(h, p);
    }
  }

  /** Stops the workers (SIGTERM to each supervisor, which forwards it) and waits for them. */
  async stopWorkers(): Promise<void> {
    this.workersOn = false;
    const ps = [...this.workerSup.values()].filter((p): p is Proc => p !== null && !p.exited);
    for (const p of ps) this.signalTree(p.pid, 'SIGCONT');
    for (const p of ps) this.signal(p.pid, 'SIGTERM');
    await this.waitFor(async () => ps.every((p) => p.exited), 5000, 'the workers stop').catch(() => {
      for (const p of ps) this.signalTree(p.pid, 'SIGKILL');
    });
    await sleep(200);
  }

  private sampling = false;
  /** The latest fence answer of each agent (from the sampler). */
  readonly lastFence = new Map<Host, { run: boolean; generation: number; holder: string | null; t: number }>();
  private samplers: Promise<void>[] = [];

  /** Asks both agents' fence sockets every 200 ms and records each answer (S1 claims, S2 validity overlap, S3 bound, L1). */
  startSampler(): void {
    this.sampling = true;
    for (const h of HOSTS) {
      this.samplers.push(
        (async () => {
          while (this.sampling && !this.destroyed) {
            const t0 = hr();
            const r = await askSocket(this.socket(h), '/v1/fence?role=cron', 1000);
            const t1 = hr();
            if (r !== null && r.status === 200 && !this.destroyed) {
              const b = r.body as {
                run?: boolean;
                reason?: string;
                generation?: number;
                holder?: string | null;
                validForSeconds?: number | null;
              };
              this.lastFence.set(h, {
                run: b.run === true,
                generation: b.generation ?? 0,
                holder: b.holder ?? null,
                t: t1,
              });
              this.record({
                src: 'fence',
                host: h,
                run: b.run ?? null,
                reason: b.reason ?? null,
                generation: b.generation ?? null,
                holder: b.holder ?? null,
                validForSeconds: b.validForSeconds ?? null,
                t0,
                t1,
              });
            } else if (!this.destroyed) {
              // Asked and not answered (agent stopped, killed, socket gone): the checker tells a
              // host that did not answer from a stretch the sampler never asked.
              this.record({
                src: 'fence',
                host: h,
                run: null,
                error: r === null ? 'no answer' : `status ${r.status}`,
                t0,
                t1,
              });
            }
            await sleep(200);
          }
        })(),
      );
    }
  }

  async stopSampler(): Promise<void> {
    this.sampling = false;
    await Promise.all(this.samplers);
    this.samplers = [];
  }

  // ---------------------------------------------------------------- faults

  /** Cuts a link both ways (both ends down) or heals it. */
  async linkDown(link: Link, down: boolean): Promise<void> {
    await Promise.all(
      LINK_ENDS[link].map((end) => ipAsync(['-n', this.ns[end.node], 'link', 'set', end.dev, down ? 'down' : 'up'])),
    );
  }

  /** The root qdisc of one link end: `DROP` (a zero-length pfifo), `SLOW` (a slow token bucket), or
   * none (`null`: back to the default; deleting a qdisc that is not there fails harmlessly). */
  private qdisc(
    end: { node: Node; dev: string },
    spec: readonly string[] | null,
  ): Promise<{ ok: boolean; err: string }> {
    const base = ['netns', 'exec', this.ns[end.node], 'tc', 'qdisc'];
    return runAsync(
      'ip',
      spec === null ? [...base, 'del', 'dev', end.dev, 'root'] : [...base, 'replace', 'dev', end.dev, 'root', ...spec],
    );
  }

  /** Drops everything leaving `from`'s end of `link` (one direction only): a zero-length pfifo. */
  async oneWay(link: Link, fromNode: Node, on: boolean): Promise<void> {
    const end = LINK_ENDS[link].find((e) => e.node === fromNode)!;
    const r = await this.qdisc(end, on ? DROP : null);
    if (!r.ok && on)
      throw new Error(`tc qdisc replace dev ${end.dev} root ${DROP.join(' ')} in ${this.ns[end.node]}: ${r.err}`);
  }

  /**
   * Delay and loss on a link. This kernel has no sch_netem, so: a slow token bucket (queueing
   * delay, drops when its queue overflows) on both ends, flipped at random moments to a
   * zero-length queue (bursts of 100 % loss) by `flakyStep`.
   */
  async flaky(link: Link, mode: 'slow' | 'drop' | 'off'): Promise<void> {
    await Promise.all(
      LINK_ENDS[link].map((end) => this.qdisc(end, mode === 'off' ? null : mode === 'drop' ? DROP : SLOW)),
    );
  }

  signal(pid: number, sig: NodeJS.Signals): boolean {
    try {
      process.kill(pid, sig);
      return true;
    } catch {
      return false;
    }
  }

  /** PIDs of `pid` and all its descendants (parent links read from /proc/PID/stat). */
  tree(pid: number): number[] {
    const kids = new Map<number, number[]>();
    for (const e of readdirSync('/proc')) {
      if (!/^[0-9]+$/.test(e)) continue;
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        const l = kids.get(ppid) ?? [];
        l.push(Number(e));
        kids.set(ppid, l);
      } catch {
        /* gone */
      }
    }
    const out = [pid];
    for (let i = 0; i < out.length; i++) out.push(...(kids.get(out[i]!) ?? []));
    return out;
  }

  signalTree(pid: number, sig: NodeJS.Signals): void {
    for (const p of this.tree(pid)) this.signal(p, sig);
  }

  /** kill -9 of a daemon; resolves when it is gone. */
  async killDaemon(d: Daemon): Promise<void> {
    const p = this.daemons.get(d);
    if (p === undefined || p.exited) return;
    const gone = new Promise<void>((r) => p.child.once('exit', () => r()));
    this.signal(p.pid, 'SIGCONT');
    this.signal(p.pid, 'SIGKILL');
    await Promise.race([gone, sleep(5000)]);
  }

  async restartDaemon(d: Daemon): Promise<void> {
    if (this.daemonPid(d) !== null) return;
    if (d === 'arbiter' || d === 'arbiter-1') {
      await this.startArbiter(d);
      // S4: read the record back at once after every restart.
      await this.readLease();
    } else {
      await this.startAgent(d);
    }
  }

  stopDaemon(d: Daemon, stop: boolean): void {
    const pid = this.daemonPid(d);
    if (pid !== null) this.signal(pid, stop ? 'SIGSTOP' : 'SIGCONT');
  }

  /** Jumps a daemon's wall clock: libfaketime re-reads the offset file on every call. */
  clockOffset(d: Daemon, seconds: number): void {
    writeFileSync(this.timeFile(d), `${seconds >= 0 ? '+' : ''}${seconds}s\n`);
  }

  get canJumpClocks(): boolean {
    return this.faketime;
  }

  /** Laptop sleep: every process of the host (agent, supervisor, worker) stopped, or resumed. */
  async sleepHost(h: Host, asleep: boolean): Promise<void> {
    const pids: number[] = [];
    const agent = this.daemonPid(h);
    if (agent !== null) pids.push(agent);
    const sup = this.workerSup.get(h);
    if (sup !== undefined && sup !== null && !sup.exited) pids.push(...this.tree(sup.pid));
    if (asleep) {
      // Recorded first: the checker's S3 bound excuses this host's writes from here to just after the wake.
      this.record({ src: 'harness', kind: 'asleep', host: h, pids, t: hr() });
      this.paused.add(h);
      for (const p of pids) this.signal(p, 'SIGSTOP');
    } else {
      // All at once, as a wake-up: no process of the host is favoured.
      if (pids.length > 0) await runAsync('kill', ['-CONT', ...pids.map(String)]);
      this.record({ src: 'harness', kind: 'woken', host: h, pids, t: hr() });
      this.paused.delete(h);
      if (this.workersOn && (sup === undefined || sup === null || sup.exited)) this.spawnWorker(h);
    }
  }

  /** Undoes every network fault and clock offset, resumes every process. */
  async healAll(): Promise<void> {
    await Promise.all(
      this.links.flatMap((link) =>
        LINK_ENDS[link].map(async (end) => {
          await this.qdisc(end, null);
          await runAsync('ip', ['-n', this.ns[end.node], 'link', 'set', end.dev, 'up']);
        }),
      ),
    );
    for (const d of this.daemonNames) writeFileSync(this.timeFile(d), '+0s\n');
    for (const h of HOSTS) if (this.paused.has(h)) await this.sleepHost(h, false);
    for (const p of this.all.values()) if (!p.exited) this.signal(p.pid, 'SIGCONT');
  }

  // ---------------------------------------------------------------- end

  /** The arbiter's whole event log, page by page, recorded for S1/S5. */
  async recordEvents(): Promise<void> {
    const events: unknown[] = [];
    let after = 0;
    let complete = false;
    for (let page = 0; page < 200; page++) {
      const a = await this.http('GET', `/v1/events?after=${after}&limit=1000`);
      const list = (a.body as { events?: { id: number }[] } | undefined)?.events;
      if (a.status !== 200 || !Array.isArray(list)) break;
      events.push(...list);
      if (list.length < 1000) {
        complete = true;
        break;
      }
      after = list[list.length - 1]!.id;
    }
    this.record({ src: 'events', t: hr(), complete, events });
  }

  /** Writes the end record: the daemons alive now. */
  finish(): void {
    const alive = [...this.daemons.values()].filter((p) => !p.exited).map((p) => p.pid);
    this.record({ src: 'harness', kind: 'end', t: hr(), alive });
  }

  async waitFor(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
    const start = Date.now();
    for (;;) {
      if (await fn()) return (Date.now() - start) / 1000;
      if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
      await sleep(100);
    }
  }

  /** Kills every process this cluster started (by PID) and deletes the namespaces. */
  async destroy(keepDir = false): Promise<void> {
    if (this.destroyed) return;
    this.workersOn = false;
    const ps = [...this.all.values()].filter((p) => !p.exited);
    const gone = Promise.all(
      ps.map((p) => new Promise<void>((r) => (p.exited ? r() : p.child.once('exit', () => r())))),
    );
    this.destroyed = true;
    this.killAll();
    await Promise.all(
      this.nodes
        .map((node) => this.ns[node])
        .map(async (n) => {
          const pids = (await runAsync('ip', ['netns', 'pids', n])).out;
          for (const s of pids.split(/\s+/).filter((x) => x !== '')) this.signal(Number(s), 'SIGKILL');
          await runAsync('ip', ['netns', 'del', n]);
        }),
    );
    if (this.removed) return; // Ctrl-C meanwhile: destroySync did it all
    this.removed = true;
    if (!keepDir) rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
    await Promise.race([gone, sleep(3000)]);
  }

  private killAll(): void {
    for (const p of this.all.values()) {
      if (p.exited) continue;
      for (const q of this.tree(p.pid)) {
        this.signal(q, 'SIGKILL');
        this.signal(q, 'SIGCONT');
      }
    }
  }

  /** The same as `destroy`, blocking: for process 'exit' and the signal handlers, where nothing async runs. */
  destroySync(keepDir = false): void {
    if (this.removed) return;
    this.removed = true;
    this.destroyed = true;
    this.workersOn = false;
    this.killAll();
    // Processes still inside a namespace (a worker that escaped its parent) by the kernel's list.
    for (const n of this.nodes.map((node) => this.ns[node])) {
      const pids = spawnSync('ip', ['netns', 'pids', n], { encoding: 'utf8' }).stdout ?? '';
      for (const s of pids.split(/\s+/).filter((x) => x !== '')) this.signal(Number(s), 'SIGKILL');
      spawnSync('ip', ['netns', 'del', n]);
    }
    if (!keepDir) rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }
}
