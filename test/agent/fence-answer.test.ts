/**
 * The fence's answer (fence.ts `Fence`): the body is the decision as JSON, and the Fence logs one
 * line when a role's decision changes, none while only its validity falls.
 */
import t from 'tap';
import { initialAgent, onArbiterAnswer, type AgentSettings, type AgentState, type Stamp } from '@hq/lease-core';
import { Fence } from '../../apps/agent/src/daemon/fence.js';

t.test(
  'the Fence answers with the decision as JSON and logs a line when it changes, not when only its validity does',
  async (t) => {
    // As test/lease-core: mbp holds after one confirming answer sent at mono 10 (valid until 15).
    const settings: AgentSettings = { host: 'mbp', requestTimeoutSeconds: 1, failOpenRoles: [] };
    const at = (mono: number): Stamp => ({ mono, wall: mono + 1_700_000_000 });
    const record = {
      holder: 'mbp',
      generation: 3,
      revision: 9,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      expired: false,
      released: false,
      notBefore: 5000,
      floorPending: false,
      displaced: null,
      now: 5000,
    };
    let state: AgentState = onArbiterAnswer(
      initialAgent(settings, at(0), 0, null),
      { record, confirms: true, hold: null },
      at(10),
      at(10.2),
      settings,
    ).state;
    let now = at(11);
    const lines: string[] = [];
    const fence = new Fence({
      memory: {
        get state() {
          return state;
        },
        keepSettled: (s) => {
          state = s;
        },
      },
      clock: { now: () => now },
      settings,
      roles: ['cron'],
      log: { info: (_o: object, m: string) => void lines.push(m), warn() {}, error() {}, debug() {} },
    });
    const answers: string[] = [];
    for (const mono of [11, 12.5, 14.9, 15.1, 16]) {
      now = at(mono);
      const r = fence.reply('cron');
      t.equal(r.body, JSON.stringify(fence.decide('cron')), `at ${mono}: the reply is the decision as JSON`);
      answers.push(r.body);
    }
    t.match(answers[0], /"validForSeconds":4,"run":true,"reason":"holder"/, 'at 11: the holder with 4 s left');
    t.match(answers[2], /"run":true/, 'at 14.9: still the holder');
    t.match(answers[3], /"validForSeconds":null,"run":false/, 'at 15.1: its validity ran out');
    t.same(
      lines,
      ['allowed', 'skipped'],
      'one line when it may run, one when it may not: none while only the validity fell',
    );
    t.equal(fence.reply('nope').status, 400, 'an unknown role is a 400');
  },
);
