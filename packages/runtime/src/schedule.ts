/**
 * A node-cron schedule with a monotonic watchdog. node-cron follows the wall clock: after the
 * wall clock steps back N seconds its next tick comes N seconds late, which stalled heartbeats
 * and checks for the length of the jump (found by the fault harness, docs/RELIABILITY.md). The
 * watchdog, on the monotonic clock, runs the job itself when no tick came within 1.5 × the
 * schedule's largest gap. It wakes twice per interval at most: no busy timer when idle.
 */
import cron from 'node-cron';
import { cronGapSeconds } from './cron-gap.js';
import { monotonicSeconds } from './clock.js';

export { cronGapSeconds };

const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Schedule {
  stop(): Promise<void>;
}

export interface ScheduleDeps {
  readonly now: () => number;
  /** node-cron's `schedule` (a test passes one that never fires: a stalled wall clock). */
  readonly cronSchedule: (expr: string, fn: () => void, opts: { noOverlap: boolean; name: string }) => {
    stop(): unknown;
    destroy(): unknown;
  };
}

const DEPS: ScheduleDeps = { now: monotonicSeconds, cronSchedule: (e, f, o) => cron.schedule(e, f, o) };

export function scheduleCron(expr: string, name: string, job: () => void | Promise<void>, deps: ScheduleDeps = DEPS): Schedule {
  const parsed = cronGapSeconds(expr);
  // The config was validated at load; a schedule we cannot measure gets no watchdog.
  const interval = parsed.ok ? parsed.seconds : Infinity;
  let last = deps.now();
  const fire = (): void => {
    last = deps.now();
    void job();
  };
  const task = deps.cronSchedule(expr, fire, { noOverlap: true, name });
  const watchdog = Number.isFinite(interval)
    ? setInterval(() => {
        if (deps.now() - last > interval * 1.5) fire();
        // setInterval takes at most 2^31 − 1 ms (a longer delay fires after 1 ms): a yearly
        // schedule's watchdog looks every ~24 days and still fires only after 1.5 × its gap.
      }, Math.min(MAX_TIMER_MS, Math.max(250, (interval * 1000) / 2)))
    : null;
  return {
    async stop() {
      if (watchdog !== null) clearInterval(watchdog);
      await task.stop();
      await task.destroy();
    },
  };
}
