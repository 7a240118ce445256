/**
 * A cron schedule with a monotonic watchdog. The schedule is node-cron's: its parser, and its
 * timer's rules — the next run found in local time by the same walk (lease-core `nextFiring`), a
 * timer of at most a day re-armed until the run is due, a run more than 1 s late counted missed
 * and skipped. Only node-cron's timer itself is not used: it reads the local time through
 * `Intl.DateTimeFormat`, which costs a daemon 8 MiB of ICU data and code for the life of the
 * process (docs/BENCH.md "Where the idle agent's memory goes"); `Date`'s local fields say the same.
 *
 * A wall-clock schedule follows the wall clock: after the wall clock steps back N seconds its next
 * tick comes N seconds late, which stalled heartbeats and checks for the length of the jump (found
 * by the fault harness, docs/RELIABILITY.md). The watchdog, on the monotonic clock, runs the job
 * itself when no tick came within 1.5 × the schedule's largest gap. It wakes twice per interval at
 * most: no busy timer when idle.
 */
import cron from 'node-cron';
import { nextFiring, type CronFields } from '@hq/lease-core';
import { cronGapSeconds } from './cron-gap.js';
import { monotonicSeconds, realTimers, wallClockMs, type MsClock, type Timers } from './clock.js';

export { cronGapSeconds };

const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Schedule {
  stop(): Promise<void>;
}

export interface ScheduleDeps {
  readonly now: () => number;
  /** The wall-clock schedule, `wallClockSchedule` (a test passes one that never fires: a stalled wall clock). */
  readonly cronSchedule: (
    expr: string,
    fn: () => void,
    opts: { noOverlap: boolean; name: string },
  ) => {
    stop(): unknown;
    destroy(): unknown;
  };
  /** The watchdog's timer (default real timers). */
  readonly timers?: Timers;
}

/** node-cron's longest timer: a later run is reached by re-arming (and a clock step is noticed). */
const MAX_WAIT_MS = 86_400_000;
/** node-cron's default `missedExecutionTolerance`: a run later than this is missed, not run. */
const MISSED_TOLERANCE_MS = 1000;

/**
 * `expr` (valid: the config checked it) on the wall clock, as node-cron's `schedule` runs it: at
 * each firing of `nextFiring`, unless the timer came more than 1 s late (an event loop that was
 * blocked, a suspended machine: node-cron calls that a missed execution and skips it).
 */
export function wallClockSchedule(
  expr: string,
  fn: () => void,
  now: () => number = wallClockMs.now,
  timers: Timers = realTimers,
): { stop(): void; destroy(): void } {
  const fields: CronFields = cron.parse(expr);
  let timer: unknown = null;
  let stopped = false;
  const arm = (slot: number | null): void => {
    if (stopped || slot === null) return;
    timer = timers.set(() => beat(slot), Math.min(MAX_WAIT_MS, Math.max(0, slot - now())));
  };
  const beat = (slot: number): void => {
    const at = now();
    // Early: a wait longer than a day, or the wall clock went back; node-cron waits again too.
    if (at < slot) {
      arm(slot);
      return;
    }
    const late = at - slot;
    const after = nextFiring(fields, slot);
    if (late <= MISSED_TOLERANCE_MS && (after === null || late < after - slot)) fn();
    arm(after !== null && after > at ? after : nextFiring(fields, at));
  };
  arm(nextFiring(fields, now()));
  return {
    stop() {
      stopped = true;
      if (timer !== null) timers.clear(timer);
    },
    destroy() {
      this.stop();
    },
  };
}

/**
 * The production schedule: the wall-clock schedule (on `wall`, default `wallClockMs`) and the
 * monotonic watchdog, on `timers`. A test hands its manual timers and the wall clock they move.
 */
export function scheduleDeps(timers: Timers = realTimers, wall: MsClock = wallClockMs): ScheduleDeps {
  return { now: monotonicSeconds, cronSchedule: (e, f) => wallClockSchedule(e, f, wall.now, timers), timers };
}

export function scheduleCron(
  expr: string,
  name: string,
  job: () => void | Promise<void>,
  deps: ScheduleDeps = scheduleDeps(),
): Schedule {
  const parsed = cronGapSeconds(expr);
  // The config was validated at load; a schedule we cannot measure gets no watchdog.
  const interval = parsed.ok ? parsed.seconds : Infinity;
  let last = deps.now();
  const fire = (): void => {
    last = deps.now();
    void job();
  };
  const task = deps.cronSchedule(expr, fire, { noOverlap: true, name });
  const timers = deps.timers ?? realTimers;
  // A timer takes at most 2^31 − 1 ms (a longer delay fires after 1 ms): a yearly schedule's
  // watchdog looks every ~24 days and still fires only after 1.5 × its gap.
  const every = Math.min(MAX_TIMER_MS, Math.max(250, (interval * 1000) / 2));
  let watchdog: unknown = null;
  let stopped = false;
  const look = (): void => {
    if (stopped) return;
    watchdog = timers.set(() => {
      look(); // re-armed first, as an interval would be, whatever the job does
      if (deps.now() - last > interval * 1.5) fire();
    }, every);
  };
  if (Number.isFinite(interval)) look();
  return {
    async stop() {
      stopped = true;
      if (watchdog !== null) timers.clear(watchdog);
      await task.stop();
      await task.destroy();
    },
  };
}
