/**
 * Prometheus metrics of the agent (served at `/metrics` on the peer listener): fence decisions
 * by role, run and reason; heartbeat outcomes; peer confirmations; step-downs; validity remaining; the
 * known and seen generations; and the request-duration histogram. Every series carries
 * `host` (this machine, set when the agent is attached), the label the arbiter's metrics use for
 * a machine too, so one Prometheus job scrapes every agent without relabelling.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FenceDecision } from '@hq/protocol';
import type { AgentObserver } from './observe.js';

/**
 * The agent's parts the gauges read at scrape time. Written out here rather than imported, so
 * the metrics depend on the observer contract alone and not on the parts' modules.
 */
export interface ScrapedAgent {
  readonly host: string;
  readonly clock: { now(): { readonly wall: number } };
  readonly store: { readonly state: { readonly seen: number; readonly known: { readonly generation: number } | null } };
  readonly fence: { validForSeconds(): number };
  readonly link: { readonly tokenProblem: string | null; readonly lastHeartbeat: { readonly at: number } | null };
  readonly peers: { readonly peerPaths: Iterable<readonly [string, string | null]> };
}

export interface AgentMetrics extends AgentObserver {
  readonly registry: Registry;
  attach(agent: ScrapedAgent): void;
  httpDuration: Histogram<'listener' | 'method' | 'route' | 'status'>;
}

export function createMetrics(): AgentMetrics {
  const registry = new Registry();
  const { fenceDecisions, heartbeats, confirms, stepDowns, httpDuration } = counters(registry);
  let agent: ScrapedAgent | null = null;
  gauges(registry, () => agent);
  return {
    registry,
    httpDuration,
    attach(a) {
      agent = a;
      registry.setDefaultLabels({ host: a.host });
    },
    fence(d: FenceDecision) {
      fenceDecisions.inc({ role: d.role, run: String(d.run), reason: d.reason });
    },
    heartbeat(outcome: string) {
      heartbeats.inc({ outcome });
    },
    peerConfirm(result: string) {
      confirms.inc({ result });
    },
    stepDown(result: string) {
      stepDowns.inc({ result });
    },
  };
}

/** The series counted as things happen (the agent reports them through its observer). */
function counters(registry: Registry) {
  const fenceDecisions = new Counter({
    name: 'hq_agent_fence_decisions_total',
    help: 'Fence decisions answered, by role, run and reason.',
    labelNames: ['role', 'run', 'reason'] as const,
    registers: [registry],
  });
  const heartbeats = new Counter({
    name: 'hq_agent_heartbeats_total',
    help: 'Heartbeats sent to the arbiter, by outcome.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const confirms = new Counter({
    name: 'hq_agent_peer_confirmations_total',
    help: 'Rounds of peer confirmation asked by this holder, by result.',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const stepDowns = new Counter({
    name: 'hq_agent_step_downs_total',
    help: 'Step-downs from a lost generation, by result: acknowledged (the arbiter ended its lock-delay), refused (it needed nothing: late, duplicate), unreachable, unacknowledged (a fenced child could not be proven gone).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'hq_http_request_duration_seconds',
    help: 'Duration of HTTP requests served by the agent.',
    labelNames: ['listener', 'method', 'route', 'status'] as const,
    buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [registry],
  });
  return { fenceDecisions, heartbeats, confirms, stepDowns, httpDuration };
}

/** The series read from the attached agent at each scrape (nothing, or 0, before it is attached). */
function gauges(registry: Registry, current: () => ScrapedAgent | null): void {
  new Gauge({
    name: 'hq_agent_validity_remaining_seconds',
    help: 'Seconds this host may still run a non-fail-open role (0 when it may not).',
    registers: [registry],
    collect() {
      const agent = current();
      this.set(agent === null ? 0 : agent.fence.validForSeconds());
    },
  });
  new Gauge({
    name: 'hq_lease_generation',
    help: 'The lease generation this agent knows.',
    registers: [registry],
    collect() {
      const agent = current();
      // As the primary answer has it: the known generation, else the highest seen.
      this.set(agent === null ? 0 : (agent.store.state.known?.generation ?? agent.store.state.seen));
    },
  });
  new Gauge({
    name: 'hq_agent_seen_generation',
    help: 'The highest generation this host has seen.',
    registers: [registry],
    collect() {
      const agent = current();
      this.set(agent === null ? 0 : agent.store.state.seen);
    },
  });
  new Gauge({
    name: 'hq_agent_member_token_ok',
    help: "1 while this host's member token is readable and the arbiter accepts it; 0 once either breaks (rotation gone wrong).",
    labelNames: ['host'] as const,
    registers: [registry],
    collect() {
      const agent = current();
      if (agent === null) return;
      this.set({ host: agent.host }, agent.link.tokenProblem === null ? 1 : 0);
    },
  });
  new Gauge({
    name: 'hq_agent_peer_path_ok',
    help: "1 while the last probe of the peer's confirmation path (POST /v1/peer/confirm, probe: true) worked; 0 once it failed (another peer token, the peer unreachable). Proven on every heartbeat the arbiter answers.",
    labelNames: ['host', 'peer'] as const,
    registers: [registry],
    collect() {
      const agent = current();
      if (agent === null) return;
      this.reset();
      for (const [peer, problem] of agent.peers.peerPaths)
        this.set({ host: agent.host, peer }, problem === null ? 1 : 0);
    },
  });
  new Gauge({
    name: 'hq_agent_last_heartbeat_age_seconds',
    help: 'Seconds since the last heartbeat answer (or failure).',
    labelNames: ['host'] as const,
    registers: [registry],
    collect() {
      const agent = current();
      const last = agent?.link.lastHeartbeat ?? null;
      if (agent === null || last === null) return;
      this.set({ host: agent.host }, Math.max(0, agent.clock.now().wall - last.at));
    },
  });
}
