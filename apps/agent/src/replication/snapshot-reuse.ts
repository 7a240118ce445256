/**
 * Reuse of an unchanged file in a snapshot: the sources' fingerprints (device, inode, size,
 * mtime and ctime in ns, for the file and its `-wal` and `-journal`; an empty one counts as
 * none) are kept beside each generation, and a file whose fingerprints are the same as at the
 * previous generation, and which last changed well before they were taken, is hard-linked from
 * it instead of copied (file times are coarse: a write in the same tick could otherwise hide).
 */
import { link, lstat, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { latestGeneration } from '@hq/runtime/generations';
import type { Manifest, ManifestEntry } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import type { Planned } from './plan.js';

export interface Fingerprint {
  readonly dev: string;
  readonly ino: string;
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
}
export type Fp = { main: Fingerprint; wal: Fingerprint | null; journal: Fingerprint | null };
export interface Fingerprints {
  readonly takenAtMs: number;
  readonly files: readonly (readonly [string, Fp])[];
}

/** Reused only when the source last changed this long before the previous fingerprint. */
export const STABLE_MS = 2000;

async function fingerprint(abs: string): Promise<Fingerprint | null> {
  try {
    const st = await stat(abs, { bigint: true });
    return {
      dev: String(st.dev),
      ino: String(st.ino),
      size: String(st.size),
      mtimeNs: String(st.mtimeNs),
      ctimeNs: String(st.ctimeNs),
    };
  } catch {
    return null;
  }
}

/** An empty `-wal` or `-journal` holds nothing: the same as none (a read-only open leaves an empty `-wal`). */
async function sideFingerprint(abs: string): Promise<Fingerprint | null> {
  const f = await fingerprint(abs);
  return f === null || f.size === '0' ? null : f;
}

export async function fingerprintAll(abs: string): Promise<Fp | null> {
  const main = await fingerprint(abs);
  if (main === null) return null;
  return { main, wal: await sideFingerprint(`${abs}-wal`), journal: await sideFingerprint(`${abs}-journal`) };
}

const same = (a: Fingerprint | null, b: Fingerprint | null): boolean =>
  a === null || b === null
    ? a === b
    : a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;

function stableBefore(fp: Fp, takenAtMs: number, stableMs: number): boolean {
  const limit = BigInt(Math.floor(takenAtMs - stableMs)) * 1_000_000n;
  return [fp.main, fp.wal, fp.journal].every(
    (f) => f === null || (BigInt(f.mtimeNs) < limit && BigInt(f.ctimeNs) < limit),
  );
}

export interface Previous {
  readonly manifest: Manifest;
  readonly dir: string;
  readonly fingerprints: Fingerprints | null;
}

export async function previous(tierRoot: string): Promise<Previous | null> {
  const name = await latestGeneration(tierRoot);
  if (name === null) return null;
  const dir = join(tierRoot, name);
  try {
    const m = parseManifest(await readFile(join(dir, 'MANIFEST.json'), 'utf8'));
    if (typeof m === 'string') return null;
    let fingerprints: Fingerprints | null = null;
    try {
      fingerprints = JSON.parse(await readFile(join(tierRoot, `${name}.sources.json`), 'utf8')) as Fingerprints;
    } catch {
      fingerprints = null;
    }
    return { manifest: m, dir, fingerprints };
  } catch {
    return null;
  }
}

/** The previous generation's copy of an item, hard-linked to `dest`, when the source is unchanged since (guarantee 4); else null. */
export async function tryReuse(
  item: Planned,
  fp: Fp,
  dest: string,
  prev: Previous | null,
  prevEntries: ReadonlyMap<string, ManifestEntry>,
  prevFps: ReadonlyMap<string, Fp>,
  stableMs: number,
): Promise<ManifestEntry | null> {
  if (prev === null || prev.fingerprints === null || item.path === 'config.json') return null;
  const old = prevEntries.get(item.path);
  const oldFp = prevFps.get(item.path);
  if (old === undefined || oldFp === undefined || old.kind !== item.kind) return null;
  if (!same(fp.main, oldFp.main) || !same(fp.wal, oldFp.wal) || !same(fp.journal, oldFp.journal)) return null;
  if (!stableBefore(oldFp, prev.fingerprints.takenAtMs, stableMs)) return null;
  const src = join(prev.dir, item.path);
  try {
    const st = await lstat(src);
    if (!st.isFile() || st.size !== old.bytes) return null;
    await link(src, dest);
  } catch {
    return null;
  }
  return { path: item.path, bytes: old.bytes, sha256: old.sha256, kind: old.kind, reused: true };
}
