/**
 * A blob sent whole, by a pusher that does not chunk: appended in pieces at offsets into
 * `blobs/<sha256>.part`, each piece starting where the part ends; a cut connection truncates the
 * part back to where the piece started (so the sender resumes there); the last piece checks the
 * sha256 and renames the part into place.
 */
import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { SHA256_RE } from '@hq/protocol';
import { refuse, type Refusal } from './errors.js';
import { sha256File } from './manifest.js';
import { drain, type Blob, type Ok, type Push, type ReceiverState } from './receive-state.js';

/** Appends one piece of a blob starting at `offset` (must equal what was received so far). */
export async function putWholeBlobPiece(
  st: ReceiverState,
  pushId: string,
  sha: string,
  offset: number,
  stream: Readable,
): Promise<Ok<{ received: number; complete: boolean }> | Refusal> {
  const push = st.pushes.get(pushId);
  if (push === undefined || push.committing) return drain(stream, refuse('NO_PUSH'));
  if (!SHA256_RE.test(sha))
    return drain(stream, refuse('UNEXPECTED_BLOB', 'the blob name must be a lower-case sha256'));
  const blob = push.blobs.get(sha);
  if (blob === undefined || blob.done) return drain(stream, refuse('UNEXPECTED_BLOB'));
  if (blob.busy) return drain(stream, refuse('BLOB_BUSY'));
  if (offset !== blob.received)
    return drain(
      stream,
      refuse('OFFSET', `the chunk starts at ${offset}, the part ends at ${blob.received}`, { received: blob.received }),
    );
  blob.busy = true;
  push.lastActive = st.clock.now();
  const part = join(push.dir, 'blobs', `${sha}.part`);
  try {
    const wrote = await appendPiece(st, push, blob, part, offset, stream);
    if (typeof wrote !== 'number') return wrote;
    blob.received = wrote;
    if (wrote < blob.bytes) return { ok: true, received: wrote, complete: false };
    const h = await sha256File(part);
    if (h.sha256 !== sha) {
      await unlink(part).catch(() => undefined);
      blob.received = 0;
      st.log.warn(
        { category: 'hq.standby', event: 'checksum-mismatch', push: pushId, sha256: sha },
        'blob checksum mismatch',
      );
      return refuse('CHECKSUM', `the blob received for ${sha} hashes to ${h.sha256}`);
    }
    await rename(part, join(push.dir, 'blobs', sha));
    blob.done = true;
    return { ok: true, received: wrote, complete: true };
  } catch (err) {
    // The connection was cut (or the disk failed): the part is back at `offset`.
    st.log.warn(
      { category: 'hq.standby', event: 'chunk-interrupted', push: pushId, sha256: sha, err },
      'chunk interrupted',
    );
    throw err;
  } finally {
    blob.busy = false;
  }
}

/** Writes the stream into the part from `offset`, fsync'd; the new end, or a refusal (the part truncated back). */
async function appendPiece(
  st: ReceiverState,
  push: Push,
  blob: Blob,
  part: string,
  offset: number,
  stream: Readable,
): Promise<number | Refusal> {
  const fh = await open(part, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  let pos = offset;
  try {
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      if (pos + buf.length > blob.bytes) {
        stream.destroy();
        await fh.truncate(offset);
        return refuse('BLOB_SIZE', `the blob is longer than ${blob.bytes} bytes`);
      }
      let off = 0;
      while (off < buf.length) off += (await fh.write(buf, off, buf.length - off, pos + off)).bytesWritten;
      pos += buf.length;
      push.lastActive = st.clock.now();
    }
    await fh.sync();
  } catch (err) {
    await fh.truncate(offset).catch(() => undefined);
    throw err;
  } finally {
    await fh.close();
  }
  return pos;
}
