import t from 'tap';
import {
  PROTOCOL_1_RELEASE,
  PROTOCOL_HEADER,
  PROTOCOL_PREVIOUS,
  PROTOCOL_UNSTATED,
  PROTOCOL_VERSION,
  REQUEST_FIELDS,
  fieldsAfter,
  hostVersionText,
  servesVersion,
  spokenVersion,
  upgradeNote,
  versionRefusal,
} from '../../packages/protocol/src/version.js';
import * as root from '../../packages/protocol/src/index.js';

t.test('this release speaks protocol 2 and serves 1 (hq 0.1.x, which sends no header)', async (t) => {
  t.equal(PROTOCOL_VERSION, 2, 'protocol 2');
  t.equal(PROTOCOL_PREVIOUS, 1, 'the previous one is still served');
  t.equal(PROTOCOL_UNSTATED, 1, 'no header is protocol 1');
  t.equal(PROTOCOL_HEADER, 'hq-protocol', 'the header, lower case');
  t.equal(PROTOCOL_1_RELEASE, '0.1', 'protocol 1 is hq 0.1.x');
  t.equal(root.PROTOCOL_VERSION, PROTOCOL_VERSION, 'the package root exports the version subpath');
  t.ok(Object.isFrozen(REQUEST_FIELDS) && REQUEST_FIELDS.every((f) => Object.isFrozen(f)), 'the field list is frozen');
});

const spoken: ReadonlyArray<readonly [string, string | string[] | undefined, ReturnType<typeof spokenVersion>]> = [
  ['no header is protocol 1', undefined, { ok: true, version: 1 }],
  ['"2" is 2', '2', { ok: true, version: 2 }],
  ['surrounding blanks are allowed', ' 1 ', { ok: true, version: 1 }],
  ['a future version is a version', '3', { ok: true, version: 3 }],
  ['0 is a version (not served)', '0', { ok: true, version: 0 }],
  ['a word is not', 'two', { ok: false, given: 'two' }],
  ['a sign is not', '-1', { ok: false, given: '-1' }],
  ['a fraction is not', '2.0', { ok: false, given: '2.0' }],
  ['an empty header is not', '', { ok: false, given: '' }],
  ['seven digits are not', '1000000', { ok: false, given: '1000000' }],
  ['two headers are not', ['1', '2'], { ok: false, given: '1, 2' }],
];
for (const [name, header, want] of spoken) {
  t.test(`spokenVersion: ${name}`, async (t) =>
    t.same(spokenVersion(header), want, `${JSON.stringify(header)} → ${JSON.stringify(want)}`),
  );
}

t.test('servesVersion: its own and the previous one, nothing else', async (t) => {
  t.same([0, 1, 2, 3].map(servesVersion), [false, true, true, false], '1 and 2 only');
});

t.test('a refusal names both versions and what to upgrade', async (t) => {
  t.equal(
    versionRefusal({ ok: true, version: 3 }, 'hq-arbiter on cloud-vm'),
    'the request speaks hq protocol 3, newer than hq-arbiter on cloud-vm speaks hq protocol 1 to 2: upgrade hq-arbiter on cloud-vm',
    'a newer sender: upgrade this side',
  );
  t.equal(
    versionRefusal({ ok: true, version: 0 }, 'hq-agent on mbp'),
    "the request speaks hq protocol 0, older than hq-agent on mbp speaks hq protocol 1 to 2: upgrade the sender's hq",
    'an older sender: upgrade it',
  );
  t.equal(
    versionRefusal({ ok: false, given: 'x'.repeat(60) }, 'hq-agent on mbp'),
    `hq-protocol: "${'x'.repeat(40)}" is not a protocol version (one integer); hq-agent on mbp speaks hq protocol 1 to 2`,
    'garbage, clipped',
  );
});

t.test('the heartbeat gained the agent release in protocol 2; a protocol 1 request may not carry it', async (t) => {
  t.same(fieldsAfter(1, 'POST /v1/heartbeat'), ['version', 'peerPaths'], 'protocol 1: no version field, no peer paths');
  t.same(fieldsAfter(2, 'POST /v1/heartbeat'), [], 'protocol 2: every field');
  t.same(fieldsAfter(1, 'POST /v1/lease/acquire'), [], 'acquire is unchanged');
  t.match(REQUEST_FIELDS[0]?.absent, /hq 0\.1\.x/, 'its absence is documented');
  t.match(REQUEST_FIELDS.find((f) => f.field === 'peerPaths')?.absent, /shows none/, "the peer paths' absence too");
});

t.test(
  "the old holder's ran came with protocol 2: left out for an hq 0.1 arbiter, whose release and ack know no such field",
  async (t) => {
    t.same(fieldsAfter(1, 'POST /v1/lease/release'), ['ran'], 'a protocol 1 release carries no ran');
    t.same(fieldsAfter(1, 'POST /v1/lease/stepped-down'), ['ran'], 'nor a protocol 1 acknowledgement');
    t.same(fieldsAfter(2, 'POST /v1/lease/release'), [], 'protocol 2: every field');
  },
);

t.test('how a host reads to the operator', async (t) => {
  t.equal(hostVersionText(1, null), 'hq 0.1 (protocol 1)', 'protocol 1 never says its release');
  t.equal(hostVersionText(2, '0.2.0'), 'hq 0.2.0 (protocol 2)', 'protocol 2 does');
  t.equal(hostVersionText(2, null), 'hq ? (protocol 2)', 'a release not said');
  t.equal(upgradeNote('mbp', 1, null), 'mbp runs hq 0.1 (protocol 1); upgrade it', 'a host behind is told to upgrade');
  t.equal(upgradeNote('mbp', 2, '0.2.0'), null, 'a current host is not');
});
