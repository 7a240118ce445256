/**
 * The status page's model: what both the HTML and `GET /v1/status` are made of. Pure — the
 * state, the record and the settings in, the answer out; no clock, no I/O.
 */
import type { ArbiterState, LeaseRecord, TimingProblem } from '@hq/lease-core';
import type { ArbiterConfig } from '../../config.js';
import { failoverOf, isSilent, timingProblems } from '../../timing.js';
import type { EventRow } from '../../store/store.js';
import type { HostStatusT, StatusAnswerT } from './schemas.js';

/** What the registry knows about a machine's load (SPEC §8); every field optional. */
export interface HostLoad {
  readonly loadAvg?: readonly number[];
  readonly cpuCount?: number;
  readonly freeMem?: number;
  readonly totalMem?: number;
  /** Arbiter time of the observation. */
  readonly observedAt?: number;
}

export interface StatusSettings {
  readonly arbiter: string;
  readonly candidates: readonly string[];
  readonly ttlSeconds: number;
  readonly checkSeconds: number;
  /** The slowest standby heartbeat reported (null: none yet). */
  readonly heartbeatSeconds: number | null;
  readonly promoteAfterChecks: number;
  /** Worst-case failover (lease-core `failover`, the number every place prints). */
  readonly failoverSeconds: number | null;
  readonly lockDelaySeconds: number | null;
  /** lease-core `describeFailover`: the sentence every place prints. */
  readonly failoverText?: string;
  /** The cross-side relations (S6) the agents' last reports break, one line each. */
  readonly timingProblems?: readonly TimingProblem[];
  /** The first of them, or null (kept for the footer and older readers). */
  readonly timingProblem: string | null;
}

/** The last request refused for a host's name (a member token of another machine). */
export interface Refusal {
  readonly at: number;
  readonly message: string;
}

/** Events shown in the timeline. */
export const TIMELINE_EVENTS = 50;

/**
 * The settings the page shows: the arbiter's config (its own timing was checked when it was
 * loaded) and what the agents' last reports imply across the sides (S6, ../../timing.ts).
 */
export function statusSettings(config: ArbiterConfig, state: ArbiterState): StatusSettings {
  const f = failoverOf(config, state);
  const problems = timingProblems(config, state);
  return {
    arbiter: config.arbiter,
    candidates: config.candidates,
    ttlSeconds: config.ttlSeconds,
    checkSeconds: config.checkSeconds,
    heartbeatSeconds: f.heartbeatSeconds,
    promoteAfterChecks: config.promoteAfterChecks,
    failoverSeconds: f.seconds,
    lockDelaySeconds: f.lockDelaySeconds,
    failoverText: f.text,
    timingProblems: problems,
    timingProblem: problems[0]?.message ?? null,
  };
}

/** Seconds as the page shows them: "4.2 s", "3.5 min", "2.0 h". */
export function fmtSeconds(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return '—';
  const a = Math.abs(s);
  if (a < 120) return `${s.toFixed(a < 10 ? 1 : 0)} s`;
  if (a < 7200) return `${(s / 60).toFixed(1)} min`;
  if (a < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** promoted → "promotion"; *-refused, stale-generation, agent-silent → "refusal"; maintenance → "maintenance". */
export function eventKind(event: string): 'promotion' | 'refusal' | 'maintenance' | 'plain' {
  if (event === 'promoted') return 'promotion';
  if (event.endsWith('-refused') || event === 'stale-generation' || event === 'agent-silent') return 'refusal';
  if (event === 'maintenance') return 'maintenance';
  return 'plain';
}

function finite(n: unknown): n is number {
  return typeof n === 'number' && Number.isFinite(n);
}

function loadOf(l: HostLoad | null | undefined, now: number): HostStatusT['load'] {
  if (l === null || l === undefined) return null;
  const out: { loadAvg?: number[]; cpuCount?: number; freeMem?: number; totalMem?: number; ageSeconds?: number } = {};
  if (Array.isArray(l.loadAvg)) out.loadAvg = l.loadAvg.filter(finite).slice(0, 3);
  if (finite(l.cpuCount)) out.cpuCount = l.cpuCount;
  if (finite(l.freeMem)) out.freeMem = l.freeMem;
  if (finite(l.totalMem)) out.totalMem = l.totalMem;
  if (finite(l.observedAt)) out.ageSeconds = Math.max(0, now - l.observedAt);
  return out;
}

/**
 * The heartbeat cell: never, N ago, N ago (silent: more than 2 × its interval), or the refusal of
 * its last request when that came after its last good heartbeat (a token that broke).
 */
function heartbeatOf(
  role: HostStatusT['role'],
  o: { lastHeartbeatAt: number | null; heartbeatSeconds: number | null } | undefined,
  refused: Refusal | null,
  now: number,
): { text: string; problem: boolean } {
  if (role === 'arbiter') return { text: '—', problem: false };
  const last = o?.lastHeartbeatAt ?? null;
  if (refused !== null && (last === null || refused.at > last)) return { text: `refused ${fmtSeconds(Math.max(0, now - refused.at))} ago: ${refused.message}`, problem: true };
  if (last === null) return { text: 'never', problem: role === 'holder' || role === 'standby' };
  const age = Math.max(0, now - last);
  const interval = o?.heartbeatSeconds ?? null;
  if (interval !== null && isSilent(age, interval)) return { text: `${fmtSeconds(age)} ago (silent: it reports every ${fmtSeconds(interval)})`, problem: true };
  return { text: `${fmtSeconds(age)} ago`, problem: false };
}

/** One row per candidate (priority order), then the arbiter, then any other observer. */
export function statusModel(
  state: ArbiterState,
  record: LeaseRecord,
  settings: StatusSettings,
  load?: (host: string) => HostLoad | null,
  refused?: (host: string) => Refusal | null,
): StatusAnswerT {
  const now = record.now;
  const names: string[] = [...settings.candidates];
  if (!names.includes(settings.arbiter)) names.push(settings.arbiter);
  for (const name of state.observers.keys()) if (!names.includes(name)) names.push(name);
  const hosts = names.map((host): HostStatusT => {
    const o = state.observers.get(host);
    const v = o?.view ?? null;
    const role: HostStatusT['role'] =
      host === settings.arbiter ? 'arbiter' : record.holder === host ? 'holder' : settings.candidates.includes(host) ? 'standby' : 'observer';
    let l: HostLoad | null = null;
    try {
      l = load === undefined ? null : load(host);
    } catch {
      l = null;
    }
    const hb = heartbeatOf(role, o, refused?.(host) ?? null, now);
    return {
      host,
      role,
      lastHeartbeatAgeSeconds: o?.lastHeartbeatAt == null ? null : Math.max(0, now - o.lastHeartbeatAt),
      heartbeatSeconds: o?.heartbeatSeconds ?? null,
      heartbeatText: hb.text,
      heartbeatProblem: hb.problem,
      view: v === null ? null : { target: v.target, reachable: v.reachable, ping: v.ping, health: v.health, ageSeconds: Math.max(0, now - v.at) },
      load: loadOf(l, now),
    };
  });
  return {
    now,
    maintenance: { enabled: state.lease.maintenance, reason: state.lease.maintenanceReason },
    failover: {
      seconds: settings.failoverSeconds,
      lockDelaySeconds: settings.lockDelaySeconds,
      promoteAfterChecks: settings.promoteAfterChecks,
      checkSeconds: settings.checkSeconds,
      heartbeatSeconds: settings.heartbeatSeconds,
      text: settings.failoverText ?? (settings.failoverSeconds === null ? 'unknown' : `${fmtSeconds(settings.failoverSeconds)} worst case`),
      problem: settings.timingProblem,
    },
    timingProblems: [...(settings.timingProblems ?? [])],
    hosts,
  };
}

/** The newest `limit` rows by paging through `listEvents` (used when no `recentEvents` is given). */
export function tailEvents(listEvents: (after: number, limit: number) => readonly EventRow[], limit: number): EventRow[] {
  const page = 1000;
  let tail: EventRow[] = [];
  let after = 0;
  for (;;) {
    const rows = listEvents(after, page);
    if (rows.length === 0) break;
    tail = tail.concat(rows).slice(-limit);
    after = (rows[rows.length - 1] as EventRow).id;
    if (rows.length < page) break;
  }
  return tail;
}
