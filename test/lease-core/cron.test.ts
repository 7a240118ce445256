import t from 'tap';
import cron from 'node-cron';
import { largestGapSeconds, nextFiring, type CronFields } from '../../packages/lease-core/src/index.js';

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
  t.same(
    largestGapSeconds({ ...every, hour: [] }),
    { ok: false, message: 'never fires (no time of day matches)' },
    'no time of day',
  );
  t.same(
    largestGapSeconds({ ...every, dayOfMonth: [31], month: [2] }),
    { ok: false, message: 'never fires (no day of the calendar matches)' },
    'no day (31 February)',
  );
  t.same(
    largestGapSeconds({ ...every, dayOfMonth: [1], dayOfWeek: [7] }),
    largestGapSeconds({ ...every, dayOfMonth: [1], dayOfWeek: [0] }),
    'weekday 7 is Sunday, as 0',
  );
  t.same(
    largestGapSeconds({ ...every, dayOfMonth: ['L-40'] }),
    { ok: false, message: 'never fires (no day of the calendar matches)' },
    'an offset before the month starts',
  );
  t.same(
    largestGapSeconds({ ...every, dayOfMonth: ['31W'], month: [2] }),
    { ok: false, message: 'never fires (no day of the calendar matches)' },
    'a W day past the end of the month',
  );
});

// nextFiring: when the schedule fires next in local time, as node-cron's own walk finds it (its
// TimeMatcher, which the daemons no longer run: it reads the local time through Intl). Compared
// from instants around the year and across daylight-saving changes, in zones with and without them:
// the process's zone set for nextFiring (Date reads TZ anew), the same zone named to node-cron
// (its Intl formatter is kept per zone name, so the default one would keep the first zone).
t.test('nextFiring finds the run node-cron would find, in several time zones', async (t) => {
  const saved = process.env['TZ'];
  t.teardown(() => {
    if (saved === undefined) delete process.env['TZ'];
    else process.env['TZ'] = saved;
  });
  const exprs = [...intervals.map(([, e]) => e), '30 2 * * *', '0,30 1-3 * * *', '*/15 * 2-3 * * *', '59 23 31 12 *'];
  // The days of the 2026 daylight-saving changes in Europe and the US, a leap day, and a year end.
  const starts = [
    '2026-03-08T06:59:30Z',
    '2026-03-29T00:59:59Z',
    '2026-10-25T00:30:00Z',
    '2026-11-01T05:45:10Z',
    '2028-02-28T23:59:59Z',
    '2026-12-31T22:59:59.500Z',
    '2026-06-15T12:00:00Z',
  ];
  for (const tz of ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe']) {
    process.env['TZ'] = tz;
    const wrong: string[] = [];
    let compared = 0;
    for (const expr of exprs) {
      const matcher = (
        cron.createTask(expr, () => undefined, { timezone: tz }) as unknown as {
          timeMatcher: { getNextMatch(d: Date): Date };
        }
      ).timeMatcher;
      const fields = cron.parse(expr);
      for (const start of starts) {
        // Five runs in a row from each start: each from the previous one, as a schedule walks.
        let ours = Date.parse(start);
        let theirs = new Date(ours);
        for (let i = 0; i < 5; i++) {
          const next = nextFiring(fields, ours);
          theirs = matcher.getNextMatch(theirs);
          if (next !== theirs.getTime()) {
            wrong.push(
              `"${expr}" run ${i + 1} after ${new Date(ours).toISOString()}: ${next === null ? 'null' : new Date(next).toISOString()}, node-cron ${theirs.toISOString()}`,
            );
            break;
          }
          ours = next;
          compared++;
        }
      }
    }
    t.same(wrong, [], `${tz}: every run agrees`);
    t.equal(compared, exprs.length * starts.length * 5, `${tz}: ${compared} runs compared`);
  }
});

t.test(
  'nextFiring: a local time that a daylight-saving change skips is no run; one it repeats runs once',
  async (t) => {
    const saved = process.env['TZ'];
    t.teardown(() => {
      if (saved === undefined) delete process.env['TZ'];
      else process.env['TZ'] = saved;
    });
    process.env['TZ'] = 'Europe/Berlin';
    const daily = cron.parse('30 2 * * *');
    // 29 March 2026: 02:00 → 03:00 local; there is no 02:30 that day.
    t.equal(
      new Date(nextFiring(daily, Date.parse('2026-03-28T12:00:00Z'))!).toISOString(),
      '2026-03-30T00:30:00.000Z',
      'the skipped 02:30 is passed over to the next day',
    );
    // 25 October 2026: 03:00 → 02:00 local; 02:30 happens twice, and runs once (node-cron, east of
    // UTC, takes the second: the offset in effect at 02:30 UTC is winter time's).
    const first = nextFiring(daily, Date.parse('2026-10-24T12:00:00Z'))!;
    t.equal(new Date(first).toISOString(), '2026-10-25T01:30:00.000Z', 'the 02:30 of winter time');
    t.equal(new Date(nextFiring(daily, first)!).toISOString(), '2026-10-26T01:30:00.000Z', 'then the next day');
    // The hour before the change: its local times exist once, on winter time.
    t.equal(
      new Date(nextFiring(cron.parse('30 1 * * *'), Date.parse('2026-03-28T12:00:00Z'))!).toISOString(),
      '2026-03-29T00:30:00.000Z',
      '01:30 on the day of the change, winter time',
    );
    t.equal(
      nextFiring({ ...daily, dayOfMonth: [31], month: [2] }, Date.now()),
      null,
      'a schedule that never fires has no next run',
    );
  },
);
