import t from 'tap';
import { cronGapSeconds } from '../../packages/runtime/src/schedule.js';

t.test('node-cron parses, lease-core measures: one answer for valid and for how often', async (t) => {
  t.same(cronGapSeconds('*/10 * * * *'), { ok: true, seconds: 600 }, 'the default');
  t.same(
    cronGapSeconds('0 0 1 1 *'),
    { ok: true, seconds: 366 * 86_400 },
    'once a year is accepted (S6), its gap a leap year',
  );
  t.same(cronGapSeconds('*/1 * * * * *'), { ok: true, seconds: 1 }, 'every second');
});

t.test('the shell helper refuses what node-cron refuses, naming the expression', async (t) => {
  for (const expr of ['* * * *', '* * * * * * *', '', 'a * * * *', '60 * * * *', '0 24 * * *']) {
    const got = cronGapSeconds(expr);
    t.equal(got.ok, false, `"${expr}" is refused`);
    if (!got.ok) t.ok(got.message.startsWith(`"${expr}"`), 'the message starts with the quoted expression');
  }
  const impossible = cronGapSeconds('0 0 31 2 *');
  t.equal(impossible.ok, false, '31 February is refused');
});
