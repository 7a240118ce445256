/**
 * The fence answer made ready (fence.ts `Answered`): for any decision, after `update(d)`, the
 * body is exactly `JSON.stringify(d)` and its length is its byte length — through any sequence of
 * decisions, whatever a holder or role is spelled with, and for every number `validForSeconds`
 * can be (null, non-finite, negative zero, exponents). `update` says "changed" exactly when a
 * field other than `validForSeconds` changed, and the Fence logs one line per such change.
 */
import t from 'tap';
import fc from 'fast-check';
import { FENCE_REASONS, type FenceDecision } from '@hq/protocol';
import { initialAgent, onArbiterAnswer, type AgentSettings, type AgentState, type Stamp } from '@hq/lease-core';
import { Answered, Fence } from '../../apps/agent/src/daemon/fence.js';

const decision: fc.Arbitrary<FenceDecision> = fc.record({
  generation: fc.oneof(fc.nat(5), fc.integer()),
  holder: fc.oneof(fc.constant(null), fc.constantFrom('mbp', 'node-b'), fc.string(), fc.string({ unit: 'binary' })),
  role: fc.oneof(fc.constantFrom('cron', 'ledger-cli'), fc.string({ unit: 'binary' })),
  validForSeconds: fc.oneof(fc.constant(null), fc.double(), fc.constantFrom(-0, 1e21, 5e-7, Number.NaN, Infinity, -Infinity, Number.MAX_VALUE)),
  run: fc.boolean(),
  reason: fc.constantFrom(...FENCE_REASONS),
});

const sameButValidity = (a: FenceDecision, b: FenceDecision): boolean =>
  a.run === b.run && a.reason === b.reason && a.generation === b.generation && a.holder === b.holder && a.role === b.role;

t.test('the body made ready is JSON.stringify of the decision, through any sequence of decisions', async (t) => {
  const r = fc.check(
    fc.property(fc.array(decision, { minLength: 1, maxLength: 12 }), (ds) => {
      const a = new Answered();
      let last: FenceDecision | null = null;
      for (const d of ds) {
        const changed = a.update(d);
        if (changed !== (last === null || !sameButValidity(last, d))) return false;
        const want = JSON.stringify(d);
        if (a.body(d) !== want || a.byteLength(d) !== Buffer.byteLength(want)) return false;
        last = d;
      }
      return true;
    }),
    { numRuns: 3000 },
  );
  t.notOk(r.failed, `3,000 sequences: bodies and lengths equal${r.failed ? `; counterexample ${JSON.stringify(r.counterexample)}` : ''}`);
});

t.test('a decision that changes only in its validity reuses the text around the number', async (t) => {
  const a = new Answered();
  const d: FenceDecision = { generation: 3, holder: 'mbp', role: 'cron', validForSeconds: 4.5, run: true, reason: 'holder' };
  t.equal(a.update(d), true, 'the first decision is a change');
  t.equal(a.update({ ...d, validForSeconds: 1.25 }), false, 'less validity: not a change');
  t.equal(a.body({ ...d, validForSeconds: 1.25 }), JSON.stringify({ ...d, validForSeconds: 1.25 }), 'the body carries the new number');
  t.equal(a.update({ ...d, generation: 4 }), true, 'another generation is a change');
  t.equal(a.body({ ...d, generation: 4 }), JSON.stringify({ ...d, generation: 4 }), 'and its body names it');
  t.equal(a.update({ ...d, generation: 4, run: false, reason: 'lock-delay', validForSeconds: null }), true, 'a skip is a change');
  t.equal(a.body({ ...d, generation: 4, run: false, reason: 'lock-delay', validForSeconds: null }), '{"generation":4,"holder":"mbp","role":"cron","validForSeconds":null,"run":false,"reason":"lock-delay"}');
});

t.test('the Fence answers with the decision as JSON and logs a line when it changes, not when only its validity does', async (t) => {
  // As test/lease-core: mbp holds after one confirming answer sent at mono 10 (valid until 15).
  const settings: AgentSettings = { host: 'mbp', requestTimeoutSeconds: 1, failOpenRoles: [] };
  const at = (mono: number): Stamp => ({ mono, wall: mono + 1_700_000_000 });
  const record = { holder: 'mbp', generation: 3, revision: 9, ttlSeconds: 6, safetyMarginSeconds: 1, expired: false, released: false, notBefore: 5000, floorPending: false, displaced: null, now: 5000 };
  let state: AgentState = onArbiterAnswer(initialAgent(settings, at(0), 0, null), { record, confirms: true, hold: null }, at(10), at(10.2), settings).state;
  let now = at(11);
  const lines: string[] = [];
  const fence = new Fence({
    memory: { get state() { return state; }, keepSettled: (s) => void (state = s) },
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
  t.same(lines, ['allowed', 'skipped'], 'one line when it may run, one when it may not: none while only the validity fell');
  t.equal(fence.reply('nope').status, 400, 'an unknown role is a 400');
});
