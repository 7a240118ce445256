import t from 'tap';
import { systemClock } from '../../apps/arbiter/src/clock.js';

t.test('the system clock is wall at start plus monotonic elapsed', async (t) => {
  const clock = systemClock();
  const a = clock.now();
  t.ok(Math.abs(a - Date.now() / 1000) < 1, 'close to the wall clock at start');
  const b = clock.now();
  t.ok(b >= a, 'never goes backwards');
});
