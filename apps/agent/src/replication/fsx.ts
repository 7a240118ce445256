/**
 * File helpers of replication beside `@hq/runtime/files` (atomic writes, private directories) and
 * `@hq/runtime/generations` (publishing a tier): new files 0600 and fsync'd, copies hashed while
 * they stream so what lands is what was checked.
 */
import { constants } from 'node:fs';
import { lstat, open, rm } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { FILE_MODE } from '@hq/runtime/files';

export function rand(): string {
  return randomBytes(6).toString('hex');
}

/** Writes a new file (never replacing one), fsync'd. */
export async function writeFileNew(path: string, data: string | Uint8Array, mode = FILE_MODE): Promise<void> {
  const fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    await fh.writeFile(data);
    await fh.chmod(mode);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Copies `src` to a new file `dest` (never following a link at either end), hashing the bytes as
 * they pass (and showing them to `observe`, e.g. a chunker); fsync'd. Returns the digest and size
 * of what was written.
 */
export async function copyHashed(
  src: string,
  dest: string,
  mode = FILE_MODE,
  observe?: (chunk: Buffer) => void,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  const inp = await open(src, constants.O_RDONLY | constants.O_NOFOLLOW);
  let bytes = 0;
  try {
    const out = await open(
      dest,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      mode,
    );
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (;;) {
        const { bytesRead } = await inp.read(buf, 0, buf.length, null);
        if (bytesRead === 0) break;
        const chunk = buf.subarray(0, bytesRead);
        hash.update(chunk);
        observe?.(chunk);
        let off = 0;
        while (off < bytesRead) off += (await out.write(chunk, off, bytesRead - off)).bytesWritten;
        bytes += bytesRead;
      }
      await out.chmod(mode);
      await out.sync();
    } finally {
      await out.close();
    }
  } finally {
    await inp.close();
  }
  return { sha256: hash.digest('hex'), bytes };
}

export async function removeTree(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

export async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}
