/**
 * The largest gap between two firings of a cron schedule, in seconds, so the timing rules (S6)
 * and the worst-case failover are computed from what a schedule really does: any valid
 * node-cron expression is accepted — a check once a year is legal, and its failover says a year.
 *
 * The expression is parsed by node-cron in the shell (one parser, the one that schedules); this
 * module gets its fields and measures them. node-cron's day rule is an AND: a day fires when its
 * month, its day of month and its weekday all match (`L`, `LW`, `15W`, `L-3`, `5L`, `1#2` as
 * node-cron reads them). The Gregorian calendar repeats every 400 years (146,097 days, a whole
 * number of weeks), so one cycle holds every gap there is. Days are UTC days: a daylight-saving
 * change can make a local-time gap that spans midnight up to one hour longer.
 *
 * `nextFiring` is the other half: when the schedule fires next in the host's local time, found as
 * node-cron finds it, so that the daemons can schedule without node-cron's timer (which reads the
 * local time through `Intl.DateTimeFormat`: 8 MiB of ICU data and code for a daemon, docs/BENCH.md).
 */

export type CronResult =
  | { readonly ok: true; readonly seconds: number }
  | { readonly ok: false; readonly message: string };

/** node-cron's parsed fields (its `parse`): numbers, and the day tokens above as strings. */
export interface CronFields {
  readonly second: readonly number[];
  readonly minute: readonly number[];
  readonly hour: readonly number[];
  readonly dayOfMonth: ReadonlyArray<number | string>;
  readonly month: readonly number[];
  readonly dayOfWeek: ReadonlyArray<number | string>;
}

const DAY = 86_400;
/** Days in 400 Gregorian years; 2000-03-01 starts a cycle on any day, so any start does. */
const CYCLE_DAYS = 146_097;
const CYCLE_START = Date.UTC(2001, 0, 1) / 1000 / DAY;

function lastDayOfMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month - 1, day)).getUTCDay();
}

/** The weekday (Mon–Fri) nearest to `target` within its month, as node-cron's `W`. */
function nearestWeekday(year: number, month: number, target: number): number {
  const last = lastDayOfMonth(year, month);
  if (target < 1 || target > last) return -1;
  const weekday = weekdayOf(year, month, target);
  if (weekday === 6) return target === 1 ? target + 2 : target - 1;
  if (weekday === 0) return target === last ? target - 2 : target + 1;
  return target;
}

function matchesDayOfMonth(field: CronFields['dayOfMonth'], year: number, month: number, day: number): boolean {
  const last = lastDayOfMonth(year, month);
  for (const value of field) {
    if (value === day) return true;
    if (typeof value !== 'string') continue;
    if (value === 'L' && day === last) return true;
    const w = /^(L|\d{1,2})W$/i.exec(value);
    if (w !== null && nearestWeekday(year, month, w[1] === 'L' ? last : Number(w[1])) === day) return true;
    const offset = /^L-(\d{1,2})$/i.exec(value);
    if (offset !== null && last - Number(offset[1]) === day) return true;
  }
  return false;
}

function matchesDayOfWeek(field: CronFields['dayOfWeek'], year: number, month: number, day: number): boolean {
  const weekday = weekdayOf(year, month, day);
  for (const value of field) {
    if (value === weekday || value === weekday + 7) return true;
    if (typeof value !== 'string') continue;
    const lastOf = /^([0-7])L$/i.exec(value);
    if (lastOf !== null && Number(lastOf[1]) % 7 === weekday && day + 7 > lastDayOfMonth(year, month)) return true;
    const nth = /^([0-7])#([1-5])$/.exec(value);
    if (nth !== null && Number(nth[1]) % 7 === weekday && Math.floor((day - 1) / 7) + 1 === Number(nth[2])) return true;
  }
  return false;
}

/** True when every day fires: no day-level restriction at all (the common case, no walk). */
function everyDay(f: CronFields): boolean {
  const dom = new Set(f.dayOfMonth);
  const dow = new Set(f.dayOfWeek.map((d) => (typeof d === 'number' ? d % 7 : d)));
  const months = new Set(f.month);
  for (let d = 1; d <= 31; d++) if (!dom.has(d)) return false;
  for (let d = 0; d <= 6; d++) if (!dow.has(d)) return false;
  for (let m = 1; m <= 12; m++) if (!months.has(m)) return false;
  return true;
}

/** The largest gap between two consecutive firings of the schedule, over a whole 400-year cycle. */
export function largestGapSeconds(f: CronFields): CronResult {
  const times = new Set<number>();
  for (const h of f.hour) for (const m of f.minute) for (const s of f.second) times.add(h * 3600 + m * 60 + s);
  const inDay = [...times].filter((t) => Number.isInteger(t) && t >= 0 && t < DAY).sort((a, b) => a - b);
  const first = inDay[0];
  const last = inDay[inDay.length - 1];
  if (first === undefined || last === undefined) return { ok: false, message: 'never fires (no time of day matches)' };
  let gap = 0;
  for (let i = 1; i < inDay.length; i++) gap = Math.max(gap, (inDay[i] as number) - (inDay[i - 1] as number));
  if (everyDay(f)) return { ok: true, seconds: Math.max(gap, DAY - last + first) };
  const months = new Set(f.month);
  let firstDay = -1;
  let previous = -1;
  let dayGap = 0;
  for (let i = 0; i < CYCLE_DAYS; i++) {
    const date = new Date((CYCLE_START + i) * DAY * 1000);
    const year = date.getUTCFullYear();
    const month = date.getUTCMonth() + 1;
    const day = date.getUTCDate();
    if (
      !months.has(month) ||
      !matchesDayOfMonth(f.dayOfMonth, year, month, day) ||
      !matchesDayOfWeek(f.dayOfWeek, year, month, day)
    )
      continue;
    if (firstDay < 0) firstDay = i;
    else dayGap = Math.max(dayGap, i - previous);
    previous = i;
  }
  if (firstDay < 0) return { ok: false, message: 'never fires (no day of the calendar matches)' };
  // The cycle wraps: the last firing day is followed by the first one, one cycle later.
  dayGap = Math.max(dayGap, firstDay + CYCLE_DAYS - previous);
  return { ok: true, seconds: Math.max(gap, (dayGap - 1) * DAY + (DAY - last + first)) };
}

/** Does the local time at `ms` match every field (node-cron's `TimeMatcher.match`)? */
function matchesAt(f: CronFields, ms: number): boolean {
  const d = new Date(ms);
  const year = d.getFullYear();
  const month = d.getMonth() + 1;
  const day = d.getDate();
  return (
    f.second.includes(d.getSeconds()) &&
    f.minute.includes(d.getMinutes()) &&
    f.hour.includes(d.getHours()) &&
    f.month.includes(month) &&
    matchesDayOfMonth(f.dayOfMonth, year, month, day) &&
    matchesDayOfWeek(f.dayOfWeek, year, month, day)
  );
}

/** The local time's offset from UTC at `ms`, in minutes east (node-cron's sign). */
function offsetAt(ms: number): number {
  return -new Date(ms).getTimezoneOffset();
}

/** Does the local time at `ms` read as these fields? */
function readsBackTo(ms: number, year: number, month: number, day: number, h: number, m: number, s: number): boolean {
  const d = new Date(ms);
  return (
    d.getFullYear() === year &&
    d.getMonth() + 1 === month &&
    d.getDate() === day &&
    d.getHours() === h &&
    d.getMinutes() === m &&
    d.getSeconds() === s
  );
}

/**
 * The instant of a local date and time as node-cron's `localTimeToTimestamp` picks it: the offset
 * in effect at the UTC instant with the same digits, then the offset at that result; where they
 * differ (a daylight-saving change) the second candidate when it reads back, else the later one.
 * (node-cron also tries the first candidate then; with offsets from `Date` it cannot read back:
 * its local time is the digits shifted by the difference of the two offsets.)
 */
function localInstant(year: number, month: number, day: number, h: number, m: number, s: number): number {
  const guess = Date.UTC(year, month - 1, day, h, m, s);
  const first = offsetAt(guess);
  const one = guess - first * 60_000;
  const second = offsetAt(one);
  if (second === first) return one;
  const two = guess - second * 60_000;
  return readsBackTo(two, year, month, day, h, m, s) ? two : Math.max(one, two);
}

/**
 * The first firing strictly after `afterMs` (epoch milliseconds) in the host's local time, found
 * as node-cron's walk finds it (its `MatcherWalker`): day by day from the local day of `afterMs`,
 * on a day that matches (the AND above) its times of day in order; a time's instant as
 * `localInstant` picks it, taken when it is later than `afterMs`'s whole second and the local time
 * there matches the schedule — so a time a daylight-saving change skips is no run, and the hour
 * it repeats runs once. Null when nothing fires within a 400-year cycle (configs refuse that).
 */
export function nextFiring(f: CronFields, afterMs: number): number | null {
  const asc = (xs: readonly number[]): number[] => [...new Set(xs)].sort((a, b) => a - b);
  const hours = asc(f.hour);
  const minutes = asc(f.minute);
  const seconds = asc(f.second);
  const months = new Set(f.month);
  const baseMs = Math.floor(afterMs / 1000) * 1000;
  const base = new Date(baseMs);
  const floor = base.getHours() * 3600 + base.getMinutes() * 60 + base.getSeconds();
  let year = base.getFullYear();
  let month = base.getMonth() + 1;
  let day = base.getDate();
  for (let i = 0; i <= CYCLE_DAYS; i++) {
    if (
      months.has(month) &&
      matchesDayOfMonth(f.dayOfMonth, year, month, day) &&
      matchesDayOfWeek(f.dayOfWeek, year, month, day)
    ) {
      for (const h of hours) {
        for (const m of minutes) {
          for (const s of seconds) {
            // On the first day only the times later than the base's own are candidates.
            if (i === 0 && h * 3600 + m * 60 + s <= floor) continue;
            const ms = localInstant(year, month, day, h, m, s);
            if (ms > baseMs && matchesAt(f, ms)) return ms;
          }
        }
      }
    }
    const next = new Date(Date.UTC(year, month - 1, day + 1));
    year = next.getUTCFullYear();
    month = next.getUTCMonth() + 1;
    day = next.getUTCDate();
  }
  return null;
}
