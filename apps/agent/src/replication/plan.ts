/**
 * What one tier of a snapshot holds, read from the state directory as it is now.
 *
 * Canonical items (`plan.files`, and the files under `plan.dirs`) go to `core` when the file is
 * at most `smallBytes`, else to `big`; `plan.obs` goes to `obs`. Never planned: symlinks (at any
 * depth; a listed path whose parent is a link too), anything but a regular file, SQLite side
 * files (`-wal`, `-shm`, `-journal`) and `.tmp` / `.lock` files. A file is SQLite when it
 * starts with the SQLite header, whatever its name: such a file is never copied live.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isSecretPath, type Tier } from '@hq/protocol';
import type { PlanItem, ReplicationConfig } from './config.js';

export interface Planned {
  readonly path: string;
  readonly abs: string;
  readonly kind: 'sqlite' | 'file';
  readonly bytes: number;
  /** May go to survival copies: the plan says so and it is not a secret. */
  readonly survival: boolean;
  readonly secret: boolean;
}

export interface Skipped {
  readonly path: string;
  readonly why: 'symlink' | 'not-a-file' | 'side-file' | 'missing';
}

export interface Plan {
  readonly tier: Tier;
  readonly items: readonly Planned[];
  readonly skipped: readonly Skipped[];
}

const SIDE_FILE = /(-wal|-shm|-journal|\.tmp|\.lock)$/;
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

export function isSideFile(name: string): boolean {
  return SIDE_FILE.test(name);
}

async function isSqlite(abs: string): Promise<boolean> {
  const fh = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buf = Buffer.alloc(16);
    const { bytesRead } = await fh.read(buf, 0, 16, 0);
    return bytesRead === 16 && buf.equals(SQLITE_MAGIC);
  } finally {
    await fh.close();
  }
}

/** lstat every component below `root`; the reason it cannot be used, or the stat of the last. */
async function walkStat(
  root: string,
  rel: string,
): Promise<{ ok: true; size: number } | { ok: false; why: Skipped['why'] }> {
  const parts = rel.split('/');
  let cur = root;
  for (const [i, part] of parts.entries()) {
    cur = join(cur, part);
    let st: Stats;
    try {
      st = await lstat(cur);
    } catch {
      return { ok: false, why: 'missing' };
    }
    if (st.isSymbolicLink()) return { ok: false, why: 'symlink' };
    if (i < parts.length - 1 ? !st.isDirectory() : !st.isFile()) return { ok: false, why: 'not-a-file' };
    if (i === parts.length - 1) return { ok: true, size: st.size };
  }
  return { ok: false, why: 'missing' };
}

async function walkDir(root: string, rel: string, out: string[], skipped: Skipped[]): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(join(root, rel))).sort();
  } catch {
    return;
  }
  for (const name of names) {
    const child = `${rel}/${name}`;
    const st = await lstat(join(root, child));
    if (st.isSymbolicLink()) skipped.push({ path: child, why: 'symlink' });
    else if (st.isDirectory()) await walkDir(root, child, out, skipped);
    else if (!st.isFile()) skipped.push({ path: child, why: 'not-a-file' });
    else if (isSideFile(name)) skipped.push({ path: child, why: 'side-file' });
    else out.push(child);
  }
}

/** The plan of one tier. */
export async function planTier(cfg: ReplicationConfig, tier: Tier): Promise<Plan> {
  const root = cfg.stateDir;
  const skipped: Skipped[] = [];
  const chosen = new Map<string, PlanItem>();
  const consider = (rel: string, item: PlanItem) => {
    if (!chosen.has(rel)) chosen.set(rel, item);
  };
  const lists = tier === 'obs' ? [cfg.obs] : [cfg.files];
  for (const list of lists) {
    for (const item of list) {
      const name = item.path.split('/').pop() as string;
      if (isSideFile(name)) skipped.push({ path: item.path, why: 'side-file' });
      else consider(item.path, item);
    }
  }
  if (tier !== 'obs') {
    for (const item of cfg.dirs) {
      // Every component must be a real directory (a linked directory is skipped whole).
      const parts = item.path.split('/');
      let ok = true;
      let cur = root;
      for (const part of parts) {
        cur = join(cur, part);
        const st = await lstat(cur).catch(() => null);
        if (st === null || st.isSymbolicLink() || !st.isDirectory()) {
          ok = false;
          if (st?.isSymbolicLink()) skipped.push({ path: item.path, why: 'symlink' });
          break;
        }
      }
      if (!ok) continue;
      const files: string[] = [];
      await walkDir(root, item.path, files, skipped);
      for (const f of files) {
        const below = f.slice(item.path.length + 1);
        if (item.match === null || item.match.test(below)) consider(f, item);
      }
    }
  }
  const items: Planned[] = [];
  for (const [rel, item] of chosen) {
    const st = await walkStat(root, rel);
    if (!st.ok) {
      if (st.why !== 'missing') skipped.push({ path: rel, why: st.why });
      continue;
    }
    if (tier !== 'obs') {
      const big = st.size > cfg.smallBytes;
      if ((tier === 'big') !== big) continue;
    }
    const abs = join(root, rel);
    const secret = isSecretPath(rel, cfg.secretPatterns);
    items.push({
      path: rel,
      abs,
      kind: (await isSqlite(abs)) ? 'sqlite' : 'file',
      bytes: st.size,
      survival: item.survival && !secret,
      secret,
    });
  }
  items.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { tier, items, skipped };
}
