/**
 * State files on disk, for every daemon and the CLI. Writes are atomic and durable: a temp file
 * in the same directory (0600 unless told, O_EXCL, never through a link), write, chmod (the
 * umask may have narrowed the mode), fsync, rename over the target, fsync the directory — after
 * a crash the file is either the old or the new content, never half of either, and a failed
 * write removes its temp file. Private directories are 0700. Reads are suspicious: a symlink, a
 * file owned by another user, a group/world-writable file, or anything but a plain file is
 * refused (the caller fails closed), never followed.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  openSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { chmod, lstat, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';

export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

export type ReadResult =
  | { readonly kind: 'ok'; readonly text: string; readonly mtimeMs: number; readonly size: number }
  | { readonly kind: 'missing' }
  | { readonly kind: 'refused'; readonly problem: string };

function uid(): number | null {
  return typeof process.getuid === 'function' ? process.getuid() : null;
}

export interface ReadOptions {
  /** Refuse a file readable by group or others (token files: must be 0600). */
  readonly secret?: boolean;
  /** Largest size accepted, bytes. */
  readonly maxBytes?: number;
}

/** Reads a state file, refusing anything that could have been planted or tampered with. */
export async function readSecure(path: string, options: ReadOptions = {}): Promise<ReadResult> {
  let st: Stats;
  try {
    st = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'refused', problem: `cannot stat: ${(err as NodeJS.ErrnoException).code ?? 'error'}` };
  }
  if (st.isSymbolicLink()) return { kind: 'refused', problem: 'is a symlink' };
  if (!st.isFile()) return { kind: 'refused', problem: 'is not a regular file' };
  const me = uid();
  if (me !== null && st.uid !== me) return { kind: 'refused', problem: `is owned by uid ${st.uid}, not ${me}` };
  if ((st.mode & 0o022) !== 0)
    return { kind: 'refused', problem: `is group- or world-writable (mode ${(st.mode & 0o777).toString(8)})` };
  if (options.secret === true && (st.mode & 0o077) !== 0) {
    return { kind: 'refused', problem: `must be mode 0600 (is ${(st.mode & 0o777).toString(8).padStart(4, '0')})` };
  }
  const max = options.maxBytes ?? 1 << 20;
  if (st.size > max) return { kind: 'refused', problem: `is larger than ${max} bytes` };
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    return { kind: 'refused', problem: `cannot open: ${(err as NodeJS.ErrnoException).code ?? 'error'}` };
  }
  try {
    const st2 = await fh.stat();
    // The file we opened must be the one we checked (no swap in between).
    if (st2.ino !== st.ino || st2.dev !== st.dev) return { kind: 'refused', problem: 'changed while being read' };
    const text = await fh.readFile('utf8');
    return { kind: 'ok', text, mtimeMs: st2.mtimeMs, size: st2.size };
  } finally {
    await fh.close();
  }
}

/** The temp file beside `path` (same directory, so the rename is atomic); hidden, unique. */
export function tempBeside(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Atomic, durable write with mode `mode` (default 0600). */
export async function writeAtomic(path: string, data: string | Uint8Array, mode = FILE_MODE): Promise<void> {
  const tmp = tempBeside(path);
  const fh = await open(tmp, CREATE_NEW, mode);
  try {
    try {
      await fh.writeFile(data); // strings as UTF-8
      await fh.chmod(mode);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fsyncDir(dirname(path));
}

/**
 * `writeAtomic` for a caller that cannot wait (the arbiter's start-up, before it listens). The
 * directory's fsync is best effort here, as it always was for the admin token.
 */
export function writeAtomicSync(path: string, data: string | Uint8Array, mode = FILE_MODE): void {
  const tmp = tempBeside(path);
  const fd = openSync(tmp, CREATE_NEW, mode);
  try {
    try {
      writeFileSync(fd, data);
      fchmodSync(fd, mode);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw err;
  }
  try {
    const dfd = openSync(dirname(path), constants.O_RDONLY);
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // Directory fsync is not supported everywhere.
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  const dh = await open(dir, constants.O_RDONLY);
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}

/** mkdir -p with 0700 on every directory it creates, and on `dir` itself. */
export async function mkdirPrivate(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  await chmod(dir, DIR_MODE);
}

/**
 * Makes sure `dir` exists as a real directory owned by this user with exactly `mode`.
 * Returns a problem string instead of throwing for a directory it must not use.
 */
export async function ensureDir(dir: string, mode: number): Promise<string | null> {
  await mkdir(dir, { recursive: true, mode });
  const st = await lstat(dir);
  if (st.isSymbolicLink()) return `${dir} is a symlink`;
  if (!st.isDirectory()) return `${dir} is not a directory`;
  const me = uid();
  if (me !== null && st.uid !== me) return `${dir} is owned by uid ${st.uid}, not ${me}`;
  if ((st.mode & 0o777) !== mode) await chmod(dir, mode);
  return null;
}
