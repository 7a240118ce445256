/**
 * Hashing a generation's files. The manifest, its sums file and the rules every reader applies
 * to them are the protocol's (`@hq/protocol` replication.ts, the reader `checkManifest` in
 * `@hq/protocol/schemas`): the arbiter's survival route reads the same manifests.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

export async function sha256File(path: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}
