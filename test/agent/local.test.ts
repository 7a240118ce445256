/** The unix-socket client of the CLI (cli/local.ts): its deadline runs on the timers it is given. */
import t from 'tap';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import type { Timers } from '../../packages/runtime/src/clock.js';
import { shortDir } from './helpers.js';

t.test('an agent that does not answer is unreachable when the deadline timer fires, not before', async (t) => {
  const socket = join(shortDir(t), 'a.sock');
  const srv = createServer(() => undefined); // takes the request, never answers
  await new Promise<void>((r) => srv.listen(socket, r));
  t.teardown(() => {
    srv.closeAllConnections();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  const live = new Map<number, () => void>();
  let n = 0;
  const timers: Timers = {
    set: (fn) => {
      live.set(++n, fn);
      return n;
    },
    clear: (h) => void live.delete(h as number),
  };
  let settled = false;
  const pending = callAgent(socket, 'GET', '/v1/status', 30, undefined, undefined, timers).then((r) => {
    settled = true;
    return r;
  });
  for (let i = 0; i < 50 && live.size === 0; i++) await new Promise((r) => setImmediate(r));
  t.equal(live.size, 1, 'one deadline timer is set on the given timers');
  t.notOk(settled, 'the request waits for its answer');
  for (const fn of [...live.values()]) fn();
  t.same(await pending, { kind: 'unreachable', problem: 'no answer within 30 s' }, 'the deadline ended it');
  t.equal(live.size, 0, 'and its timer is cleared');
});
