/**
 * Wires one arbiter from a config: store → arbiter shell → checker → app. The daemon, the
 * one-shot commands and the tests all build it here (tests inject the clock and the prober).
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { arbiterLogger } from '../log.js';
import { Arbiter } from '../arbiter.js';
import { ensureAdminToken } from '../auth.js';
import { Checker, TailnetProber, type Prober } from '../checks.js';
import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import type { ArbiterConfig } from '../config.js';
import { EventSink, Hooks } from '../events.js';
import { VERSION } from '@hq/lease-core/version';
import { Metrics } from '../metrics.js';
import { SqliteStore } from '../store/sqlite.js';
import { buildApp } from './app.js';
import { EventWaiters } from '../routes/events-stream.js';
import { registerOperatorMetrics } from '../operator-metrics.js';
import { registryRoutes } from '../registry/routes.js';
import { registryLoad } from '../routes/status-page/load.js';
import { registerFleetMetrics } from '../registry/metrics.js';
import { SqliteRegistryStore } from '../registry/store.js';
import type { RegistryStore } from '../store/store.js';
import { openDatabase } from '../store/database.js';

/** hq's version (one source: @hq/lease-core/version). */
export function version(): string {
  return VERSION;
}

export interface RuntimeOptions {
  readonly config: ArbiterConfig;
  readonly clock?: Clock;
  readonly log?: Logger;
  readonly prober?: Prober;
  /** Issue `{dataDir}/admin.token` when no admin token exists (the daemon does). */
  readonly ensureAdmin?: boolean;
  /** This is a (re)start of the daemon: clamp the previous life's times (lease-core `atRestart`). */
  readonly restart?: boolean;
  /**
   * Serve the SPEC §8 registry (resources, port leases, fleet gauges) from this app. The daemon
   * does; tests that wire `registryRoutes` themselves (test/registry) leave it off.
   */
  readonly registry?: boolean;
  /** Serve the operator pages (status page, event stream) from this app. The daemon does. */
  readonly operator?: boolean;
  readonly hookAttempts?: number;
  readonly hookBackoffMs?: number;
  /** Default Node process metrics (off in tests that build many runtimes). */
  readonly processMetrics?: boolean;
}

export interface Runtime {
  readonly config: ArbiterConfig;
  readonly log: Logger;
  readonly store: SqliteStore;
  readonly arbiter: Arbiter;
  readonly checker: Checker;
  readonly metrics: Metrics;
  readonly hooks: Hooks;
  readonly adminTokenPath: string | null;
  /** SPEC §8: resources and port leases, on a second connection to the same hq.db (when enabled). */
  readonly registry: RegistryStore | null;
  /**
   * Deletes registry rows that expired more than `REGISTRY_KEEP_EXPIRED_MS` ago (readers never
   * return expired rows; this only keeps the tables from growing). The daemon runs it hourly.
   */
  sweepRegistry(): { resources: number; leases: number };
  /**
   * Bounds the event log: deletes events older than `events.maxAgeDays`, then all but the newest
   * `events.maxCount`. The daemon runs it at start and hourly. Returns how many rows went.
   */
  sweepEvents(): number;
  app(): Promise<FastifyInstance>;
  close(): Promise<void>;
}

/** Expired registry rows stay an hour (for a look with sqlite3), then the hourly sweep drops them. */
export const REGISTRY_KEEP_EXPIRED_MS = 3_600_000;

export function createRuntime(opts: RuntimeOptions): Runtime {
  const { config } = opts;
  const log = opts.log ?? arbiterLogger();
  const clock = opts.clock ?? systemClock();
  const store = new SqliteStore({ dataDir: config.dataDir, ttlSeconds: config.ttlSeconds });
  const metrics = new Metrics(opts.processMetrics ?? true);
  const hooks = new Hooks(
    { urls: config.hooks.urls, command: config.hooks.command, attempts: opts.hookAttempts, backoffMs: opts.hookBackoffMs },
    log.child({ component: 'hooks' }),
  );
  const waiters = new EventWaiters();
  const sink = new EventSink(log.child({ component: 'lease' }), hooks, (rows) => waiters.notify(rows));
  const arbiter = new Arbiter({ config, store, clock, sink, metrics });
  const prober = opts.prober ?? new TailnetProber(config, metrics, log.child({ component: 'probe' }));
  registerOperatorMetrics(metrics.registry, () => store.read(), config);
  const checker = new Checker({ arbiter, store, prober, metrics, log: log.child({ component: 'check' }) });
  if (opts.restart === true) arbiter.restart();
  let adminTokenPath: string | null = null;
  if (opts.ensureAdmin === true) {
    adminTokenPath = ensureAdminToken(store, config.dataDir, config.arbiter, clock.now());
    if (adminTokenPath !== null) {
      // The CLI looks for it elsewhere ($HQ_ADMIN_TOKEN, --token-file, else the agent's
      // {stateDir}/admin-token), so the line says how to install it there.
      const install = `install -m 0600 ${adminTokenPath} ~/.hq/admin-token (the agent's {stateDir}/admin-token), or export HQ_ADMIN_TOKEN="$(cat ${adminTokenPath})", for hq maintenance and hq failover`;
      log.info({ path: adminTokenPath, install }, 'admin token written');
    }
  }
  if (store.createdNow) log.info({ path: store.path }, 'database created; generation floor pending until every candidate reports');
  const nowMs = (): number => Math.round(clock.now() * 1000);
  const registryDb = opts.registry === true ? openDatabase({ path: store.path }) : null;
  const registry = registryDb === null ? null : new SqliteRegistryStore(registryDb, { bands: config.portBands });
  if (registry !== null) registerFleetMetrics(metrics.registry, { store: registry, now: nowMs });
  // The status page's load column: the machines the agents register (SPEC §8).
  const load = registry === null ? undefined : registryLoad(() => registry.listResources({ kind: 'machine' }, nowMs()), nowMs);
  let app: FastifyInstance | null = null;
  let closed = false;
  return {
    config,
    log,
    store,
    arbiter,
    checker,
    metrics,
    hooks,
    adminTokenPath,
    registry,
    sweepRegistry() {
      if (registry === null || closed) return { resources: 0, leases: 0 };
      const swept = registry.sweep(nowMs() - REGISTRY_KEEP_EXPIRED_MS);
      if (swept.resources + swept.leases > 0) log.info({ component: 'registry', ...swept }, 'expired registry rows swept');
      return swept;
    },
    sweepEvents() {
      if (closed) return 0;
      const { maxAgeDays, maxCount } = config.events;
      const n = store.sweepEvents(clock.now() - maxAgeDays * 86_400, maxCount);
      if (n > 0) log.info({ component: 'events', swept: n, maxAgeDays, maxCount }, 'old events swept');
      return n;
    },
    async app() {
      if (app === null) {
        app = await buildApp({
          hq: { arbiter, checker, store, metrics, config, version: version() },
          log,
          ...(opts.operator === true ? { operator: { waiters, load } } : {}),
        });
        if (registry !== null) await app.register(registryRoutes, { store: registry, now: nowMs });
      }
      return app;
    },
    async close() {
      if (closed) return;
      closed = true;
      // No new check ticks; stop accepting and finish in-flight requests; then the running check.
      const checks = checker.stop();
      if (app !== null) await app.close();
      await checks;
      hooks.close();
      if (registryDb?.open === true) registryDb.close();
      store.close();
    },
  };
}
