/**
 * Generations of a tier on disk: each `{tierRoot}/{generation}/` is built in a hidden folder and
 * renamed into place, then the `latest` link beside them moves with one rename (both fsync'd), so
 * a reader sees the old generation or the new one, never half of either. The agent's outbox and
 * standby copy and the arbiter's survival copies all publish and prune through here.
 */
import { lstat, readdir, readlink, rename, rm, symlink, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { GENERATION_RE } from '@hq/protocol';
import { fsyncDir, tempBeside } from './files.js';

/** Points `link` at `target` (a name in the same folder) with one rename. */
export async function swapLink(link: string, target: string): Promise<void> {
  const tmp = tempBeside(link);
  await symlink(target, tmp);
  try {
    await rename(tmp, link);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fsyncDir(dirname(link));
}

/** The target of a `latest` link when it is a link, else null. */
export async function readLatest(link: string): Promise<string | null> {
  try {
    const st = await lstat(link);
    if (!st.isSymbolicLink()) return null;
    return await readlink(link);
  } catch {
    return null;
  }
}

/** The generation `{tierRoot}/latest` names when it names one, else null. */
export async function latestGeneration(tierRoot: string): Promise<string | null> {
  const name = await readLatest(join(tierRoot, 'latest'));
  return name !== null && GENERATION_RE.test(name) ? name : null;
}

/** The generation folders of a tier, oldest first (none when the tier folder is missing). */
export async function listGenerations(tierRoot: string): Promise<string[]> {
  return (await readdir(tierRoot).catch(() => [] as string[])).filter((n) => GENERATION_RE.test(n)).sort();
}

/** What `latest` points at and the generations kept, as the status answers show a tier. */
export async function tierListing(tierRoot: string): Promise<{ latest: string | null; generations: string[] }> {
  return { latest: await readLatest(join(tierRoot, 'latest')), generations: await listGenerations(tierRoot) };
}

/**
 * Renames the whole folder `built` to `{tierRoot}/{generation}` and moves `latest` to it.
 * `beforeLatest` runs once the folder is in place and before `latest` moves (files that belong
 * beside the generation and must exist whenever `latest` names it).
 */
export async function publishGeneration(
  tierRoot: string,
  generation: string,
  built: string,
  beforeLatest?: () => Promise<void>,
): Promise<void> {
  await rename(built, join(tierRoot, generation));
  await fsyncDir(tierRoot);
  await beforeLatest?.();
  await swapLink(join(tierRoot, 'latest'), generation);
}

/** Removes all but the newest `keep` generations, never `latest`; returns the names removed and kept. */
export async function pruneGenerations(
  tierRoot: string,
  keep: number,
  latest: string,
): Promise<{ removed: string[]; kept: string[] }> {
  const names = await listGenerations(tierRoot);
  const removed = names.slice(0, Math.max(0, names.length - keep)).filter((n) => n !== latest);
  for (const n of removed) await rm(join(tierRoot, n), { recursive: true, force: true });
  return { removed, kept: names.filter((n) => !removed.includes(n)) };
}
