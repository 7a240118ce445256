/** The registry's pure decisions, table-driven. */
import t from 'tap';
import { MAX_TTL_MS, MIN_TTL_MS, isResourceId } from '../../packages/protocol/src/index.js';
import {
  DEFAULT_BANDS,
  clampTtl,
  decideAllocation,
  decideLeaseAccess,
  decideRegister,
  decideResourceDelete,
  decideResourceHeartbeat,
  hostShare,
  validateBands,
  bandsFromConfig,
  type Actor,
  type Bands,
  type PortLeaseRow,
  type RegisterInput,
  type ResourceRow,
} from '../../apps/arbiter/src/registry/decide.js';

const NOW = 1_800_000_000_000;
const LID = 'a'.repeat(32);
const mbp: Actor = { machine: 'mbp', admin: false };
const nodeb: Actor = { machine: 'node-b', admin: false };
const admin: Actor = { machine: 'cloud-vm', admin: true };

function lease(port: number, extra: Partial<PortLeaseRow> = {}): PortLeaseRow {
  return {
    port,
    leaseId: 'b'.repeat(32),
    machine: 'node-b',
    purpose: 'web',
    ttlMs: 60_000,
    createdAt: NOW - 1000,
    renewedAt: NOW - 1000,
    expiresAt: NOW + 59_000,
    ...extra,
  };
}

t.test('TTLs are clamped to between a second and a day', async (t) => {
  const cases: [string, number, number][] = [
    ['a TTL inside the range is kept', 60_000, 60_000],
    ['a TTL above 24 h is clamped to 24 h', 10 * MAX_TTL_MS, MAX_TTL_MS],
    ['exactly 24 h is kept', MAX_TTL_MS, MAX_TTL_MS],
    ['a TTL below a second is raised to a second', 10, MIN_TTL_MS],
    ['a fractional TTL is floored', 1500.7, 1500],
  ];
  for (const [name, input, want] of cases) t.equal(clampTtl(input), want, name);
});

t.test('resource ids follow the host rule with 64 characters and refuse reserved words', async (t) => {
  const cases: [string, unknown, boolean][] = [
    ['a host name is an id', 'mbp', true],
    ['an instance id with dashes is an id', 'node-b-web-1', true],
    ['64 characters are allowed', `a${'b'.repeat(63)}`, true],
    ['65 characters are refused', `a${'b'.repeat(64)}`, false],
    ['__proto__ is refused', '__proto__', false],
    ['constructor is refused', 'constructor', false],
    ['prototype is refused', 'prototype', false],
    ['upper case is refused', 'MBP', false],
    ['a leading dash is refused', '-mbp', false],
    ['a dot is refused', 'mbp.local', false],
    ['the empty string is refused', '', false],
    ['a number is refused', 7, false],
  ];
  for (const [name, input, want] of cases) t.equal(isResourceId(input), want, name);
});

t.test('band settings that cannot work are refused with their key', async (t) => {
  t.ok(validateBands(DEFAULT_BANDS).ok, 'the default bands are valid');
  const bad: [string, Bands, string][] = [
    ['a reversed test band is refused', { ...DEFAULT_BANDS, test: { from: 31499, to: 31450 } }, 'portBands.test'],
    [
      'an offline band overlapping the test band is refused',
      { ...DEFAULT_BANDS, offline: { from: 31490, to: 31500 } },
      'portBands.offline',
    ],
    ['a port above 65535 is refused', { ...DEFAULT_BANDS, test: { from: 65530, to: 65536 } }, 'portBands.test'],
    [
      'reserving every test port is refused',
      { ...DEFAULT_BANDS, reserved: [31450, 31451], test: { from: 31450, to: 31451 } },
      'portBands.reserved',
    ],
  ];
  for (const [name, b, key] of bad) {
    const r = validateBands(b);
    t.equal(r.ok ? null : r.key, key, name);
  }
});

t.test('allocation gives the lowest free test port, reusing expired leases', async (t) => {
  const small: Bands = { reserved: [31451], test: { from: 31450, to: 31453 }, offline: { from: 31500, to: 31509 } };
  const base = {
    bands: DEFAULT_BANDS,
    rows: [] as PortLeaseRow[],
    machine: 'mbp',
    purpose: 'web',
    ttlMs: 60_000,
    excluded: [] as number[],
    leaseId: LID,
    now: NOW,
  };
  const cases: [string, Partial<typeof base>, number | string][] = [
    ['an empty band gives its lowest port', {}, 31450],
    ['a live lease is skipped', { rows: [lease(31450)] }, 31451],
    ['an expired lease is reused', { rows: [lease(31450, { expiresAt: NOW - 1 })] }, 31450],
    ['a lease expiring exactly now counts as expired', { rows: [lease(31450, { expiresAt: NOW })] }, 31450],
    ['an excluded port is skipped', { excluded: [31450, 31451] }, 31452],
    ['a reserved port inside the band is never given', { bands: small }, 31450],
    ['reserved is skipped after a live lease', { bands: small, rows: [lease(31450)] }, 31452],
    [
      'a full band is refused with band-full',
      { bands: small, rows: [lease(31450), lease(31452), lease(31453)] },
      'band-full',
    ],
    ['excluding every free port is band-full', { bands: small, excluded: [31450, 31452, 31453] }, 'band-full'],
    ['an excluded port outside the band changes nothing', { excluded: [31420] }, 31450],
    ['an excluded offline port changes nothing', { excluded: [31500, 70000, -1] }, 31450],
    [
      'a machine holding half the band (its share) is refused',
      { rows: Array.from({ length: 25 }, (_, i) => lease(31450 + i, { machine: 'mbp' })) },
      'band-full',
    ],
    [
      'one lease under its share is granted',
      { rows: Array.from({ length: 24 }, (_, i) => lease(31450 + i, { machine: 'mbp' })) },
      31474,
    ],
    [
      "another machine's leases do not count against its share",
      { rows: Array.from({ length: 25 }, (_, i) => lease(31450 + i)) },
      31475,
    ],
    [
      'expired leases do not count against the share',
      { rows: Array.from({ length: 25 }, (_, i) => lease(31450 + i, { machine: 'mbp', expiresAt: NOW })) },
      31450,
    ],
  ];
  for (const [name, over, want] of cases) {
    const r = decideAllocation({ ...base, ...over });
    t.equal(r.ok ? r.lease.port : r.reason, want, name);
  }
  const reused = decideAllocation({ ...base, rows: [lease(31450, { expiresAt: NOW - 1 })] });
  t.ok(
    reused.ok && reused.reused !== null && reused.reused.machine === 'node-b',
    'a reuse reports the expired row it replaces',
  );
  const clamped = decideAllocation({ ...base, ttlMs: 3 * MAX_TTL_MS });
  t.ok(
    clamped.ok && clamped.lease.ttlMs === MAX_TTL_MS && clamped.lease.expiresAt === NOW + MAX_TTL_MS,
    'the lease TTL is clamped to 24 h',
  );
  const fresh = decideAllocation(base);
  t.ok(
    fresh.ok && fresh.lease.leaseId === LID && fresh.lease.machine === 'mbp' && fresh.lease.createdAt === NOW,
    'the lease carries the given id, owner and time',
  );
  const full = decideAllocation({ ...base, bands: small, rows: [lease(31450), lease(31452), lease(31453)] });
  t.match(full.ok ? '' : full.message, /31450–31453/, 'the band-full message names the band');
  t.same(
    [hostShare(DEFAULT_BANDS), hostShare(small), hostShare({ ...small, test: { from: 31450, to: 31451 } })],
    [25, 2, 1],
    'the share is half the allocatable ports, rounded up, at least 1',
  );
  const share = decideAllocation({
    ...base,
    rows: Array.from({ length: 25 }, (_, i) => lease(31450 + i, { machine: 'mbp' })),
  });
  t.match(
    share.ok ? '' : share.message,
    /mbp already holds 25 ports of the test band 31450–31499, its share/,
    'the share refusal names the machine and its count',
  );
});

t.test('renew and release need a live lease, its owner and its id', async (t) => {
  const row = lease(31450, { machine: 'mbp', leaseId: LID });
  const cases: [string, PortLeaseRow | undefined, string, Actor, string][] = [
    ['the owner with the right id is allowed', row, LID, mbp, 'ok'],
    ['an admin with the right id is allowed', row, LID, admin, 'ok'],
    ['an unknown port is not-found', undefined, LID, mbp, 'not-found'],
    ['an expired lease is not-found', { ...row, expiresAt: NOW }, LID, mbp, 'not-found'],
    ['another machine is wrong-owner', row, LID, nodeb, 'wrong-owner'],
    [
      'another machine with a wrong id is still wrong-owner (ids are not revealed)',
      row,
      'c'.repeat(32),
      nodeb,
      'wrong-owner',
    ],
    ['the owner with another id is wrong-id', row, 'c'.repeat(32), mbp, 'wrong-id'],
  ];
  for (const [name, r, id, actor, want] of cases) {
    const d = decideLeaseAccess(r, 31450, id, actor, NOW);
    t.equal(d.ok ? 'ok' : d.reason, want, name);
  }
});

const machineReq: RegisterInput = {
  id: 'mbp',
  name: 'mbp',
  kind: 'machine',
  machine: 'mbp',
  attrs: new Map([['cpuCount', 8]]),
  observedAt: 5,
  ttlMs: 90_000,
};

function resource(extra: Partial<ResourceRow> = {}): ResourceRow {
  return {
    ...machineReq,
    owner: 'mbp',
    ttlMs: 90_000,
    registeredAt: NOW - 10_000,
    renewedAt: NOW - 10_000,
    expiresAt: NOW + 80_000,
    ...extra,
  };
}

t.test('a resource is registered only for its own machine and keeps a live id', async (t) => {
  const cases: [string, ResourceRow | undefined, RegisterInput, Actor, string][] = [
    ['a member registers its own machine', undefined, machineReq, mbp, 'ok'],
    ['a member may not register another machine', undefined, machineReq, nodeb, 'wrong-host'],
    ['an admin registers any machine', undefined, machineReq, admin, 'ok'],
    ['a live id of another machine is taken', resource({ machine: 'node-b' }), machineReq, mbp, 'id-taken'],
    [
      'an expired id of another machine is taken over',
      resource({ machine: 'node-b', expiresAt: NOW }),
      machineReq,
      mbp,
      'ok',
    ],
    ['re-registering its own live resource is allowed', resource(), machineReq, mbp, 'ok'],
  ];
  for (const [name, existing, req, actor, want] of cases) {
    const d = decideRegister(existing, req, actor, NOW);
    t.equal(d.ok ? 'ok' : d.reason, want, name);
  }
  const again = decideRegister(resource(), machineReq, mbp, NOW);
  t.equal(
    again.ok ? again.resource.registeredAt : null,
    NOW - 10_000,
    're-registering a live resource keeps registeredAt',
  );
  const over = decideRegister(resource({ expiresAt: NOW - 1 }), machineReq, mbp, NOW);
  t.equal(over.ok ? over.resource.registeredAt : null, NOW, 'registering over an expired record starts afresh');
  const clamped = decideRegister(undefined, { ...machineReq, ttlMs: 2 * MAX_TTL_MS }, mbp, NOW);
  t.equal(clamped.ok ? clamped.resource.expiresAt : null, NOW + MAX_TTL_MS, 'a resource TTL is clamped to 24 h');
  const byAdmin = decideRegister(undefined, machineReq, admin, NOW);
  t.equal(byAdmin.ok ? byAdmin.resource.owner : null, 'cloud-vm', 'the owner is the machine of the registering token');
});

t.test('heartbeat and delete need a live resource of the same machine', async (t) => {
  const cases: [string, ResourceRow | undefined, Actor, string][] = [
    ['its own live resource is renewed', resource(), mbp, 'ok'],
    ['an unknown resource is not-found', undefined, mbp, 'not-found'],
    ['an expired resource is not-found, so the member re-registers', resource({ expiresAt: NOW }), mbp, 'not-found'],
    ["another machine's resource is wrong-host", resource(), nodeb, 'wrong-host'],
    ['an admin renews any resource', resource(), admin, 'ok'],
  ];
  for (const [name, existing, actor, want] of cases) {
    const h = decideResourceHeartbeat(existing, 'mbp', undefined, actor, NOW);
    t.equal(h.ok ? 'ok' : h.reason, want, `heartbeat: ${name}`);
    const d = decideResourceDelete(existing, 'mbp', actor, NOW);
    t.equal(d.ok ? 'ok' : d.reason, want, `delete: ${name}`);
  }
  const renewed = decideResourceHeartbeat(resource(), 'mbp', new Map([['cpuCount', 16]]), mbp, NOW);
  t.ok(
    renewed.ok && renewed.resource.expiresAt === NOW + 90_000 && renewed.resource.attrs.get('cpuCount') === 16,
    'a heartbeat extends by the TTL and replaces the attrs',
  );
  const kept = decideResourceHeartbeat(resource(), 'mbp', undefined, mbp, NOW);
  t.ok(kept.ok && kept.resource.attrs.get('cpuCount') === 8, 'a heartbeat without attrs keeps the old ones');
});

t.test('bands from the config file fill the defaults and are validated', async (t) => {
  const none = bandsFromConfig(undefined);
  t.same(none.ok ? none.bands : null, DEFAULT_BANDS, 'no portBands key gives the defaults');
  const part = bandsFromConfig({ test: { from: 40000, to: 40009 } });
  t.same(
    part.ok ? [part.bands.test, part.bands.reserved, part.bands.offline] : null,
    [{ from: 40000, to: 40009 }, DEFAULT_BANDS.reserved, DEFAULT_BANDS.offline],
    'a partial key keeps the other defaults',
  );
  const bad = bandsFromConfig({ offline: { from: 31460, to: 31470 } });
  t.same(bad.ok ? null : bad.key, 'portBands.offline', 'an overlapping offline band names its key');
});
