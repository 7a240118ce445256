/**
 * Gauges the dashboard and the alert rules need beyond the documented metrics (docs/REFERENCE.md), computed at scrape time
 * from one store read (prom-client `collect`), so they cost nothing between scrapes:
 *  - `hq_maintenance_enabled` — 1 while maintenance is on (alert: left on for hours);
 *  - `hq_lease_ttl_seconds` — the record's TTL (alert: validity below a quarter of it);
 *  - `hq_agent_heartbeat_interval_seconds{host}` — the interval each agent reports (alert: silent
 *    for three intervals);
 *  - `hq_failover_worst_case_seconds` — what the settings and the agents' reported cadence
 *    imply (S6, lease-core `failover`: the same number the log, the page and the CLI print);
 *  - `hq_timing_problem{host,arbiter_key,agent_key}` — 1 for each relation across the two
 *    sides that the host's last report breaks (S6: never silent);
 *  - `hq_lease_runnable` — 1 while the record lets its holder run now, 0 while no host may
 *    (no holder, released, expired, lock-delay, a new database's floor): a dashboard that looks
 *    healthy through a gap shows it as 0 (alert: for longer than a failover takes).
 *
 * Wiring (runtime.ts, after `new Metrics(...)`):
 *     registerOperatorMetrics(metrics.registry, () => store.read(), config, clock);
 */
import { Gauge, type Registry } from 'prom-client';
import type { ArbiterState } from '@hq/lease-core';
import type { ArbiterConfig } from './config.js';
import { failoverOf, timingProblems } from './timing.js';
import type { Awaitable } from './awaitable.js';
import type { SecondsClock } from '@hq/runtime/clock';

export const OPERATOR_METRICS = Object.freeze([
  'hq_maintenance_enabled',
  'hq_lease_ttl_seconds',
  'hq_agent_heartbeat_interval_seconds',
  'hq_failover_worst_case_seconds',
  'hq_timing_problem',
  'hq_lease_runnable',
] as const);

/** Whether the record lets its holder run at arbiter time `now` (what the fence of the holder also requires). */
export function leaseRunnable(lease: ArbiterState['lease'], now: number): boolean {
  if (
    lease.holder === null ||
    lease.released ||
    lease.floorPending ||
    lease.expiresAt === null ||
    lease.expiresAt <= now
  )
    return false;
  return lease.notBefore === null || lease.notBefore <= now;
}

/** Registers the gauges once per registry (a second call does nothing). */
export function registerOperatorMetrics(
  registry: Registry,
  read: () => Awaitable<ArbiterState>,
  config: ArbiterConfig,
  clock: SecondsClock,
): void {
  if (registry.getSingleMetric('hq_maintenance_enabled') !== undefined) return;
  // One read per scrape: prom-client starts every collect of one scrape in the same turn of the
  // event loop, so the first reads and the others reuse it until the turn is over (no clock).
  let cached: Awaitable<ArbiterState> | null = null;
  const state = (): Awaitable<ArbiterState> => {
    if (cached === null) {
      cached = read();
      setImmediate(() => {
        cached = null;
      });
    }
    return cached;
  };
  new Gauge({
    name: 'hq_maintenance_enabled',
    help: '1 while maintenance is on (checks record views but never promote).',
    registers: [registry],
    async collect() {
      this.set((await state()).lease.maintenance ? 1 : 0);
    },
  });
  new Gauge({
    name: 'hq_lease_ttl_seconds',
    help: "The lease record's TTL.",
    registers: [registry],
    async collect() {
      this.set((await state()).lease.ttlSeconds);
    },
  });
  new Gauge({
    name: 'hq_agent_heartbeat_interval_seconds',
    help: 'The heartbeat interval each agent reports with its heartbeats.',
    labelNames: ['host'],
    registers: [registry],
    async collect() {
      const s = await state();
      this.reset();
      for (const [host, o] of s.observers) if (o.heartbeatSeconds !== null) this.set({ host }, o.heartbeatSeconds);
    },
  });
  new Gauge({
    name: 'hq_failover_worst_case_seconds',
    help: "The worst-case failover time the arbiter's settings and the agents' reported heartbeats imply.",
    registers: [registry],
    async collect() {
      this.set(failoverOf(config, await state()).seconds);
    },
  });
  new Gauge({
    name: 'hq_timing_problem',
    help: "1 for each relation between the arbiter's lease timing and a host's reported cadence that does not hold.",
    labelNames: ['host', 'arbiter_key', 'agent_key'],
    registers: [registry],
    async collect() {
      const s = await state();
      this.reset();
      for (const p of timingProblems(config, s))
        this.set({ host: p.host, arbiter_key: p.arbiterKey, agent_key: p.agentKey }, 1);
    },
  });
  new Gauge({
    name: 'hq_lease_runnable',
    help: '1 while the lease record lets its holder run now; 0 while no host may run (no holder, released, expired, lock-delay).',
    registers: [registry],
    async collect() {
      this.set(leaseRunnable((await state()).lease, clock.now()) ? 1 : 0);
    },
  });
}
