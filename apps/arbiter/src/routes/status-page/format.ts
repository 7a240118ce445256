/**
 * How the status page writes seconds and arbiter times: one wording for the HTML, `GET /v1/status`, the
 * timeline and the phase line, so they cannot disagree.
 */
/** Seconds as the page shows them: "4.2 s", "3.5 min", "2.0 h". */
export function fmtSeconds(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return '—';
  const a = Math.abs(s);
  if (a < 120) return `${s.toFixed(a < 10 ? 1 : 0)} s`;
  if (a < 7200) return `${(s / 60).toFixed(1)} min`;
  if (a < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** An arbiter time as the timeline prints it: "2027-01-15 08:00:10.5Z" (tenths only when there are any). */
export function clockTime(at: number): string {
  const d = new Date(at * 1000);
  if (Number.isNaN(d.getTime())) return String(at);
  const tenths = Math.floor(d.getUTCMilliseconds() / 100);
  return `${d.toISOString().slice(0, 10)} ${d.toISOString().slice(11, 19)}${tenths === 0 ? '' : `.${tenths}`}Z`;
}
