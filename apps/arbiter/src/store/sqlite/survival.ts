/**
 * Survival copies on the arbiter's disk (store "sqlite"): `{dataDir}/survival/{machine}/{tier}/
 * {generation}/` with `latest` beside them, staged blobs in `{machine}/.blobs/`, the highest
 * accepted lease generation in `{tier}/accepted-generation`. Files 0600, folders 0700; a
 * generation is built in a hidden folder and renamed into place, then `latest` moves (both
 * fsync'd), so nothing is visible before it is whole. One process writes (the serve lock); the
 * route serialises commits.
 */
import { constants } from 'node:fs';
import { link, lstat, open, readdir, readFile, rename, rm, unlink } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import { TIERS, formatManifest, isHost, type Manifest, type SurvivalList } from '@hq/protocol';
import { mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { publishGeneration, pruneGenerations, tierListing } from '@hq/runtime/generations';
import type { BlobResult, CommitResult, SurvivalStore } from '../../survival/store.js';

async function hashFile(path: string): Promise<string> {
  const h = createHash('sha256');
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      h.update(buf.subarray(0, bytesRead));
    }
  } finally {
    await fh.close();
  }
  return h.digest('hex');
}

export class FileSurvivalStore implements SurvivalStore {
  private readonly root: string;

  constructor(
    dataDir: string,
    /** Default 32 MiB (survival items are core-sized). */
    readonly maxBlobBytes: number = 32 * 1024 * 1024,
  ) {
    this.root = join(dataDir, 'survival');
  }

  async putBlob(machine: string, sha256: string, data: AsyncIterable<Buffer>): Promise<BlobResult> {
    const staging = join(this.root, machine, '.blobs');
    await mkdirPrivate(staging);
    const part = join(staging, `${sha256}.${randomBytes(4).toString('hex')}.part`);
    const fh = await open(
      part,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    const hash = createHash('sha256');
    let bytes = 0;
    try {
      for await (const buf of data) {
        bytes += buf.length;
        if (bytes > this.maxBlobBytes) {
          await fh.close();
          await unlink(part).catch(() => undefined);
          return {
            ok: false,
            error: 'too-large',
            message: `a survival blob may not exceed ${this.maxBlobBytes} bytes`,
          };
        }
        hash.update(buf);
        await fh.write(buf);
      }
      await fh.sync();
    } catch (err) {
      await fh.close().catch(() => undefined);
      await unlink(part).catch(() => undefined);
      throw err;
    }
    await fh.close();
    if (hash.digest('hex') !== sha256) {
      await unlink(part);
      return { ok: false, error: 'checksum', message: 'the blob does not match its sha256' };
    }
    await rename(part, join(staging, sha256));
    return { ok: true, bytes };
  }

  async commit(machine: string, m: Manifest, sums: string, keep: number): Promise<CommitResult> {
    const { tier, generation } = m;
    const tierRoot = join(this.root, machine, tier);
    await mkdirPrivate(tierRoot);
    const markFile = join(tierRoot, 'accepted-generation');
    let mark = 0;
    try {
      const g = parseGeneration(await readFile(markFile, 'utf8'));
      if (g === null) throw new Error(`${markFile} is unreadable: the survival mark must be a generation number`);
      mark = g;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const v = checkGeneration(mark, m.leaseGeneration);
    if (!v.ok)
      return {
        ok: false,
        error: 'stale',
        message: `lease generation ${m.leaseGeneration} is lower than ${mark}, the highest accepted`,
      };
    const final = join(tierRoot, generation);
    if (
      await lstat(final).then(
        () => true,
        () => false,
      )
    )
      return { ok: false, error: 'exists', message: `survival generation ${tier}/${generation} exists` };
    const blobs = join(this.root, machine, '.blobs');
    const building = join(tierRoot, `.building-${generation}-${randomBytes(4).toString('hex')}`);
    await mkdirPrivate(building);
    try {
      for (const e of m.entries) {
        const dest = join(building, e.path);
        await mkdirPrivate(dirname(dest));
        try {
          await link(join(blobs, e.sha256), dest);
        } catch {
          await rm(building, { recursive: true, force: true });
          return { ok: false, error: 'incomplete', message: `the blob of ${e.path} was not sent` };
        }
        const st = await lstat(dest);
        if (!st.isFile() || st.size !== e.bytes || (await hashFile(dest)) !== e.sha256) {
          await rm(building, { recursive: true, force: true });
          return { ok: false, error: 'checksum', message: `${e.path} does not match its manifest entry` };
        }
      }
      await writeAtomic(join(building, 'MANIFEST.json'), formatManifest(m));
      await writeAtomic(join(building, 'SHA256SUMS'), sums);
      if (m.leaseGeneration > mark) await writeAtomic(markFile, `${m.leaseGeneration}\n`);
      await publishGeneration(tierRoot, generation, building);
    } catch (err) {
      await rm(building, { recursive: true, force: true });
      throw err;
    }
    // Keep N; the blobs this generation used are now linked into it.
    await pruneGenerations(tierRoot, keep, generation);
    for (const e of m.entries) await unlink(join(blobs, e.sha256)).catch(() => undefined);
    return { ok: true, files: m.entries.length };
  }

  async list(): Promise<SurvivalList> {
    const machines = [];
    for (const machine of (await readdir(this.root).catch(() => [] as string[])).filter((n) => isHost(n)).sort()) {
      const tiers = [];
      for (const tier of TIERS) tiers.push({ tier, ...(await tierListing(join(this.root, machine, tier))) });
      machines.push({ machine, tiers });
    }
    return { machines };
  }
}
