import t from 'tap';
import Value from 'typebox/value';
import {
  AGENT_HEARTBEAT_OUTCOMES,
  CONFIRM_REASONS,
  HEARTBEAT_OUTCOMES,
  REPORTED_EVENTS,
  RESOURCE_ID_PATTERN,
  isHeartbeatOutcome,
  isResourceId,
} from '../../packages/protocol/src/index.js';
import {
  AcquireBody,
  ConfirmAnswer,
  ConfirmBody,
  Conflict,
  HeartbeatAnswer,
  HeartbeatBody,
  LeaseRecord,
  Literals,
  RegisterBody,
  ReportedEventBody,
  StepDownAckAnswer,
  StepDownAckBody,
} from '../../packages/protocol/src/schemas/index.js';

const record = {
  name: 'hq',
  holder: 'mbp',
  generation: 3,
  revision: 9,
  acquiredAt: 100,
  renewedAt: 200,
  ttlSeconds: 1500,
  safetyMarginSeconds: 30,
  expiresAt: 1700,
  expired: false,
  released: false,
  notBefore: null,
  views: { 'node-b': { target: 'mbp', reachable: true, ping: true, health: true, at: 190 } },
  dualUnreachableStreak: 0,
  lastCheckAt: null,
  promotedFrom: null,
  maintenance: false,
  floorPending: false,
  displaced: null,
  now: 201,
};

t.test('the closed lists', async (t) => {
  t.same(
    [...HEARTBEAT_OUTCOMES],
    ['renewed', 'standby', 'no-lease', 'renew-refused'],
    'the documented heartbeat outcomes',
  );
  t.same(
    [...AGENT_HEARTBEAT_OUTCOMES],
    [...HEARTBEAT_OUTCOMES, 'unreachable', 'refused', 'invalid-answer'],
    "the agent's report adds why there was no outcome",
  );
  for (const o of HEARTBEAT_OUTCOMES) t.ok(isHeartbeatOutcome(o), `${o} is an outcome`);
  for (const o of ['unreachable', 'RENEWED', null]) t.notOk(isHeartbeatOutcome(o), `${String(o)} is not the arbiter's`);
  t.same(
    [...CONFIRM_REASONS],
    ['confirmed', 'self', 'higher-generation', 'other-holder', 'holding', 'unknown-timing'],
    'peer confirmation reasons',
  );
  t.ok(
    Object.isFrozen(REPORTED_EVENTS['hq.standby']) && Object.isFrozen(REPORTED_EVENTS.control),
    'the reported events are frozen lists',
  );
  const u = Literals(['a', 'b'] as const);
  t.ok(Value.Check(u, 'a') && !Value.Check(u, 'c'), 'Literals is a union of exactly its values');
});

t.test('every schema takes the host rule: reserved names are refused in every body', async (t) => {
  t.ok(Value.Check(AcquireBody, { host: 'mbp' }), 'a host');
  for (const host of ['constructor', 'prototype', 'MBP', 'a'.repeat(33)]) {
    t.notOk(Value.Check(AcquireBody, { host }), `acquire: ${host} is refused`);
    t.notOk(
      Value.Check(HeartbeatBody, { host: 'mbp', view: { target: host, reachable: true, ping: true, health: true } }),
      `heartbeat view: ${host} is refused`,
    );
    t.notOk(Value.Check(ConfirmBody, { host, generation: 1 }), `peer confirm: ${host} is refused`);
    t.notOk(
      Value.Check(RegisterBody, {
        id: 'x',
        name: 'x',
        kind: 'machine',
        machine: host,
        attrs: {},
        observedAt: 0,
        ttlMs: 1000,
      }),
      `register: ${host} is refused`,
    );
  }
});

t.test('answers: the record, the outcomes and the reasons are the closed lists', async (t) => {
  t.ok(Value.Check(LeaseRecord, record), 'a record');
  const answer = {
    outcome: 'renew-refused',
    reason: 'stale-generation',
    lease: record,
    hold: null,
    reportInSeconds: null,
    timingProblems: [],
    failover: 'x',
    candidates: ['mbp'],
    stepDown: null,
  };
  t.ok(Value.Check(HeartbeatAnswer, answer), 'a heartbeat answer');
  t.notOk(
    Value.Check(HeartbeatAnswer, { ...answer, outcome: 'unreachable' }),
    "the agent's own outcome is not the arbiter's",
  );
  t.notOk(Value.Check(HeartbeatAnswer, { ...answer, reason: 'nope' }), 'an unknown refusal');
  t.ok(
    Value.Check(Conflict, { ok: false, reason: 'held', lease: record, error: 'HQ_ERR_HELD', message: 'held' }),
    'a conflict',
  );
  t.notOk(
    Value.Check(ConfirmAnswer, { confirmed: false, generation: 3, reason: 'bored' }),
    'an unknown confirmation reason',
  );
  const displaced = { host: 'node-b', generation: 2, acknowledgedAt: 150, savedSeconds: 1200 };
  t.ok(Value.Check(LeaseRecord, { ...record, displaced }), 'a record with an acknowledged displaced holder');
  t.ok(
    Value.Check(HeartbeatAnswer, { ...answer, stepDown: 2 }),
    'a heartbeat answer asking for a step-down acknowledgement',
  );
  t.ok(Value.Check(StepDownAckBody, { host: 'mbp', generation: 2, revision: 9 }), 'an acknowledgement');
  t.notOk(
    Value.Check(StepDownAckBody, { host: 'mbp', generation: 0, revision: 9 }),
    'an acknowledgement for generation 0 is refused',
  );
  t.notOk(
    Value.Check(StepDownAckBody, { host: 'mbp', generation: 2 }),
    'an acknowledgement without the revision it saw is refused',
  );
  t.ok(
    Value.Check(StepDownAckAnswer, { accepted: false, reason: 'late', savedSeconds: null, lease: record }),
    'a refused acknowledgement',
  );
  t.notOk(
    Value.Check(StepDownAckAnswer, { accepted: false, reason: 'bored', savedSeconds: null, lease: record }),
    'an unknown refusal of one',
  );
  t.ok(
    Value.Check(ReportedEventBody, { category: 'control', event: 'primary-resolved', data: { holder: 'mbp' } }),
    'a reported event',
  );
  t.notOk(
    Value.Check(ReportedEventBody, { category: 'control', event: 'generation' }),
    "an event of another category's list",
  );
});

t.test('resource ids: the host rule, 64 characters', async (t) => {
  t.equal(RESOURCE_ID_PATTERN.source, '^[a-z0-9][a-z0-9-]{0,63}$', 'the pattern');
  t.ok(isResourceId('mbp-web-1') && isResourceId('a'.repeat(64)), 'ids');
  for (const v of ['constructor', 'prototype', '__proto__', 'a'.repeat(65), 'Web', 1])
    t.notOk(isResourceId(v), `${String(v)} is not an id`);
});
