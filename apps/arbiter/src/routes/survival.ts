/**
 * Survival copies (SPEC §6, issue 6): the holder sends the survival subset of a generation (never
 * a secret) to the arbiter, which keeps the last N per machine and tier under
 * `{dataDir}/survival/{machine}/{tier}/{generation}/` with `latest` beside them.
 *
 *   PUT /v1/survival/:tier/:generation/blobs/:sha256   application/octet-stream → {stored, bytes}
 *   PUT /v1/survival/:tier/:generation                 {manifest, sums}         → {generation, files}
 *   GET /v1/survival                                                           → {machines[{machine, tiers[…]}]}
 *
 * Blobs first (each checked against its sha256 as it lands), then the manifest, which
 * publishes the generation: the manifest read by the agent's own reader (`@hq/protocol/schemas`
 * `checkManifest`), every path not a secret (the third check, after the agent's two, with the
 * agent's default secret names), holder = the token's machine, lease generation ≥ the highest accepted for that
 * machine and tier (lease-core `checkGeneration`), every file verified, then one rename and the
 * `latest` link moved. Nothing is visible before that; files 0600, folders 0700.
 *
 * Not registered by itself: `app.register(survivalRoutes, { dataDir, authorize })`, where
 * `authorize(rawHeaders)` returns the machine of a valid member (or admin) token, or null.
 */
import { constants } from 'node:fs';
import { chmod, link, lstat, mkdir, open, readdir, readFile, readlink, rename, rm, symlink, unlink } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import { ERRORS, GENERATION_RE, type CatalogEntry, REPLICATION_ERRORS, TIERS, formatManifest, formatSums, isHost, isSecretPath, type Manifest, type SurvivalBlobStored, type SurvivalCommitted, type SurvivalList, type Tier } from '@hq/protocol';
import { PushBody, SurvivalBlobParams, SurvivalParams, checkManifest } from '@hq/protocol/schemas';

export interface SurvivalRoutesOptions {
  readonly dataDir: string;
  readonly authorize: (rawHeaders: readonly string[]) => { readonly machine: string } | null | Promise<{ readonly machine: string } | null>;
  /** Generations kept per tier and machine. Default core 36, big 8, obs 8. */
  readonly keep?: { readonly core?: number; readonly big?: number; readonly obs?: number };
  /** Largest blob, bytes. Default 32 MiB (survival items are core-sized). */
  readonly maxBlobBytes?: number;
}

/** A survival copy holds at most this many files (core-sized items). */
const MAX_ENTRIES = 10_000;

/**
 * The subset manifest: the agent's reader, then what a survival copy adds — the path's tier and
 * generation, a lease generation and a holder (never a copy made before any lease), no secret.
 */
function readManifest(v: unknown, tier: Tier, generation: string): { ok: true; manifest: Manifest; holder: string } | { ok: false; message: string } {
  const m = checkManifest(v);
  if (typeof m === 'string') return { ok: false, message: m };
  if (m.generation !== generation) return { ok: false, message: 'manifest generation does not match the path' };
  if (m.tier !== tier) return { ok: false, message: 'manifest tier does not match the path' };
  if (m.leaseGeneration < 1) return { ok: false, message: 'manifest leaseGeneration must be a positive integer' };
  if (m.holder === null) return { ok: false, message: 'manifest holder must be a host' };
  if (m.entries.length > MAX_ENTRIES) return { ok: false, message: `manifest entries may list at most ${MAX_ENTRIES} files` };
  const secret = m.entries.find((e) => isSecretPath(e.path));
  if (secret !== undefined) return { ok: false, message: `${secret.path} is a secret and never goes to a survival copy` };
  return { ok: true, manifest: m, holder: m.holder };
}

async function mkdirPrivate(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}

async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeAtomic(path: string, data: string): Promise<void> {
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
  await fsyncPath(dirname(path));
}

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

function fail(reply: FastifyReply, entry: CatalogEntry, message: string = entry.message): FastifyReply {
  return reply.code(entry.status).send({ error: entry.code, message });
}

export const survivalRoutes: FastifyPluginAsync<SurvivalRoutesOptions> = async (instance, opts) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const root = join(opts.dataDir, 'survival');
  const keep = { core: opts.keep?.core ?? 36, big: opts.keep?.big ?? 8, obs: opts.keep?.obs ?? 8 };
  const maxBlob = opts.maxBlobBytes ?? 32 * 1024 * 1024;
  let commits: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = commits.then(fn, fn);
    commits = p.catch(() => undefined);
    return p;
  };

  const machineOf = new WeakMap<object, string>();
  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'GET') return undefined; // reads follow the arbiter's own read rule (scope read)
    const who = await opts.authorize(req.raw.rawHeaders);
    if (who === null || !isHost(who.machine)) return fail(reply, ERRORS.UNAUTHORIZED);
    machineOf.set(req, who.machine);
    return undefined;
  });
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

  app.put(
    '/v1/survival/:tier/:generation/blobs/:sha256',
    {
      config: { scope: 'member' },
      schema: { params: SurvivalBlobParams },
    },
    async (req, reply) => {
      const machine = machineOf.get(req) as string;
      const stream = req.body as Readable | undefined;
      if (req.headers['content-type'] !== 'application/octet-stream' || stream === undefined) {
        stream?.resume();
        return fail(reply, ERRORS.UNSUPPORTED_MEDIA, 'a blob must be application/octet-stream');
      }
      const staging = join(root, machine, '.blobs');
      await mkdirPrivate(staging);
      const part = join(staging, `${req.params.sha256}.${randomBytes(4).toString('hex')}.part`);
      const fh = await open(part, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      const hash = createHash('sha256');
      let bytes = 0;
      try {
        for await (const chunk of stream) {
          const buf = chunk as Buffer;
          bytes += buf.length;
          if (bytes > maxBlob) throw Object.assign(new Error('too large'), { tooLarge: true });
          hash.update(buf);
          await fh.write(buf);
        }
        await fh.sync();
      } catch (err) {
        await fh.close();
        await unlink(part).catch(() => undefined);
        if ((err as { tooLarge?: boolean }).tooLarge === true) return fail(reply, ERRORS.TOO_LARGE, `a survival blob may not exceed ${maxBlob} bytes`);
        throw err;
      }
      await fh.close();
      if (hash.digest('hex') !== req.params.sha256) {
        await unlink(part);
        return fail(reply, REPLICATION_ERRORS.CHECKSUM, 'the blob does not match its sha256');
      }
      await rename(part, join(staging, req.params.sha256));
      const stored: SurvivalBlobStored = { stored: true, bytes };
      return stored;
    },
  );

  app.put(
    '/v1/survival/:tier/:generation',
    {
      config: { scope: 'member' },
      bodyLimit: 4 * 1024 * 1024,
      schema: { params: SurvivalParams, body: PushBody },
    },
    async (req, reply) =>
      serial(async () => {
        const machine = machineOf.get(req) as string;
        const { tier, generation } = req.params;
        const read = readManifest(req.body.manifest, tier, generation);
        if (!read.ok) return fail(reply, ERRORS.BAD_REQUEST, read.message);
        const m = read.manifest;
        if (read.holder !== machine) return fail(reply, ERRORS.WRONG_HOST, `the manifest's holder ${read.holder} is not the token's machine ${machine}`);
        const sums = formatSums(m.entries);
        if (req.body.sums !== sums) return fail(reply, ERRORS.BAD_REQUEST, 'SHA256SUMS does not match the manifest entries');
        const tierRoot = join(root, machine, tier);
        await mkdirPrivate(tierRoot);
        const markFile = join(tierRoot, 'accepted-generation');
        let mark = 0;
        try {
          const g = parseGeneration(await readFile(markFile, 'utf8'));
          if (g === null) return fail(reply, ERRORS.INTERNAL, 'the survival mark is unreadable');
          mark = g;
        } catch {
          mark = 0;
        }
        const v = checkGeneration(mark, m.leaseGeneration);
        if (!v.ok) return fail(reply, ERRORS.STALE_GENERATION, `lease generation ${m.leaseGeneration} is lower than ${mark}, the highest accepted`);
        const final = join(tierRoot, generation);
        if (await lstat(final).then(() => true, () => false)) return fail(reply, ERRORS.CONFLICT, `survival generation ${tier}/${generation} exists`);
        const blobs = join(root, machine, '.blobs');
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
              return fail(reply, REPLICATION_ERRORS.INCOMPLETE, `the blob of ${e.path} was not sent`);
            }
            const st = await lstat(dest);
            if (!st.isFile() || st.size !== e.bytes || (await hashFile(dest)) !== e.sha256) {
              await rm(building, { recursive: true, force: true });
              return fail(reply, REPLICATION_ERRORS.CHECKSUM, `${e.path} does not match its manifest entry`);
            }
          }
          await writeAtomic(join(building, 'MANIFEST.json'), formatManifest(m));
          await writeAtomic(join(building, 'SHA256SUMS'), sums);
          if (m.leaseGeneration > mark) await writeAtomic(markFile, `${m.leaseGeneration}\n`);
          await rename(building, final);
          await fsyncPath(tierRoot);
          const tmpLink = join(tierRoot, `.latest-${randomBytes(4).toString('hex')}`);
          await symlink(generation, tmpLink);
          await rename(tmpLink, join(tierRoot, 'latest'));
          await fsyncPath(tierRoot);
        } catch (err) {
          await rm(building, { recursive: true, force: true });
          throw err;
        }
        // Keep N; the blobs this generation used are now linked into it.
        const names = (await readdir(tierRoot)).filter((n) => GENERATION_RE.test(n)).sort();
        for (const n of names.slice(0, Math.max(0, names.length - keep[tier]))) if (n !== generation) await rm(join(tierRoot, n), { recursive: true, force: true });
        for (const e of m.entries) await unlink(join(blobs, e.sha256)).catch(() => undefined);
        const committed: SurvivalCommitted = { generation, files: m.entries.length };
        return committed;
      }),
  );

  app.get('/v1/survival', { config: { scope: 'read' } }, async (): Promise<SurvivalList> => {
    const machines = [];
    for (const machine of (await readdir(root).catch(() => [] as string[])).filter((n) => isHost(n)).sort()) {
      const tiers = [];
      for (const tier of TIERS) {
        const dir = join(root, machine, tier);
        const generations = (await readdir(dir).catch(() => [] as string[])).filter((n) => GENERATION_RE.test(n)).sort();
        const latest = await readlink(join(dir, 'latest')).catch(() => null);
        tiers.push({ tier, latest, generations });
      }
      machines.push({ machine, tiers });
    }
    return { machines };
  });
};
