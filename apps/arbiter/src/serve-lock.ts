/**
 * One daemon per database. `hq-arbiter serve` holds `{dataDir}/arbiter.lock` for its whole life:
 * a file created exclusively (O_CREAT|O_EXCL, 0600) holding the daemon's PID. A second `serve`
 * on the same dataDir finds the file, sees the PID alive and refuses to start (two daemons would
 * run their own check loops and promote on their own). No flock: it is advisory, differs between
 * platforms and is lost silently on some network filesystems; a PID file is visible and explains
 * itself.
 *
 * Only `serve` takes the lock. `hq-arbiter check`, `token …` and `backup` share the database
 * with a running daemon on purpose (SQLite serializes their writes; `check` waits for the
 * daemon's running check), so they never look at it.
 *
 * A lock whose PID is dead (a crash, a power cut) — or is this process's own PID (a container
 * restarted with the same PID) — is stale and taken over: moved aside atomically (only one of
 * two racing starters gets it), then created afresh.
 */
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'arbiter.lock';

/** The start is refused: another daemon holds the lock. Exit 2, one line. */
export class LockError extends Error {}

export interface ServeLock {
  readonly path: string;
  /** Removes the lock when it is still ours. Idempotent. */
  release(): void;
}

/** Whether `pid` names a running process (EPERM: it runs, as another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPid(path: string): number | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return null;
  }
  const m = /^([1-9][0-9]{0,9})\n?$/.exec(text);
  return m === null ? null : Number(m[1]);
}

function createExclusive(path: string, pid: number): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, `${pid}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Takes the lock for `pid` (default: this process), or throws `LockError` naming the holder.
 * `alive` is a parameter for tests.
 */
export function takeServeLock(
  dataDir: string,
  opts: { pid?: number; alive?: (pid: number) => boolean } = {},
): ServeLock {
  const pid = opts.pid ?? process.pid;
  const alive = opts.alive ?? pidAlive;
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, LOCK_FILE);
  const refuse = (holder: number | null): never => {
    throw new LockError(
      holder === null
        ? `${path} is held by another hq-arbiter starting on ${dataDir}; try again, or remove the file if no hq-arbiter runs`
        : `another hq-arbiter (pid ${holder}) serves ${dataDir} (lock ${path}); stop it first, or remove the lock if pid ${holder} is not an hq-arbiter`,
    );
  };
  // Three rounds: a lost race with another starter is retried, never looped on.
  for (let round = 0; round < 3; round++) {
    if (createExclusive(path, pid)) return lockAt(path, pid);
    const holder = readPid(path);
    if (holder !== null && holder !== pid && alive(holder)) refuse(holder);
    if (holder === null) {
      // Being written right now by another starter, or garbage; give a writer a moment once.
      if (round === 0) continue;
    }
    // Stale: move it aside (atomic; a racer moving the same file gets ENOENT), then check that
    // what we moved is the stale lock we judged and not a racer's fresh one.
    const aside = `${path}.stale.${pid}`;
    try {
      renameSync(path, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    const moved = readPid(aside);
    if (moved !== holder && moved !== null && moved !== pid && alive(moved)) {
      // A racer's live lock: put it back (link fails if yet another lock appeared) and refuse.
      try {
        linkSync(aside, path);
      } catch {
        // someone else holds the path now; they are the daemon
      }
      unlinkSync(aside);
      refuse(moved);
    }
    unlinkSync(aside);
  }
  return refuse(readPid(path));
}

function lockAt(path: string, pid: number): ServeLock {
  let released = false;
  return {
    path,
    release() {
      if (released) return;
      released = true;
      try {
        if (readPid(path) === pid) unlinkSync(path);
      } catch {
        // already gone
      }
    },
  };
}
