/**
 * The status page (`GET /`): one server-rendered HTML document for an operator's phone — the
 * holder and generation large, the validity counting down, the maintenance banner, one row per
 * host, the last 50 events and the worst-case failover time. No build, no CDN: the CSS and a
 * small script are inline, and a Content-Security-Policy allows nothing else (the script by its
 * hash, `connect-src 'self'`).
 *
 * The script refreshes the page in place every `refreshSeconds`: it fetches `v1/lease`,
 * `v1/status` (what the page adds to the record: heartbeat ages, load, the maintenance reason,
 * failover) and `v1/events?after=<last id>`, and rebuilds only the parts that changed, with
 * `textContent` and `createElement` — never `innerHTML` — so no value from the arbiter is ever
 * parsed as HTML. The server side escapes every value it prints (`esc`). URLs are relative, so
 * the page also works behind a reverse proxy under a sub-path.
 *
 * Access: both routes have scope `read`, like the other GETs — open when `auth.openReads` is
 * true (the tailnet is the fence), a bearer token otherwise (a browser cannot send one, so with
 * `openReads: false` the page is for `curl` or a proxy that adds the header).
 *
 * The plugin reads everything through its options, so it depends on no arbiter internals;
 * `statusPageOptions(app.hq)` builds them from the app's context.
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import type { ArbiterState } from '@hq/lease-core';
import type { LeaseRecord, TimingProblem } from '@hq/protocol';
import type { ArbiterConfig } from '../config.js';
import { failoverOf, isSilent, timingProblems } from '../timing.js';
import type { HqContext } from '../server/context.js';
import type { EventRow } from '../store/store.js';
import { ErrorBody } from '@hq/protocol/schemas';

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

export interface StatusPageOptions {
  /** One consistent read of the arbiter state (`arbiter.read()`). */
  readonly state: () => ArbiterState;
  /** The API record of that state (`(s) => arbiter.record(s)`). */
  readonly record: (state: ArbiterState) => LeaseRecord;
  /** `store.listEvents(after, limit)`: ascending ids above `after`. */
  readonly listEvents: (after: number, limit: number) => readonly EventRow[];
  /** The newest `limit` events, ascending. When absent, found by paging through `listEvents`. */
  readonly recentEvents?: (limit: number) => readonly EventRow[];
  readonly settings: (state: ArbiterState) => StatusSettings;
  /** The registry's load for a host, when the registry is there. */
  readonly load?: (host: string) => HostLoad | null;
  /** The last request refused for a host's name (a member token of another machine), when any. */
  readonly refused?: (host: string) => { readonly at: number; readonly message: string } | null;
  /** Seconds between the page's refreshes. Default 3. */
  readonly refreshSeconds?: number;
  /** The page title. Default "hq". */
  readonly title?: string;
}

/** Events shown in the timeline. */
export const TIMELINE_EVENTS = 50;

/** The settings the page shows: the arbiter's config and what the agents' reports imply (S6). */
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

/** The options from the app's context: `app.register(statusPage, statusPageOptions(app.hq))`. */
export function statusPageOptions(hq: HqContext, extra: Partial<Pick<StatusPageOptions, 'load' | 'recentEvents' | 'refreshSeconds' | 'title'>> = {}): StatusPageOptions {
  return {
    state: () => hq.arbiter.read(),
    record: (s) => hq.arbiter.record(s),
    listEvents: (after, limit) => hq.store.listEvents(after, limit),
    settings: (state) => statusSettings(hq.config, state),
    refused: (host) => hq.arbiter.refusedFor(host),
    ...extra,
  };
}

/** What `registryLoad` needs of a registry row (SPEC §8 machine resources). */
export interface MachineRow {
  readonly kind: string;
  readonly machine: string;
  readonly attrs: ReadonlyMap<string, unknown>;
  /** Arbiter time of the last register/heartbeat, milliseconds. */
  readonly renewedAt: number;
}

/**
 * A `load` option from the registry: the newest live `machine` resource of the host, its
 * `loadAvg, cpuCount, freeMem, totalMem` attributes, aged by its last renewal. Wiring (runtime):
 *     load: registryLoad(() => registry.listResources({ kind: 'machine' }, nowMs()))
 * `list` is called once per page render or /v1/status answer (memoised for 100 ms).
 */
export function registryLoad(list: () => readonly MachineRow[]): (host: string) => HostLoad | null {
  let cache: { at: number; rows: readonly MachineRow[] } | null = null;
  return (host) => {
    const t = Date.now();
    if (cache === null || t - cache.at > 100) cache = { at: t, rows: list() };
    let best: MachineRow | null = null;
    for (const r of cache.rows) if (r.kind === 'machine' && r.machine === host && (best === null || r.renewedAt > best.renewedAt)) best = r;
    if (best === null) return null;
    const num = (k: string): number | undefined => {
      const v = best?.attrs.get(k);
      return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
    };
    const la = best.attrs.get('loadAvg');
    return {
      loadAvg: Array.isArray(la) ? la.filter((x): x is number => typeof x === 'number' && Number.isFinite(x)) : undefined,
      cpuCount: num('cpuCount'),
      freeMem: num('freeMem'),
      totalMem: num('totalMem'),
      observedAt: best.renewedAt / 1000,
    };
  };
}

// ---------------------------------------------------------------------------------------------
// The model both the HTML and `GET /v1/status` are made of.

const Num = Type.Union([Type.Number(), Type.Null()]);

export const HostStatus = Type.Object({
  host: Type.String(),
  role: Type.Union([Type.Literal('holder'), Type.Literal('standby'), Type.Literal('arbiter'), Type.Literal('observer')]),
  lastHeartbeatAgeSeconds: Num,
  heartbeatSeconds: Num,
  /** The heartbeat cell as both renderers print it, and whether it is a problem (silent, refused). */
  heartbeatText: Type.String(),
  heartbeatProblem: Type.Boolean(),
  view: Type.Union([
    Type.Object({ target: Type.String(), reachable: Type.Boolean(), ping: Type.Boolean(), health: Type.Boolean(), ageSeconds: Type.Number() }),
    Type.Null(),
  ]),
  load: Type.Union([
    Type.Object({
      loadAvg: Type.Optional(Type.Array(Type.Number())),
      cpuCount: Type.Optional(Type.Number()),
      freeMem: Type.Optional(Type.Number()),
      totalMem: Type.Optional(Type.Number()),
      ageSeconds: Type.Optional(Type.Number()),
    }),
    Type.Null(),
  ]),
});
export type HostStatusT = Static<typeof HostStatus>;

export const StatusAnswer = Type.Object({
  now: Type.Number(),
  maintenance: Type.Object({ enabled: Type.Boolean(), reason: Type.Union([Type.String(), Type.Null()]) }),
  failover: Type.Object({
    seconds: Num,
    lockDelaySeconds: Num,
    promoteAfterChecks: Type.Integer(),
    checkSeconds: Type.Number(),
    heartbeatSeconds: Num,
    text: Type.String(),
    problem: Type.Union([Type.String(), Type.Null()]),
  }),
  timingProblems: Type.Array(Type.Object({ host: Type.String(), arbiterKey: Type.String(), agentKey: Type.String(), message: Type.String() })),
  hosts: Type.Array(HostStatus),
});
export type StatusAnswerT = Static<typeof StatusAnswer>;

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

/** One row per candidate (priority order), then the arbiter, then any other observer. */
/**
 * The heartbeat cell: never, N ago, N ago (silent: more than 2 × its interval), or the refusal of
 * its last request when that came after its last good heartbeat (a token that broke).
 */
function heartbeatOf(
  role: HostStatusT['role'],
  o: { lastHeartbeatAt: number | null; heartbeatSeconds: number | null } | undefined,
  refused: { at: number; message: string } | null,
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

export function statusModel(
  state: ArbiterState,
  record: LeaseRecord,
  settings: StatusSettings,
  load?: (host: string) => HostLoad | null,
  refused?: (host: string) => { readonly at: number; readonly message: string } | null,
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
    return {
      host,
      role,
      lastHeartbeatAgeSeconds: o?.lastHeartbeatAt == null ? null : Math.max(0, now - o.lastHeartbeatAt),
      heartbeatSeconds: o?.heartbeatSeconds ?? null,
      ...((): { heartbeatText: string; heartbeatProblem: boolean } => {
        const hb = heartbeatOf(role, o, refused?.(host) ?? null, now);
        return { heartbeatText: hb.text, heartbeatProblem: hb.problem };
      })(),
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
export function tailEvents(listEvents: StatusPageOptions['listEvents'], limit: number): EventRow[] {
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

// ---------------------------------------------------------------------------------------------
// HTML.

/** Escapes text for an HTML text node or a double-quoted attribute. */
export function esc(value: unknown): string {
  return String(value).replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
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

/** promoted → "promotion"; *-refused, stale-generation → "refusal"; maintenance → "maintenance". */
export function eventKind(event: string): 'promotion' | 'refusal' | 'maintenance' | 'plain' {
  if (event === 'promoted') return 'promotion';
  if (event.endsWith('-refused') || event === 'stale-generation' || event === 'agent-silent') return 'refusal';
  if (event === 'maintenance') return 'maintenance';
  return 'plain';
}

function dataSummary(data: EventRow['data']): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(data)) parts.push(`${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  const s = parts.join(' ');
  return s.length > 200 ? `${s.slice(0, 199)}…` : s;
}

function isoTime(at: number): string {
  const d = new Date(at * 1000);
  return Number.isNaN(d.getTime()) ? String(at) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function validityText(r: LeaseRecord): { text: string; cls: string } {
  if (r.holder === null) return { text: 'no lease', cls: 'bad' };
  if (r.released) return { text: 'released', cls: 'bad' };
  if (r.expired || r.expiresAt === null) return { text: 'expired', cls: 'bad' };
  const left = r.expiresAt - r.now;
  return { text: `${fmtSeconds(left)} left`, cls: left < r.ttlSeconds * 0.25 ? 'warn' : 'ok' };
}

function lockDelayText(r: LeaseRecord): string {
  if (r.floorPending) return 'lock-delay: pending until every candidate reports its seen generation';
  if (r.notBefore !== null && r.notBefore > r.now) return `lock-delay: ${fmtSeconds(r.notBefore - r.now)} left`;
  return '';
}

function heartbeatCell(h: HostStatusT): string {
  return h.heartbeatText;
}

function viewCell(h: HostStatusT): string {
  if (h.view === null) return 'no view';
  return `${h.view.target} ${h.view.reachable ? 'reachable' : 'unreachable'} (ping ${h.view.ping ? 'ok' : 'no'}, health ${h.view.health ? 'ok' : 'no'}), ${fmtSeconds(h.view.ageSeconds)} ago`;
}

function loadCell(h: HostStatusT): string {
  const l = h.load;
  if (l === null) return '—';
  const parts: string[] = [];
  if (l.loadAvg !== undefined && l.loadAvg.length > 0) parts.push(`load ${l.loadAvg.map((x) => x.toFixed(2)).join(' ')}`);
  if (l.cpuCount !== undefined) parts.push(`${l.cpuCount} cpu`);
  if (l.freeMem !== undefined && l.totalMem !== undefined && l.totalMem > 0) parts.push(`mem ${Math.round((1 - l.freeMem / l.totalMem) * 100)}%`);
  return parts.length === 0 ? '—' : parts.join(', ');
}

function failoverText(m: StatusAnswerT): string {
  return m.failover.text;
}

function hostRow(h: HostStatusT): string {
  const viewCls = h.view === null ? '' : h.view.reachable ? 'ok' : 'bad';
  return (
    `<tr data-host="${esc(h.host)}" class="role-${esc(h.role)}">` +
    `<td data-label="host" class="c-host">${esc(h.host)}</td>` +
    `<td data-label="role" class="c-role">${esc(h.role)}</td>` +
    `<td data-label="heartbeat" class="c-heartbeat${h.heartbeatProblem ? ' bad' : ''}">${esc(heartbeatCell(h))}</td>` +
    `<td data-label="view of holder" class="c-view ${viewCls}">${esc(viewCell(h))}</td>` +
    `<td data-label="load" class="c-load">${esc(loadCell(h))}</td></tr>`
  );
}

function eventItem(e: EventRow): string {
  return (
    `<li data-id="${esc(e.id)}" class="ev ev-${esc(eventKind(e.event))}">` +
    `<span class="ev-at">${esc(isoTime(e.at))}</span> <span class="ev-name">${esc(e.event)}</span> ` +
    `<span class="ev-host">${esc(e.host ?? '-')}</span> <span class="ev-data">${esc(dataSummary(e.data))}</span></li>`
  );
}

/** Inline JSON that can never close its `<script>` element. */
function inlineJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

const CSS = `
:root{color-scheme:light dark;--bg:#f6f7f9;--fg:#111;--muted:#667;--card:#fff;--ok:#0a7d32;--warn:#a15c00;--bad:#b3261e;--line:#dde}
@media (prefers-color-scheme:dark){:root{--bg:#111418;--fg:#eef;--muted:#99a;--card:#1b1f24;--ok:#4cc27a;--warn:#f0a640;--bad:#ff6b61;--line:#2c323a}}
*{box-sizing:border-box}body{margin:0;font:16px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;background:var(--bg);color:var(--fg)}
main{max-width:980px;margin:0 auto;padding:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:14px;margin:0 0 12px}
.hero{display:flex;flex-wrap:wrap;gap:8px 24px;align-items:baseline}
.big{font-size:clamp(2.4rem,11vw,4.5rem);font-weight:700;line-height:1.05;word-break:break-all}
.label{color:var(--muted);font-size:.8rem;text-transform:uppercase;letter-spacing:.05em}
.ok{color:var(--ok)}.warn{color:var(--warn)}.bad{color:var(--bad)}
#validity{font-size:1.6rem;font-weight:600}
#banner{background:var(--warn);color:#000;font-weight:700;border-radius:12px;padding:12px 14px;margin:0 0 12px}
#banner[hidden]{display:none}
table{width:100%;border-collapse:collapse}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:500;font-size:.85rem}
tr.role-holder td.c-host{font-weight:700}
@media (max-width:640px){thead{display:none}tr{display:block;border-bottom:1px solid var(--line);padding:6px 0}td{display:flex;gap:8px;border:0;padding:2px 0}td::before{content:attr(data-label);color:var(--muted);min-width:7.5em;font-size:.85rem}}
ol#events{list-style:none;margin:0;padding:0;font-size:.9rem}
ol#events li{padding:5px 8px;border-left:4px solid transparent;border-bottom:1px solid var(--line);word-break:break-word}
.ev-at{color:var(--muted);font-variant-numeric:tabular-nums}.ev-name{font-weight:600}
li.ev-promotion{border-left-color:var(--ok);background:color-mix(in srgb,var(--ok) 12%,transparent)}
li.ev-refusal{border-left-color:var(--bad);background:color-mix(in srgb,var(--bad) 12%,transparent)}
li.ev-maintenance{border-left-color:var(--warn)}
footer{color:var(--muted);font-size:.8rem;padding:4px 2px 16px}#stale{color:var(--bad)}
`;

const SCRIPT = `
(function(){
  'use strict';
  var cfg = JSON.parse(document.getElementById('hq-initial').textContent);
  var MAX = cfg.maxEvents, every = cfg.refreshSeconds * 1000;
  var rec = cfg.record, lastId = cfg.lastEventId;
  var offset = rec.now - Date.now() / 1000, updated = Date.now();
  function $(id){ return document.getElementById(id); }
  function set(el, text){ if (el && el.textContent !== text) el.textContent = text; }
  function fmt(s){
    if (s === null || s === undefined || !isFinite(s)) return '\\u2014';
    var a = Math.abs(s);
    if (a < 120) return s.toFixed(a < 10 ? 1 : 0) + ' s';
    if (a < 7200) return (s / 60).toFixed(1) + ' min';
    if (a < 172800) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  }
  function now(){ return Date.now() / 1000 + offset; }
  function kind(ev){
    if (ev === 'promoted') return 'promotion';
    if (/-refused$/.test(ev) || ev === 'stale-generation' || ev === 'agent-silent') return 'refusal';
    if (ev === 'maintenance') return 'maintenance';
    return 'plain';
  }
  function iso(at){ var d = new Date(at * 1000); return isNaN(d.getTime()) ? String(at) : d.toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, 'Z'); }
  function summary(data){
    var parts = [];
    Object.keys(data || {}).forEach(function(k){ var v = data[k]; parts.push(k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))); });
    var s = parts.join(' ');
    return s.length > 200 ? s.slice(0, 199) + '\\u2026' : s;
  }
  function el(tag, cls, text){ var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function validity(){
    var v = $('validity');
    var cls = 'ok', text;
    if (rec.holder === null) { text = 'no lease'; cls = 'bad'; }
    else if (rec.released) { text = 'released'; cls = 'bad'; }
    else if (rec.expiresAt === null) { text = 'expired'; cls = 'bad'; }
    else {
      var left = rec.expiresAt - now();
      if (left <= 0) { text = 'expired'; cls = 'bad'; }
      else { text = fmt(left) + ' left'; cls = left < rec.ttlSeconds * 0.25 ? 'warn' : 'ok'; }
    }
    set(v, text); if (v.className !== cls) v.className = cls;
    var ld = '';
    if (rec.floorPending) ld = 'lock-delay: pending until every candidate reports its seen generation';
    else if (rec.notBefore !== null && rec.notBefore > now()) ld = 'lock-delay: ' + fmt(rec.notBefore - now()) + ' left';
    set($('lockdelay'), ld);
    var age = (Date.now() - updated) / 1000;
    set($('updated'), 'updated ' + fmt(age) + ' ago');
    var st = $('stale'); st.hidden = age < 3 * cfg.refreshSeconds + 2;
  }
  function renderLease(r){
    rec = r; offset = r.now - Date.now() / 1000;
    set($('holder'), r.holder === null ? 'none' : r.holder);
    set($('generation'), String(r.generation));
    set($('revision'), 'revision ' + r.revision + (r.promotedFrom ? ', promoted from ' + r.promotedFrom : ''));
    set($('streak'), r.dualUnreachableStreak > 0 ? 'dual-unreachable streak: ' + r.dualUnreachableStreak : '');
    validity();
  }
  function cells(h){
    var hb = h.heartbeatText;
    var view = h.view === null ? 'no view' : h.view.target + ' ' + (h.view.reachable ? 'reachable' : 'unreachable') + ' (ping ' + (h.view.ping ? 'ok' : 'no') + ', health ' + (h.view.health ? 'ok' : 'no') + '), ' + fmt(h.view.ageSeconds) + ' ago';
    var load = '\\u2014', l = h.load;
    if (l) {
      var p = [];
      if (l.loadAvg && l.loadAvg.length) p.push('load ' + l.loadAvg.map(function(x){ return x.toFixed(2); }).join(' '));
      if (typeof l.cpuCount === 'number') p.push(l.cpuCount + ' cpu');
      if (typeof l.freeMem === 'number' && typeof l.totalMem === 'number' && l.totalMem > 0) p.push('mem ' + Math.round((1 - l.freeMem / l.totalMem) * 100) + '%');
      if (p.length) load = p.join(', ');
    }
    return [['host', 'c-host', h.host], ['role', 'c-role', h.role], ['heartbeat', 'c-heartbeat' + (h.heartbeatProblem ? ' bad' : ''), hb], ['view of holder', 'c-view' + (h.view === null ? '' : h.view.reachable ? ' ok' : ' bad'), view], ['load', 'c-load', load]];
  }
  function renderStatus(s){
    var b = $('banner');
    b.hidden = !s.maintenance.enabled;
    set($('banner-text'), s.maintenance.enabled ? 'Maintenance is on: checks record views but never promote.' + (s.maintenance.reason ? ' Reason: ' + s.maintenance.reason : '') : '');
    var f = s.failover;
    set($('failover'), f.text);
    var tp = $('timing');
    tp.hidden = s.timingProblems.length === 0;
    tp.replaceChildren.apply(tp, s.timingProblems.map(function(p){ return el('li', 'bad', p.message); }));
    var body = $('hosts-body');
    var rows = [];
    s.hosts.forEach(function(h){
      var tr = el('tr', 'role-' + h.role);
      tr.setAttribute('data-host', h.host);
      cells(h).forEach(function(c){ var td = el('td', c[1], c[2]); td.setAttribute('data-label', c[0]); tr.appendChild(td); });
      rows.push(tr);
    });
    body.replaceChildren.apply(body, rows);
  }
  function addEvents(list){
    var ol = $('events');
    list.forEach(function(e){
      if (e.id <= lastId) return;
      lastId = e.id;
      var li = el('li', 'ev ev-' + kind(e.event));
      li.setAttribute('data-id', String(e.id));
      li.appendChild(el('span', 'ev-at', iso(e.at)));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-name', e.event));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-host', e.host === null ? '-' : e.host));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', 'ev-data', summary(e.data)));
      ol.insertBefore(li, ol.firstChild);
    });
    var empty = $('no-events'); if (empty && ol.children.length > 0) empty.remove();
    while (ol.children.length > MAX) ol.removeChild(ol.lastChild);
  }
  function get(path){
    return fetch(path, { cache: 'no-store', credentials: 'same-origin', headers: { accept: 'application/json' } }).then(function(r){
      if (!r.ok) throw new Error(path + ' answered ' + r.status);
      return r.json();
    });
  }
  var busy = false;
  function refresh(){
    if (busy) return; busy = true;
    Promise.all([get('v1/lease'), get('v1/status'), get('v1/events?after=' + lastId + '&limit=' + MAX)]).then(function(a){
      updated = Date.now();
      renderLease(a[0]); renderStatus(a[1]); addEvents(a[2].events || []);
      set($('error'), '');
      document.documentElement.setAttribute('data-refreshed', String(updated));
    }).catch(function(err){ set($('error'), String(err && err.message || err)); }).then(function(){ busy = false; });
  }
  setInterval(validity, 1000);
  setInterval(refresh, every);
  document.addEventListener('visibilitychange', function(){ if (!document.hidden) refresh(); });
  refresh();
})();
`;

const SCRIPT_HASH = `'sha256-${createHash('sha256').update(SCRIPT, 'utf8').digest('base64')}'`;

/** The Content-Security-Policy of the page: inline CSS, the one inline script by hash, same-origin fetches. */
export const STATUS_CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  `script-src ${SCRIPT_HASH}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function renderStatusPage(input: { record: LeaseRecord; model: StatusAnswerT; events: readonly EventRow[]; refreshSeconds: number; title: string }): string {
  const { record: r, model: m, events } = input;
  const v = validityText(r);
  const lastEventId = events.reduce((a, e) => Math.max(a, e.id), 0);
  const newestFirst = [...events].sort((a, b) => b.id - a.id);
  const initial = { record: r, lastEventId, refreshSeconds: input.refreshSeconds, maxEvents: TIMELINE_EVENTS };
  const banner = m.maintenance.enabled
    ? `Maintenance is on: checks record views but never promote.${m.maintenance.reason !== null && m.maintenance.reason !== '' ? ` Reason: ${m.maintenance.reason}` : ''}`
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${esc(input.title)} — ${esc(r.holder ?? 'no holder')} (generation ${esc(r.generation)})</title>
<style>${CSS}</style></head>
<body><main>
<div id="banner"${m.maintenance.enabled ? '' : ' hidden'} role="status"><span id="banner-text">${esc(banner)}</span></div>
<section class="card hero" aria-label="lease">
  <div><div class="label">holder</div><div id="holder" class="big">${esc(r.holder ?? 'none')}</div></div>
  <div><div class="label">generation</div><div id="generation" class="big">${esc(r.generation)}</div></div>
  <div><div class="label">validity</div><div id="validity" class="${esc(v.cls)}">${esc(v.text)}</div>
    <div id="lockdelay">${esc(lockDelayText(r))}</div></div>
  <div style="flex-basis:100%"><span id="revision" class="label">${esc(`revision ${r.revision}${r.promotedFrom !== null ? `, promoted from ${r.promotedFrom}` : ''}`)}</span>
    <span id="streak" class="bad">${esc(r.dualUnreachableStreak > 0 ? `dual-unreachable streak: ${r.dualUnreachableStreak}` : '')}</span></div>
</section>
<section class="card" aria-label="failover"><div class="label">failover</div><div id="failover">${esc(failoverText(m))}</div><ul id="timing" class="problems" aria-label="timing problems"${m.timingProblems.length === 0 ? ' hidden' : ''}>${m.timingProblems.map((p) => `<li class="bad">${esc(p.message)}</li>`).join('')}</ul></section>
<section class="card" aria-label="hosts"><div class="label">hosts</div>
<table id="hosts"><thead><tr><th>host</th><th>role</th><th>last heartbeat</th><th>view of holder</th><th>load</th></tr></thead>
<tbody id="hosts-body">${m.hosts.map(hostRow).join('')}</tbody></table></section>
<section class="card" aria-label="events"><div class="label">last ${TIMELINE_EVENTS} events (newest first)</div>
${newestFirst.length === 0 ? '<p id="no-events">no events yet</p>' : ''}<ol id="events">${newestFirst.map(eventItem).join('')}</ol></section>
<footer><span id="updated">rendered by the arbiter ${esc(m.failover.problem === null ? '' : '(timing problem)')}</span> · <span id="stale" hidden>the arbiter is not answering</span> <span id="error" class="bad"></span></footer>
</main>
<script type="application/json" id="hq-initial">${inlineJson(initial)}</script>
<script>${SCRIPT}</script>
</body></html>
`;
}

export const statusPage: FastifyPluginAsyncTypebox<StatusPageOptions> = async (app, opts) => {
  const refreshSeconds = opts.refreshSeconds ?? 3;
  const title = opts.title ?? 'hq';

  app.get(
    '/',
    {
      config: { scope: 'read' },
      schema: {
        description: 'The status page (HTML): holder, generation, validity, maintenance, hosts, the last 50 events and the worst-case failover; refreshes itself.',
        response: { 200: Type.String({ description: 'text/html' }), 401: ErrorBody },
      },
    },
    async (_req, reply) => {
      const state = opts.state();
      const record = opts.record(state);
      const model = statusModel(state, record, opts.settings(state), opts.load, opts.refused);
      const events = opts.recentEvents !== undefined ? [...opts.recentEvents(TIMELINE_EVENTS)] : tailEvents(opts.listEvents, TIMELINE_EVENTS);
      reply
        .type('text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('content-security-policy', STATUS_CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('x-frame-options', 'DENY');
      return renderStatusPage({ record, model, events: events.slice(-TIMELINE_EVENTS), refreshSeconds, title });
    },
  );

  app.get(
    '/v1/status',
    { config: { scope: 'read' }, schema: { response: { 200: StatusAnswer, 401: ErrorBody } } },
    async (_req, reply) => {
      const state = opts.state();
      reply.header('cache-control', 'no-store');
      return statusModel(state, opts.record(state), opts.settings(state), opts.load, opts.refused);
    },
  );
};
