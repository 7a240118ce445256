/** The fleet gauges, computed from the registry at scrape time. */
import { Gauge, type Registry } from 'prom-client';
import type { ResourceRow } from './decide.js';
import type { RegistryStore } from './store.js';
import type { Awaitable } from '../awaitable.js';

export interface FleetMetricsOptions {
  readonly store: RegistryStore;
  readonly now: () => number;
}

/**
 * Registers `hq_fleet_member_up{host}` and `hq_fleet_member_load1{host}` (`host`: the machine's name, the
 * label every hq metric uses for a machine) on `registry`.
 * Both are computed from the store at scrape time: every live machine resource is 1 (up) with
 * its `attrs.loadAvg[0]`; an expired one is simply absent (the gauges are reset each scrape).
 */
export function registerFleetMetrics(
  registry: Registry,
  opts: FleetMetricsOptions,
): { up: Gauge; load1: Gauge; leases: Gauge } {
  let snapshot: { at: number; rows: Awaitable<ResourceRow[]> } | null = null;
  // Both gauges are collected in one scrape; read the store once per scrape, not twice.
  const machines = (): Awaitable<ResourceRow[]> => {
    const t = opts.now();
    if (snapshot === null || snapshot.at !== t)
      snapshot = { at: t, rows: opts.store.listResources({ kind: 'machine' }, t) };
    return snapshot.rows;
  };
  const up = new Gauge({
    name: 'hq_fleet_member_up',
    help: '1 for every machine whose registry record is live (expired machines are absent).',
    labelNames: ['host'],
    registers: [registry],
    async collect() {
      const rows = await machines();
      this.reset();
      for (const r of rows) this.set({ host: r.machine }, 1);
    },
  });
  const load1 = new Gauge({
    name: 'hq_fleet_member_load1',
    help: 'The 1-minute load average each live machine last reported (attrs.loadAvg[0]).',
    labelNames: ['host'],
    registers: [registry],
    async collect() {
      const rows = await machines();
      this.reset();
      for (const r of rows) {
        const load = r.attrs.get('loadAvg');
        const one = Array.isArray(load) ? load[0] : undefined;
        if (typeof one === 'number' && Number.isFinite(one)) this.set({ host: r.machine }, one);
      }
    },
  });
  const leases = new Gauge({
    name: 'hq_port_leases',
    help: 'Live port leases in the test band.',
    registers: [registry],
    async collect() {
      this.set((await opts.store.listPortLeases(opts.now())).length);
    },
  });
  return { up, load1, leases };
}
