import t from 'tap';
import { ERRORS, refusalError } from '../../packages/lease-core/src/index.js';
import type { CatalogEntry, ErrorName, LeaseRefusal } from '../../packages/lease-core/src/index.js';

// The catalog as SPEC §4 fixes it: name → [code, HTTP status].
const catalog: ReadonlyArray<readonly [ErrorName, string, number]> = [
  ['BAD_REQUEST', 'HQ_ERR_BAD_REQUEST', 400],
  ['UNKNOWN_ROLE', 'HQ_ERR_UNKNOWN_ROLE', 400],
  ['UNAUTHORIZED', 'HQ_ERR_UNAUTHORIZED', 401],
  ['FORBIDDEN', 'HQ_ERR_FORBIDDEN', 403],
  ['WRONG_HOST', 'HQ_ERR_WRONG_HOST', 403],
  ['NOT_FOUND', 'HQ_ERR_NOT_FOUND', 404],
  ['HELD', 'HQ_ERR_HELD', 409],
  ['NOT_HOLDER', 'HQ_ERR_NOT_HOLDER', 409],
  ['STALE_GENERATION', 'HQ_ERR_STALE_GENERATION', 409],
  ['EXPIRED', 'HQ_ERR_EXPIRED', 409],
  ['NOT_CANDIDATE', 'HQ_ERR_NOT_CANDIDATE', 409],
  ['SAME_HOLDER', 'HQ_ERR_SAME_HOLDER', 409],
  ['TARGET_SILENT', 'HQ_ERR_TARGET_SILENT', 409],
  ['CONFLICT', 'HQ_ERR_CONFLICT', 409],
  ['PRECONDITION', 'HQ_ERR_PRECONDITION', 412],
  ['TOO_LARGE', 'HQ_ERR_TOO_LARGE', 413],
  ['UNSUPPORTED_MEDIA', 'HQ_ERR_UNSUPPORTED_MEDIA', 415],
  ['BAND_FULL', 'HQ_ERR_BAND_FULL', 503],
  ['STORE_UNAVAILABLE', 'HQ_ERR_STORE_UNAVAILABLE', 503],
  ['NOT_ELECTED', 'HQ_ERR_NOT_ELECTED', 503],
  ['INTERNAL', 'HQ_ERR_INTERNAL', 500],
];

for (const [name, code, status] of catalog) {
  t.test(`${name} is ${code} with status ${status}`, async (t) => {
    const e: CatalogEntry = ERRORS[name];
    t.equal(e.code, code, 'stable code');
    t.equal(e.status, status, 'HTTP status');
    t.match(e.message, /^[^\n]*[^.\n]$/, 'a one-line message without a full stop');
    t.ok(Object.isFrozen(e), 'the entry is frozen');
  });
}

t.test('the catalog has exactly the entries of the table, each code unique', async (t) => {
  t.same(Object.keys(ERRORS).sort(), catalog.map(([n]) => n).sort(), 'no entry missing or extra');
  const codes = Object.values(ERRORS).map((e) => e.code);
  t.equal(new Set(codes).size, codes.length, 'every code is unique');
  for (const c of codes) t.match(c, /^HQ_ERR_[A-Z_]+$/, `${c} has the HQ_ERR_ prefix`);
  t.ok(Object.isFrozen(ERRORS), 'the catalog is frozen');
});

t.test('no catalog status is a 5xx except the internal error, a full port band and the etcd store\'s outages', async (t) => {
  const fives = Object.values(ERRORS).filter((e) => e.status >= 500).map((e) => e.code).sort();
  t.same(fives, ['HQ_ERR_BAND_FULL', 'HQ_ERR_INTERNAL', 'HQ_ERR_NOT_ELECTED', 'HQ_ERR_STORE_UNAVAILABLE'], 'bad input never maps to a 5xx (only an outage of the store or of the election does)');
});

const refusals: ReadonlyArray<readonly [string, LeaseRefusal, CatalogEntry]> = [
  ['a held lease maps to HELD', 'held', ERRORS.HELD],
  ['a non-holder maps to NOT_HOLDER', 'not-holder', ERRORS.NOT_HOLDER],
  ['a stale generation maps to STALE_GENERATION', 'stale-generation', ERRORS.STALE_GENERATION],
  ['an expired lease maps to EXPIRED', 'expired', ERRORS.EXPIRED],
  ['a non-candidate maps to NOT_CANDIDATE', 'not-candidate', ERRORS.NOT_CANDIDATE],
  ['the same holder maps to SAME_HOLDER', 'same-holder', ERRORS.SAME_HOLDER],
  ['a handover or transfer target not heard from maps to TARGET_SILENT', 'target-silent', ERRORS.TARGET_SILENT],
  ['no holder maps to CONFLICT', 'no-holder', ERRORS.CONFLICT],
];

for (const [name, reason, expected] of refusals) {
  t.test(name, async (t) => {
    const e = refusalError(reason);
    t.equal(e, expected, `refusalError('${reason}') is the catalog entry itself`);
    t.equal(e.status, 409, 'every lease refusal is a 409 conflict');
  });
}
