import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CDC_AVG_BYTES,
  CDC_MAX_BYTES,
  CDC_MIN_BYTES,
  Chunker,
  chunkFile,
  decodeRecipe,
  encodeRecipe,
  runsOf,
  SQLITE_CHUNK_BYTES,
  sqlitePageSize,
} from '../../apps/agent/src/replication/chunks.js';
import { backupSqlite } from '../../apps/agent/src/replication/snapshot.js';
import { sha256File } from '../../apps/agent/src/replication/manifest.js';
import { RECIPE_RECORD_BYTES, type Chunk } from '../../packages/protocol/src/index.js';
import { ledger, tmp, write } from './helpers.js';

function header(pageField: number): Buffer {
  const h = Buffer.alloc(100);
  h.write('SQLite format 3\0', 0, 'latin1');
  h.writeUInt16BE(pageField, 16);
  return h;
}

const pageSizes: [string, Buffer, number | null][] = [
  ['4096 is 4096', header(4096), 4096],
  ['512, the smallest page, is 512', header(512), 512],
  ['1 means 65536', header(1), 65536],
  ['0 is no page size', header(0), null],
  ['3000 (not a power of two) is no page size', header(3000), null],
  ['256 (below 512) is no page size', header(256), null],
  ['a header shorter than 18 bytes has none', Buffer.alloc(10), null],
];
for (const [name, h, want] of pageSizes) {
  t.test(`the SQLite page size: ${name}`, async (t) => {
    t.equal(sqlitePageSize(h), want, 'the page size read from offset 16');
  });
}

function chunkBuffer(buf: Buffer, kind: 'sqlite' | 'file', piece = 1 << 20) {
  const c = new Chunker(kind);
  for (let off = 0; off < buf.length; off += piece) c.update(buf.subarray(off, off + piece));
  return c.finish();
}

const shas = (cs: readonly Chunk[]) => cs.map((c) => c.sha256);

t.test('content-defined chunks are deterministic, bounded, and cover the file whatever the read sizes', async (t) => {
  const data = randomBytes(3 * 1024 * 1024);
  const a = chunkBuffer(data, 'file');
  const b = chunkBuffer(data, 'file', 7777);
  t.same(a.chunks, b.chunks, 'the same chunks whether read in 1 MiB or 7777-byte pieces');
  t.equal(a.bytes, data.length, 'the size is the file size');
  t.equal(
    a.chunks.reduce((n, c) => n + c.bytes, 0),
    data.length,
    'the chunks add up to the file',
  );
  t.ok(
    a.chunks.slice(0, -1).every((c) => c.bytes >= CDC_MIN_BYTES && c.bytes <= CDC_MAX_BYTES),
    'every chunk but the last is between the minimum and the maximum',
  );
  const avg = data.length / a.chunks.length;
  t.ok(
    avg > CDC_AVG_BYTES / 2 && avg < CDC_AVG_BYTES * 2,
    `the mean chunk (${Math.round(avg)} bytes) is near the target average`,
  );
});

t.test('an insertion moves only the content-defined boundaries near it', async (t) => {
  const data = randomBytes(4 * 1024 * 1024);
  const edited = Buffer.concat([
    data.subarray(0, 2_000_000),
    Buffer.from('a hundred bytes or so of new text inserted mid-file.'.repeat(2)),
    data.subarray(2_000_000),
  ]);
  const before = new Set(shas(chunkBuffer(data, 'file').chunks));
  const after = chunkBuffer(edited, 'file').chunks;
  const fresh = after.filter((c) => !before.has(c.sha256));
  t.ok(fresh.length <= 2, `at most two chunks are new after the insertion (${fresh.length} of ${after.length})`);
});

t.test('a SQLite backup is cut at every page, and an updated row changes one chunk', async (t) => {
  const base = tmp(t);
  const src = join(base, 'live.db');
  const db = ledger(src, 3000);
  await backupSqlite(src, join(base, 'one.db'));
  db.prepare('UPDATE rows SET payload = ? WHERE id = 1500').run(randomBytes(1000));
  db.pragma('wal_checkpoint(TRUNCATE)');
  await backupSqlite(src, join(base, 'two.db'));
  db.close();
  const one = await chunkFile(join(base, 'one.db'), 'sqlite');
  const two = await chunkFile(join(base, 'two.db'), 'sqlite');
  t.equal(one.sha256, (await sha256File(join(base, 'one.db'))).sha256, 'the file sha256 comes from the same pass');
  t.ok(
    one.chunks.every((c) => c.bytes === 4096),
    'every chunk is one 4096-byte page',
  );
  t.equal(one.chunks.length, one.bytes / 4096, 'one chunk per page');
  const changed = two.chunks.filter((c, i) => c.sha256 !== one.chunks[i]?.sha256).length;
  t.ok(changed >= 1 && changed <= 2, `one row updated changes one or two pages (${changed} of ${two.chunks.length})`);
  const asFile = chunkBuffer(readFileSync(join(base, 'one.db')), 'file');
  t.not(asFile.chunks.length, one.chunks.length, 'the same bytes as a plain file are cut by content instead');
});

t.test('a file that says SQLite but has no valid page size is cut by content; a tiny one is one chunk', async (t) => {
  const small = Buffer.concat([header(512), randomBytes(512 * 40 - 100)]);
  t.ok(
    chunkBuffer(small, 'sqlite').chunks.every((c) => c.bytes === SQLITE_CHUNK_BYTES),
    '512-byte pages are cut every 4 KiB (8 pages)',
  );
  const odd = Buffer.concat([header(3000), randomBytes(600_000)]);
  t.same(chunkBuffer(odd, 'sqlite').chunks, chunkBuffer(odd, 'file').chunks, 'no page size: content-defined chunks');
  const tiny = chunkBuffer(Buffer.from('SQLite'), 'sqlite');
  t.equal(tiny.chunks.length, 1, 'a six-byte file is one chunk');
  t.equal(chunkBuffer(Buffer.alloc(0), 'file').chunks.length, 0, 'an empty file has no chunks');
});

t.test('a chunk list encodes to 36 bytes a chunk and reads back; malformed lists are refused', async (t) => {
  const chunks = chunkBuffer(randomBytes(500_000), 'file').chunks;
  const buf = encodeRecipe(chunks);
  t.equal(buf.length, chunks.length * RECIPE_RECORD_BYTES, '36 bytes per chunk');
  t.same(decodeRecipe(buf, 500_000), { ok: true, chunks }, 'the list reads back');
  const bad: [string, Buffer, number, RegExp][] = [
    ['a length that is not a multiple of 36', buf.subarray(0, 35), 500_000, /multiple of 36/],
    ['a total that is not the file size', buf, 500_001, /add up to 500000 bytes, the file is 500001/],
    ['a zero-length chunk', encodeRecipe([{ sha256: 'a'.repeat(64), bytes: 0 }]), 0, /chunk 0 is 0 bytes/],
    [
      'a chunk over 1 MiB',
      encodeRecipe([{ sha256: 'a'.repeat(64), bytes: 2 * 1024 * 1024 }]),
      2 * 1024 * 1024,
      /chunk 0 is 2097152 bytes/,
    ],
    [
      'a short chunk before the last',
      encodeRecipe([
        { sha256: 'a'.repeat(64), bytes: 100 },
        { sha256: 'b'.repeat(64), bytes: 100 },
      ]),
      200,
      /only the last may be under 512/,
    ],
  ];
  for (const [name, b, size, reason] of bad) {
    const r = decodeRecipe(b, size);
    t.match(r, { ok: false, reason }, `${name} is refused`);
  }
});

t.test('runsOf turns flags into [first, count] runs', async (t) => {
  t.same(runsOf([]), [], 'none');
  t.same(
    runsOf([true, true, false, true, false, false, true, true, true]),
    [
      [0, 2],
      [3, 1],
      [6, 3],
    ],
    'three runs',
  );
});

t.test('chunkFile reads a file from disk like the streaming chunker', async (t) => {
  const base = tmp(t);
  const data = randomBytes(1_500_000);
  const p = write(base, 'x.bin', data);
  t.same((await chunkFile(p, 'file')).chunks, chunkBuffer(data, 'file').chunks, 'the same chunks');
});
