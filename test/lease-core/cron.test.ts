import t from 'tap';
import cron from 'node-cron';
import { largestGapSeconds, type CronFields } from '../../packages/lease-core/src/index.js';

const DAY = 86_400;
const gapOf = (expr: string) => largestGapSeconds(cron.parse(expr));

// [name, expression, largest gap in seconds]: any valid node-cron expression is accepted (S6),
// its real largest gap measured over the whole 400-year calendar cycle.
const intervals: ReadonlyArray<readonly [string, string, number]> = [
  ['every ten minutes is 600 seconds (the default)', '*/10 * * * *', 600],
  ['six stars fire every second', '* * * * * *', 1],
  ['five stars fire every minute', '* * * * *', 60],
  ['a fixed minute fires hourly', '0 * * * *', 3600],
  ['a list of two minutes has its larger gap (wrap-around to the next hour)', '0,10 * * * *', 3000],
  ['a stepped range wraps from its last to its first firing', '10-40/15 * * * *', 1800],
  ['once a day is a day', '0 0 * * *', DAY],
  ['an hour range wraps across midnight', '0 9-17 * * *', 16 * 3600],
  ['an uneven seconds list takes its largest gap', '0,1,50 * * * * *', 49],
  ['a step that does not divide the field leaves a short wrap gap', '*/7 * * * *', 420],
  ['once a year is a leap year long (the issue: it was refused)', '0 0 1 1 *', 366 * DAY],
  ['weekdays only: the weekend is the gap', '0 9 * * mon-fri', 3 * DAY],
  ['every Sunday is a week', '0 0 * * sun', 7 * DAY],
  ['the last day of the month: 31 days from Jan 31 to Feb 28/29 is not it — Feb to Mar is', '0 0 L * *', 31 * DAY],
  ['the 29th of February: eight years across 2100, which is no leap year', '0 0 29 2 *', (8 * 365 + 1) * DAY],
  ['the last Friday of the month', '0 0 * * 5L', 35 * DAY],
  ['the second Monday of the month', '0 0 * * 1#2', 35 * DAY],
  ['the weekday nearest the 15th', '0 0 15W * *', 32 * DAY],
  ['the last weekday of the month', '0 0 LW * *', 33 * DAY],
  ['three days before the end of the month', '0 0 L-3 * *', 31 * DAY],
  ['a day of month AND a weekday (node-cron requires both): Friday the 13th', '0 0 13 * 5', 427 * DAY],
];

for (const [name, expr, seconds] of intervals) {
  t.test(name, async (t) => {
    t.same(gapOf(expr), { ok: true, seconds }, `"${expr}"`);
  });
}

t.test('schedules that never fire are refused with the reason', async (t) => {
  const every: CronFields = cron.parse('0 0 * * *');
  t.same(largestGapSeconds({ ...every, hour: [] }), { ok: false, message: 'never fires (no time of day matches)' }, 'no time of day');
  t.same(largestGapSeconds({ ...every, dayOfMonth: [31], month: [2] }), { ok: false, message: 'never fires (no day of the calendar matches)' }, 'no day (31 February)');
  t.same(largestGapSeconds({ ...every, dayOfMonth: [1], dayOfWeek: [7] }), largestGapSeconds({ ...every, dayOfMonth: [1], dayOfWeek: [0] }), 'weekday 7 is Sunday, as 0');
  t.same(largestGapSeconds({ ...every, dayOfMonth: ['L-40'] }), { ok: false, message: 'never fires (no day of the calendar matches)' }, 'an offset before the month starts');
  t.same(largestGapSeconds({ ...every, dayOfMonth: ['31W'], month: [2] }), { ok: false, message: 'never fires (no day of the calendar matches)' }, 'a W day past the end of the month');
});

