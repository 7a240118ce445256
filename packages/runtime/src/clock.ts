/**
 * The clock of every daemon and the CLI: the one place that reads the wall and the monotonic
 * clock. Each kind of time the shell needs is built from those two readings:
 *
 *  - `stampClock` — both readings per `now()` (the agent, `hq fence run`); the time between
 *    two is lease-core's `elapsed`, the larger of the two clocks (A1, S2.5).
 *  - `steadyClock()` — the wall time read once at start plus the monotonic time since, epoch
 *    seconds (the arbiter, PROTOCOL.md "Clocks"): a wall-clock jump (NTP step, `date -s`) never
 *    moves lease times within one life of the daemon; only a restart re-reads the wall clock.
 *  - `sleepSafeClockMs()` — epoch milliseconds that neither a backward wall jump nor a stopped
 *    monotonic clock (a suspended laptop) can slow down: a deadline measured on it comes early,
 *    never late (the port-lease keeper).
 *  - `wallClockMs` — the wall clock as it is, epoch milliseconds: for a time another process
 *    compares with its own reading (the arbiter's check lock row, `hq doctor`'s clock check).
 *  - `monotonicClockMs` — the monotonic clock in milliseconds from an arbitrary origin: for a
 *    request's own deadline (the HTTP client, the etcd client) and request durations.
 *
 * Decisions take these as parameters (a `Clock` in the constructor); tests pass `manualClock`
 * or drive `Timers`, and nothing sleeps.
 */
import { elapsed, type Stamp } from '@hq/lease-core/stamp';

export { elapsed, type Stamp };

/**
 * A time in the unit `U` names. The unit is a type only (nothing reads it at run time): a clock
 * in seconds handed where milliseconds are expected fails to compile.
 */
export interface Clock<U extends TimeUnit = TimeUnit> {
  now(): number;
  readonly unit?: U;
}

export type TimeUnit = 'seconds' | 'ms';
/** Epoch (or monotonic) seconds: lease times, the arbiter's clock. */
export type SecondsClock = Clock<'seconds'>;
/** Epoch (or monotonic) milliseconds: log stamps, request deadlines, the registry clients. */
export type MsClock = Clock<'ms'>;

/** Both readings per `now()`. */
export interface StampClock {
  now(): Stamp;
}

export function monotonicSeconds(): number {
  return Number(process.hrtime.bigint()) / 1e9;
}

export function readStamp(): Stamp {
  return { wall: Date.now() / 1000, mono: monotonicSeconds() };
}

export const stampClock: StampClock = { now: readStamp };

/** The wall clock, epoch ms, read each time: for times that cross processes. */
export const wallClockMs: MsClock = { now: () => Date.now() };

/** Monotonic milliseconds (arbitrary origin): request deadlines and durations. */
export const monotonicClockMs: MsClock = { now: () => monotonicSeconds() * 1000 };

/** Epoch seconds that never go backwards within a life: wall at start + monotonic since. */
export function steadyClock(): SecondsClock {
  const start = readStamp();
  return { now: () => start.wall + (monotonicSeconds() - start.mono) };
}

/** Epoch ms: wall at start + the larger of the two clocks' time since. */
export function sleepSafeClockMs(): MsClock {
  const start = readStamp();
  return { now: () => (start.wall + elapsed(start, readStamp())) * 1000 };
}

/** A clock for tests: starts at `start` and moves only when told, in the unit of the clock it stands for. */
export interface ManualClock<U extends TimeUnit = TimeUnit> extends Clock<U> {
  advance(by: number): void;
  set(at: number): void;
}

export function manualClock<U extends TimeUnit = 'seconds'>(start = 1_800_000_000): ManualClock<U> {
  let t = start;
  return {
    now: () => t,
    advance: (by: number) => {
      t += by;
    },
    set: (at: number) => {
      t = at;
    },
  };
}

/** Timers, injectable so tests drive time without sleeping. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Resolves after `ms` on `timers`, or at once when `signal` aborts (its timer cleared: nothing holds the process). */
export function pause(timers: Timers, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((done) => {
    if (signal?.aborted === true) return done();
    const finish = (): void => {
      timers.clear(h);
      signal?.removeEventListener('abort', finish);
      done();
    };
    const h = timers.set(finish, ms);
    signal?.addEventListener('abort', finish, { once: true });
  });
}

/** Real timers that never keep the process alive: for background chores (sweeps, retries, watches). */
export const unrefTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

/**
 * Calls `fn` every `ms` on `timers` until the returned function stops it. The next run is armed
 * before `fn` runs, so `fn` may stop the series itself.
 */
export function every(timers: Timers, ms: number, fn: () => void): () => void {
  let stopped = false;
  let handle: unknown;
  const arm = (): void => {
    handle = timers.set(() => {
      if (stopped) return;
      arm();
      fn();
    }, ms);
  };
  arm();
  return () => {
    stopped = true;
    timers.clear(handle);
  };
}
