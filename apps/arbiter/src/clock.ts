/**
 * The arbiter's clock (PROTOCOL.md "Clocks"): `now()` is the wall time read once at start plus
 * the monotonic time elapsed since, in seconds. A wall-clock jump of the host (NTP step, manual
 * `date -s`) therefore never moves lease times during one life of the daemon; only a restart
 * re-reads the wall clock, and every wait after a restart is re-armed by the start waits (S2.3).
 */
export interface Clock {
  /** Arbiter time, Unix epoch seconds (fractional). Never goes backwards within a life. */
  now(): number;
}

function monotonicSeconds(): number {
  return Number(process.hrtime.bigint()) / 1e9;
}

export function systemClock(): Clock {
  const wall0 = Date.now() / 1000;
  const mono0 = monotonicSeconds();
  return { now: () => wall0 + (monotonicSeconds() - mono0) };
}

/** A clock for tests: starts at `start` and moves only when told. */
export interface ManualClock extends Clock {
  advance(seconds: number): void;
  set(at: number): void;
}

export function manualClock(start = 1_800_000_000): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance: (seconds: number) => {
      t += seconds;
    },
    set: (at: number) => {
      t = at;
    },
  };
}
