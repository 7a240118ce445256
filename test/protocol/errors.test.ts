import t from 'tap';
import {
  CATALOG,
  ERRORS,
  LEASE_REFUSALS,
  REPLICATION_ERRORS,
  STREAM_ERRORS,
  refusalError,
  registryError,
  type CatalogEntry,
  type LeaseRefusal,
  type RegistryRefusal,
} from '../../packages/protocol/src/index.js';

// Every code hq answers with: group, name → [code, HTTP status] (the lease API and the replication routes).
const catalog: ReadonlyArray<readonly [{ readonly [name: string]: CatalogEntry }, string, string, number]> = [
  [ERRORS, 'BAD_REQUEST', 'HQ_ERR_BAD_REQUEST', 400],
  [ERRORS, 'UNKNOWN_ROLE', 'HQ_ERR_UNKNOWN_ROLE', 400],
  [ERRORS, 'UNAUTHORIZED', 'HQ_ERR_UNAUTHORIZED', 401],
  [ERRORS, 'FORBIDDEN', 'HQ_ERR_FORBIDDEN', 403],
  [ERRORS, 'JOIN_REFUSED', 'HQ_ERR_JOIN_REFUSED', 401],
  [ERRORS, 'WRONG_HOST', 'HQ_ERR_WRONG_HOST', 403],
  [ERRORS, 'NOT_FOUND', 'HQ_ERR_NOT_FOUND', 404],
  [ERRORS, 'METHOD_NOT_ALLOWED', 'HQ_ERR_METHOD_NOT_ALLOWED', 405],
  [ERRORS, 'HELD', 'HQ_ERR_HELD', 409],
  [ERRORS, 'NOT_HOLDER', 'HQ_ERR_NOT_HOLDER', 409],
  [ERRORS, 'STALE_GENERATION', 'HQ_ERR_STALE_GENERATION', 409],
  [ERRORS, 'EXPIRED', 'HQ_ERR_EXPIRED', 409],
  [ERRORS, 'NOT_CANDIDATE', 'HQ_ERR_NOT_CANDIDATE', 409],
  [ERRORS, 'SAME_HOLDER', 'HQ_ERR_SAME_HOLDER', 409],
  [ERRORS, 'TARGET_SILENT', 'HQ_ERR_TARGET_SILENT', 409],
  [ERRORS, 'GENERATION_JUMP', 'HQ_ERR_GENERATION_JUMP', 409],
  [ERRORS, 'GENERATION_CEILING', 'HQ_ERR_GENERATION_CEILING', 409],
  [ERRORS, 'CONFLICT', 'HQ_ERR_CONFLICT', 409],
  [ERRORS, 'PRECONDITION', 'HQ_ERR_PRECONDITION', 412],
  [ERRORS, 'TOO_LARGE', 'HQ_ERR_TOO_LARGE', 413],
  [ERRORS, 'UNSUPPORTED_MEDIA', 'HQ_ERR_UNSUPPORTED_MEDIA', 415],
  [ERRORS, 'BAND_FULL', 'HQ_ERR_BAND_FULL', 503],
  [ERRORS, 'STORE_UNAVAILABLE', 'HQ_ERR_STORE_UNAVAILABLE', 503],
  [ERRORS, 'NOT_ELECTED', 'HQ_ERR_NOT_ELECTED', 503],
  [ERRORS, 'PROTOCOL_VERSION', 'HQ_ERR_PROTOCOL_VERSION', 400],
  [ERRORS, 'INTERNAL', 'HQ_ERR_INTERNAL', 500],
  [REPLICATION_ERRORS, 'BAD_MANIFEST', 'HQ_ERR_BAD_MANIFEST', 400],
  [REPLICATION_ERRORS, 'BAD_GENERATION', 'HQ_ERR_BAD_GENERATION', 400],
  [REPLICATION_ERRORS, 'UNKNOWN_GENERATION', 'HQ_ERR_UNKNOWN_GENERATION', 409],
  [REPLICATION_ERRORS, 'GENERATION_EXISTS', 'HQ_ERR_GENERATION_EXISTS', 409],
  [REPLICATION_ERRORS, 'OLDER_SNAPSHOT', 'HQ_ERR_OLDER_SNAPSHOT', 409],
  [REPLICATION_ERRORS, 'NO_PUSH', 'HQ_ERR_NO_PUSH', 404],
  [REPLICATION_ERRORS, 'UNEXPECTED_BLOB', 'HQ_ERR_UNEXPECTED_BLOB', 409],
  [REPLICATION_ERRORS, 'OFFSET', 'HQ_ERR_BLOB_OFFSET', 409],
  [REPLICATION_ERRORS, 'BLOB_SIZE', 'HQ_ERR_BLOB_SIZE', 400],
  [REPLICATION_ERRORS, 'BLOB_BUSY', 'HQ_ERR_BLOB_BUSY', 409],
  [REPLICATION_ERRORS, 'CHECKSUM', 'HQ_ERR_CHECKSUM', 422],
  [REPLICATION_ERRORS, 'INCOMPLETE', 'HQ_ERR_PUSH_INCOMPLETE', 409],
  [REPLICATION_ERRORS, 'UNKNOWN_BASE', 'HQ_ERR_UNKNOWN_BASE', 409],
  [REPLICATION_ERRORS, 'TOO_MANY_PUSHES', 'HQ_ERR_TOO_MANY_PUSHES', 503],
  [STREAM_ERRORS, 'TOO_MANY_STREAMS', 'HQ_ERR_TOO_MANY_STREAMS', 503],
];

for (const [group, name, code, status] of catalog) {
  t.test(`${name} is ${code} with status ${status}`, async (t) => {
    const e = group[name] as CatalogEntry;
    t.equal(e.code, code, 'stable code');
    t.equal(e.status, status, 'HTTP status');
    t.match(e.message, /^[^\n]*[^.\n]$/, 'a one-line message without a full stop');
    t.ok(Object.isFrozen(e), 'the entry is frozen');
  });
}

t.test('CATALOG is every entry once, and each code is in the table', async (t) => {
  t.same(CATALOG.map((e) => e.code).sort(), catalog.map(([, , code]) => code).sort(), 'no entry missing or extra');
  const codes = CATALOG.map((e) => e.code);
  t.equal(new Set(codes).size, codes.length, 'every code is unique');
  for (const c of codes) t.match(c, /^HQ_ERR_[A-Z_]+$/, `${c} has the HQ_ERR_ prefix`);
  for (const g of [ERRORS, REPLICATION_ERRORS, STREAM_ERRORS, CATALOG]) t.ok(Object.isFrozen(g), 'frozen');
});

t.test('the replication routes reuse the shared entries, never a second copy of a code', async (t) => {
  t.equal(REPLICATION_ERRORS.STALE_GENERATION, ERRORS.STALE_GENERATION, 'a stale lease generation');
  t.equal(REPLICATION_ERRORS.UNAUTHORIZED, ERRORS.UNAUTHORIZED, 'no peer token');
  t.equal(REPLICATION_ERRORS.UNSUPPORTED_MEDIA, ERRORS.UNSUPPORTED_MEDIA, 'a body of the wrong type');
  t.equal(REPLICATION_ERRORS.INTERNAL, ERRORS.INTERNAL, 'internal');
});

t.test(
  'no status is a 5xx except the internal error, a full capacity and an outage of the etcd store or its election',
  async (t) => {
    const fives = CATALOG.filter((e) => e.status >= 500)
      .map((e) => e.code)
      .sort();
    t.same(
      fives,
      [
        'HQ_ERR_BAND_FULL',
        'HQ_ERR_INTERNAL',
        'HQ_ERR_NOT_ELECTED',
        'HQ_ERR_STORE_UNAVAILABLE',
        'HQ_ERR_TOO_MANY_PUSHES',
        'HQ_ERR_TOO_MANY_STREAMS',
      ],
      'bad input never maps to a 5xx',
    );
  },
);

// A refusal reason of a decision → its entry: [why, the lease or registry reason, the entry].
const refusals: ReadonlyArray<
  readonly [string, { readonly lease: LeaseRefusal } | { readonly registry: RegistryRefusal }, CatalogEntry]
> = [
  ['a held lease maps to HELD', { lease: 'held' }, ERRORS.HELD],
  ['a non-holder maps to NOT_HOLDER', { lease: 'not-holder' }, ERRORS.NOT_HOLDER],
  ['a stale generation maps to STALE_GENERATION', { lease: 'stale-generation' }, ERRORS.STALE_GENERATION],
  ['an expired lease maps to EXPIRED', { lease: 'expired' }, ERRORS.EXPIRED],
  ['a non-candidate maps to NOT_CANDIDATE', { lease: 'not-candidate' }, ERRORS.NOT_CANDIDATE],
  ['the same holder maps to SAME_HOLDER', { lease: 'same-holder' }, ERRORS.SAME_HOLDER],
  [
    'a handover or transfer target not heard from maps to TARGET_SILENT',
    { lease: 'target-silent' },
    ERRORS.TARGET_SILENT,
  ],
  ['no holder maps to CONFLICT', { lease: 'no-holder' }, ERRORS.CONFLICT],
  ['a member token acting for another machine maps to WRONG_HOST', { registry: 'wrong-host' }, ERRORS.WRONG_HOST],
  ['a lease of another machine maps to WRONG_HOST', { registry: 'wrong-owner' }, ERRORS.WRONG_HOST],
  ['a resource id another machine holds maps to CONFLICT', { registry: 'id-taken' }, ERRORS.CONFLICT],
  ['a wrong lease id maps to CONFLICT', { registry: 'wrong-id' }, ERRORS.CONFLICT],
  ['an unknown or expired lease or resource maps to NOT_FOUND', { registry: 'not-found' }, ERRORS.NOT_FOUND],
  ['a full band maps to BAND_FULL', { registry: 'band-full' }, ERRORS.BAND_FULL],
];

for (const [name, reason, expected] of refusals) {
  t.test(name, async (t) => {
    const e = 'lease' in reason ? refusalError(reason.lease) : registryError(reason.registry);
    t.equal(e, expected, 'the catalog entry itself');
    if ('lease' in reason) t.equal(e.status, 409, 'every lease refusal is a 409 conflict');
  });
}

t.test('LEASE_REFUSALS lists every lease refusal of the table', async (t) => {
  const lease = refusals.flatMap(([, r]) => ('lease' in r ? [r.lease] : []));
  t.same([...LEASE_REFUSALS].sort(), lease.sort(), 'the list');
});
