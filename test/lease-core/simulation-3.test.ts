// Seeded fault schedules through lease-core's decisions, slice 3 of 4 (see sim/slice.ts).
import t from 'tap';
import { runSlice } from './sim/slice.js';

t.test(
  'random schedules of partitions, crashes, pauses, sleep and clock jumps keep S1, S2, S5, S6 and L1',
  async (t) => {
    runSlice(t, 2);
  },
);
