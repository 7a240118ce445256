/**
 * The status page's HTML: one server-rendered document for an operator's phone, its CSS, and
 * the browser script (./browser.js, inlined) with the Content-Security-Policy that allows it by
 * its hash. The hash is computed from the file when this module loads, so an edit of the script
 * can never leave the policy behind. Every value printed here goes through `esc`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runWindow, type LeaseRecord, type LeaseWaitKind } from '@hq/protocol';
import type { EventRow } from '../../store/store.js';
import { TIMELINE_EVENTS, arbitersText, clockTime, eventData, eventKind, eventLabel, fmtSeconds } from './model.js';
import type { HostStatusT, StatusAnswerT } from '../../schemas/status.js';
import type { ArbitersT } from '@hq/protocol/schemas';

/** Escapes text for an HTML text node or a double-quoted attribute. */
export function esc(value: unknown): string {
  return String(value).replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The validity cell. Green only while the holder reports and may run: a silent holder's is red,
 * one that waits out lock-delay amber. A holder that may not run yet shows when it may and for
 * how long (its validity counts from then), never a remaining validity longer than the TTL.
 */
function validityText(r: LeaseRecord, phase: StatusAnswerT['phase']): { text: string; cls: string } {
  if (r.holder === null) return { text: 'no lease', cls: 'bad' };
  if (r.released) return { text: 'released', cls: 'bad' };
  if (r.expired || r.expiresAt === null) return { text: 'expired', cls: 'bad' };
  if (r.floorPending) return { text: 'may run once every candidate has reported its seen generation', cls: 'warn' };
  const w = runWindow(r);
  if (w === null) return { text: 'expired', cls: 'bad' };
  if (w.startsInSeconds > 0)
    return {
      text: `may run in ${fmtSeconds(w.startsInSeconds)}, then for ${fmtSeconds(w.validSeconds)} (until ${clockTime(w.until)})`,
      cls: 'warn',
    };
  const left = w.validSeconds;
  if (phase.name === 'holder-silent')
    return {
      text: `${fmtSeconds(left)} left${r.renewedAt === null ? '' : `, not renewed for ${fmtSeconds(r.now - r.renewedAt)}`}`,
      cls: 'bad',
    };
  return {
    text: `${fmtSeconds(left)} left`,
    cls: phase.name === 'lock-delay' || left < r.ttlSeconds * 0.25 ? 'warn' : 'ok',
  };
}

/** The wait under the validity, by its name (browser.js says the same as time passes). */
export function lockDelayText(r: LeaseRecord): string {
  const w = r.wait ?? null;
  if (w !== null) {
    const label = WAIT_LABELS[w.kind];
    if (w.until === null)
      return `${label}: pending until ${w.unreported.length === 0 ? 'the next report' : `${w.unreported.join(', ')} ${w.unreported.length === 1 ? 'reports' : 'report'}`}`;
    return w.until > r.now ? `${label}: may run in ${fmtSeconds(w.until - r.now)}` : '';
  }
  if (r.floorPending) return 'lock-delay: pending until every candidate reports its seen generation';
  if (r.notBefore !== null && r.notBefore > r.now) return `lock-delay: may run in ${fmtSeconds(r.notBefore - r.now)}`;
  return '';
}

/** How each wait of the record is called on the page. */
const WAIT_LABELS: { readonly [K in LeaseWaitKind]: string } = {
  'lock-delay': 'lock-delay',
  'start-wait': "the arbiter's start wait",
  'floor-pending': 'floor',
  confirmation: 'its own confirmation of the old holder',
};

function streakText(r: LeaseRecord, promoteAfterChecks: number): string {
  return r.dualUnreachableStreak > 0
    ? `holder unreachable: check ${r.dualUnreachableStreak} of ${promoteAfterChecks} before a promotion`
    : '';
}

function hostRow(h: HostStatusT): string {
  return (
    `<tr data-host="${esc(h.host)}" class="role-${esc(h.role)}${h.heartbeatProblem ? ' problem' : ''}">` +
    `<td data-label="host" class="c-host">${esc(h.host)}</td>` +
    `<td data-label="role" class="c-role">${esc(h.role)}</td>` +
    `<td data-label="heartbeat" class="c-heartbeat${h.heartbeatProblem ? ' bad' : ''}">${esc(h.heartbeatText)}</td>` +
    `<td data-label="view of holder" class="c-view ${esc(h.viewLevel)}">${esc(h.viewText)}</td>` +
    `<td data-label="load" class="c-load">${esc(h.loadText)}</td>` +
    `<td data-label="version" class="c-version${h.upgrade === null ? '' : ' warn'}"${h.upgrade === null ? '' : ` title="${esc(h.upgrade)}"`}>${esc(h.upgrade === null ? h.versionText : `${h.versionText}; upgrade it`)}</td></tr>`
  );
}

function eventItem(e: EventRow): string {
  return (
    `<li data-id="${esc(e.id)}" class="ev ev-${esc(eventKind(e.event))}">` +
    `<span class="ev-at">${esc(clockTime(e.at))}</span> <span class="ev-name">${esc(eventLabel(e.event, e.data))}</span> ` +
    `<span class="ev-host">${esc(e.host ?? '-')}</span> <span class="ev-data">${esc(eventData(e))}</span></li>`
  );
}

/** Inline JSON that can never close its `<script>` element. */
function inlineJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
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
.ok{color:var(--ok)}.warn{color:var(--warn)}.bad{color:var(--bad)}.muted{color:var(--muted)}
#validity{font-size:1.6rem;font-weight:600}#lockdelay.warn,#streak{font-weight:700}
.phase{border-left:8px solid var(--line);font-size:1.1rem;font-weight:600}
.phase-ok{border-left-color:var(--ok)}
.phase-warn{border-left-color:var(--warn);background:color-mix(in srgb,var(--warn) 14%,var(--card))}
.phase-bad{border-left-color:var(--bad);background:color-mix(in srgb,var(--bad) 14%,var(--card))}
tr.problem td.c-host{color:var(--bad)}#peerpaths li.bad{font-weight:700}td.c-heartbeat.bad{font-weight:600}
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

/**
 * The browser script, read once at load. The path is relative to the package root, the same
 * from src/ (tests) and dist/ (the daemon): package.json `files` ships the file beside dist/.
 */
const SCRIPT = readFileSync(new URL('../../../src/routes/status-page/browser.js', import.meta.url), 'utf8');

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

function arbitersCard(a: ArbitersT): string {
  const t = arbitersText(a);
  return `<section class="card" aria-label="arbiters"><div class="label">arbiters</div><div id="arbiters" class="${esc(t.level === 'ok' ? '' : t.level)}">${esc(t.text)}</div></section>
`;
}

export function renderStatusPage(input: {
  record: LeaseRecord;
  model: StatusAnswerT;
  events: readonly EventRow[];
  refreshSeconds: number;
  title: string;
}): string {
  const { record: r, model: m, events } = input;
  const v = validityText(r, m.phase);
  const ld = lockDelayText(r);
  const lastEventId = events.reduce((a, e) => Math.max(a, e.id), 0);
  const newestFirst = [...events].sort((a, b) => b.id - a.id);
  const initial = {
    record: r,
    phase: m.phase,
    promoteAfterChecks: m.failover.promoteAfterChecks,
    lastEventId,
    refreshSeconds: input.refreshSeconds,
    maxEvents: TIMELINE_EVENTS,
  };
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
<section id="phase" class="card phase phase-${esc(m.phase.level)}" data-phase="${esc(m.phase.name)}" aria-label="state"><span id="phase-text">${esc(m.phase.text)}</span></section>
<section class="card hero" aria-label="lease">
  <div><div class="label">holder</div><div id="holder" class="big">${esc(r.holder ?? 'none')}</div></div>
  <div><div class="label">generation</div><div id="generation" class="big">${esc(r.generation)}</div></div>
  <div><div class="label">validity</div><div id="validity" class="${esc(v.cls)}">${esc(v.text)}</div>
    <div id="lockdelay" class="${ld === '' ? '' : 'warn'}">${esc(ld)}</div></div>
  <div style="flex-basis:100%"><span id="revision" class="label">${esc(`revision ${r.revision}${r.promotedFrom !== null ? `, promoted from ${r.promotedFrom}` : ''}`)}</span>
    <span id="streak" class="bad">${esc(streakText(r, m.failover.promoteAfterChecks))}</span></div>
</section>
<section class="card" aria-label="failover"><div class="label">failover</div><div id="failover">${esc(m.failover.text)}</div><ul id="timing" class="problems" aria-label="timing problems"${m.timingProblems.length === 0 ? ' hidden' : ''}>${m.timingProblems.map((p) => `<li class="bad">${esc(p.message)}</li>`).join('')}</ul>
<ul id="peerpaths" class="problems" aria-label="peer paths"${m.peerPaths.length === 0 ? ' hidden' : ''}>${m.peerPaths.map((p) => `<li class="${p.ok ? 'ok' : 'bad'}" data-host="${esc(p.host)}" data-peer="${esc(p.peer)}">${esc(p.text)}</li>`).join('')}</ul></section>
${m.arbiters === undefined ? '' : arbitersCard(m.arbiters)}<section class="card" aria-label="hosts"><div class="label">hosts</div>
<table id="hosts"><thead><tr><th>host</th><th>role</th><th>last heartbeat</th><th>view of holder</th><th>load</th><th>version</th></tr></thead>
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
