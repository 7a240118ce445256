/**
 * The agent's step-down shell (apps/agent/src/daemon/step-down.ts) with the real pieces: the
 * state store on a temp dir (local.json, fsync), the run registry and real processes, and a
 * link to the arbiter that records what it is sent. The order lease-core A7 asks for is checked
 * where it is made: the lost generation is on disk before the acknowledgement leaves; a
 * generation with a child the agent cannot vouch for is never acknowledged, not even when the
 * arbiter asks again (its lock-delay still runs) and a second look would find no child it knows.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { onArbiterAnswer, type AgentSettings, type ArbiterAnswer, type RecordSummary } from '@hq/lease-core';
import type { FenceDecision, StepDownAck } from '@hq/protocol';
import type { HttpResult } from '../../packages/runtime/src/http.js';
import { stampClock } from '../../packages/runtime/src/clock.js';
import { AgentStore } from '../../apps/agent/src/daemon/store.js';
import { Runs } from '../../apps/agent/src/daemon/runs.js';
import { StepDowns } from '../../apps/agent/src/daemon/step-down.js';
import type { ArbiterLink } from '../../apps/agent/src/daemon/arbiter-link.js';
import type { Peers } from '../../apps/agent/src/daemon/peers.js';
import type { Log } from '../../apps/agent/src/daemon/observe.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };
const A: AgentSettings = { host: 'mbp', requestTimeoutSeconds: 1, failOpenRoles: [] };

/** A record as the arbiter answers it, on the arbiter's clock (only differences count). */
function answer(patch: Partial<RecordSummary>, confirms: boolean, stepDown: number | null = null): ArbiterAnswer {
  const now = 5000;
  return {
    record: {
      holder: 'mbp',
      generation: 3,
      revision: 9,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      expired: false,
      released: false,
      notBefore: now,
      floorPending: false,
      displaced: null,
      now,
      ...patch,
    },
    confirms,
    hold: null,
    stepDown,
  };
}

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0], fence: () => FenceDecision) {
  const stateDir = t.testdir();
  const { store } = await AgentStore.open({ stateDir, settings: A, clock: stampClock, log: silent });
  const runs = new Runs({ fence, clock: stampClock, log: silent });
  const sent: Array<{ ack: StepDownAck; onDisk: { lost?: number; steppedDown?: number } }> = [];
  const link = {
    acknowledge: async (ack: StepDownAck): Promise<HttpResult> => {
      sent.push({
        ack,
        onDisk: JSON.parse(readFileSync(store.paths.local, 'utf8')) as { lost?: number; steppedDown?: number },
      });
      return {
        kind: 'answer',
        status: 200,
        body: { accepted: true, reason: null, savedSeconds: 4 },
        headers: {},
      } as unknown as HttpResult;
    },
  } as unknown as ArbiterLink;
  const steps = new StepDowns({ store, runs, link, peers: {} as Peers, settings: A, clock: stampClock, log: silent });
  const hear = async (a: ArbiterAnswer): Promise<void> => {
    const s = stampClock.now();
    await store.commit((st) => onArbiterAnswer(st, a, s, stampClock.now(), A));
    await steps.idle();
  };
  return { store, runs, steps, sent, hear };
}

const lost = answer({ holder: 'node-b', generation: 4, revision: 12, notBefore: 5010 }, false);

t.test('the lost generation is on disk before its acknowledgement leaves', async (t) => {
  const { sent, hear } = await setup(t, () => ({
    run: true,
    reason: 'holder',
    generation: 3,
    holder: 'mbp',
    role: 'cron',
    validForSeconds: 5,
  }));
  await hear(answer({}, true));
  await hear(lost);
  t.equal(sent.length, 1, 'one acknowledgement');
  t.same(
    sent[0]?.ack,
    { host: 'mbp', generation: 3, revision: 12, ran: true },
    'for generation 3, in the revision that showed the loss, saying it ran',
  );
  t.ok(
    (sent[0]?.onDisk.lost ?? 0) >= 3 || (sent[0]?.onDisk.steppedDown ?? 0) >= 3,
    `local.json said generation 3 is stepped down when it left (${JSON.stringify(sent[0]?.onDisk)})`,
  );
});

t.test('a child the agent cannot vouch for: no acknowledgement, now or when asked again', async (t) => {
  const { runs, sent, hear } = await setup(t, () => ({
    run: true,
    reason: 'holder',
    generation: 3,
    holder: 'mbp',
    role: 'cron',
    validForSeconds: 5,
  }));
  await hear(answer({}, true));
  // A supervisor that claimed a run and died before it said its child's process group.
  const dead = spawn('true');
  await new Promise((done) => dead.once('exit', done));
  t.match(
    runs.claim({ role: 'cron', generation: 3, supervisorPid: dead.pid as number, graceSeconds: 1 }),
    { ok: true },
    'the run was claimed',
  );
  await hear(lost);
  t.same(sent, [], 'not acknowledged: a child of generation 3 may run unknown');
  t.same(runs.list(), [], 'the claim is dropped (nothing left to look at)');
  await hear(answer({ holder: 'node-b', generation: 4, revision: 13, notBefore: 5010 }, false, 3));
  t.same(sent, [], 'asked again while the lock-delay runs: still not acknowledged');
});
