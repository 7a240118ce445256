/**
 * A missing file's chunk list: read whole (at most one record per `MIN_CHUNK_BYTES` of the file;
 * or as a delta from the list of a file kept here), an empty file of its size opened for its
 * assembly, and each chunk marked as held here (read later from a hard link in staging to the
 * file that holds it, so a prune cannot take it away) or wanted. The answer is the runs of the
 * list to send: the chunks neither held here nor asked for already. Sent again (after an
 * incomplete commit), it asks again for what is still missing.
 */
import { constants } from 'node:fs';
import { link, open } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { MIN_CHUNK_BYTES, RECIPE_RECORD_BYTES, type Chunk } from '@hq/protocol';
import { mkdirPrivate } from '@hq/runtime/files';
import { decodeRecipe, runsOf, type RecipeRead } from './chunks.js';
import { decodeRecipeDelta } from './delta.js';
import { refuse, type Refusal } from './errors.js';
import { drain, type Assembly, type Blob, type Held, type Ok, type Push, type ReceiverState } from './receive-state.js';

type RecipeAnswer = Ok<{ missing: [number, number][]; have: number }>;

export async function putRecipe(
  st: ReceiverState,
  pushId: string,
  sha: string,
  stream: Readable,
  base?: string,
): Promise<RecipeAnswer | Refusal> {
  const push = st.pushes.get(pushId);
  if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
  const blob = push.blobs.get(sha);
  if (blob === undefined || blob.done)
    return drain(stream, refuse('UNEXPECTED_BLOB', 'this push does not need that file'));
  if (blob.busy) return drain(stream, refuse('BLOB_BUSY', `the chunk list of ${sha} is being received`));
  // Until its assembly and its needs are in place, this file is busy and the push may not commit.
  blob.busy = true;
  push.recipes++;
  try {
    return await takeRecipe(st, push, blob, sha, stream, base);
  } finally {
    blob.busy = false;
    push.recipes--;
  }
}

async function takeRecipe(
  st: ReceiverState,
  push: Push,
  blob: Blob,
  sha: string,
  stream: Readable,
  base: string | undefined,
): Promise<RecipeAnswer | Refusal> {
  push.lastActive = st.clock.now();
  const r = await readRecipe(st, push, blob, sha, stream, base);
  if (!r.ok) return r;
  let asm = push.assemblies.get(sha);
  if (
    asm !== undefined &&
    (asm.chunks.length !== r.chunks.length || asm.chunks.some((c, i) => c.sha256 !== r.chunks[i]?.sha256))
  ) {
    return refuse('BAD_MANIFEST', `the chunk list of ${sha} differs from the one sent before`);
  }
  const held = await heldChunks(st, push);
  asm ??= await openAssembly(push, blob, sha, r.chunks);
  return needsOf(push, asm, held);
}

/** The chunk list sent, whole or as a delta from the list of a file kept here. */
async function readRecipe(
  st: ReceiverState,
  push: Push,
  blob: Blob,
  sha: string,
  stream: Readable,
  base: string | undefined,
): Promise<Ok<{ chunks: readonly Chunk[] }> | Refusal> {
  const limit = RECIPE_RECORD_BYTES * (Math.ceil(blob.bytes / MIN_CHUNK_BYTES) + 1);
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size <= limit) parts.push(chunk as Buffer);
  }
  if (size > limit)
    return refuse('BAD_MANIFEST', `the chunk list of ${sha} is longer than a ${blob.bytes}-byte file can need`);
  let r: RecipeRead;
  if (base === undefined) r = decodeRecipe(Buffer.concat(parts), blob.bytes);
  else {
    // A delta from the list of a file kept here.
    const kept = push.held.get(base);
    const baseChunks = kept === undefined || push.damaged.has(base) ? null : await st.recipes.get(base, kept.bytes);
    if (baseChunks === null) return refuse('UNKNOWN_BASE', `this standby keeps no chunk list of ${base}`);
    r = decodeRecipeDelta(baseChunks, Buffer.concat(parts), blob.bytes);
  }
  if (!r.ok) return refuse('BAD_MANIFEST', `the chunk list of ${sha}: ${r.reason}`);
  return { ok: true, chunks: r.chunks };
}

/** The file's assembly: `asm/<sha256>`, as long as the file and empty (sparse) until its chunks are written. */
async function openAssembly(push: Push, blob: Blob, sha: string, chunks: readonly Chunk[]): Promise<Assembly> {
  const offsets: number[] = [];
  let at = 0;
  for (const c of chunks) {
    offsets.push(at);
    at += c.bytes;
  }
  const asm: Assembly = {
    sha256: sha,
    path: join(push.dir, 'asm', sha),
    chunks,
    offsets,
    written: new Uint8Array(chunks.length),
  };
  await mkdirPrivate(join(push.dir, 'asm'));
  const fh = await open(
    asm.path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o600,
  );
  await fh.truncate(blob.bytes);
  await fh.close();
  push.assemblies.set(sha, asm);
  return asm;
}

/** Marks each chunk of the assembly held here or wanted; answers the runs to send now. */
async function needsOf(push: Push, asm: Assembly, held: Map<string, Held>): Promise<RecipeAnswer | Refusal> {
  // The files held here this list takes chunks from, linked into staging first.
  const files = new Map<string, string | null>();
  for (const c of asm.chunks) {
    const h = push.chunks.has(c.sha256) ? undefined : held.get(c.sha256);
    if (h !== undefined && !files.has(h.file)) files.set(h.file, await source(push, h.file));
  }
  const ask: boolean[] = [];
  let have = 0;
  for (const [i, c] of asm.chunks.entries()) {
    let need = push.chunks.get(c.sha256);
    if (need !== undefined && need.bytes !== c.bytes)
      return refuse('BAD_MANIFEST', `chunk ${c.sha256} is listed with two lengths`);
    if (need === undefined) {
      const h = held.get(c.sha256);
      const file = h !== undefined && h.bytes === c.bytes ? (files.get(h.file) ?? null) : null;
      need = {
        bytes: c.bytes,
        state: file === null ? 'wanted' : 'have',
        asked: false,
        src: file === null || h === undefined ? null : { file, offset: h.offset },
        targets: [],
      };
      push.chunks.set(c.sha256, need);
    }
    if (asm.written[i] === 0 && need.state === 'wanted' && !need.targets.some((t) => t.asm === asm && t.index === i))
      need.targets.push({ asm, index: i });
    const askNow = asm.written[i] === 0 && need.state === 'wanted' && !need.asked;
    if (askNow) need.asked = true;
    else have++;
    ask.push(askNow);
  }
  return { ok: true, missing: runsOf(ask), have };
}

/** Chunk sha256 → where this standby holds it: the chunk lists of the files of its kept generations. */
async function heldChunks(st: ReceiverState, push: Push): Promise<Map<string, Held>> {
  if (push.heldChunks !== null) return push.heldChunks;
  const out = new Map<string, Held>();
  for (const [sha, f] of push.held) {
    const chunks = await st.recipes.get(sha, f.bytes);
    if (chunks === null) continue;
    let offset = 0;
    for (const c of chunks) {
      if (!out.has(c.sha256)) out.set(c.sha256, { file: sha, offset, bytes: c.bytes });
      offset += c.bytes;
    }
  }
  push.heldChunks = out;
  return out;
}

/** A hard link in staging to a file held here (so a prune cannot take it away), or null. */
async function source(push: Push, fileSha: string): Promise<string | null> {
  if (push.damaged.has(fileSha)) return null;
  const held = push.held.get(fileSha);
  if (held === undefined) return null;
  const dest = join(push.dir, 'src', fileSha);
  if (push.linked.has(fileSha)) return dest;
  try {
    await mkdirPrivate(join(push.dir, 'src'));
    await link(held.abs, dest);
    push.linked.add(fileSha);
    return dest;
  } catch {
    push.damaged.add(fileSha);
    return null;
  }
}
