import t from 'tap';
import { cronIntervalSeconds } from '../../packages/lease-core/src/index.js';

// [name, expression, largest gap in seconds]
const intervals: ReadonlyArray<readonly [string, string, number]> = [
  ['every ten minutes is 600 seconds (the default)', '*/10 * * * *', 600],
  ['six stars fire every second', '* * * * * *', 1],
  ['five stars fire every minute', '* * * * *', 60],
  ['a fixed minute fires hourly', '0 * * * *', 3600],
  ['a list of two minutes has its larger gap (wrap-around to the next hour)', '0,10 * * * *', 3000],
  ['a range leaves the wrap-around gap', '0-5 * * * *', 3300],
  ['a stepped range wraps from its last to its first firing', '10-40/15 * * * *', 1800],
  ['a start with a step runs to the end of the field', '5/15 * * * *', 900],
  ['once a day is 86400 seconds', '0 0 * * *', 86400],
  ['an hour range wraps across midnight', '0 9-17 * * *', 16 * 3600],
  ['seconds steps are honoured', '*/30 * * * * *', 30],
  ['a fixed second with stepped minutes', '0 */10 * * * *', 600],
  ['an uneven seconds list takes its largest gap', '0,1,50 * * * * *', 49],
  ['surrounding and repeated spaces are ignored', '  */10   *  * * * ', 600],
  ['a step that does not divide the field leaves a short wrap gap', '*/7 * * * *', 420],
];

for (const [name, expr, seconds] of intervals) {
  t.test(name, async (t) => {
    t.same(cronIntervalSeconds(expr), { ok: true, seconds }, `"${expr}"`);
  });
}

// [name, expression, message pattern]
const refused: ReadonlyArray<readonly [string, string, RegExp]> = [
  ['four fields are refused', '* * * *', /must have 5 fields/],
  ['seven fields are refused', '* * * * * * *', /must have 5 fields \(6 with seconds\)/],
  ['an empty expression is refused', '', /must have 5 fields/],
  ['a day-of-month is refused', '0 0 1 * *', /must run every day/],
  ['a month is refused', '* * * 1 *', /must run every day/],
  ['a weekday range is refused', '* * * * 1-5', /must run every day/],
  ['a day field in the six-field form is refused', '0 * * * * 0', /must run every day/],
  ['a word is not a cron field', 'a * * * *', /"a" is not a cron field/],
  ['an empty list item is not a cron field', '1,,2 * * * *', /"" is not a cron field/],
  ['a step of zero is out of range', '*/0 * * * *', /"\*\/0" is out of range 0-59/],
  ['minute 60 is out of range', '60 * * * *', /"60" is out of range 0-59/],
  ['a reversed range is out of range', '5-3 * * * *', /"5-3" is out of range/],
  ['hour 24 is out of range', '0 24 * * *', /"24" is out of range 0-23/],
  ['second 60 is out of range', '60 * * * * *', /"60" is out of range 0-59/],
  ['a range past the end of the field is out of range', '0 20-25 * * *', /"20-25" is out of range 0-23/],
];

for (const [name, expr, pattern] of refused) {
  t.test(name, async (t) => {
    const got = cronIntervalSeconds(expr);
    t.equal(got.ok, false, `"${expr}" is refused`);
    if (!got.ok) {
      t.match(got.message, pattern, 'the message says why');
      t.ok(got.message.startsWith(`"${expr}"`), 'the message starts with the quoted expression');
    }
  });
}
