/**
 * Physical paths for `hq guard`: symlinks resolved one component at a time (so a path that
 * does not exist yet still resolves through the links of its existing prefix), and an
 * "inside" test on the results. `..` is applied to the physical directory reached so far,
 * never lexically to the original text.
 */
import type { Stats } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { isAbsolute, resolve, sep } from 'node:path';

const MAX_LINKS = 40;

export async function physicalPath(input: string, cwd: string = process.cwd()): Promise<string> {
  // Never `resolve()` the input: it would apply `..` to the text before the links are read.
  const start = isAbsolute(input) ? input : `${cwd}${sep}${input}`;
  let pending = start.split(sep).filter((c) => c !== '');
  let current: string = sep;
  let links = 0;
  let missing = false;
  while (pending.length > 0) {
    const comp = pending.shift() as string;
    if (comp === '.') continue;
    if (comp === '..') {
      current = resolve(current, '..');
      continue;
    }
    const next = current === sep ? `${sep}${comp}` : `${current}${sep}${comp}`;
    if (missing) {
      current = next;
      continue;
    }
    let st: Stats;
    try {
      st = await lstat(next);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        missing = true; // the rest does not exist yet: nothing below can be a link
        current = next;
        continue;
      }
      throw err;
    }
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) throw new Error(`${input}: too many levels of symbolic links`);
      const target = await readlink(next);
      const parts = target.split(sep).filter((c) => c !== '');
      if (isAbsolute(target)) current = sep;
      pending = [...parts, ...pending];
      continue;
    }
    current = next;
  }
  return current;
}

export function isInside(child: string, parent: string): boolean {
  if (parent === sep) return true;
  return child === parent || child.startsWith(parent.endsWith(sep) ? parent : `${parent}${sep}`);
}
