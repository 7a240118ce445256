/**
 * Shared setup of the registry tests: the arbiter's real runtime (real SqliteStore, real auth
 * plugin, real tokens, real error handler) on a testdir, with `registryRoutes` registered on
 * top of it over a second connection to the same hq.db — exactly how the arbiter wires it.
 */
import pino from 'pino';
import type { Test } from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { Registry } from 'prom-client';
import { issueToken } from '../../apps/arbiter/src/auth.js';
import { manualClock, type ManualClock } from '../../packages/runtime/src/clock.js';
import { createRuntime, type Runtime } from '../../apps/arbiter/src/server/runtime.js';
import { registryRoutes } from '../../apps/arbiter/src/registry/routes.js';
import { registerFleetMetrics } from '../../apps/arbiter/src/registry/metrics.js';
import { SqliteRegistryStore } from '../../apps/arbiter/src/store/sqlite/registry.js';
import { openDatabase } from '../../apps/arbiter/src/store/sqlite/database.js';
import type { Bands } from '../../apps/arbiter/src/registry/decide.js';
import { fastConfig } from '../arbiter/helper.js';

export interface RegistryHarness {
  readonly dir: string;
  readonly rt: Runtime;
  readonly app: FastifyInstance;
  readonly store: SqliteRegistryStore;
  readonly clock: ManualClock;
  readonly metrics: Registry;
  readonly tokens: { admin: string; mbp: string; nodeb: string; query: string };
  /** The arbiter clock in epoch ms. */
  nowMs(): number;
  req(
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    opts?: { body?: unknown; token?: string | null; headers?: Record<string, string> },
  ): Promise<LightMyRequestResponse>;
}

export async function registryHarness(
  t: Test,
  opts: { bands?: Bands; dir?: string; extra?: Record<string, unknown> } = {},
): Promise<RegistryHarness> {
  const dir = opts.dir ?? t.testdir();
  const config = fastConfig(dir, opts.extra ?? {});
  const clock = manualClock();
  const rt = await createRuntime({ config, clock, log: pino({ level: 'silent' }), processMetrics: false });
  const app = await rt.app();
  const db = openDatabase({ path: rt.databasePath! });
  const store = new SqliteRegistryStore(db, opts.bands === undefined ? {} : { bands: opts.bands });
  const nowMs = (): number => Math.round(clock.now() * 1000);
  await app.register(registryRoutes, { store, now: nowMs });
  const metrics = new Registry();
  registerFleetMetrics(metrics, { store, now: nowMs });
  await app.ready();
  t.teardown(async () => {
    await rt.close();
    db.close();
  });
  const now = clock.now();
  const tokens = {
    admin: await issueToken(rt.store, 'cloud-vm', 'admin', now),
    mbp: await issueToken(rt.store, 'mbp', 'member', now),
    nodeb: await issueToken(rt.store, 'node-b', 'member', now),
    query: await issueToken(rt.store, 'grafana', 'query', now),
  };
  return {
    dir,
    rt,
    app,
    store,
    clock,
    metrics,
    tokens,
    nowMs,
    req(method, url, o = {}) {
      const token = o.token === undefined ? tokens.mbp : o.token;
      const headers: Record<string, string> = {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(o.headers ?? {}),
      };
      if (o.body !== undefined) headers['content-type'] = 'application/json';
      return app.inject({
        method,
        url,
        headers,
        ...(o.body === undefined ? {} : { payload: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) }),
      });
    },
  };
}

export function machineBody(machine: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: machine,
    name: machine,
    kind: 'machine',
    machine,
    attrs: { loadAvg: [0.5, 0.4, 0.3], cpuCount: 8, freeMem: 1000, totalMem: 4000, observedAt: 1, roles: ['cron'] },
    observedAt: 1,
    ttlMs: 90_000,
    ...extra,
  };
}
