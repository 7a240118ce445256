import t from 'tap';
import {
  applyEntries,
  decodeRecipeDelta,
  diffEntries,
  encodeRecipeDelta,
} from '../../apps/agent/src/replication/delta.js';
import { encodeRecipe } from '../../apps/agent/src/replication/chunks.js';
import type { Chunk, ManifestEntry } from '../../packages/protocol/src/index.js';

const entry = (path: string, c: string, reused = false): ManifestEntry => ({
  path,
  bytes: 10,
  sha256: c.repeat(64),
  kind: 'file',
  reused,
});
const chunk = (c: string, bytes = 4096): Chunk => ({ sha256: c.repeat(64), bytes });

t.test('a manifest rebuilt from its differences is the manifest, sorted by path', async (t) => {
  const base = [entry('a', '1'), entry('b', '2'), entry('c', '3')];
  const now = [entry('a', '1', true), entry('b', '4'), entry('d', '5')];
  const d = diffEntries(base, now);
  t.same(
    d,
    { changed: [entry('a', '1', true), entry('b', '4'), entry('d', '5')], removed: ['c'] },
    'a reused flag, a new digest and a new path differ; c is gone',
  );
  t.same(applyEntries(base, d?.changed ?? [], d?.removed ?? []), now, 'applied to the base it gives the entries back');
  t.same(diffEntries(base, base), { changed: [], removed: [] }, 'nothing differs from itself');
  t.equal(
    diffEntries(base, [entry('b', '2'), entry('a', '1')]),
    null,
    'entries not in path order cannot be sent as differences',
  );
});

t.test('a chunk list delta copies runs of the base and lists the rest', async (t) => {
  const base = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => chunk(c));
  const cases: [string, Chunk[]][] = [
    ['one chunk changed', [chunk('a'), chunk('b'), chunk('9'), chunk('d'), chunk('e'), chunk('f')]],
    ['chunks appended', [...base, chunk('7'), chunk('8', 100)]],
    [
      'a chunk inserted and one moved',
      [chunk('f'), chunk('a'), chunk('7'), chunk('b'), chunk('c'), chunk('d'), chunk('e')],
    ],
    ['nothing in common', [chunk('7'), chunk('8')]],
  ];
  for (const [name, chunks] of cases) {
    const bytes = chunks.reduce((n, c) => n + c.bytes, 0);
    const delta = encodeRecipeDelta(base, chunks);
    t.same(decodeRecipeDelta(base, delta, bytes), { ok: true, chunks }, `${name}: the delta rebuilds the list`);
  }
  const one = encodeRecipeDelta(base, cases[0]?.[1] ?? []);
  t.ok(
    one.length < encodeRecipe(base).length / 2,
    `one changed chunk costs ${one.length} bytes, not the list's ${encodeRecipe(base).length}`,
  );
});

t.test('a malformed delta is refused', async (t) => {
  const base = [chunk('a'), chunk('b')];
  const copy = (first: number, count: number) => {
    const b = Buffer.alloc(9);
    b.writeUInt32BE(first, 1);
    b.writeUInt32BE(count, 5);
    return b;
  };
  const bad: [string, Buffer, number, RegExp][] = [
    ['a run outside the base', copy(1, 5), 4096 * 5, /outside the base list of 2 chunks/],
    ['an unknown record', Buffer.from([7, 0, 0]), 4096, /no valid record at byte 0/],
    [
      'a listed run cut short',
      Buffer.concat([Buffer.from([1, 0, 0, 0, 2]), encodeRecipe([chunk('c')])]),
      8192,
      /cut short/,
    ],
    [
      'more chunks than the file can have',
      Buffer.concat(Array.from({ length: 40 }, () => copy(0, 2))),
      4096,
      /more chunks than a 4096-byte file/,
    ],
    ['a total that is not the file size', copy(0, 2), 4096, /add up to 8192 bytes/],
  ];
  for (const [name, delta, bytes, reason] of bad)
    t.match(decodeRecipeDelta(base, delta, bytes), { ok: false, reason }, `${name} is refused`);
});
