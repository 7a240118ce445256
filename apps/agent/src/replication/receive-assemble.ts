/**
 * Completing the files sent as chunk lists, at commit: the chunks that did not arrive over the
 * wire are copied from where they are held, each hashed as it is read (one that does not match
 * is wanted again, and nothing more is read from its file); a complete file is fsync'd and linked
 * into `blobs/`. And, when the generation fails its check, finding the blobs held here that were
 * damaged, so they are sent.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { link, open, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Chunk } from '@hq/protocol';
import { sha256File } from './manifest.js';
import {
  WRITE_RUN_BYTES,
  writeAll,
  type Assembly,
  type ChunkNeed,
  type Push,
  type ReceiverState,
} from './receive-state.js';

/** Completes each missing file that has its chunk list; returns the files still missing. */
export async function assemble(st: ReceiverState, push: Push): Promise<string[]> {
  const missing: string[] = [];
  const handles = new Map<string, FileHandle>();
  const read = async (file: string): Promise<FileHandle> => {
    let fh = handles.get(file);
    if (fh === undefined) {
      fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
      handles.set(file, fh);
    }
    return fh;
  };
  try {
    for (const blob of push.blobs.values()) {
      if (blob.done) continue;
      const asm = push.assemblies.get(blob.sha256);
      if (asm === undefined || !(await fill(st, push, asm, read)) || asm.written.includes(0)) {
        missing.push(blob.sha256);
        continue;
      }
      await link(asm.path, join(push.dir, 'blobs', blob.sha256));
      blob.received = blob.bytes;
      blob.done = true;
    }
  } finally {
    for (const fh of handles.values()) await fh.close().catch(() => undefined);
  }
  // A chunk wanted again is asked for again when its list comes again.
  for (const sha of missing) {
    for (const c of push.assemblies.get(sha)?.chunks ?? []) {
      const n = push.chunks.get(c.sha256);
      if (n !== undefined && n.state === 'wanted') n.asked = false;
    }
  }
  return missing;
}

/** Copies into an assembly the chunks held here, in runs from one source file; true when nothing was lacking (then fsync'd). */
async function fill(
  st: ReceiverState,
  push: Push,
  asm: Assembly,
  read: (file: string) => Promise<FileHandle>,
): Promise<boolean> {
  const out = await open(asm.path, constants.O_WRONLY | constants.O_NOFOLLOW);
  let complete = true;
  try {
    const n = asm.chunks.length;
    for (let i = 0; i < n; ) {
      const need = push.chunks.get((asm.chunks[i] as Chunk).sha256) as ChunkNeed;
      if (asm.written[i] === 1) {
        i++;
        continue;
      }
      if (need.state === 'wanted' || need.src === null) {
        complete = false;
        i++;
        continue;
      }
      // A run: the next chunks lie right after this one in the same source file.
      const src = need.src;
      let j = i + 1;
      let bytes = (asm.chunks[i] as Chunk).bytes;
      while (j < n && asm.written[j] === 0 && bytes < WRITE_RUN_BYTES) {
        const nx = push.chunks.get((asm.chunks[j] as Chunk).sha256) as ChunkNeed;
        if (nx.state !== 'have' || nx.src?.file !== src.file || nx.src.offset !== src.offset + bytes) break;
        bytes += (asm.chunks[j] as Chunk).bytes;
        j++;
      }
      const data = Buffer.allocUnsafe(bytes);
      const { bytesRead } = await (await read(src.file)).read(data, 0, bytes, src.offset);
      if (!runIsGood(st, push, asm, i, j, data, bytesRead === bytes)) {
        // Damage here: nothing more is read from that file; its chunks are asked for.
        forget(push, src.file);
        complete = false;
        i = j;
        continue;
      }
      await writeAll(out, data, asm.offsets[i] as number);
      asm.written.fill(1, i, j);
      i = j;
    }
    if (complete) await out.sync();
  } finally {
    await out.close();
  }
  return complete;
}

/** Whether the bytes read for chunks i..j-1 of an assembly hash to them (logs the first that does not). */
function runIsGood(
  st: ReceiverState,
  push: Push,
  asm: Assembly,
  i: number,
  j: number,
  data: Buffer,
  whole: boolean,
): boolean {
  let at = 0;
  let good = whole;
  for (let k = i; good && k < j; k++) {
    const c = asm.chunks[k] as Chunk;
    good =
      createHash('sha256')
        .update(data.subarray(at, at + c.bytes))
        .digest('hex') === c.sha256;
    at += c.bytes;
    if (!good)
      st.log.warn(
        { category: 'hq.standby', event: 'checksum-mismatch', push: push.id, sha256: c.sha256 },
        'held chunk damaged',
      );
  }
  return good;
}

/** A file read for chunks turned out damaged: every chunk read from it is wanted again. */
function forget(push: Push, file: string): void {
  push.damaged.add(basename(file));
  for (const n of push.chunks.values()) {
    if (n.src?.file !== file) continue;
    n.state = 'wanted';
    n.asked = false;
    n.src = null;
  }
}

/** Re-hashes the linked blobs; the damaged ones are removed and returned (to be sent). */
export async function heal(push: Push): Promise<string[]> {
  const bad: string[] = [];
  for (const b of push.blobs.values()) {
    if (!b.linked) continue;
    const p = join(push.dir, 'blobs', b.sha256);
    const h = await sha256File(p).catch(() => null);
    if (h === null || h.sha256 !== b.sha256) {
      await unlink(p).catch(() => undefined);
      // None of its chunks may be used to rebuild it (or anything else).
      forget(push, join(push.dir, 'src', b.sha256));
      b.done = false;
      b.linked = false;
      b.received = 0;
      bad.push(b.sha256);
    }
  }
  return bad;
}
