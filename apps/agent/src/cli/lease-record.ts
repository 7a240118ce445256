/**
 * Reading a lease record the arbiter answered, as every lease command words it: ages, the wait that holds its
 * holder, whether an agent runs on it. Shared by status, acquire, release, failover and their waits.
 */
import { parseRecord } from '@hq/lease-core';
import { fieldsOf } from '@hq/protocol';

export function fmtAge(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (Math.abs(s) < 120) return `${s.toFixed(1)} s`;
  if (Math.abs(s) < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/**
 * Which wait holds the record's holder and why, in the arbiter's own words (the record's `wait`),
 * with how long it has left (null: it ends on reports, not at a time); null when nothing holds
 * it. An arbiter of hq 0.1 does not say which wait: its record's own fields give how long.
 * Every command that waits for a holder prints this, and `hq lease status` shows it.
 */
export function waitNote(lease: unknown): { readonly left: number | null; readonly text: string } | null {
  const r = fieldsOf(lease);
  const now = typeof r.now === 'number' ? r.now : null;
  const w = fieldsOf(r.wait);
  if (typeof w.text === 'string') {
    const until = typeof w.until === 'number' ? w.until : null;
    if (until === null || now === null) return { left: null, text: w.text };
    return until > now ? { left: until - now, text: w.text } : null;
  }
  if ('wait' in r) return null;
  if (r.floorPending === true)
    return {
      left: null,
      text: 'the floor is pending: it may run once every candidate has reported its seen generation to the arbiter',
    };
  const notBefore = typeof r.notBefore === 'number' ? r.notBefore : null;
  if (notBefore === null || now === null || notBefore <= now) return null;
  return {
    left: notBefore - now,
    text: `until ${new Date(notBefore * 1000).toISOString()}: the old holder's lock-delay, or the arbiter's start wait after it started`,
  };
}

/** When a just-granted holder may first run, from the record the grant answered. */
export function runsWhen(lease: unknown): string {
  const w = waitNote(lease);
  if (w === null) return 'it may run now';
  return w.left === null ? `it may not run yet: ${w.text}` : `it may run in ${fmtAge(w.left)}: ${w.text}`;
}

/**
 * Null when an agent takes `rec` as its record (the checks it applies, the generation ceiling
 * among them), else why not: an answer that promises a run is never printed for a record that
 * no agent will run on.
 */
export function agentRefuses(rec: unknown): string | null {
  const p = parseRecord(rec);
  return p.ok ? null : p.problem;
}
