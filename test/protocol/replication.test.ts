import t from 'tap';
import {
  DEFAULT_SECRET_PATTERNS,
  GENERATION_RE,
  INDEX_FILES,
  TIERS,
  formatManifest,
  formatSums,
  generationId,
  isSecretPath,
  isTier,
  parseSums,
  relPathProblem,
  sumsDisagreement,
  type Manifest,
} from '../../packages/protocol/src/index.js';
import Value from 'typebox/value';
import { ManifestSchema, checkManifest, parseManifest } from '../../packages/protocol/src/schemas/index.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);

t.test('tiers and generation ids', async (t) => {
  t.same([...TIERS], ['core', 'big', 'obs'], 'the documented tiers');
  for (const v of ['core', 'big', 'obs']) t.ok(isTier(v), `${v} is a tier`);
  for (const v of ['Core', 'all', '', null, 1]) t.notOk(isTier(v), `${JSON.stringify(v)} is not`);
  t.equal(
    generationId(Date.UTC(2026, 11, 1, 7, 0, 5, 123)),
    '20261201T070005Z',
    'one clock reading, UTC, milliseconds dropped',
  );
  t.ok(GENERATION_RE.test(generationId(0)), 'an id matches GENERATION_RE');
  t.notOk(GENERATION_RE.test('2026-12-01T07:00:05Z'), 'an ISO string does not');
});

const paths: ReadonlyArray<readonly [unknown, string | null]> = [
  ['decisions/a.md', null],
  ['a', null],
  ['', 'must be a non-empty relative path'],
  [7, 'must be a non-empty relative path'],
  ['x'.repeat(1025), 'is longer than 1024 characters'],
  ['/etc/passwd', 'must be relative (it starts with /)'],
  ['a\\b', 'may not hold a backslash, NUL or newline'],
  ['a\nb', 'may not hold a backslash, NUL or newline'],
  ['a/../b', 'may not hold empty, "." or ".." components'],
  ['a//b', 'may not hold empty, "." or ".." components'],
  ['./a', 'may not hold empty, "." or ".." components'],
  ['MANIFEST.json', 'names an index file'],
  ['SHA256SUMS', 'names an index file'],
  ['sub/MANIFEST.json', null],
];

for (const [p, problem] of paths) {
  t.test(`relPathProblem(${JSON.stringify(p).slice(0, 40)})`, async (t) => {
    t.equal(relPathProblem(p), problem, problem ?? 'a usable path');
  });
}

const manifest: Manifest = {
  generation: '20261201T070000Z',
  tier: 'core',
  createdAt: '2026-12-01T07:00:00.000Z',
  source: '/srv/app',
  host: 'mbp',
  leaseGeneration: 3,
  holder: 'mbp',
  entries: [
    { path: 'a.db', bytes: 4, sha256: A, kind: 'sqlite', reused: false },
    { path: 'd/b.md', bytes: 0, sha256: B, kind: 'file', reused: true },
  ],
};

t.test('the index files: manifest and sums agree', async (t) => {
  t.same([...INDEX_FILES], ['MANIFEST.json', 'SHA256SUMS'], 'the two index files');
  t.equal(
    formatManifest(manifest),
    `${JSON.stringify(manifest, null, 2)}\n`,
    'MANIFEST.json is indented JSON with a newline',
  );
  const text = formatSums(manifest.entries);
  t.equal(text, `${A}  a.db\n${B}  d/b.md\n`, 'sha256sum -c format, manifest order');
  const sums = parseSums(text);
  t.ok(sums.ok, 'the sums parse');
  if (sums.ok) t.equal(sumsDisagreement(manifest, sums.sums), null, 'and agree with the manifest');
  t.same(parseSums(''), { ok: true, sums: new Map() }, 'an empty file lists nothing');
});

const badSums: ReadonlyArray<readonly [string, string, RegExp]> = [
  ['no final newline', `${A}  a.db`, /does not end with a newline/],
  ['one space', `${A} a.db\n`, /line 1 is not/],
  ['upper-case hex', `${A.toUpperCase()}  a.db\n`, /line 1 is not/],
  ['an unsafe path', `${A}  ../a.db\n`, /line 1: path may not hold/],
  ['a path twice', `${A}  a.db\n${B}  a.db\n`, /lists "a\.db" twice/],
];

for (const [name, text, reason] of badSums) {
  t.test(`parseSums refuses ${name}`, async (t) => {
    const r = parseSums(text);
    t.equal(r.ok, false, 'refused');
    if (!r.ok) t.match(r.reason, reason, 'with why');
  });
}

t.test('sumsDisagreement names the first difference', async (t) => {
  const of = (text: string) => {
    const r = parseSums(text);
    if (!r.ok) throw new Error(r.reason);
    return r.sums;
  };
  t.match(sumsDisagreement(manifest, of(`${A}  a.db\n`)), /has 1 lines, the manifest 2 entries/, 'a missing line');
  t.match(sumsDisagreement(manifest, of(`${A}  a.db\n${B}  d/c.md\n`)), /does not list "d\/b\.md"/, 'another path');
  t.match(sumsDisagreement(manifest, of(`${A}  a.db\n${A}  d/b.md\n`)), /disagree on "d\/b\.md"/, 'another digest');
});

t.test('secret names: the defaults, lower-cased, and any patterns given', async (t) => {
  t.equal(DEFAULT_SECRET_PATTERNS.length, 4, "the seeds' four patterns");
  for (const p of [
    'secrets/x',
    'a/secret.md',
    'backup-key',
    'acp-token.txt',
    'auth.json',
    'deploy.PEM',
    'a.key',
    '.env',
    'api-token.txt',
    'Session.db',
    'x/credentials',
  ]) {
    t.ok(isSecretPath(p), `${p} is a secret`);
  }
  for (const p of ['decisions/keep.md', 'config.json', 'keys/readme.md']) t.notOk(isSecretPath(p), `${p} is not`);
  t.ok(isSecretPath('notes/private.md', [/private/]), 'the patterns given replace the defaults');
  t.notOk(isSecretPath('auth.json', []), 'no patterns, no secrets');
});

const bad: ReadonlyArray<readonly [string, unknown, RegExp]> = [
  ['not an object', 7, /^manifest \(top level\) /],
  ['a reserved host', { ...manifest, host: 'constructor' }, /^manifest \/host /],
  ['a reserved holder', { ...manifest, holder: 'prototype' }, /^manifest \/holder /],
  ['an unknown tier', { ...manifest, tier: 'all' }, /^manifest \/tier /],
  ['an unknown field', { ...manifest, extra: 1 }, /^manifest /],
  ['a date that is none', { ...manifest, createdAt: 'yesterday' }, /createdAt is not a date/],
  [
    'an unsafe path',
    { ...manifest, entries: [{ ...manifest.entries[0], path: '../x' }] },
    /path "\.\.\/x" may not hold/,
  ],
  ['a path twice', { ...manifest, entries: [manifest.entries[0], manifest.entries[0]] }, /lists "a\.db" twice/],
  [
    'a file under a file',
    { ...manifest, entries: [manifest.entries[0], { ...manifest.entries[1], path: 'a.db/x' }] },
    /"a\.db\/x" lies under a listed file/,
  ],
];

t.test('checkManifest: the one reader of every side', async (t) => {
  t.equal(checkManifest(manifest), manifest, 'a manifest is returned as is');
  t.ok(Value.Check(ManifestSchema, manifest), 'and matches the schema');
  t.same(
    checkManifest({ ...manifest, holder: null }),
    { ...manifest, holder: null },
    'a manifest made before any lease has no holder',
  );
  for (const [name, v, problem] of bad) t.match(checkManifest(v), problem, `${name} is refused, saying why`);
  t.same(parseManifest(formatManifest(manifest)), manifest, 'parseManifest reads what formatManifest wrote');
  t.equal(parseManifest('{'), 'MANIFEST.json is not valid JSON', 'text that is not JSON');
});
