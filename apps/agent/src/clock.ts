/**
 * The agent's clock: one reading of both clocks per `now()`. Validities are measured with
 * lease-core's `elapsed` (max of monotonic and wall, S2.5); waits on the monotonic clock alone.
 * Injectable so tests can drive time.
 */
import type { Stamp } from '@hq/lease-core';

export interface Clock {
  now(): Stamp;
}

export const systemClock: Clock = {
  now(): Stamp {
    return { wall: Date.now() / 1000, mono: Number(process.hrtime.bigint()) / 1e9 };
  },
};
