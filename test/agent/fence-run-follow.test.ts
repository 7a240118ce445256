/**
 * What `hq fence run --follow` adds to the supervisor (fence-run.ts `superviseFence`), with a
 * real child and stand-ins for the agent: a watch that reports a change makes it re-check at
 * once (the loss is not left to the next scheduled re-check), a watch that fails leaves the
 * schedule alone, and `stop` ends the child as a loss would, reported `stopped`; every end says
 * why (`skipped`, `lost`, `stopped`, `exited`).
 */
import t from 'tap';
import type { FenceDecision } from '../../packages/protocol/src/fence.js';
import { superviseFence, type FenceQueryResult, type SupervisorOptions } from '../../apps/agent/src/fence-run.js';
import { FakeTime } from '../registry/fake-time.js';

const RUN: FenceDecision = {
  run: true,
  reason: 'holder',
  generation: 2,
  holder: 'mbp',
  role: 'cron',
  validForSeconds: 60,
};
const LOST: FenceDecision = {
  run: false,
  reason: 'not-holder',
  generation: 3,
  holder: 'node-b',
  role: 'cron',
  validForSeconds: null,
};

function options(over: Partial<SupervisorOptions>): SupervisorOptions {
  return {
    role: 'cron',
    recheckSeconds: 30,
    graceSeconds: 1,
    skipExit: 0,
    argv: ['sleep', '100'],
    check: async () => ({ kind: 'answer', fence: RUN }),
    log: () => undefined,
    forwardSignals: false,
    ...over,
  };
}

t.test('a watch that reports a change makes the supervisor re-check at once and stop CMD on the loss', async (t) => {
  let answer: FenceDecision = RUN;
  let checks = 0;
  let watching!: (report: (due: boolean) => void) => void;
  const watched = new Promise<(due: boolean) => void>((r) => (watching = r));
  const started = Date.now();
  const out = superviseFence(
    options({
      check: async (): Promise<FenceQueryResult> => {
        checks++;
        return { kind: 'answer', fence: answer };
      },
      watch: () => new Promise<boolean>((done) => watching(done)),
    }),
  );
  const report = await watched;
  answer = LOST;
  report(true);
  const o = await out;
  t.match(o, { kind: 'exit', code: 75, end: 'lost' }, 'CMD stopped on the loss: exit 75, end lost');
  t.equal(checks, 2, 'the first check and the one the watch asked for');
  t.ok(Date.now() - started < 10_000, `within ${Date.now() - started} ms, not at the 30 s re-check`);
});

t.test('a watch that fails asks for no re-check', async (t) => {
  let checks = 0;
  let watches = 0;
  const stop = new AbortController();
  const time = new FakeTime();
  const out = superviseFence(
    options({
      check: async (): Promise<FenceQueryResult> => {
        checks++;
        return { kind: 'answer', fence: RUN };
      },
      watch: async () => {
        watches++;
        return false;
      },
      stop: stop.signal,
      timers: time,
    }),
  );
  // CMD's spawn is real: its re-check is scheduled once it runs.
  while (time.pending().length === 0) await new Promise((r) => setImmediate(r));
  await time.advance(1_000);
  t.equal(checks, 1, 'only the first check in a second');
  t.equal(watches, 1, 'one watch, not retried until a re-check succeeds');
  stop.abort();
  t.match(await out, { kind: 'exit', end: 'stopped' }, 'stop ends CMD, reported stopped');
});

t.test('stop before the spawn skips; each end says why', async (t) => {
  const stop = new AbortController();
  stop.abort();
  t.match(
    await superviseFence(options({ stop: stop.signal })),
    { kind: 'exit', end: 'skipped' },
    'stopped before the spawn: skipped',
  );
  t.match(
    await superviseFence(options({ check: async () => ({ kind: 'answer', fence: LOST }) })),
    { kind: 'exit', code: 0, end: 'skipped', fence: LOST },
    'may not run: skipped, with the decision',
  );
  t.match(
    await superviseFence(options({ argv: ['sh', '-c', 'exit 4'] })),
    { kind: 'exit', code: 4, end: 'exited' },
    'CMD ended by itself: exited, its code',
  );
});
