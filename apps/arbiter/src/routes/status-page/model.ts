/**
 * The status page's model: what both the HTML and `GET /v1/status` are made of. Pure — the
 * state, the record and the settings in, the answer out; no clock, no I/O. Every cell's text and
 * colour is decided here, once, so the server's HTML and the browser script (which only prints
 * the strings) cannot disagree; the script computes nothing but the countdowns.
 *
 * The phase (`phaseOf`) is the one line at the top that says what is going on, in this order of
 * precedence: no holder → holder silent (or unreachable) → lock-delay → timing problem → a
 * broken peer path → a silent standby (after a failover: the old holder) → healthy.
 */
import type { ArbiterState } from '@hq/lease-core';
import { hostVersionText, upgradeNote, type LeaseRecord, type TimingProblem } from '@hq/protocol';
import type { ArbiterConfig } from '../../config.js';
import { failoverOf, isSilent, timingProblems } from '../../timing.js';
import type { EventRow } from '../../store/store.js';
import type { Awaitable } from '../../awaitable.js';
import type { ArbitersT } from '@hq/protocol/schemas';
import type { HostStatusT, PeerPathStatusT, StatusAnswerT } from '../../schemas/status.js';

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

/** Seconds as the page shows them: "4.2 s", "3.5 min", "2.0 h". */
export function fmtSeconds(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return '—';
  const a = Math.abs(s);
  if (a < 120) return `${s.toFixed(a < 10 ? 1 : 0)} s`;
  if (a < 7200) return `${(s / 60).toFixed(1)} min`;
  if (a < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** The name the page shows: a forced transfer is logged as `promoted` with `via: "transfer"`, but it was the operator's move, not a promotion. */
export function eventLabel(event: string, data: { readonly [k: string]: unknown } | null | undefined): string {
  return event === 'promoted' && data?.['via'] === 'transfer' ? 'transferred' : event;
}

/** promoted → "promotion"; *-refused, stale-generation, agent-silent, timing-problem, peer-path-broken → "refusal" (red); maintenance → "maintenance". */
export function eventKind(event: string): 'promotion' | 'refusal' | 'maintenance' | 'plain' {
  if (event === 'promoted') return 'promotion';
  if (
    event.endsWith('-refused') ||
    event === 'stale-generation' ||
    event === 'agent-silent' ||
    event === 'timing-problem' ||
    event === 'peer-path-broken'
  )
    return 'refusal';
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

type Phase = StatusAnswerT['phase'];

/** 1. Nobody may run: no holder, or its lease released or expired. */
function noHolderPhase(record: LeaseRecord): Phase | null {
  const holder = record.holder;
  if (!(holder === null || record.released || record.expired || record.expiresAt === null)) return null;
  if (record.floorPending)
    return {
      name: 'no-holder',
      level: 'bad',
      text: 'no host may run: a new database waits until every candidate reports the generation it has seen',
    };
  if (holder === null)
    return {
      name: 'no-holder',
      level: 'bad',
      text: 'no host may run: nobody holds the lease; nothing runs until a candidate runs hq lease acquire',
    };
  if (record.released)
    return {
      name: 'no-holder',
      level: 'bad',
      text: `no host may run: ${holder} released the lease without a handover; nothing brings HQ back until a candidate runs hq lease acquire`,
    };
  return {
    name: 'no-holder',
    level: 'bad',
    text: `no host may run: ${holder}'s lease expired; nothing runs until a candidate acquires it`,
  };
}

/** 2. The holder does not report, or the arbiter and a standby cannot reach it. */
function holderSilentPhase(
  holder: string,
  record: LeaseRecord,
  hosts: readonly HostStatusT[],
  promoteAfterChecks: number,
): Phase | null {
  const row = hosts.find((h) => h.host === holder);
  const streak = record.dualUnreachableStreak;
  if (!(row?.heartbeatProblem ?? false) && streak <= 0) return null;
  let heard = 'unreachable (it still reports)';
  if (row?.heartbeatProblem === true) {
    // Never heard from, or its last request refused: the cell says which; else how long.
    const age = row.lastHeartbeatAgeSeconds;
    heard =
      age === null || row.heartbeatText.startsWith('refused')
        ? `silent (heartbeat: ${row.heartbeatText})`
        : `silent: no heartbeat for ${fmtSeconds(age)}`;
  }
  const checks =
    streak > 0
      ? `; unreachable in ${streak} of the ${promoteAfterChecks} checks that promote a standby`
      : '; its lease runs out unless it renews';
  return { name: 'holder-silent', level: 'bad', text: `${holder}, the holder, is ${heard}${checks}` };
}

/** 3. Granted, but not yet allowed to run: the record says which wait holds it, and why. */
function waitPhase(holder: string, record: LeaseRecord): Phase | null {
  const how = record.promotedFrom !== null ? `was promoted from ${record.promotedFrom}` : 'acquired the lease';
  const wait = record.wait ?? null;
  if (wait !== null)
    return { name: 'lock-delay', level: 'warn', text: `${holder} ${how} and may not run yet: ${wait.text}` };
  if (record.floorPending)
    return {
      name: 'lock-delay',
      level: 'warn',
      text: `${holder} holds the lease but may not run yet: a new database waits until every candidate reports its seen generation`,
    };
  if (record.notBefore !== null && record.notBefore > record.now) {
    return {
      name: 'lock-delay',
      level: 'warn',
      text: `${holder} ${how} and may not run before ${new Date(record.notBefore * 1000).toISOString()}`,
    };
  }
  return null;
}

/**
 * 4. The settings across the sides break failover; 4b. a standby could not confirm a candidate:
 * an arbiter outage would stop HQ instead of failing over.
 */
function brokenPhase(problems: readonly TimingProblem[], paths: readonly PeerPathStatusT[]): Phase | null {
  const first = problems[0];
  if (first !== undefined)
    return {
      name: 'timing-problem',
      level: 'bad',
      text: `timing problem: ${first.message}${problems.length > 1 ? ` (and ${problems.length - 1} more below)` : ''}`,
    };
  const broken = paths.filter((p) => !p.ok);
  const b0 = broken[0];
  if (b0 !== undefined)
    return {
      name: 'peer-path-broken',
      level: 'bad',
      text: `peer path broken: ${b0.text}${broken.length > 1 ? ` (and ${broken.length - 1} more below)` : ''}`,
    };
  return null;
}

/** 5. The holder runs, but a standby is gone: no failover to it until it is back; else healthy. */
function runningPhase(holder: string, record: LeaseRecord, hosts: readonly HostStatusT[]): Phase {
  const standbys = hosts.filter((h) => h.role === 'standby');
  const gone = standbys.filter((h) => h.heartbeatProblem).map((h) => h.host);
  const live = standbys.filter((h) => !h.heartbeatProblem).map((h) => h.host);
  const by = (names: readonly string[]): string => `${names.join(', ')} ${names.length === 1 ? 'stands' : 'stand'} by`;
  if (gone.length > 0) {
    const silent = `${gone.join(', ')} ${gone.length === 1 ? 'is' : 'are'} silent`;
    const rest =
      live.length === 0 ? `so there is no standby until ${gone.length === 1 ? 'it is' : 'they are'} back` : by(live);
    if (record.promotedFrom !== null && gone.includes(record.promotedFrom)) {
      return {
        name: 'failed-over',
        level: 'warn',
        text: `${holder} took over from ${record.promotedFrom} (generation ${record.generation}) and runs; ${silent}, ${rest}`,
      };
    }
    return {
      name: 'standby-down',
      level: 'warn',
      text: `${holder} holds the lease and runs; standby ${silent}, ${rest}`,
    };
  }
  return {
    name: 'healthy',
    level: 'ok',
    text: `${holder} holds the lease and runs${live.length > 0 ? `; ${by(live)}` : ''}`,
  };
}

/** What is going on, in one line and one colour (the top of the page): the first phase that applies. */
export function phaseOf(
  record: LeaseRecord,
  hosts: readonly HostStatusT[],
  promoteAfterChecks: number,
  problems: readonly TimingProblem[],
  paths: readonly PeerPathStatusT[] = [],
): Phase {
  const none = noHolderPhase(record);
  if (none !== null) return none;
  const holder = record.holder as string;
  return (
    holderSilentPhase(holder, record, hosts, promoteAfterChecks) ??
    waitPhase(holder, record) ??
    brokenPhase(problems, paths) ??
    runningPhase(holder, record, hosts)
  );
}

/** Event data keys that hold an arbiter time (seconds since the epoch). */
function isTimeKey(key: string): boolean {
  return key === 'notBefore' || key === 'was' || key.endsWith('At');
}

/** An arbiter time as the timeline prints it: "2027-01-15 08:00:10.5Z" (tenths only when there are any). */
export function clockTime(at: number): string {
  const d = new Date(at * 1000);
  if (Number.isNaN(d.getTime())) return String(at);
  const tenths = Math.floor(d.getUTCMilliseconds() / 100);
  return `${d.toISOString().slice(0, 10)} ${d.toISOString().slice(11, 19)}${tenths === 0 ? '' : `.${tenths}`}Z`;
}

/** A time in an event's data: "08:00:10.5Z (+3.0 s)" — the time (its date only if another day) and how far from the event. */
export function eventTime(at: number, eventAt: number): string {
  const full = clockTime(at);
  if (full === String(at)) return full;
  const time = full.slice(0, 10) === clockTime(eventAt).slice(0, 10) ? full.slice(11) : full;
  const delta = at - eventAt;
  return `${time} (${delta >= 0 ? '+' : ''}${fmtSeconds(delta)})`;
}

/** An event's data as one line, times readable ("notBefore=08:00:10.5Z (+7.0 s)"), at most 200 characters. */
export function eventData(e: Pick<EventRow, 'at' | 'data'>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(e.data)) {
    const text =
      typeof v === 'number' && isTimeKey(k) && v > 1e9
        ? eventTime(v, e.at)
        : typeof v === 'string'
          ? v
          : JSON.stringify(v);
    parts.push(`${k}=${text}`);
  }
  const s = parts.join(' ');
  return s.length > 200 ? `${s.slice(0, 199)}…` : s;
}

/** The newest `limit` rows by paging through `listEvents` (used when no `recentEvents` is given). */
export async function tailEvents(
  listEvents: (after: number, limit: number) => Awaitable<readonly EventRow[]>,
  limit: number,
): Promise<EventRow[]> {
  const page = 1000;
  let tail: EventRow[] = [];
  let after = 0;
  for (;;) {
    const rows = await listEvents(after, page);
    if (rows.length === 0) break;
    tail = tail.concat(rows).slice(-limit);
    after = (rows[rows.length - 1] as EventRow).id;
    if (rows.length < page) break;
  }
  return tail;
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
