/**
 * Wires one arbiter from a config: store → arbiter shell → checker → app. The daemon, the
 * one-shot commands and the tests all build it here (tests inject the clock and the prober).
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { arbiterLogger } from '../log.js';
import { Arbiter } from '../arbiter-shell.js';
import { ensureAdminToken } from '../auth.js';
import { Checker, TailnetProber, type Prober } from '../checks.js';
import { steadyClock, wallClockMs, type MsClock, type SecondsClock, type Timers } from '@hq/runtime/clock';
import { PEER_PORT } from '@hq/runtime/probe';
import type { ArbiterConfig } from '../config.js';
import { EventSink, Hooks } from '../events.js';
import { VERSION } from '@hq/runtime/version';
import type { GenerationLimits } from '@hq/lease-core';
import { Metrics } from '../metrics.js';
import { SqliteStore } from '../store/sqlite/lease.js';
import { buildApp } from './app.js';
import { EventWaiters } from '../routes/events-stream.js';
import { registerOperatorMetrics } from '../operator-metrics.js';
import { registryRoutes } from '../registry/routes.js';
import { registryLoad } from '../routes/status-page/load.js';
import { registerFleetMetrics } from '../registry/metrics.js';
import { SqliteRegistryStore } from '../store/sqlite/registry.js';
import type { LeaseStore } from '../store/store.js';
import type { RegistryStore } from '../registry/store.js';
import type { EtcdTlsFiles, StoreConfig } from '../config.js';
// The etcd store's modules (and undici, its HTTP client: ≈ 19 MiB of VmRSS) load only for
// `store.kind: "etcd"`: the embedded SQLite arbiter never needs them (docs/BENCH.md).
import type { EtcdClient, EtcdTls } from '../store/etcd/client.js';
import type { EtcdStore } from '../store/etcd/lease.js';
import type { EtcdRegistryStore } from '../store/etcd/registry.js';
import type { EtcdSurvivalStore } from '../store/etcd/survival.js';
import type { Leadership } from '../leadership.js';
import { openDatabase } from '../store/sqlite/database.js';

/** hq's version (one source: @hq/runtime/version). */
export function version(): string {
  return VERSION;
}

export interface RuntimeOptions {
  readonly config: ArbiterConfig;
  readonly clock?: SecondsClock;
  /** The wall clock, epoch ms, for times other processes compare (the check lock); default `wallClockMs`. */
  readonly wallClockMs?: MsClock;
  readonly log?: Logger;
  /**
   * The timers of the hooks' retries, the check schedule and the election's pauses and
   * compactor (default: each one's real timers); tests pass a manual one and advance it.
   */
  readonly timers?: Timers;
  readonly prober?: Prober;
  /** Issue `{dataDir}/admin.token` when no admin token exists (the daemon does). */
  readonly ensureAdmin?: boolean;
  /** This is a (re)start of the daemon: clamp the previous life's times (lease-core `atRestart`). */
  readonly restart?: boolean;
  /**
   * Serve the fleet registry (resources, port leases, fleet gauges) from this app. The daemon
   * does; tests that wire `registryRoutes` themselves (test/registry) leave it off.
   */
  readonly registry?: boolean;
  /** Serve the operator pages (status page, event stream) from this app. The daemon does. */
  readonly operator?: boolean;
  readonly hookAttempts?: number;
  readonly hookBackoffMs?: number;
  /** The generation bounds (lease-core's constants); a test of what they stop passes wider ones. */
  readonly limits?: GenerationLimits;
  /** Default Node process metrics (off in tests that build many runtimes). */
  readonly processMetrics?: boolean;
  /**
   * Store etcd: campaign, and decide only while elected (the daemon does; `start()` begins the
   * campaign). A one-shot command opens the store without an election.
   */
  readonly elect?: boolean;
}

export interface Runtime {
  readonly config: ArbiterConfig;
  readonly log: Logger;
  readonly store: LeaseStore;
  /** The SQLite file (`{dataDir}/hq.db`) when the store is SQLite's. */
  readonly databasePath: string | null;
  readonly arbiter: Arbiter;
  readonly checker: Checker;
  readonly metrics: Metrics;
  readonly hooks: Hooks;
  readonly adminTokenPath: string | null;
  /** The registry: resources and port leases, on a second connection to the same hq.db (when enabled). */
  readonly registry: RegistryStore | null;
  /** Store etcd with `elect`: the election; null otherwise. */
  readonly leadership: Leadership | null;
  /** The daemon's start: SQLite runs the checks now; etcd campaigns (the elected arbiter runs them). */
  start(): void;
  /**
   * Deletes registry rows that expired more than `REGISTRY_KEEP_EXPIRED_MS` ago (readers never
   * return expired rows; this only keeps the tables from growing). The daemon runs it hourly.
   */
  sweepRegistry(): Promise<{ resources: number; leases: number }>;
  /**
   * Bounds the event log: deletes events older than `events.maxAgeDays`, then all but the newest
   * `events.maxCount`. The daemon runs it at start and hourly. Returns how many rows went.
   */
  sweepEvents(): Promise<number>;
  app(): Promise<FastifyInstance>;
  close(): Promise<void>;
}

interface Stores {
  readonly store: LeaseStore;
  readonly registry: RegistryStore | null;
  readonly databasePath: string | null;
  /** For the log: the file, or the etcd endpoints and prefix. */
  readonly where: string;
  readonly etcd: {
    readonly client: EtcdClient;
    readonly store: EtcdStore;
    readonly registry: EtcdRegistryStore | null;
    readonly survival: EtcdSurvivalStore;
    readonly config: Extract<StoreConfig, { kind: 'etcd' }>;
  } | null;
  close(): Promise<void>;
}

/** The PEM files of `store.tls` (checked readable at config load), read now. */
export function readEtcdTls(f: EtcdTlsFiles): EtcdTls {
  const read = (path: string | null): string | undefined => (path === null ? undefined : readFileSync(path, 'utf8'));
  const ca = read(f.caFile);
  const cert = read(f.certFile);
  const key = read(f.keyFile);
  return {
    ...(ca === undefined ? {} : { ca }),
    ...(cert === undefined ? {} : { cert }),
    ...(key === undefined ? {} : { key }),
  };
}

/** The configured store: SQLite in dataDir (a second connection for the registry), or etcd under its prefix. */
export async function openStores(config: ArbiterConfig, withRegistry: boolean): Promise<Stores> {
  const s = config.store;
  if (s.kind === 'sqlite') {
    const store = new SqliteStore({ dataDir: config.dataDir, ttlSeconds: config.ttlSeconds });
    const db = withRegistry ? openDatabase({ path: store.path }) : null;
    return {
      store,
      registry: db === null ? null : new SqliteRegistryStore(db, { bands: config.portBands }),
      databasePath: store.path,
      where: store.path,
      etcd: null,
      async close() {
        if (db?.open === true) db.close();
        store.close();
      },
    };
  }
  const [{ EtcdClient }, { EtcdStore }, { EtcdRegistryStore }, { EtcdSurvivalStore }] = await Promise.all([
    import('../store/etcd/client.js'),
    import('../store/etcd/lease.js'),
    import('../store/etcd/registry.js'),
    import('../store/etcd/survival.js'),
  ]);
  const client = new EtcdClient({
    endpoints: s.endpoints,
    dialTimeoutMs: s.dialTimeoutMs,
    requestTimeoutMs: s.requestTimeoutMs,
    ...(s.tls === null ? {} : { tls: readEtcdTls(s.tls) }),
  });
  let store: EtcdStore;
  try {
    store = await EtcdStore.open({ client, prefix: s.prefix, ttlSeconds: config.ttlSeconds });
  } catch (err) {
    await client.close();
    throw err;
  }
  const registry = withRegistry ? new EtcdRegistryStore({ client, prefix: s.prefix, bands: config.portBands }) : null;
  const survival = new EtcdSurvivalStore(client, s.prefix);
  return {
    store,
    registry,
    databasePath: null,
    where: `etcd ${s.endpoints.join(',')} ${s.prefix}`,
    etcd: { client, store, registry, survival, config: s },
    async close() {
      await store.close();
      await client.close();
    },
  };
}

/** Expired registry rows stay an hour (for a look with sqlite3), then the hourly sweep drops them. */
export const REGISTRY_KEEP_EXPIRED_MS = 3_600_000;

/** Where a decision is told: the metrics, the hooks, and the sink that logs, hooks and wakes the event stream. */
interface Tell {
  readonly metrics: Metrics;
  readonly hooks: Hooks;
  readonly waiters: EventWaiters;
  readonly sink: EventSink;
}

function tellOf(opts: RuntimeOptions, log: Logger): Tell {
  const { config } = opts;
  const metrics = new Metrics(opts.processMetrics ?? true);
  const hooks = new Hooks(
    {
      urls: config.hooks.urls,
      command: config.hooks.command,
      attempts: opts.hookAttempts,
      backoffMs: opts.hookBackoffMs,
    },
    log.child({ component: 'hooks' }),
    opts.timers,
  );
  const waiters = new EventWaiters();
  const sink = new EventSink(log.child({ component: 'lease' }), hooks, (rows) => waiters.notify(rows));
  return { metrics, hooks, waiters, sink };
}

/**
 * Store etcd with `elect` (the daemon): the election, whose takeover is a restart with the state
 * kept (L3) after which this arbiter runs the checks. Otherwise a daemon's restart clamps the
 * previous life's times now; null.
 */
async function leadershipOf(
  opts: RuntimeOptions,
  stores: Stores,
  arbiter: Arbiter,
  checker: Checker,
  metrics: Metrics,
  log: Logger,
): Promise<Leadership | null> {
  const e = stores.etcd;
  if (e === null || opts.elect !== true) {
    if (opts.restart === true) await arbiter.restart();
    return null;
  }
  const { Leadership, registerLeadershipMetrics } = await import('../leadership.js');
  const leadership = new Leadership({
    client: e.client,
    prefix: e.config.prefix,
    advertiseUrl: e.config.advertiseUrl,
    ttlSeconds: e.config.electionTtlSeconds,
    compactionIntervalMs: e.config.compactionIntervalSeconds * 1000,
    quotaBytes: e.config.quotaBackendBytes,
    ...(opts.timers === undefined ? {} : { timers: opts.timers }),
    guarded: [e.store, ...(e.registry === null ? [] : [e.registry])],
    log: log.child({ component: 'election' }),
    onElected: async () => {
      await arbiter.takeOver();
      checker.start();
    },
    onEnded: () => checker.stop(),
  });
  registerLeadershipMetrics(metrics.registry, leadership);
  return leadership;
}

/** `ensureAdmin`: the admin token written when none exists, and the line that says how to install it. */
async function adminTokenOf(
  opts: RuntimeOptions,
  store: LeaseStore,
  clock: SecondsClock,
  log: Logger,
): Promise<string | null> {
  if (opts.ensureAdmin !== true) return null;
  const { config } = opts;
  const path = await ensureAdminToken(store, config.dataDir, config.arbiter, clock.now());
  if (path !== null) {
    // The CLI looks for it elsewhere ($HQ_ADMIN_TOKEN, --token-file, else the agent's
    // {stateDir}/admin-token), so the line says how to install it there.
    const install = `install -m 0600 ${path} ~/.hq/admin-token (the agent's {stateDir}/admin-token), or export HQ_ADMIN_TOKEN="$(cat ${path})", for hq maintenance and hq failover`;
    log.info({ path, install }, 'admin token written');
  }
  return path;
}

/** What the runtime's sweeps and app are built from, once its parts are wired. */
interface Wired {
  readonly opts: RuntimeOptions;
  readonly log: Logger;
  readonly clock: SecondsClock;
  readonly stores: Stores;
  readonly tell: Tell;
  readonly arbiter: Arbiter;
  readonly checker: Checker;
  readonly leadership: Leadership | null;
  readonly nowMs: () => number;
  /** True once the runtime is closed: the sweeps stop. */
  readonly closed: () => boolean;
}

/** Store etcd: an expiry is a clock decision, the elected arbiter's alone (leadership.ts). */
function maySweep(w: Wired): boolean {
  return !w.closed() && (w.leadership === null || w.leadership.mayDecide());
}

async function sweepRegistryOf(w: Wired): Promise<{ resources: number; leases: number }> {
  const { registry } = w.stores;
  if (registry === null || !maySweep(w)) return { resources: 0, leases: 0 };
  const swept = await registry.sweep(w.nowMs() - REGISTRY_KEEP_EXPIRED_MS);
  if (swept.resources + swept.leases > 0)
    w.log.info({ component: 'registry', ...swept }, 'expired registry rows swept');
  return swept;
}

async function sweepEventsOf(w: Wired): Promise<number> {
  if (!maySweep(w)) return 0;
  const { maxAgeDays, maxCount } = w.opts.config.events;
  const n = await w.stores.store.sweepEvents(w.clock.now() - maxAgeDays * 86_400, maxCount);
  if (n > 0) w.log.info({ component: 'events', swept: n, maxAgeDays, maxCount }, 'old events swept');
  return n;
}

/** The Fastify app over the wired parts, with the registry's routes and the operator pages when asked. */
async function appOf(w: Wired): Promise<FastifyInstance> {
  const { stores, opts, nowMs } = w;
  const { registry } = stores;
  // The status page's load column: the machines the agents register.
  const load =
    registry === null ? undefined : registryLoad(() => registry.listResources({ kind: 'machine' }, nowMs()), nowMs);
  const app = await buildApp({
    hq: {
      arbiter: w.arbiter,
      checker: w.checker,
      store: stores.store,
      metrics: w.tell.metrics,
      config: opts.config,
      version: version(),
      leadership: w.leadership,
      ...(stores.etcd === null ? {} : { survival: stores.etcd.survival }),
    },
    log: w.log,
    ...(opts.operator === true ? { operator: { waiters: w.tell.waiters, load } } : {}),
  });
  if (registry !== null) await app.register(registryRoutes, { store: registry, now: nowMs });
  return app;
}

/** Store → arbiter shell → checker (→ election) → admin token; the app is built on first use. */
export async function createRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const { config } = opts;
  const log = opts.log ?? arbiterLogger();
  const clock = opts.clock ?? steadyClock();
  const stores = await openStores(config, opts.registry === true);
  const { store, registry } = stores;
  const tell = tellOf(opts, log);
  const { metrics, hooks, sink } = tell;
  // Store etcd with an election (the daemon): decisions only on the elected arbiter (leadership.ts).
  let leadership: Leadership | null = null;
  const arbiter = new Arbiter({
    config,
    store,
    clock,
    sink,
    metrics,
    ...(opts.limits === undefined ? {} : { limits: opts.limits }),
    ...(stores.etcd !== null && opts.elect === true ? { mayDecide: () => leadership?.mayDecide() === true } : {}),
  });
  const prober = opts.prober ?? new TailnetProber(config, metrics, log.child({ component: 'probe' }), PEER_PORT);
  registerOperatorMetrics(metrics.registry, () => store.read(), config, clock);
  const checker = new Checker({
    arbiter,
    store,
    prober,
    metrics,
    log: log.child({ component: 'check' }),
    wallClockMs: opts.wallClockMs ?? wallClockMs,
    ...(opts.timers === undefined ? {} : { timers: opts.timers }),
  });
  leadership = await leadershipOf(opts, stores, arbiter, checker, metrics, log);
  const adminTokenPath = await adminTokenOf(opts, store, clock, log);
  if (store.createdNow)
    log.info({ where: stores.where }, 'store created; generation floor pending until every candidate reports');
  const nowMs = (): number => Math.round(clock.now() * 1000);
  if (registry !== null) registerFleetMetrics(metrics.registry, { store: registry, now: nowMs });
  let app: FastifyInstance | null = null;
  let closed = false;
  const wired: Wired = { opts, log, clock, stores, tell, arbiter, checker, leadership, nowMs, closed: () => closed };
  return {
    config,
    log,
    store,
    databasePath: stores.databasePath,
    leadership,
    arbiter,
    checker,
    metrics,
    hooks,
    adminTokenPath,
    registry,
    start() {
      if (leadership !== null) leadership.start();
      else checker.start();
    },
    sweepRegistry: () => sweepRegistryOf(wired),
    sweepEvents: () => sweepEventsOf(wired),
    async app() {
      app ??= await appOf(wired);
      return app;
    },
    async close() {
      if (closed) return;
      closed = true;
      // No new check ticks; stop accepting and finish in-flight requests; then the running check;
      // then an elected arbiter resigns (the next is elected at once, not after its etcd lease).
      const checks = checker.stop();
      if (app !== null) await app.close();
      await checks;
      await leadership?.close();
      hooks.close();
      await stores.close();
    },
  };
}
