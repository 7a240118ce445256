// The heartbeat/check schedule must not stall when node-cron does (a wall clock stepped back).
import t from 'tap';
import { scheduleCron, wallClockSchedule } from '../../packages/runtime/src/schedule.js';
import { FakeTime } from '../registry/fake-time.js';

t.test('a stalled cron schedule is covered by the monotonic watchdog', async (t) => {
  let runs = 0;
  let stopped = 0;
  const stalled = () => ({ stop: () => stopped++, destroy: () => undefined });
  const time = new FakeTime();
  const s = scheduleCron('* * * * * *', 'test', () => void runs++, {
    now: () => time.now / 1000,
    cronSchedule: stalled,
    timers: time,
  });
  await time.advance(2600);
  await s.stop();
  t.ok(runs >= 1, `the job ran without a cron tick (${runs} runs in 2.6 s of a 1 s schedule)`);
  const after = runs;
  await time.advance(1200);
  t.equal(runs, after, 'nothing runs after stop');
  t.equal(stopped, 1, 'the cron task is stopped');
});

t.test('a cron schedule that ticks keeps the watchdog quiet', async (t) => {
  let runs = 0;
  let fire: (() => void) | null = null;
  const ticking = (_e: string, f: () => void) => {
    fire = f;
    return { stop: () => undefined, destroy: () => undefined };
  };
  const time = new FakeTime();
  let ticks = 0;
  const tick = (): void => {
    time.set(() => {
      ticks++;
      fire?.();
      tick();
    }, 300);
  };
  tick();
  const s = scheduleCron('* * * * * *', 'test', () => void runs++, {
    now: () => time.now / 1000,
    cronSchedule: ticking,
    timers: time,
  });
  await time.advance(2100);
  await s.stop();
  t.equal(
    runs,
    ticks,
    `only the cron ticks ran the job (${runs} runs for ${ticks} ticks, each well within 1.5 × the interval)`,
  );
});

t.test('the wall-clock schedule runs the job at its firings without building an Intl.DateTimeFormat', async (t) => {
  // node-cron's own timer builds one (8 MiB of ICU data and code for the daemon, docs/BENCH.md).
  let built = 0;
  const Original = Intl.DateTimeFormat;
  Intl.DateTimeFormat = new Proxy(Original, {
    construct(target, args: [string?, Intl.DateTimeFormatOptions?]) {
      built++;
      return new target(...args);
    },
    apply(target, _this, args: [string?, Intl.DateTimeFormatOptions?]) {
      built++;
      return target(...args);
    },
  });
  t.teardown(() => {
    Intl.DateTimeFormat = Original;
  });
  let runs = 0;
  let seen: () => void = () => undefined;
  const ran = new Promise<void>((r) => (seen = r));
  const s = scheduleCron('* * * * * *', 'test', () => {
    runs++;
    // Each run falls on a whole second of the wall clock.
    t.ok(Date.now() % 1000 < 500, 'the run came at the start of its second');
    seen();
  });
  await ran;
  await s.stop();
  t.ok(runs >= 1, 'the job ran');
  t.equal(built, 0, 'no Intl.DateTimeFormat was built');
});

t.test('a run more than 1 s late is skipped, as node-cron skips it; an early timer waits again', async (t) => {
  const SECOND = 1_800_000_000_000; // a whole second of the wall clock
  const run = async (at: number): Promise<number> => {
    let clock = SECOND - 5; // the next run of every second is SECOND, 5 ms away
    let reads = 0;
    let runs = 0;
    const time = new FakeTime();
    const s = wallClockSchedule(
      '* * * * * *',
      () => void runs++,
      () => {
        reads++;
        return clock;
      },
      time,
    );
    t.same(time.pending(), [5], 'the timer is set for the next run');
    clock = at; // where the wall clock is when the timer comes
    reads = 0;
    await time.advance(5);
    t.ok(reads > 0, 'the timer came and read the clock');
    s.stop();
    return runs;
  };
  t.equal(await run(SECOND + 200), 1, 'on time (within 1 s): it runs');
  t.equal(await run(SECOND + 3000), 0, '3 s late (a blocked loop, a suspended machine): missed, not run');
  t.equal(
    await run(SECOND - 60_000),
    0,
    'the wall clock went back a minute: it waits again (the watchdog covers that)',
  );
});
