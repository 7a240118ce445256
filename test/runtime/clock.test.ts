/** The shell's clocks: units, where each starts, and that none of them runs backwards. */
import t from 'tap';
import {
  elapsed,
  every,
  manualClock,
  monotonicClockMs,
  monotonicSeconds,
  sleepSafeClockMs,
  stampClock,
  steadyClock,
  unrefTimers,
  wallClockMs,
} from '../../packages/runtime/src/clock.js';
import { FakeTime } from '../registry/fake-time.js';

t.test('each clock reads in its unit and starts at the wall time', async (t) => {
  const wall = Date.now() / 1000;
  const s = stampClock.now();
  t.ok(Math.abs(s.wall - wall) < 5, 'a stamp holds the wall time in seconds');
  t.ok(s.mono > 0, 'and a monotonic reading');
  t.ok(Math.abs(steadyClock().now() - wall) < 5, 'the steady clock starts at the wall time, in seconds');
  t.ok(Math.abs(sleepSafeClockMs().now() - wall * 1000) < 5000, 'the sleep-safe clock reads epoch milliseconds');
  t.ok(Math.abs(wallClockMs.now() - wall * 1000) < 5000, 'the wall clock reads epoch milliseconds');
  t.ok(
    Math.abs(monotonicClockMs.now() - monotonicSeconds() * 1000) < 5000,
    'the monotonic clock in milliseconds is the monotonic seconds × 1000',
  );
});

t.test('no clock runs backwards between two readings', async (t) => {
  const steady = steadyClock();
  const safe = sleepSafeClockMs();
  const a = [stampClock.now(), steady.now(), safe.now()] as const;
  for (let i = 0; i < 10_000; i++) Math.sqrt(i);
  const b = [stampClock.now(), steady.now(), safe.now()] as const;
  t.ok(elapsed(a[0], b[0]) >= 0, 'stamps: elapsed is never negative');
  t.ok(b[1] >= a[1], 'steady: the later reading is not earlier');
  t.ok(b[2] >= a[2], 'sleep-safe: the later reading is not earlier');
});

t.test('elapsed is the larger of the two clocks, so a stopped or stepped-back clock cannot stretch it', async (t) => {
  t.equal(
    elapsed({ wall: 100, mono: 5 }, { wall: 110, mono: 6 }),
    10,
    'a suspend (monotonic stopped) counts by the wall',
  );
  t.equal(elapsed({ wall: 100, mono: 5 }, { wall: 90, mono: 8 }), 3, 'a wall step back counts by the monotonic clock');
});

t.test('a manual clock moves only when told', async (t) => {
  const c = manualClock(10);
  t.equal(c.now(), 10, 'it starts where asked');
  c.advance(2.5);
  t.equal(c.now(), 12.5, 'advance adds');
  c.set(3);
  t.equal(c.now(), 3, 'set jumps, backwards included');
});

t.test('every runs on its period until stopped, and may stop itself', async (t) => {
  const time = new FakeTime();
  const runs: number[] = [];
  const stop = every(time, 1000, () => runs.push(time.now));
  await time.advance(3500);
  t.same(
    runs.map((at) => at - 1_800_000_000_000),
    [1000, 2000, 3000],
    'once a period',
  );
  stop();
  t.same(time.pending(), [], 'stopped: no timer left');
  await time.advance(5000);
  t.equal(runs.length, 3, 'and no run after');

  let n = 0;
  const self = every(time, 10, () => {
    if (++n === 2) self();
  });
  await time.advance(100);
  t.equal(n, 2, 'a run that stops the series is the last');
  t.same(time.pending(), [], 'with no timer left');
});

t.test('unrefTimers never hold the process', async (t) => {
  const h = unrefTimers.set(() => t.fail('cleared'), 60_000) as NodeJS.Timeout;
  t.equal(h.hasRef(), false, 'unref');
  unrefTimers.clear(h);
});
