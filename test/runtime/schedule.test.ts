// The heartbeat/check schedule must not stall when node-cron does (a wall clock stepped back).
import t from 'tap';
import { scheduleCron } from '../../packages/runtime/src/schedule.js';

t.test('a stalled cron schedule is covered by the monotonic watchdog', async (t) => {
  let runs = 0;
  let stopped = 0;
  const stalled = () => ({ stop: () => stopped++, destroy: () => undefined });
  const s = scheduleCron('* * * * * *', 'test', () => void runs++, { now: () => Number(process.hrtime.bigint()) / 1e9, cronSchedule: stalled });
  await new Promise((r) => setTimeout(r, 2600));
  await s.stop();
  t.ok(runs >= 1, `the job ran without a cron tick (${runs} runs in 2.6 s of a 1 s schedule)`);
  const after = runs;
  await new Promise((r) => setTimeout(r, 1200));
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
  let ticks = 0;
  const timer = setInterval(() => {
    ticks++;
    fire?.();
  }, 300);
  const s = scheduleCron('* * * * * *', 'test', () => void runs++, { now: () => Number(process.hrtime.bigint()) / 1e9, cronSchedule: ticking });
  await new Promise((r) => setTimeout(r, 2100));
  clearInterval(timer);
  await s.stop();
  t.equal(runs, ticks, `only the cron ticks ran the job (${runs} runs for ${ticks} ticks, each well within 1.5 × the interval)`);
});
