/**
 * The status page's timeline: which events it shows, how each is named and coloured, its data in one line with
 * readable times. Apart from the host rows and the phase, which read the state, not the log.
 */
import type { EventRow } from '../../store/store.js';
import type { Awaitable } from '../../awaitable.js';
import { clockTime, fmtSeconds } from './format.js';

/** Events shown in the timeline. */
export const TIMELINE_EVENTS = 50;

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

/** Event data keys that hold an arbiter time (seconds since the epoch). */
function isTimeKey(key: string): boolean {
  return key === 'notBefore' || key === 'was' || key.endsWith('At');
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
