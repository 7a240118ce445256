/**
 * What a push sends of what the standby already has, as differences from it: the
 * manifest as the entries that differ from a base generation the standby keeps, and a chunk list
 * as runs copied from the list of a base file it keeps. Both sides rebuild the same full
 * manifest or list with these functions; the receiver then checks it exactly as a full one.
 *
 * A chunk-list delta (`PUT …/recipes/:sha256` with header `x-hq-base: <base file sha256>`) is a
 * sequence of records: `0x00, u32 first, u32 count` = the base list's chunks first..first+count-1;
 * `0x01, u32 count, count × 36 bytes` = chunks as in a full list (big-endian).
 */
import { MIN_CHUNK_BYTES, RECIPE_RECORD_BYTES, type Chunk, type ManifestEntry } from '@hq/protocol';
import { decodeRecipe, encodeRecipe, type RecipeRead } from './chunks.js';

const byPath = (a: ManifestEntry, b: ManifestEntry) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/** The entries of a manifest rebuilt from its base's: the base minus `removed`, `changed` put in, sorted by path. */
export function applyEntries(
  base: readonly ManifestEntry[],
  changed: readonly ManifestEntry[],
  removed: readonly string[],
): ManifestEntry[] {
  const out = new Map(base.map((e) => [e.path, e] as const));
  for (const p of removed) out.delete(p);
  for (const e of changed) out.set(e.path, e);
  return [...out.values()].sort(byPath);
}

const sameEntry = (a: ManifestEntry | undefined, b: ManifestEntry): boolean =>
  a !== undefined &&
  a.path === b.path &&
  a.bytes === b.bytes &&
  a.sha256 === b.sha256 &&
  a.kind === b.kind &&
  a.reused === b.reused;

/** The entries that differ from the base, and the paths gone; null when `applyEntries` would not give `entries` back. */
export function diffEntries(
  base: readonly ManifestEntry[],
  entries: readonly ManifestEntry[],
): { changed: ManifestEntry[]; removed: string[] } | null {
  const old = new Map(base.map((e) => [e.path, e] as const));
  const now = new Set(entries.map((e) => e.path));
  const changed = entries.filter((e) => !sameEntry(old.get(e.path), e));
  const removed = base.filter((e) => !now.has(e.path)).map((e) => e.path);
  const rebuilt = applyEntries(base, changed, removed);
  return rebuilt.length === entries.length &&
    rebuilt.every((e, i) => e === entries[i] || sameEntry(e, entries[i] as ManifestEntry))
    ? { changed, removed }
    : null;
}

/** A chunk list as runs of a base list and literal chunks. */
export function encodeRecipeDelta(base: readonly Chunk[], chunks: readonly Chunk[]): Buffer {
  const first = new Map<string, number>();
  base.forEach((c, i) => {
    if (!first.has(c.sha256)) first.set(c.sha256, i);
  });
  const parts: Buffer[] = [];
  let copy: [number, number] | null = null;
  let literal: Chunk[] = [];
  const flushCopy = () => {
    if (copy === null) return;
    const b = Buffer.allocUnsafe(9);
    b[0] = 0;
    b.writeUInt32BE(copy[0], 1);
    b.writeUInt32BE(copy[1], 5);
    parts.push(b);
    copy = null;
  };
  const flushLiteral = () => {
    if (literal.length === 0) return;
    const b = Buffer.allocUnsafe(5);
    b[0] = 1;
    b.writeUInt32BE(literal.length, 1);
    parts.push(b, encodeRecipe(literal));
    literal = [];
  };
  for (const c of chunks) {
    const next: [number, number] | null = copy;
    if (next !== null && base[next[0] + next[1]]?.sha256 === c.sha256 && base[next[0] + next[1]]?.bytes === c.bytes) {
      next[1]++;
      continue;
    }
    const at = first.get(c.sha256);
    if (at !== undefined && base[at]?.bytes === c.bytes) {
      flushCopy();
      flushLiteral();
      copy = [at, 1];
      continue;
    }
    flushCopy();
    literal.push(c);
  }
  flushCopy();
  flushLiteral();
  return Buffer.concat(parts);
}

/** Rebuilds a chunk list from a delta and its base, then reads it as strictly as a full list. */
export function decodeRecipeDelta(base: readonly Chunk[], delta: Buffer, fileBytes: number): RecipeRead {
  const out: Buffer[] = [];
  const baseBuf = encodeRecipe(base);
  // No valid list of this file has more chunks (every chunk but the last is MIN_CHUNK_BYTES or more).
  const most = Math.ceil(fileBytes / MIN_CHUNK_BYTES) + 1;
  let total = 0;
  let at = 0;
  while (at < delta.length) {
    if (total > most)
      return { ok: false, reason: `the delta makes more chunks than a ${fileBytes}-byte file can have` };
    const op = delta[at];
    if (op === 0 && at + 9 <= delta.length) {
      const first = delta.readUInt32BE(at + 1);
      const count = delta.readUInt32BE(at + 5);
      if (count === 0 || first + count > base.length)
        return {
          ok: false,
          reason: `a copied run ${first}+${count} lies outside the base list of ${base.length} chunks`,
        };
      out.push(baseBuf.subarray(first * RECIPE_RECORD_BYTES, (first + count) * RECIPE_RECORD_BYTES));
      total += count;
      at += 9;
    } else if (op === 1 && at + 5 <= delta.length) {
      const count = delta.readUInt32BE(at + 1);
      const end = at + 5 + count * RECIPE_RECORD_BYTES;
      if (count === 0 || end > delta.length) return { ok: false, reason: 'a run of listed chunks is cut short' };
      out.push(delta.subarray(at + 5, end));
      total += count;
      at = end;
    } else {
      return { ok: false, reason: `the delta has no valid record at byte ${at}` };
    }
  }
  return decodeRecipe(Buffer.concat(out), fileBytes);
}
