import t from 'tap';
import {
  emptyLease,
  isExpired,
  isGeneration,
  isTime,
  parseRecord,
  toRecord,
} from '../../packages/lease-core/src/index.js';
import type { LeaseState, Observer, RecordSummary } from '../../packages/lease-core/src/index.js';

const held: LeaseState = {
  ...emptyLease(6),
  holder: 'mbp',
  generation: 3,
  revision: 7,
  acquiredAt: 100,
  renewedAt: 110,
  expiresAt: 116,
  notBefore: 100,
};

t.test('emptyLease is the never-granted record', async (t) => {
  t.same(
    emptyLease(1500),
    {
      holder: null,
      generation: 0,
      revision: 0,
      acquiredAt: null,
      renewedAt: null,
      ttlSeconds: 1500,
      safetyMarginSeconds: 0,
      expiresAt: null,
      released: false,
      notBefore: null,
      floorPending: false,
      dualUnreachableStreak: 0,
      lastCheckAt: null,
      promotedFrom: null,
      maintenance: false,
      maintenanceReason: null,
      displaced: null,
    },
    'every field at its zero value',
  );
});

const expiries: ReadonlyArray<readonly [string, LeaseState, number, boolean]> = [
  ['a lease without holder is expired', emptyLease(6), 0, true],
  ['a held lease before expiresAt is live', held, 115.9, false],
  ['a held lease at expiresAt is expired', held, 116, true],
  ['a held lease after expiresAt is expired', held, 200, true],
  ['a released lease is expired before expiresAt', { ...held, released: true }, 101, true],
  ['a holder without expiresAt is expired', { ...held, expiresAt: null }, 101, true],
];

for (const [name, lease, now, expected] of expiries) {
  t.test(name, async (t) => {
    t.equal(isExpired(lease, now), expected, `isExpired at ${now}`);
  });
}

const observer = (target: string, at: number): Observer => ({
  view: { target, reachable: false, ping: false, health: false, at },
  confirmation: null,
  lastHeartbeatAt: at,
  heartbeatSeconds: 1,
});

t.test('toRecord shows the lease, the computed expiry and the views', async (t) => {
  const observers = new Map<string, Observer>([
    ['node-b', observer('mbp', 105)],
    ['cloud-vm', observer('mbp', 106)],
    ['quiet', { view: null, confirmation: null, lastHeartbeatAt: 100, heartbeatSeconds: null }],
  ]);
  const r = toRecord(
    {
      ...held,
      maintenance: true,
      floorPending: true,
      dualUnreachableStreak: 1,
      lastCheckAt: 106,
      promotedFrom: 'node-b',
    },
    observers,
    110,
  );
  t.equal(r.name, 'hq', 'the record is named hq');
  t.equal(r.holder, 'mbp', 'holder');
  t.equal(r.generation, 3, 'generation');
  t.equal(r.revision, 7, 'revision');
  t.equal(r.acquiredAt, 100, 'acquiredAt');
  t.equal(r.renewedAt, 110, 'renewedAt');
  t.equal(r.ttlSeconds, 6, 'ttlSeconds');
  t.equal(r.expiresAt, 116, 'expiresAt');
  t.equal(r.expired, false, 'live at 110');
  t.equal(r.released, false, 'not released');
  t.equal(r.notBefore, 100, 'notBefore');
  t.equal(r.dualUnreachableStreak, 1, 'streak');
  t.equal(r.lastCheckAt, 106, 'lastCheckAt');
  t.equal(r.promotedFrom, 'node-b', 'promotedFrom');
  t.equal(r.maintenance, true, 'maintenance');
  t.equal(r.floorPending, true, 'floorPending');
  t.equal(r.now, 110, 'now');
  t.same(Object.keys(r.views), ['node-b', 'cloud-vm'], 'an observer without a view is not shown');
  t.same(r.views['node-b'], observer('mbp', 105).view, 'the view itself');
  t.equal(toRecord(held, observers, 116).expired, true, 'expired is computed from now');
  t.equal(toRecord({ ...held, released: true }, observers, 110).released, true, 'released shown');
  t.equal(r.displaced, null, 'no displaced holder');
  const d = { host: 'node-b', generation: 2, revision: 6, floor: 90, acknowledgedAt: 104, savedSeconds: 11 };
  t.same(
    toRecord({ ...held, displaced: d }, observers, 110).displaced,
    { host: 'node-b', generation: 2, acknowledgedAt: 104, savedSeconds: 11 },
    'displaced shown without its revision and floor',
  );
  const { displaced: _gone, ...old } = held;
  t.equal(toRecord(old, observers, 110).displaced, null, 'a row written before 0.2.0 shows none');
});

t.test('toRecord views have a null prototype and hostile names cannot pollute prototypes', async (t) => {
  const observers = new Map<string, Observer>([
    ['__proto__', observer('mbp', 1)],
    ['constructor', observer('mbp', 2)],
    ['hasOwnProperty', observer('mbp', 3)],
  ]);
  const r = toRecord(held, observers, 110);
  t.equal(Object.getPrototypeOf(r.views), null, 'views has no prototype');
  t.same(Object.keys(r.views), ['__proto__', 'constructor', 'hasOwnProperty'], 'every name is an own, enumerable key');
  // biome-ignore lint/suspicious/noProto: the test is that __proto__ is a plain data key here
  t.equal(r.views['__proto__']?.at, 1, '__proto__ is a plain data key');
  t.equal(({} as { [k: string]: unknown })['at'], undefined, 'Object.prototype was not touched');
  t.equal(Object.hasOwn(Object.prototype, 'target'), false, 'no view leaked into Object.prototype');
  t.throws(
    () => {
      (r.views as { [k: string]: unknown })['constructor'] = 'x';
    },
    TypeError,
    'views cannot be overwritten',
  );
  const view = { target: 'mbp', reachable: false, ping: false, health: false, at: 1 };
  // biome-ignore lint/suspicious/noProto: the test is that JSON keeps __proto__ as data
  t.same(JSON.parse(JSON.stringify(r)).views.__proto__, view, 'JSON shows the key as data');
});

const predicates: ReadonlyArray<readonly [string, (v: unknown) => boolean, unknown, boolean]> = [
  ['0 is a generation', isGeneration, 0, true],
  ['a safe integer is a generation', isGeneration, 2 ** 53 - 1, true],
  ['an unsafe integer is not a generation', isGeneration, 2 ** 53, false],
  ['a negative is not a generation', isGeneration, -1, false],
  ['a fraction is not a generation', isGeneration, 1.5, false],
  ['a string is not a generation', isGeneration, '1', false],
  ['a fraction is a time', isTime, 1.5, true],
  ['a negative is a time', isTime, -3, true],
  ['NaN is not a time', isTime, Number.NaN, false],
  ['Infinity is not a time', isTime, Infinity, false],
  ['a string is not a time', isTime, '1', false],
];

for (const [name, fn, value, expected] of predicates) {
  t.test(name, async (t) => {
    t.equal(fn(value), expected, `${fn.name}(${String(value)})`);
  });
}

const good = {
  name: 'hq',
  holder: 'mbp',
  generation: 3,
  revision: 7,
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  expired: false,
  released: false,
  notBefore: 100,
  floorPending: false,
  now: 110,
  views: {},
  extra: 'ignored',
};

t.test('parseRecord accepts an API record and keeps what the agent needs', async (t) => {
  const got = parseRecord(good);
  const expected: RecordSummary = {
    holder: 'mbp',
    generation: 3,
    revision: 7,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    expired: false,
    released: false,
    notBefore: 100,
    floorPending: false,
    displaced: null,
    now: 110,
  };
  t.same(got, { ok: true, value: expected }, 'summary without extra fields');
});

const accepted: ReadonlyArray<readonly [string, object, Partial<RecordSummary>]> = [
  [
    'a record without released and floorPending defaults both to false',
    { released: undefined, floorPending: undefined },
    { released: false, floorPending: false },
  ],
  [
    'null released and floorPending default to false',
    { released: null, floorPending: null },
    { released: false, floorPending: false },
  ],
  [
    'a never-granted record without holder is accepted while not expired',
    { holder: null, generation: 0, expired: false },
    { holder: null, generation: 0 },
  ],
  [
    'a record without holder at a generation is accepted when expired',
    { holder: null, generation: 4, expired: true },
    { holder: null, generation: 4, expired: true },
  ],
  ['a null notBefore is accepted', { notBefore: null }, { notBefore: null }],
  [
    'a released, floor-pending record is accepted',
    { released: true, floorPending: true, expired: true },
    { released: true, floorPending: true },
  ],
  ['a record without displaced (before 0.2.0) has none', { displaced: undefined }, { displaced: null }],
  [
    'a displaced holder is kept without its savedSeconds',
    { displaced: { host: 'node-b', generation: 2, acknowledgedAt: 105, savedSeconds: 12 } },
    { displaced: { host: 'node-b', generation: 2, acknowledgedAt: 105 } },
  ],
  [
    'a displaced holder not yet acknowledged',
    { displaced: { host: 'node-b', generation: 2, acknowledgedAt: null } },
    { displaced: { host: 'node-b', generation: 2, acknowledgedAt: null } },
  ],
];

for (const [name, patch, expected] of accepted) {
  t.test(name, async (t) => {
    const got = parseRecord({ ...good, ...patch });
    t.equal(got.ok, true, 'accepted');
    if (got.ok) t.match(got.value, expected, 'fields');
  });
}

const problems: ReadonlyArray<readonly [string, unknown, string]> = [
  ['null is not a record', null, 'record must be an object'],
  ['an array is not a record', [good], 'record must be an object'],
  ['a string is not a record', 'hq', 'record must be an object'],
  ['a number is not a record', 3, 'record must be an object'],
  ['a missing holder is refused', { ...good, holder: undefined }, 'record.holder must be a host or null'],
  ['an upper-case holder is refused', { ...good, holder: 'MBP' }, 'record.holder must be a host or null'],
  ['a reserved holder name is refused', { ...good, holder: 'constructor' }, 'record.holder must be a host or null'],
  ['a holder in an array is refused', { ...good, holder: ['mbp'] }, 'record.holder must be a host or null'],
  ['a negative generation is refused', { ...good, generation: -1 }, 'record.generation must be a safe integer ≥ 0'],
  ['a generation as a string is refused', { ...good, generation: '3' }, 'record.generation must be a safe integer ≥ 0'],
  ['a fractional generation is refused', { ...good, generation: 3.5 }, 'record.generation must be a safe integer ≥ 0'],
  ['a missing revision is refused', { ...good, revision: undefined }, 'record.revision must be a safe integer ≥ 0'],
  ['an unsafe revision is refused', { ...good, revision: 2 ** 53 }, 'record.revision must be a safe integer ≥ 0'],
  ['a zero ttl is refused', { ...good, ttlSeconds: 0 }, 'record.ttlSeconds must be a positive number'],
  ['a NaN ttl is refused', { ...good, ttlSeconds: Number.NaN }, 'record.ttlSeconds must be a positive number'],
  ['a ttl as a string is refused', { ...good, ttlSeconds: '6' }, 'record.ttlSeconds must be a positive number'],
  [
    'a missing margin is refused (agents read it from the record, S6)',
    { ...good, safetyMarginSeconds: undefined },
    'record.safetyMarginSeconds must be a number ≥ 0 and below ttlSeconds',
  ],
  [
    'a negative margin is refused',
    { ...good, safetyMarginSeconds: -1 },
    'record.safetyMarginSeconds must be a number ≥ 0 and below ttlSeconds',
  ],
  [
    'a margin as long as the ttl is refused (no validity left)',
    { ...good, safetyMarginSeconds: 6 },
    'record.safetyMarginSeconds must be a number ≥ 0 and below ttlSeconds',
  ],
  ['a missing expired is refused', { ...good, expired: undefined }, 'record.expired must be a boolean'],
  ['an expired of 0 is refused', { ...good, expired: 0 }, 'record.expired must be a boolean'],
  ['a missing notBefore is refused', { ...good, notBefore: undefined }, 'record.notBefore must be a time or null'],
  ['an infinite notBefore is refused', { ...good, notBefore: Infinity }, 'record.notBefore must be a time or null'],
  ['a released of "yes" is refused', { ...good, released: 'yes' }, 'record.released must be a boolean'],
  ['a floorPending of 1 is refused', { ...good, floorPending: 1 }, 'record.floorPending must be a boolean'],
  ['a missing now is refused', { ...good, now: undefined }, 'record.now must be a time'],
  ['a now as a string is refused', { ...good, now: '110' }, 'record.now must be a time'],
  [
    'a displaced that is no object is refused',
    { ...good, displaced: 'node-b' },
    'record.displaced must be {host, generation, acknowledgedAt} or null',
  ],
  [
    'a displaced in an array is refused',
    { ...good, displaced: [] },
    'record.displaced must be {host, generation, acknowledgedAt} or null',
  ],
  [
    'a displaced without a host is refused',
    { ...good, displaced: { generation: 2, acknowledgedAt: null } },
    'record.displaced must be {host, generation, acknowledgedAt} or null',
  ],
  [
    'a displaced with a bad generation is refused',
    { ...good, displaced: { host: 'node-b', generation: -2, acknowledgedAt: null } },
    'record.displaced must be {host, generation, acknowledgedAt} or null',
  ],
  [
    'a displaced with a bad acknowledgedAt is refused',
    { ...good, displaced: { host: 'node-b', generation: 2, acknowledgedAt: '105' } },
    'record.displaced must be {host, generation, acknowledgedAt} or null',
  ],
  [
    'a record without holder at a generation must be expired',
    { ...good, holder: null, generation: 2, expired: false },
    'record without holder must be expired',
  ],
];

for (const [name, input, problem] of problems) {
  t.test(name, async (t) => {
    t.same(parseRecord(input), { ok: false, problem }, 'refused as a whole with the problem');
  });
}
