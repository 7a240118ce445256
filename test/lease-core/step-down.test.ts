// The step-down acknowledgement in the simulator, on fixed schedules: a planned move
// with the old holder alive ends in a few heartbeats instead of the lock-delay, the old worker
// gone first; a holder killed mid-step-down leaves the full lock-delay in place.
import t from 'tap';
import type { Fault } from './sim/world.js';
import { FAST, REAL, World } from './sim/world.js';

const MOVE_AT = 20;
/** Lock-delay of a transfer from a holder renewing every second: its expiresAt (≈ now + ttl) + margin. */
const LOCK_DELAY = FAST.ttlSeconds + FAST.safetyMarginSeconds;

function world(faults: readonly Fault[]): World {
  const w = new World(7, FAST, REAL, faults);
  w.runUntil(MOVE_AT - 0.05);
  return w;
}

const move = (kind: 'transfer' | 'handover'): Fault => ({
  kind,
  start: MOVE_AT,
  length: 0.01,
  a: 'node-b',
  b: 'node-b',
  amount: 0,
});
const crash = (phase: 'persisted' | 'children-gone'): Fault => ({
  kind: 'crash-step-down',
  start: 1,
  length: 3,
  a: 'mbp',
  b: 'mbp',
  amount: 0,
  phase,
});

/** When node-b first ran after the move, and when mbp's last run before it ended. */
function handoff(w: World): { nodeB: number; mbpEnd: number } {
  const nodeB = w.runs.find((r) => r.host === 'node-b' && r.start >= MOVE_AT);
  const mbp = w.runs.filter((r) => r.host === 'mbp' && r.start < MOVE_AT).at(-1);
  return { nodeB: nodeB?.start ?? Infinity, mbpEnd: mbp?.end ?? -Infinity };
}

t.test(
  'a transfer with the holder alive: acknowledged, node-b runs within three heartbeats, after mbp’s worker is gone',
  async (t) => {
    const w = world([move('transfer')]);
    t.ok(w.runningHost()?.host === 'mbp', 'mbp runs before the move');
    w.runUntil(MOVE_AT + 2 * LOCK_DELAY);
    const { nodeB, mbpEnd } = handoff(w);
    t.same(w.violations, [], 'no violation');
    t.ok(
      nodeB - MOVE_AT <= 3 * FAST.heartbeatSeconds,
      `node-b ran ${(nodeB - MOVE_AT).toFixed(2)} s after the transfer (lock-delay ${LOCK_DELAY} s)`,
    );
    t.ok(mbpEnd <= nodeB, `mbp's worker was gone (${mbpEnd.toFixed(2)}) before node-b ran (${nodeB.toFixed(2)})`);
    t.same(
      w.moves.map((m) => [m.kind, m.from, m.to, m.acknowledged]),
      [['transfer', 'mbp', 'node-b', true]],
      'the arbiter accepted the acknowledgement',
    );
    const saved = w.events.find((e) => e.event === 'stepped-down');
    t.ok(
      saved !== undefined && (saved.data['savedSeconds'] as number) > 0,
      `stepped-down with the time saved (${saved?.data['savedSeconds']} s)`,
    );
    t.ok(
      w.events.some((e) => e.event === 'step-down' && e.host === 'mbp' && e.data['acknowledge'] === true),
      'mbp decided to step down and acknowledge',
    );
  },
);

t.test('a handover by the holder: node-b runs at its next answer, after mbp’s worker is gone', async (t) => {
  const w = world([move('handover')]);
  w.runUntil(MOVE_AT + 2 * LOCK_DELAY);
  const { nodeB, mbpEnd } = handoff(w);
  t.same(w.violations, [], 'no violation');
  t.ok(
    nodeB - MOVE_AT <= 3 * FAST.heartbeatSeconds,
    `node-b ran ${(nodeB - MOVE_AT).toFixed(2)} s after the handover began`,
  );
  t.ok(mbpEnd <= nodeB, 'mbp’s worker was gone first');
  t.equal(w.moves[0]?.kind, 'handover', 'a handover');
});

for (const phase of ['persisted', 'children-gone'] as const) {
  t.test(
    `mbp’s agent killed mid-step-down (after ${phase === 'persisted' ? 'persisting' : 'its worker is gone'}): the full lock-delay holds`,
    async (t) => {
      const w = world([crash(phase), move('transfer')]);
      w.runUntil(MOVE_AT + 3 * LOCK_DELAY);
      const { nodeB, mbpEnd } = handoff(w);
      t.same(w.violations, [], 'no violation');
      t.ok(
        w.events.some((e) => e.event === 'step-down' && e.host === 'mbp' && e.data['acknowledge'] === true),
        'mbp decided to step down and acknowledge, then was killed',
      );
      t.equal(w.moves[0]?.acknowledged, false, 'no acknowledgement was accepted');
      t.notOk(
        w.events.some((e) => e.event === 'stepped-down'),
        'no stepped-down event',
      );
      t.ok(
        nodeB - MOVE_AT >= LOCK_DELAY - 2,
        `node-b waited out the lock-delay: ran ${(nodeB - MOVE_AT).toFixed(2)} s after the transfer`,
      );
      t.ok(nodeB - MOVE_AT <= LOCK_DELAY + 3 * FAST.heartbeatSeconds, 'and then ran within a few heartbeats');
      t.ok(mbpEnd <= nodeB, 'mbp’s worker (its deadline, the supervisor’s) was over first');
    },
  );
}

t.test(
  'a transfer right after an arbiter restart: mbp ran, acknowledges, node-b runs before the start wait would end',
  async (t) => {
    // A TTL of 20 s: reports count two request timeouts (6 s) after the start, well inside its start wait.
    const cfg = { ...FAST, ttlSeconds: 20, viewFreshSeconds: 20 };
    const restartAt = MOVE_AT - 2;
    const up = restartAt + 0.5;
    const w = new World(7, cfg, REAL, [
      { kind: 'crash-arbiter', start: restartAt, length: 0.5, a: 'arbiter', b: 'arbiter', amount: 0 },
      move('transfer'),
    ]);
    w.runUntil(MOVE_AT + 30);
    const { nodeB, mbpEnd } = handoff(w);
    t.same(w.violations, [], 'no violation');
    const startWaitEnd = up + cfg.ttlSeconds + cfg.safetyMarginSeconds;
    t.ok(
      nodeB < startWaitEnd - 8,
      `node-b ran at ${nodeB.toFixed(2)}, long before the start wait would end (${startWaitEnd.toFixed(2)})`,
    );
    t.ok(mbpEnd <= nodeB, "mbp's worker was gone first");
    t.ok(
      w.events.some((e) => e.event === 'stepped-down' && e.data['ran'] === true),
      'the acknowledgement said mbp ran',
    );
  },
);

t.test(
  "mbp's agent restarted inside an arbiter outage: it runs again on node-b's confirmation, never beside node-b",
  async (t) => {
    const outageAt = 15;
    const w = new World(7, FAST, REAL, [
      { kind: 'crash-arbiter', start: outageAt, length: 20, a: 'arbiter', b: 'arbiter', amount: 0 },
      { kind: 'crash-agent', start: outageAt + 3, length: 1, a: 'mbp', b: 'mbp', amount: 0 },
    ]);
    w.runUntil(outageAt + 19);
    t.same(w.violations, [], 'no violation');
    const again = w.runs.find((r) => r.host === 'mbp' && r.start > outageAt + 4);
    t.ok(
      again !== undefined && again.start < outageAt + 20,
      `mbp ran again at ${again?.start.toFixed(2)}, inside the outage`,
    );
    t.notOk(
      w.runs.some((r) => r.host === 'node-b'),
      'node-b never ran',
    );
  },
);
