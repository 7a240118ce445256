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
 * publishes the generation: every path safe and not a secret (the third check, after the
 * agent's two), holder = the token's machine, lease generation ≥ the highest accepted for that
 * machine and tier (lease-core `checkGeneration`), every file verified, then one rename and the
 * `latest` link moved. Nothing is visible before that; files 0600, folders 0700.
 *
 * Not registered by itself: `app.register(survivalRoutes, { dataDir, authorize })`, where
 * `authorize(rawHeaders)` returns the machine of a valid member (or admin) token, or null.
 */
import { constants } from 'node:fs';
import { link, lstat, open, readdir, readFile, readlink, rename, rm, symlink, unlink } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { checkGeneration, ERRORS, isHost, parseGeneration } from '@hq/lease-core';
import { fsyncDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';

export interface SurvivalRoutesOptions {
  readonly dataDir: string;
  readonly authorize: (rawHeaders: readonly string[]) => { readonly machine: string } | null | Promise<{ readonly machine: string } | null>;
  /** Generations kept per tier and machine. Default core 36, big 8, obs 8. */
  readonly keep?: { readonly core?: number; readonly big?: number; readonly obs?: number };
  /** Largest blob, bytes. Default 32 MiB (survival items are core-sized). */
  readonly maxBlobBytes?: number;
}

/** The agent's default secret names (replication/config.ts), checked again here. */
export const SURVIVAL_SECRET_PATTERNS: readonly RegExp[] = [
  /(^|\/)(secrets?|backup-key|acp-token)(\/|$|\.)/,
  /(^|\/)auth\.json/,
  /\.(p8|pem|key|env)$/,
  /(token|credential|password|session)[^/]*$/,
];

const GENERATION = /^[0-9]{8}T[0-9]{6}Z$/;
const SHA = /^[0-9a-f]{64}$/;
const TIERS = ['core', 'big', 'obs'] as const;
type Tier = (typeof TIERS)[number];

function pathProblem(p: unknown): string | null {
  if (typeof p !== 'string' || p === '' || p.length > 1024) return 'must be a non-empty relative path';
  if (p.startsWith('/') || /[\\\0\n\r]/.test(p)) return 'must be relative, without backslash, NUL or newline';
  if (p.split('/').some((x) => x === '' || x === '.' || x === '..')) return 'may not hold empty, "." or ".." components';
  if (p === 'MANIFEST.json' || p === 'SHA256SUMS') return 'names an index file';
  return null;
}

const isSecret = (p: string): boolean => SURVIVAL_SECRET_PATTERNS.some((r) => r.test(p.toLowerCase()));

interface Entry {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
}

/** The subset manifest, read strictly (the agent's shape; only what the arbiter needs is checked deeply). */
function readManifest(v: unknown, tier: Tier, generation: string): { ok: true; entries: Entry[]; holder: string; leaseGeneration: number } | { ok: false; message: string } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, message: 'manifest must be an object' };
  const m = v as Record<string, unknown>;
  if (m['generation'] !== generation) return { ok: false, message: 'manifest generation does not match the path' };
  if (m['tier'] !== tier) return { ok: false, message: 'manifest tier does not match the path' };
  const lg = m['leaseGeneration'];
  if (typeof lg !== 'number' || !Number.isSafeInteger(lg) || lg < 1) return { ok: false, message: 'manifest leaseGeneration must be a positive integer' };
  if (!isHost(m['holder'])) return { ok: false, message: 'manifest holder must be a host' };
  if (!Array.isArray(m['entries']) || m['entries'].length > 10_000) return { ok: false, message: 'manifest entries must be a list' };
  const entries: Entry[] = [];
  const seen = new Set<string>();
  for (const e of m['entries'] as unknown[]) {
    if (typeof e !== 'object' || e === null) return { ok: false, message: 'manifest entry must be an object' };
    const x = e as Record<string, unknown>;
    const problem = pathProblem(x['path']);
    if (problem !== null) return { ok: false, message: `manifest path ${JSON.stringify(x['path'])} ${problem}` };
    const path = x['path'] as string;
    if (seen.has(path)) return { ok: false, message: `manifest lists ${path} twice` };
    seen.add(path);
    if (isSecret(path)) return { ok: false, message: `${path} is a secret and never goes to a survival copy` };
    if (typeof x['sha256'] !== 'string' || !SHA.test(x['sha256'])) return { ok: false, message: `manifest sha256 of ${path} is not a sha256` };
    if (typeof x['bytes'] !== 'number' || !Number.isSafeInteger(x['bytes']) || x['bytes'] < 0) return { ok: false, message: `manifest bytes of ${path} is not a size` };
    entries.push({ path, bytes: x['bytes'] as number, sha256: x['sha256'] as string });
  }
  return { ok: true, entries, holder: m['holder'] as string, leaseGeneration: lg };
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

function fail(reply: FastifyReply, status: number, error: string, message: string): FastifyReply {
  return reply.code(status).send({ error, message });
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
    if (who === null || !isHost(who.machine)) return fail(reply, 401, ERRORS.UNAUTHORIZED.code, ERRORS.UNAUTHORIZED.message);
    machineOf.set(req, who.machine);
    return undefined;
  });
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

  const Params = Type.Object(
    { tier: Type.Union(TIERS.map((t) => Type.Literal(t))), generation: Type.String({ pattern: GENERATION.source }) },
    { additionalProperties: false },
  );

  app.put(
    '/v1/survival/:tier/:generation/blobs/:sha256',
    {
      config: { scope: 'member' },
      schema: {
        params: Type.Object(
          { tier: Type.Union(TIERS.map((t) => Type.Literal(t))), generation: Type.String({ pattern: GENERATION.source }), sha256: Type.String({ pattern: SHA.source }) },
          { additionalProperties: false },
        ),
      },
    },
    async (req, reply) => {
      const machine = machineOf.get(req) as string;
      const stream = req.body as Readable | undefined;
      if (req.headers['content-type'] !== 'application/octet-stream' || stream === undefined) {
        stream?.resume();
        return fail(reply, 415, ERRORS.UNSUPPORTED_MEDIA.code, 'a blob must be application/octet-stream');
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
        if ((err as { tooLarge?: boolean }).tooLarge === true) return fail(reply, 413, ERRORS.TOO_LARGE.code, `a survival blob may not exceed ${maxBlob} bytes`);
        throw err;
      }
      await fh.close();
      if (hash.digest('hex') !== req.params.sha256) {
        await unlink(part);
        return fail(reply, 422, 'HQ_ERR_CHECKSUM', 'the blob does not match its sha256');
      }
      await rename(part, join(staging, req.params.sha256));
      return { stored: true, bytes };
    },
  );

  app.put(
    '/v1/survival/:tier/:generation',
    {
      config: { scope: 'member' },
      bodyLimit: 4 * 1024 * 1024,
      schema: { params: Params, body: Type.Object({ manifest: Type.Unknown(), sums: Type.String() }, { additionalProperties: false }) },
    },
    async (req, reply) =>
      serial(async () => {
        const machine = machineOf.get(req) as string;
        const { tier, generation } = req.params as { tier: Tier; generation: string };
        const m = readManifest(req.body.manifest, tier, generation);
        if (!m.ok) return fail(reply, 400, ERRORS.BAD_REQUEST.code, m.message);
        if (m.holder !== machine) return fail(reply, 403, ERRORS.WRONG_HOST.code, `the manifest's holder ${m.holder} is not the token's machine ${machine}`);
        const sums = m.entries.map((e) => `${e.sha256}  ${e.path}\n`).join('');
        if (req.body.sums !== sums) return fail(reply, 400, ERRORS.BAD_REQUEST.code, 'SHA256SUMS does not match the manifest entries');
        const tierRoot = join(root, machine, tier);
        await mkdirPrivate(tierRoot);
        const markFile = join(tierRoot, 'accepted-generation');
        let mark = 0;
        try {
          const g = parseGeneration(await readFile(markFile, 'utf8'));
          if (g === null) return fail(reply, 500, ERRORS.INTERNAL.code, 'the survival mark is unreadable');
          mark = g;
        } catch {
          mark = 0;
        }
        const v = checkGeneration(mark, m.leaseGeneration);
        if (!v.ok) return fail(reply, 409, ERRORS.STALE_GENERATION.code, `lease generation ${m.leaseGeneration} is lower than ${mark}, the highest accepted`);
        const final = join(tierRoot, generation);
        if (await lstat(final).then(() => true, () => false)) return fail(reply, 409, ERRORS.CONFLICT.code, `survival generation ${tier}/${generation} exists`);
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
              return fail(reply, 409, 'HQ_ERR_PUSH_INCOMPLETE', `the blob of ${e.path} was not sent`);
            }
            const st = await lstat(dest);
            if (!st.isFile() || st.size !== e.bytes || (await hashFile(dest)) !== e.sha256) {
              await rm(building, { recursive: true, force: true });
              return fail(reply, 422, 'HQ_ERR_CHECKSUM', `${e.path} does not match its manifest entry`);
            }
          }
          await writeAtomic(join(building, 'MANIFEST.json'), `${JSON.stringify(req.body.manifest, null, 2)}\n`);
          await writeAtomic(join(building, 'SHA256SUMS'), sums);
          if (m.leaseGeneration > mark) await writeAtomic(markFile, `${m.leaseGeneration}\n`);
          await rename(building, final);
          await fsyncDir(tierRoot);
          const tmpLink = join(tierRoot, `.latest-${randomBytes(4).toString('hex')}`);
          await symlink(generation, tmpLink);
          await rename(tmpLink, join(tierRoot, 'latest'));
          await fsyncDir(tierRoot);
        } catch (err) {
          await rm(building, { recursive: true, force: true });
          throw err;
        }
        // Keep N; the blobs this generation used are now linked into it.
        const names = (await readdir(tierRoot)).filter((n) => GENERATION.test(n)).sort();
        for (const n of names.slice(0, Math.max(0, names.length - keep[tier]))) if (n !== generation) await rm(join(tierRoot, n), { recursive: true, force: true });
        for (const e of m.entries) await unlink(join(blobs, e.sha256)).catch(() => undefined);
        return { generation, files: m.entries.length };
      }),
  );

  app.get('/v1/survival', { config: { scope: 'read' } }, async () => {
    const machines = [];
    for (const machine of (await readdir(root).catch(() => [] as string[])).filter((n) => isHost(n)).sort()) {
      const tiers = [];
      for (const tier of TIERS) {
        const dir = join(root, machine, tier);
        const generations = (await readdir(dir).catch(() => [] as string[])).filter((n) => GENERATION.test(n)).sort();
        const latest = await readlink(join(dir, 'latest')).catch(() => null);
        tiers.push({ tier, latest, generations });
      }
      machines.push({ machine, tiers });
    }
    return { machines };
  });
};
