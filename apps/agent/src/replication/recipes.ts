/**
 * Chunk lists kept beside the generations, one file per file content: `<dir>/<file sha256>`,
 * the wire encoding (chunks.ts). The outbox keeps them under `<outbox>/<tier>/.chunks` (written
 * by the snapshot, read by the push); the standby under `<standbyDir>/.chunks` (written before a
 * generation is published, read to find the chunks it holds). A list is a cache of what the
 * file's bytes say: a missing or unreadable one is never an error (the push computes it again,
 * the standby offers none of that file's chunks), and a stale one cannot pass the checks (every
 * chunk is hashed as it is read, every file before `latest` moves).
 *
 * Garbage collection: `keepOnly(referenced)` after a prune removes every list no kept
 * generation names. The chunks' bytes live in the generations' files only, so a chunk no kept
 * generation references is gone with the last generation holding it.
 */
import { readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { SHA256_RE, type Chunk } from '@hq/protocol';
import { mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { decodeRecipe, encodeRecipe } from './chunks.js';

export class RecipeStore {
  constructor(readonly dir: string) {}

  /** The chunk list of the file with this sha256 and size, or null. */
  async get(sha256: string, bytes: number): Promise<readonly Chunk[] | null> {
    if (!SHA256_RE.test(sha256)) return null;
    let buf: Buffer;
    try {
      buf = await readFile(join(this.dir, sha256));
    } catch {
      return null;
    }
    const r = decodeRecipe(buf, bytes);
    return r.ok ? r.chunks : null;
  }

  async put(sha256: string, chunks: readonly Chunk[]): Promise<void> {
    if (!SHA256_RE.test(sha256)) return;
    await mkdirPrivate(this.dir);
    await writeAtomic(join(this.dir, sha256), encodeRecipe(chunks));
  }

  /** Removes every list whose file no kept generation references; how many went. */
  async keepOnly(referenced: ReadonlySet<string>): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return 0;
    }
    let removed = 0;
    for (const n of names) {
      if (SHA256_RE.test(n) && !referenced.has(n)) {
        await unlink(join(this.dir, n)).catch(() => undefined);
        removed++;
      }
    }
    return removed;
  }
}
