/**
 * Prometheus metrics on an own Registry. Counters move after commit; the lease and
 * view gauges are recomputed from the store at scrape time (`refresh`), so they are never
 * stale and cost nothing between scrapes.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PROTOCOL_1_RELEASE } from '@hq/protocol';
import type { ArbiterState } from '@hq/lease-core';

export interface MetricsSnapshot {
  readonly state: ArbiterState;
  readonly now: number;
  readonly candidates: readonly string[];
  /** Each host's protocol and release (its last heartbeat; the arbiter itself too). */
  readonly versions?: ReadonlyMap<string, { readonly protocol: number; readonly release: string | null }>;
  /** Each candidate's confirmation path to each peer, as its last heartbeat reported it (host → peer → ok). */
  readonly peerPaths?: ReadonlyMap<string, ReadonlyMap<string, { readonly ok: boolean }>>;
}

/** prom-client's default gauges whose names end in `_total`, which is reserved for counters. */
export const MISNAMED_DEFAULT_GAUGES: readonly string[] = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

export class Metrics {
  readonly registry = new Registry();
  readonly generation = new Gauge({
    name: 'hq_lease_generation',
    help: 'The lease generation (fencing token).',
    registers: [this.registry],
  });
  readonly holder = new Gauge({
    name: 'hq_lease_holder',
    help: '1 for the lease holder, 0 for every other candidate.',
    labelNames: ['host'],
    registers: [this.registry],
  });
  readonly expiresIn = new Gauge({
    name: 'hq_lease_expires_in_seconds',
    help: 'Seconds until the lease expires (negative once expired).',
    registers: [this.registry],
  });
  readonly streak = new Gauge({
    name: 'hq_lease_dual_unreachable_streak',
    help: 'Consecutive checks in which the holder was unreachable for the arbiter and the promotee.',
    registers: [this.registry],
  });
  readonly viewReachable = new Gauge({
    name: 'hq_view_reachable',
    help: "1 when the observer's latest view says the target is reachable.",
    labelNames: ['observer', 'target'],
    registers: [this.registry],
  });
  readonly viewAge = new Gauge({
    name: 'hq_view_age_seconds',
    help: "Age of the observer's latest view.",
    labelNames: ['observer', 'target'],
    registers: [this.registry],
  });
  readonly heartbeatAge = new Gauge({
    name: 'hq_agent_last_heartbeat_age_seconds',
    help: "Seconds since the candidate's last heartbeat.",
    labelNames: ['host'],
    registers: [this.registry],
  });
  readonly hostVersion = new Gauge({
    name: 'hq_host_version',
    help: 'Always 1, for each host and the hq version its last heartbeat spoke ("0.1" for protocol 1, which never says its release; the arbiter itself too).',
    labelNames: ['host', 'version'],
    registers: [this.registry],
  });
  readonly peerPathOk = new Gauge({
    name: 'hq_peer_path_ok',
    help: "1 when host's last confirmation probe of peer worked, 0 when peer could not confirm host in an arbiter outage (peer tokens that differ, a peer listener not reached), as host's heartbeat reported it.",
    labelNames: ['host', 'peer'],
    registers: [this.registry],
  });
  readonly checks = new Counter({
    name: 'hq_checks_total',
    help: 'Arbiter checks by result.',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly probes = new Counter({
    name: 'hq_probe_total',
    help: 'Probes by kind (ping, health) and result (ok, fail).',
    labelNames: ['kind', 'result'],
    registers: [this.registry],
  });
  readonly promotions = new Counter({
    name: 'hq_promotions_total',
    help: 'Promotions by checks (the holder unreachable). Handovers and forced transfers are not: hq_lease_operations_total{op="release"|"transfer"}.',
    registers: [this.registry],
  });
  readonly operations = new Counter({
    name: 'hq_lease_operations_total',
    help: 'Lease operations by op and outcome.',
    labelNames: ['op', 'outcome'],
    registers: [this.registry],
  });
  readonly generationRefused = new Counter({
    name: 'hq_generation_reports_refused_total',
    help: 'Decisions refused by the generation bounds: reason "report-jump" (a report further above the highest granted or learned generation than any real history goes) or "ceiling" (a grant above the generation ceiling).',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly stepDownSaved = new Counter({
    name: 'hq_step_down_saved_seconds_total',
    help: 'Seconds of lock-delay that displaced holders’ step-down acknowledgements ended.',
    registers: [this.registry],
  });
  readonly http = new Histogram({
    name: 'hq_http_request_duration_seconds',
    help: 'HTTP request duration by method, route and status.',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor(defaults = true) {
    // The event-loop lag monitor samples every eventLoopMonitoringPrecision ms; prom-client's 10 ms
    // woke an idle arbiter 100 times a second. Once a second is enough for a dashboard.
    if (!defaults) return;
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 1000 });
    // Gauges named like counters break `promtool check metrics` (and rate() on them is
    // meaningless); each is the sum of the by-type gauge of the same name without `_total`.
    for (const name of MISNAMED_DEFAULT_GAUGES) this.registry.removeSingleMetric(name);
  }

  /** Recomputes the state gauges from one store read. */
  refresh(s: MetricsSnapshot): void {
    const { lease, observers } = s.state;
    this.generation.set(lease.generation);
    this.holder.reset();
    for (const c of s.candidates) this.holder.set({ host: c }, lease.holder === c ? 1 : 0);
    if (lease.holder !== null && !s.candidates.includes(lease.holder)) this.holder.set({ host: lease.holder }, 1);
    this.expiresIn.set(lease.expiresAt === null || lease.released ? 0 : lease.expiresAt - s.now);
    this.streak.set(lease.dualUnreachableStreak);
    this.viewReachable.reset();
    this.viewAge.reset();
    this.heartbeatAge.reset();
    for (const [name, o] of observers) {
      if (o.view !== null) {
        this.viewReachable.set({ observer: name, target: o.view.target }, o.view.reachable ? 1 : 0);
        this.viewAge.set({ observer: name, target: o.view.target }, Math.max(0, s.now - o.view.at));
      }
      if (o.lastHeartbeatAt !== null) this.heartbeatAge.set({ host: name }, Math.max(0, s.now - o.lastHeartbeatAt));
    }
    this.hostVersion.reset();
    for (const [host, v] of s.versions ?? [])
      this.hostVersion.set(
        { host, version: v.release ?? (v.protocol === 1 ? PROTOCOL_1_RELEASE : `protocol ${v.protocol}`) },
        1,
      );
    this.peerPathOk.reset();
    for (const [host, paths] of s.peerPaths ?? [])
      for (const [peer, p] of paths) this.peerPathOk.set({ host, peer }, p.ok ? 1 : 0);
  }
}
