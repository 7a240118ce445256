/**
 * The status page's model: what both the HTML and `GET /v1/status` are made of. Pure — the
 * state, the record and the settings in, the answer out; no clock, no I/O. Every cell's text and
 * colour is decided here, once, so the server's HTML and the browser script (which only prints
 * the strings) cannot disagree; the script computes nothing but the countdowns.
 *
 * The phase (`phaseOf`) is the one line at the top that says what is going on, in this order of
 * precedence: no holder → holder silent (or unreachable) → lock-delay → timing problem → a
 * broken peer path → a silent standby (after a failover: the old holder) → healthy (phase.ts).
 * The timeline's wording is timeline.ts, the page's seconds and times format.ts.
 */
import type { ArbiterState } from '@hq/lease-core';
import { hostVersionText, upgradeNote, type LeaseRecord, type TimingProblem } from '@hq/protocol';
import type { ArbiterConfig } from '../../config.js';
import { failoverOf, isSilent, timingProblems } from '../../timing.js';
import type { ArbitersT } from '@hq/protocol/schemas';
import type { HostStatusT, PeerPathStatusT, StatusAnswerT } from '../../schemas/status.js';
import { fmtSeconds } from './format.js';
import { phaseOf } from './phase.js';

export { clockTime, fmtSeconds } from './format.js';
export { phaseOf } from './phase.js';
export { eventData, eventKind, eventLabel, eventTime, TIMELINE_EVENTS, tailEvents } from './timeline.js';

/** What the registry knows about a machine's load; every field optional. */
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
  /** A view older than this is not counted by a check (S5): the page marks it stale. */
  readonly viewFreshSeconds: number;
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

/** What a host last said of its version: the protocol of its heartbeat and its release (null: it did not say). */
export interface HostVersion {
  readonly protocol: number;
  readonly release: string | null;
}

/** The version cell: "hq 0.1 (protocol 1)", "—" for a host not heard yet; the note when it is behind. */
function versionOf(
  v: HostVersion | null,
): Pick<HostStatusT, 'protocol' | 'release' | 'versionText'> & { note: (host: string) => string | null } {
  if (v === null) return { protocol: null, release: null, versionText: '—', note: () => null };
  return {
    protocol: v.protocol,
    release: v.release,
    versionText: hostVersionText(v.protocol, v.release),
    note: (host) => upgradeNote(host, v.protocol, v.release),
  };
}

/** What a candidate's last heartbeat said of its path to each peer (`since` in arbiter time). */
export type PeerPaths = ReadonlyMap<
  string,
  ReadonlyMap<string, { readonly ok: boolean; readonly problem: string | null; readonly since: number }>
>;

/**
 * The paths as rows, broken first: "mbp → node-b broken for 2.0 min: node-b could not confirm mbp
 * if the arbiter went down: …" — both hosts and the cause, since a holder whose standby cannot
 * confirm it stops in an arbiter outage instead of running on.
 */
export function peerPathRows(paths: PeerPaths | undefined, now: number): PeerPathStatusT[] {
  const rows: PeerPathStatusT[] = [];
  for (const [host, peers] of paths ?? []) {
    for (const [peer, p] of peers) {
      const forSeconds = Math.max(0, now - p.since);
      const text = p.ok
        ? `${host} → ${peer} works (for ${fmtSeconds(forSeconds)})`
        : `${host} → ${peer} broken for ${fmtSeconds(forSeconds)}: ${peer} could not confirm ${host} if the arbiter went down: ${p.problem ?? 'no reason given'}`;
      rows.push({ host, peer, ok: p.ok, problem: p.problem, forSeconds, text });
    }
  }
  return rows.sort((a, b) => Number(a.ok) - Number(b.ok));
}
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
    viewFreshSeconds: config.viewFreshSeconds,
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

/** The load cell: "load 0.50 0.25 0.10, 8 cpu, mem 75%", or a dash. */
function loadText(l: HostStatusT['load']): string {
  if (l === null) return '—';
  const parts: string[] = [];
  if (l.loadAvg !== undefined && l.loadAvg.length > 0)
    parts.push(`load ${l.loadAvg.map((x) => x.toFixed(2)).join(' ')}`);
  if (l.cpuCount !== undefined) parts.push(`${l.cpuCount} cpu`);
  if (l.freeMem !== undefined && l.totalMem !== undefined && l.totalMem > 0)
    parts.push(`mem ${Math.round((1 - l.freeMem / l.totalMem) * 100)}%`);
  return parts.length === 0 ? '—' : parts.join(', ');
}

/**
 * The "view of holder" cell: what this host last said of the current holder. Green or red only
 * for a view a check would count — about this holder, taken during its tenure, fresher than
 * `viewFreshSeconds`, from a host that still reports; anything else is grey and says why. The
 * holder's own row has no view of the holder (its view is of its peer, said on the peer's row).
 */
function viewOf(
  role: HostStatusT['role'],
  v: { target: string; reachable: boolean; ping: boolean; health: boolean; at: number } | null,
  record: LeaseRecord,
  settings: StatusSettings,
  silent: boolean,
): { text: string; level: HostStatusT['viewLevel'] } {
  if (role === 'holder') return { text: 'it is the holder', level: 'muted' };
  if (v === null) return { text: 'no view', level: 'muted' };
  const age = Math.max(0, record.now - v.at);
  const seen = `${v.target} ${v.reachable ? 'reachable' : 'unreachable'} (ping ${v.ping ? 'ok' : 'no'}, health ${v.health ? 'ok' : 'no'}), ${fmtSeconds(age)} ago`;
  const holder = record.holder;
  if (holder === null) return { text: `${seen} (no holder now)`, level: 'muted' };
  if (v.target !== holder) return { text: `no view of ${holder} yet (last: ${seen})`, level: 'muted' };
  if (record.acquiredAt !== null && v.at < record.acquiredAt)
    return { text: `${seen} (from before ${holder} held the lease)`, level: 'muted' };
  if (silent) return { text: `${seen} (stale: this host is silent)`, level: 'muted' };
  if (age > settings.viewFreshSeconds)
    return {
      text: `${seen} (stale: older than viewFreshSeconds ${fmtSeconds(settings.viewFreshSeconds)})`,
      level: 'muted',
    };
  return { text: seen, level: v.reachable ? 'ok' : 'bad' };
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
  if (refused !== null && (last === null || refused.at > last))
    return { text: `refused ${fmtSeconds(Math.max(0, now - refused.at))} ago: ${refused.message}`, problem: true };
  if (last === null) return { text: 'never', problem: role === 'holder' || role === 'standby' };
  const age = Math.max(0, now - last);
  const interval = o?.heartbeatSeconds ?? null;
  if (interval !== null && isSilent(age, interval))
    return { text: `${fmtSeconds(age)} ago (silent: it reports every ${fmtSeconds(interval)})`, problem: true };
  return { text: `${fmtSeconds(age)} ago`, problem: false };
}

/** What a host's row is read from, beside its name. */
interface RowSources {
  readonly state: ArbiterState;
  readonly record: LeaseRecord;
  readonly settings: StatusSettings;
  readonly load: ((host: string) => HostLoad | null) | undefined;
  readonly refused: ((host: string) => Refusal | null) | undefined;
  readonly versions: ((host: string) => HostVersion | null) | undefined;
}

/** The candidates (priority order), then the arbiter, then any other observer. */
function hostNames(state: ArbiterState, settings: StatusSettings): string[] {
  const names: string[] = [...settings.candidates];
  if (!names.includes(settings.arbiter)) names.push(settings.arbiter);
  for (const name of state.observers.keys()) if (!names.includes(name)) names.push(name);
  return names;
}

function roleOf(host: string, record: LeaseRecord, settings: StatusSettings): HostStatusT['role'] {
  if (host === settings.arbiter) return 'arbiter';
  if (record.holder === host) return 'holder';
  return settings.candidates.includes(host) ? 'standby' : 'observer';
}

/** The registry's load of a host; a failing registry costs the column, never the page. */
function safeLoad(load: ((host: string) => HostLoad | null) | undefined, host: string): HostLoad | null {
  try {
    return load === undefined ? null : load(host);
  } catch {
    return null;
  }
}

function hostRow(host: string, src: RowSources): HostStatusT {
  const { state, record, settings } = src;
  const now = record.now;
  const o = state.observers.get(host);
  const v = o?.view ?? null;
  const role = roleOf(host, record, settings);
  const hb = heartbeatOf(role, o, src.refused?.(host) ?? null, now);
  const view = viewOf(role, v, record, settings, hb.problem);
  const hostLoad = loadOf(safeLoad(src.load, host), now);
  const ver = versionOf(src.versions?.(host) ?? null);
  return {
    host,
    role,
    lastHeartbeatAgeSeconds: o?.lastHeartbeatAt == null ? null : Math.max(0, now - o.lastHeartbeatAt),
    heartbeatSeconds: o?.heartbeatSeconds ?? null,
    heartbeatText: hb.text,
    heartbeatProblem: hb.problem,
    view:
      v === null
        ? null
        : {
            target: v.target,
            reachable: v.reachable,
            ping: v.ping,
            health: v.health,
            ageSeconds: Math.max(0, now - v.at),
          },
    viewText: view.text,
    viewLevel: view.level,
    load: hostLoad,
    loadText: loadText(hostLoad),
    protocol: ver.protocol,
    release: ver.release,
    versionText: ver.versionText,
    upgrade: ver.note(host),
  };
}

function failoverStatus(settings: StatusSettings): StatusAnswerT['failover'] {
  return {
    seconds: settings.failoverSeconds,
    lockDelaySeconds: settings.lockDelaySeconds,
    promoteAfterChecks: settings.promoteAfterChecks,
    checkSeconds: settings.checkSeconds,
    heartbeatSeconds: settings.heartbeatSeconds,
    text:
      settings.failoverText ??
      (settings.failoverSeconds === null ? 'unknown' : `${fmtSeconds(settings.failoverSeconds)} worst case`),
    problem: settings.timingProblem,
  };
}

/** One row per candidate (priority order), then the arbiter, then any other observer. */
export function statusModel(
  state: ArbiterState,
  record: LeaseRecord,
  settings: StatusSettings,
  load?: (host: string) => HostLoad | null,
  refused?: (host: string) => Refusal | null,
  versions?: (host: string) => HostVersion | null,
  peerPaths?: PeerPaths,
): StatusAnswerT {
  const now = record.now;
  const src: RowSources = { state, record, settings, load, refused, versions };
  const hosts = hostNames(state, settings).map((host) => hostRow(host, src));
  const problems = [...(settings.timingProblems ?? [])];
  const paths = peerPathRows(peerPaths, now);
  return {
    now,
    maintenance: { enabled: state.lease.maintenance, reason: state.lease.maintenanceReason },
    failover: failoverStatus(settings),
    timingProblems: problems,
    peerPaths: paths,
    phase: phaseOf(record, hosts, settings.promoteAfterChecks, problems, paths),
    hosts,
  };
}
/** Store etcd: the elected arbiter and the members' health, in one line (the page's card; its refresh sets it from `arbitersLine`). */
export function arbitersText(a: ArbitersT): { text: string; level: 'ok' | 'warn' | 'bad' } {
  const up = a.etcd.members.filter((m) => m.ok).length;
  const etcd = `etcd ${up}/${a.etcd.members.length} members up${a.etcd.healthy ? '' : ' (no quorum: nothing can be decided)'}`;
  const who = a.elected
    ? `this arbiter (${a.self}) is elected and decides`
    : a.leader === null
      ? 'no arbiter is elected'
      : `${a.leader} is elected; this arbiter (${a.self}) forwards mutations to it`;
  // etcd's space, once it matters: the warning with its fix
  const s = a.etcd.space;
  const space = s?.warning == null ? '' : ` · ${s.warning}`;
  const level =
    !a.etcd.healthy || a.leader === null || s?.level === 'bad'
      ? 'bad'
      : up < a.etcd.members.length || s?.level === 'warn'
        ? 'warn'
        : 'ok';
  return { text: `${who} · ${etcd}${space}`, level };
}
