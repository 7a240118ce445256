/**
 * The follower of `hq fence run --follow` (fence-follow.ts) with a manual clock and timers and
 * stand-ins for the agent's long poll and the supervisor: it waits on the long poll (never
 * polls), goes back to waiting after a loss, restarts a command that exits by itself with a
 * back-off that doubles and starts over after a healthy run, and ends 0 when stopped.
 */
import t from 'tap';
import type { FenceDecision, FenceSeen } from '../../packages/protocol/src/fence.js';
import { followFence, type FollowOptions, type RestartPolicy } from '../../apps/agent/src/fence-follow.js';
import type { FenceQueryResult, SupervisorOutcome } from '../../apps/agent/src/fence-run.js';
import { FakeTime, flush } from '../registry/fake-time.js';

const RUN: FenceDecision = {
  run: true,
  reason: 'holder',
  generation: 3,
  holder: 'mbp',
  role: 'seat-loop',
  validForSeconds: 10,
};
const STANDBY: FenceDecision = {
  run: false,
  reason: 'not-holder',
  generation: 3,
  holder: 'node-b',
  role: 'seat-loop',
  validForSeconds: null,
};

interface Rig {
  readonly time: FakeTime;
  readonly stop: AbortController;
  /** Each wait: the decision it named, and its wait. */
  readonly waits: { seen: FenceSeen | null; wait: number; at: number }[];
  /** Each supervision's start (ms). */
  readonly runs: number[];
  readonly logs: { event: string; data: { [k: string]: unknown } }[];
  decision: FenceDecision;
  /** What the next supervisions return (shifted; when empty they run until stopped). */
  outcomes: (SupervisorOutcome | { holdMs: number; outcome: SupervisorOutcome })[];
  done: Promise<{ kind: string; code?: number }>;
}

function rig(
  restart: RestartPolicy,
  first: FenceDecision,
  outcomes: Rig['outcomes'],
  extra: Partial<FollowOptions> = {},
): Rig {
  const time = new FakeTime();
  const stop = new AbortController();
  const r: Rig = {
    time,
    stop,
    waits: [],
    runs: [],
    logs: [],
    decision: first,
    outcomes,
    done: Promise.resolve({ kind: 'none' }),
  };
  // The long poll: at once when the decision differs from the one named, else when the test changes it.
  let wake: (() => void) | null = null;
  const wait = (seen: FenceSeen | null, w: number): Promise<FenceQueryResult> => {
    r.waits.push({ seen, wait: w, at: time.now });
    const differs = (): boolean =>
      seen === null ||
      seen.run !== r.decision.run ||
      seen.reason !== r.decision.reason ||
      seen.generation !== r.decision.generation;
    if (differs()) return Promise.resolve({ kind: 'answer', fence: r.decision });
    return new Promise((done) => {
      const h = time.set(() => done({ kind: 'answer', fence: r.decision }), w * 1000);
      wake = () => {
        if (!differs()) return;
        time.clear(h);
        wake = null;
        done({ kind: 'answer', fence: r.decision });
      };
    });
  };
  (r as { set?: (d: FenceDecision) => void }).set = (d) => {
    r.decision = d;
    wake?.();
  };
  const supervise = (signal: AbortSignal): Promise<SupervisorOutcome> => {
    r.runs.push(time.now);
    const next = r.outcomes.shift();
    if (next !== undefined && 'kind' in next) return Promise.resolve(next);
    return new Promise((done) => {
      const h = next === undefined ? null : time.set(() => done(next.outcome), next.holdMs);
      signal.addEventListener('abort', () => {
        if (h !== null) time.clear(h);
        done({ kind: 'exit', code: 75, end: 'stopped', fence: RUN });
      });
    });
  };
  r.done = followFence({
    role: 'seat-loop',
    restart,
    wait,
    supervise,
    log: (event, data) => r.logs.push({ event, data }),
    clock: { now: () => time.now / 1000 },
    timers: time,
    stop: stop.signal,
    ...extra,
  });
  return r;
}
const setDecision = (r: Rig, d: FenceDecision): void => (r as unknown as { set: (d: FenceDecision) => void }).set(d);
const exited = (code: number): SupervisorOutcome => ({ kind: 'exit', code, end: 'exited', fence: RUN });

t.test('a standby waits on the long poll without polling, and runs within the change that lets it', async (t) => {
  const r = rig('on-failure', STANDBY, []);
  await r.time.advance(120_000);
  t.equal(r.runs.length, 0, 'nothing ran while node-b holds');
  t.ok(r.waits.length <= 2 + 120 / 30, `${r.waits.length} asks in 120 s: one plain, then long polls of 30 s`);
  t.ok(
    r.waits.slice(1).every((w) => w.wait === 30 && w.seen?.reason === 'not-holder'),
    'each names the decision last seen',
  );
  setDecision(r, RUN);
  await flush();
  t.equal(r.runs.length, 1, 'the command starts in the instant the agent says run');
  r.stop.abort();
  t.same(await r.done, { kind: 'exit', code: 0 }, 'stopped: exit 0');
});

t.test('after a loss the follower asks afresh and waits again on the standby decision', async (t) => {
  const r = rig('on-failure', RUN, [{ holdMs: 5_000, outcome: { kind: 'exit', code: 75, end: 'lost', fence: RUN } }]);
  await flush();
  r.decision = STANDBY;
  await r.time.advance(5_000);
  t.equal(r.runs.length, 1, 'one run, ended by the loss');
  const last = r.waits[r.waits.length - 1];
  t.same(last?.seen, { run: false, reason: 'not-holder', generation: 3 }, 'it waits on the standby decision');
  t.same(r.waits[r.waits.length - 2]?.seen, null, 'after a plain query (the decision may be run again already)');
  await r.time.advance(60_000);
  t.equal(r.runs.length, 1, 'no restart while it may not run');
  r.stop.abort();
  t.same(await r.done, { kind: 'exit', code: 0 }, 'exit 0');
});

t.test('a crashing command is restarted with a back-off that doubles to its bound', async (t) => {
  const r = rig(
    'on-failure',
    RUN,
    Array.from({ length: 8 }, () => exited(1)),
  );
  await r.time.advance(200_000);
  const gaps = r.runs.slice(1).map((at, i) => (at - (r.runs[i] as number)) / 1000);
  t.same(gaps.slice(0, 7), [1, 2, 4, 8, 16, 30, 30], 'waits of 1, 2, 4, 8, 16, then 30 s');
  t.ok(
    r.logs.some((l) => l.event === 'restarting' && l.data['code'] === 1),
    'each restart is logged with the code',
  );
  r.stop.abort();
  await r.done;
});

t.test('a healthy run starts the back-off over', async (t) => {
  const r = rig('always', RUN, [exited(1), exited(1), exited(1), { holdMs: 61_000, outcome: exited(1) }, exited(1)]);
  await r.time.advance(200_000);
  const gaps = r.runs.slice(1).map((at, i) => (at - (r.runs[i] as number)) / 1000);
  t.same(gaps.slice(0, 5), [1, 2, 4, 62, 2], 'after a 61 s run the next wait is 1 s again (then 2 s)');
  r.stop.abort();
  await r.done;
});

t.test('--restart decides what an exit by itself does', async (t) => {
  const a = rig('on-failure', RUN, [exited(0)]);
  t.same(await a.done, { kind: 'exit', code: 0 }, 'on-failure: a clean exit ends the follower with 0');
  const b = rig('never', RUN, [exited(3)]);
  t.same(await b.done, { kind: 'exit', code: 3 }, "never: the follower exits with the command's code");
  const c = rig('always', RUN, [exited(0)]);
  await c.time.advance(1_000);
  t.equal(c.runs.length, 2, 'always: a clean exit is started again after 1 s');
  c.stop.abort();
  await c.done;
});

t.test('stopped while waiting or in a back-off: exit 0 at once', async (t) => {
  const a = rig('on-failure', STANDBY, []);
  await a.time.advance(10_000);
  a.stop.abort();
  t.same(await a.done, { kind: 'exit', code: 0 }, 'stopped while waiting');
  const b = rig('on-failure', RUN, [exited(1)]);
  await flush();
  b.stop.abort();
  t.same(await b.done, { kind: 'exit', code: 0 }, 'stopped in the back-off');
  t.equal(b.runs.length, 1, 'no second run');
});

t.test('an agent that does not answer is asked again with a back-off; the follower keeps waiting', async (t) => {
  const time = new FakeTime();
  const stop = new AbortController();
  const asks: number[] = [];
  const done = followFence({
    role: 'seat-loop',
    restart: 'on-failure',
    wait: async () => {
      asks.push(time.now);
      return { kind: 'unreachable', problem: 'ECONNREFUSED' };
    },
    supervise: async () => exited(0),
    log: () => undefined,
    clock: { now: () => time.now / 1000 },
    timers: time,
    stop: stop.signal,
  });
  await time.advance(30_000);
  const gaps = asks.slice(1).map((at, i) => (at - (asks[i] as number)) / 1000);
  t.same(gaps.slice(0, 6), [0.5, 1, 2, 4, 5, 5], 'asked again after 0.5, 1, 2, 4, then every 5 s');
  stop.abort();
  t.same(await done, { kind: 'exit', code: 0 }, 'stopped: exit 0');
});

t.test(
  'a loss after which the agent says run again (same tenure) runs the command again at once, without back-off',
  async (t) => {
    const r = rig('on-failure', RUN, [{ holdMs: 5_000, outcome: { kind: 'exit', code: 75, end: 'lost', fence: RUN } }]);
    await r.time.advance(5_000);
    t.equal(r.runs.length, 2, 'a second run');
    t.equal((r.runs[1] as number) - (r.runs[0] as number), 5_000, 'in the instant the first was lost');
    r.stop.abort();
    await r.done;
  },
);
