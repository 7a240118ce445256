import t from 'tap';
import { decideRole, leaseOf, parseDefaultSource } from '../../apps/agent/src/replication/role.js';

type Lease = { holder: string | null; generation: number } | null;

const table: readonly [string, string, readonly string[], Lease, number, string, string][] = [
  ['a lease held by this host runs the copy fenced', 'mbp', ['mbp'], { holder: 'mbp', generation: 3 }, 3, 'fenced', 'lease-exists'],
  ['a lease held by the other host runs the copy fenced (the fence skips it)', 'mbp', ['mbp'], { holder: 'node-b', generation: 4 }, 4, 'fenced', 'lease-exists'],
  ['a released lease (no holder, generation 5) still runs fenced', 'node-b', ['mbp'], { holder: null, generation: 5 }, 5, 'fenced', 'lease-exists'],
  ['an unreadable lease skips: never copy blind', 'mbp', ['mbp'], null, 0, 'skip', 'lease-unreadable'],
  ['an unreadable lease skips even on the default source after a generation was seen', 'mbp', ['mbp'], null, 7, 'skip', 'lease-unreadable'],
  ['no lease yet on the default source copies directly', 'mbp', ['mbp'], { holder: null, generation: 0 }, 0, 'direct', 'no-lease-default-source'],
  ['no lease yet on an alias of the default source copies directly', 'macbookprom5', ['mbp', 'macbookprom5'], { holder: null, generation: 0 }, 0, 'direct', 'no-lease-default-source'],
  ['no lease yet on another host skips', 'node-b', ['mbp', 'macbookprom5'], { holder: null, generation: 0 }, 0, 'skip', 'no-lease-not-default'],
  ['no lease after a generation was seen skips (a wiped arbiter must not turn the old source back on)', 'mbp', ['mbp'], { holder: null, generation: 0 }, 4, 'skip', 'no-lease-after-seen'],
  ['names are compared exactly: no case folding', 'mbp', ['MBP'], { holder: null, generation: 0 }, 0, 'skip', 'no-lease-not-default'],
];

for (const [name, host, defaultSource, lease, seen, role, reason] of table) {
  t.test(name, async (t) => {
    const a = decideRole({ host, defaultSource, lease, seenGeneration: seen });
    t.equal(a.role, role, `the role is ${role}`);
    t.equal(a.reason, reason, `the reason is ${reason}`);
    t.equal(a.host, host, 'the answer names this host');
    t.equal(a.holder, lease?.holder ?? null, 'the answer carries the holder it saw');
  });
}

t.test('--default-source takes a host and its aliases, and nothing else', async (t) => {
  t.same(parseDefaultSource('mbp'), ['mbp'], 'one host');
  t.same(parseDefaultSource('mbp,macbookprom5'), ['mbp', 'macbookprom5'], 'a host and an alias');
  t.type(parseDefaultSource(''), 'string', 'an empty value is refused');
  t.type(parseDefaultSource('mbp,'), 'string', 'an empty alias is refused');
  t.type(parseDefaultSource('MBP'), 'string', 'an upper-case name is not a host');
  t.type(parseDefaultSource('constructor'), 'string', 'constructor is never a host');
});

t.test("the arbiter's record is read strictly; anything odd is an unreadable lease", async (t) => {
  t.same(leaseOf({ holder: 'mbp', generation: 3, revision: 9 }), { holder: 'mbp', generation: 3 }, 'a record gives holder and generation');
  t.same(leaseOf({ holder: null, generation: 0 }), { holder: null, generation: 0 }, 'a never-granted record reads as no lease');
  t.equal(leaseOf({ holder: 'mbp', generation: '3' }), null, 'a generation as text is unreadable');
  t.equal(leaseOf({ holder: 'Not A Host', generation: 3 }), null, 'a holder that is not a host is unreadable');
  t.equal(leaseOf({ holder: 'mbp', generation: -1 }), null, 'a negative generation is unreadable');
  t.equal(leaseOf(null), null, 'no body is unreadable');
});
