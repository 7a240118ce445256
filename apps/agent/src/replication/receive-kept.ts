/**
 * What this standby keeps, read for a push: the manifest of a tier's `latest` or of any kept
 * generation, the files of the kept generations by content (what a push need not send), and
 * the garbage collection of the chunk lists no kept generation names any more.
 */
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { latestGeneration, listGenerations } from '@hq/runtime/generations';
import { TIERS, type Manifest, type Tier } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import type { ReceiverState } from './receive-state.js';

/** The manifest of a tier's `latest`, or null. */
export async function latestManifest(st: ReceiverState, tier: Tier): Promise<Manifest | null> {
  const tierRoot = join(st.opts.standbyDir, tier);
  const name = await latestGeneration(tierRoot);
  if (name === null) return null;
  try {
    const m = parseManifest(await readFile(join(tierRoot, name, 'MANIFEST.json'), 'utf8'));
    return typeof m === 'string' ? null : m;
  } catch {
    return null;
  }
}

/** The manifest of a kept generation of a tier, or null. */
export async function keptManifest(st: ReceiverState, tier: Tier, generation: string): Promise<Manifest | null> {
  try {
    const s = await lstat(join(st.opts.standbyDir, tier, generation));
    if (!s.isDirectory()) return null;
    const m = parseManifest(await readFile(join(st.opts.standbyDir, tier, generation, 'MANIFEST.json'), 'utf8'));
    return typeof m === 'string' || m.tier !== tier || m.generation !== generation ? null : m;
  } catch {
    return null;
  }
}

/** sha256 → a file of a kept generation holding it (its manifest says so; verified at commit). */
export async function heldFiles(st: ReceiverState): Promise<Map<string, { abs: string; bytes: number }>> {
  const idx = new Map<string, { abs: string; bytes: number }>();
  for (const t of TIERS) {
    const tierRoot = join(st.opts.standbyDir, t);
    for (const n of (await listGenerations(tierRoot)).reverse()) {
      try {
        const m = parseManifest(await readFile(join(tierRoot, n, 'MANIFEST.json'), 'utf8'));
        if (typeof m === 'string') continue;
        for (const e of m.entries)
          if (!idx.has(e.sha256)) idx.set(e.sha256, { abs: join(tierRoot, n, e.path), bytes: e.bytes });
      } catch {
        /* an unreadable generation offers nothing */
      }
    }
  }
  return idx;
}

/** Garbage collection: drops every chunk list no kept generation (of any tier) names. */
export async function collectRecipes(st: ReceiverState): Promise<number> {
  const referenced = new Set<string>();
  for (const t of TIERS) {
    const tierRoot = join(st.opts.standbyDir, t);
    for (const n of await listGenerations(tierRoot)) {
      const m = parseManifest(await readFile(join(tierRoot, n, 'MANIFEST.json'), 'utf8').catch(() => ''));
      // An unreadable generation keeps every list: a list is only a cache of its file.
      if (typeof m === 'string') return 0;
      for (const e of m.entries) referenced.add(e.sha256);
    }
  }
  return st.recipes.keepOnly(referenced);
}
