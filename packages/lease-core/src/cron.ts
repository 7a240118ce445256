/**
 * The largest gap between two firings of a node-cron expression, in seconds, so the timing
 * rule (S6) can be checked on `heartbeatCron` and `checkCron`. Five fields are minute-based,
 * six fields start with seconds (node-cron's convention). Supported per field: `*`, numbers,
 * ranges `a-b`, steps `*\/n` and `a-b/n`, and comma lists. Day-of-month, month and weekday
 * must be `*`: a schedule that skips days cannot keep a lease alive and is refused by S6 anyway.
 */

export type CronResult = { readonly ok: true; readonly seconds: number } | { readonly ok: false; readonly message: string };

function parseField(text: string, min: number, max: number): Set<number> | string {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
    if (m === null) return `"${part}" is not a cron field`;
    let lo = min;
    let hi = max;
    if (m[1] !== '*') {
      lo = Number(m[2]);
      hi = m[3] === undefined ? (m[4] === undefined ? lo : max) : Number(m[3]);
    }
    const step = m[4] === undefined ? 1 : Number(m[4]);
    if (lo < min || hi > max || lo > hi || step < 1) return `"${part}" is out of range ${min}-${max}`;
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

export function cronIntervalSeconds(expr: string): CronResult {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    return { ok: false, message: `"${expr}" must have 5 fields (6 with seconds)` };
  }
  const withSeconds = fields.length === 6;
  const [secText, minText, hourText, ...days] = withSeconds ? fields : ['0', ...fields];
  if (days.some((d) => d !== '*')) {
    return { ok: false, message: `"${expr}" must run every day (day-of-month, month and weekday must be *)` };
  }
  const seconds = parseField(secText as string, 0, 59);
  const minutes = parseField(minText as string, 0, 59);
  const hours = parseField(hourText as string, 0, 23);
  for (const f of [seconds, minutes, hours]) {
    if (typeof f === 'string') return { ok: false, message: `"${expr}": ${f}` };
  }
  const firings: number[] = [];
  for (const h of [...(hours as Set<number>)].sort((a, b) => a - b)) {
    for (const m of [...(minutes as Set<number>)].sort((a, b) => a - b)) {
      for (const s of [...(seconds as Set<number>)].sort((a, b) => a - b)) firings.push(h * 3600 + m * 60 + s);
    }
  }
  let gap = 0;
  for (let i = 0; i < firings.length; i++) {
    const here = firings[i] as number;
    const next = i + 1 < firings.length ? (firings[i + 1] as number) : (firings[0] as number) + 86400;
    gap = Math.max(gap, next - here);
  }
  return { ok: true, seconds: gap };
}
