/**
 * State files: atomic writes (async and sync) with their modes and no temp file left behind,
 * private directories, and reads that refuse what could have been planted.
 */
import t from 'tap';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { missingTool } from '../missing-tool.js';
import { ensureDir, mkdirPrivate, readSecure, writeAtomic, writeAtomicSync } from '../../packages/runtime/src/files.js';

function scratch(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hq-files-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function underUmask<T>(mask: number, fn: () => Promise<T> | T): Promise<T> {
  const old = process.umask(mask);
  try {
    return await fn();
  } finally {
    process.umask(old);
  }
}

const WRITERS = [
  ['writeAtomic', writeAtomic],
  ['writeAtomicSync', writeAtomicSync],
] as const;

for (const [name, write] of WRITERS) {
  t.test(`${name} writes mode 0600 whatever the umask and leaves no temp file`, async (t) => {
    const dir = scratch(t);
    await underUmask(0, async () => {
      await write(join(dir, 'f'), 'one\n');
      await write(join(dir, 'f'), 'two\n');
    });
    t.equal(statSync(join(dir, 'f')).mode & 0o777, 0o600, 'the file is 0600 under umask 0');
    t.equal(readFileSync(join(dir, 'f'), 'utf8'), 'two\n', 'the last write wins');
    t.same(readdirSync(dir), ['f'], 'no temp file is left behind');
    await underUmask(0o077, () => write(join(dir, 'g'), new Uint8Array([1, 2]), 0o640));
    t.equal(
      statSync(join(dir, 'g')).mode & 0o777,
      0o640,
      'a mode the caller asks for is set even where the umask would narrow it',
    );
  });

  t.test(`${name} that cannot rename removes its temp file and keeps the old content`, async (t) => {
    const dir = scratch(t);
    mkdirSync(join(dir, 'target'));
    writeFileSync(join(dir, 'target', 'inside'), 'old');
    await t.rejects(async () => write(join(dir, 'target'), 'new'), 'renaming over a non-empty directory fails');
    t.same(readdirSync(dir), ['target'], 'the temp file is gone');
    t.equal(readFileSync(join(dir, 'target', 'inside'), 'utf8'), 'old', 'what was there is untouched');
  });
}

t.test('mkdirPrivate makes every level 0700, the existing one included', async (t) => {
  const dir = scratch(t);
  await underUmask(0, () => mkdirPrivate(join(dir, 'a', 'b')));
  t.equal(statSync(join(dir, 'a')).mode & 0o777, 0o700, 'a created parent is 0700');
  t.equal(statSync(join(dir, 'a', 'b')).mode & 0o777, 0o700, 'the directory is 0700');
  mkdirSync(join(dir, 'loose'), { mode: 0o755 });
  chmodSync(join(dir, 'loose'), 0o755);
  await mkdirPrivate(join(dir, 'loose'));
  t.equal(statSync(join(dir, 'loose')).mode & 0o777, 0o700, 'a 0755 directory is tightened');
});

t.test('ensureDir creates 0700 and tightens a looser directory', async (t) => {
  const dir = scratch(t);
  t.equal(await ensureDir(join(dir, 'state'), 0o700), null, 'a new directory is accepted');
  t.equal(statSync(join(dir, 'state')).mode & 0o777, 0o700, 'it is created 0700');
  mkdirSync(join(dir, 'loose'), { mode: 0o755 });
  chmodSync(join(dir, 'loose'), 0o755);
  await ensureDir(join(dir, 'loose'), 0o700);
  t.equal(statSync(join(dir, 'loose')).mode & 0o777, 0o700, 'a 0755 directory is tightened to 0700');
  symlinkSync(join(dir, 'state'), join(dir, 'link'));
  t.match(await ensureDir(join(dir, 'link'), 0o700), /symlink/, 'a symlinked directory is refused');
});

t.test('readSecure refuses what could have been planted', async (t) => {
  const dir = scratch(t);
  const write = (name: string, mode: number): string => {
    const p = join(dir, name);
    writeFileSync(p, '5\n', { mode });
    chmodSync(p, mode);
    return p;
  };
  t.equal((await readSecure(join(dir, 'nope'))).kind, 'missing', 'a missing file is missing, not refused');
  t.match(await readSecure(write('ok', 0o600)), { kind: 'ok', text: '5\n', size: 2 }, 'a 0600 file of ours is read');
  t.match(
    await readSecure(write('gw', 0o620)),
    { kind: 'refused', problem: /writable/ },
    'a group-writable file is refused',
  );
  t.match(
    await readSecure(write('ww', 0o602)),
    { kind: 'refused', problem: /writable/ },
    'a world-writable file is refused',
  );
  t.match(
    await readSecure(write('gr', 0o640), { secret: true }),
    { kind: 'refused', problem: /must be mode 0600/ },
    'a group-readable secret is refused',
  );
  t.match(
    await readSecure(write('big', 0o600), { maxBytes: 1 }),
    { kind: 'refused', problem: /larger than 1 bytes/ },
    'a file above maxBytes is refused',
  );
  symlinkSync(join(dir, 'ok'), join(dir, 'sl'));
  t.match(
    await readSecure(join(dir, 'sl')),
    { kind: 'refused', problem: /symlink/ },
    'a symlink is refused, not followed',
  );
  mkdirSync(join(dir, 'd'));
  t.match(await readSecure(join(dir, 'd')), { kind: 'refused', problem: /regular/ }, 'a directory is refused');
  if (process.getuid?.() === 0) {
    const f = write('foreign', 0o600);
    chownSync(f, 12345, 12345);
    t.match(
      await readSecure(f),
      { kind: 'refused', problem: /owned by uid 12345/ },
      'a file owned by another user is refused',
    );
  } else {
    missingTool(t, 'foreign ownership needs root to set up; checked where the tests run as root (CI)');
  }
});
