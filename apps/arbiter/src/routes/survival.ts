/**
 * Survival copies: the holder sends the survival subset of a generation (never
 * a secret) to the arbiter, which keeps the last N per machine and tier in its survival store
 * (../survival/store.ts: on its disk with SQLite, under the prefix with etcd).
 *
 *   PUT /v1/survival/:tier/:generation/blobs/:sha256   application/octet-stream → {stored, bytes}
 *   PUT /v1/survival/:tier/:generation                 {manifest, sums}         → {generation, files}
 *   GET /v1/survival                                                           → {machines[{machine, tiers[…]}]}
 *
 * Blobs first (each checked against its sha256 as it lands), then the manifest, which
 * publishes the generation: the manifest read by the agent's own reader (`@hq/protocol/schemas`
 * `checkManifest`), every path not a secret (the third check, after the agent's two, with the
 * agent's default secret names), holder = the token's machine; then the store checks the lease
 * generation (≥ the highest accepted for that machine and tier), verifies every file and
 * publishes the generation whole. Nothing is visible before that.
 *
 * Not registered by itself: `app.register(survivalRoutes, { dataDir | store, authorize })`, where
 * `authorize(rawHeaders)` returns the machine of a valid member (or admin) token, or null.
 */
import type { Readable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  ERRORS,
  type CatalogEntry,
  REPLICATION_ERRORS,
  formatSums,
  isHost,
  isSecretPath,
  type Manifest,
  type SurvivalBlobStored,
  type SurvivalCommitted,
  type SurvivalList,
  type Tier,
} from '@hq/protocol';
import type { checkManifest } from '@hq/protocol/schemas';
import { HttpError } from '@hq/runtime/refusal';
import {
  ErrorBody,
  PushBody,
  SurvivalBlobParams,
  SurvivalBlobStoredAnswer,
  SurvivalCommittedAnswer,
  SurvivalParams,
} from '../schemas/generated.js';
import { SURVIVAL_KEEP, type CommitError, type SurvivalStore } from '../survival/store.js';

export interface SurvivalRoutesOptions {
  /** Where the copies live (the server picks the backend: files under the data dir, or etcd). */
  readonly store: SurvivalStore;
  readonly authorize: (
    rawHeaders: readonly string[],
  ) => { readonly machine: string } | null | Promise<{ readonly machine: string } | null>;
  /** Generations kept per tier and machine. Default core 36, big 8, obs 8. */
  readonly keep?: { readonly core?: number; readonly big?: number; readonly obs?: number };
}

const COMMIT_ERRORS: { readonly [E in CommitError]: CatalogEntry } = {
  stale: ERRORS.STALE_GENERATION,
  exists: ERRORS.CONFLICT,
  incomplete: REPLICATION_ERRORS.INCOMPLETE,
  checksum: REPLICATION_ERRORS.CHECKSUM,
  'too-large': ERRORS.TOO_LARGE,
};

/** A survival copy holds at most this many files (core-sized items). */
const MAX_ENTRIES = 10_000;

/**
 * The protocol's manifest reader (`checkManifest`), loaded with its TypeBox schema on the first
 * push: an arbiter that takes no survival copy never loads TypeBox (docs/BENCH.md).
 */
let reader: Promise<typeof checkManifest> | null = null;
const manifestReader = (): Promise<typeof checkManifest> =>
  (reader ??= import('@hq/protocol/schemas').then((m) => m.checkManifest));

/**
 * The subset manifest: the agent's reader, then what a survival copy adds — the path's tier and
 * generation, a lease generation and a holder (never a copy made before any lease), no secret.
 */
async function readManifest(
  v: unknown,
  tier: Tier,
  generation: string,
): Promise<{ ok: true; manifest: Manifest; holder: string } | { ok: false; message: string }> {
  const m = (await manifestReader())(v);
  if (typeof m === 'string') return { ok: false, message: m };
  if (m.generation !== generation) return { ok: false, message: 'manifest generation does not match the path' };
  if (m.tier !== tier) return { ok: false, message: 'manifest tier does not match the path' };
  if (m.leaseGeneration < 1) return { ok: false, message: 'manifest leaseGeneration must be a positive integer' };
  if (m.holder === null) return { ok: false, message: 'manifest holder must be a host' };
  if (m.entries.length > MAX_ENTRIES)
    return { ok: false, message: `manifest entries may list at most ${MAX_ENTRIES} files` };
  const secret = m.entries.find((e) => isSecretPath(e.path));
  if (secret !== undefined)
    return { ok: false, message: `${secret.path} is a secret and never goes to a survival copy` };
  return { ok: true, manifest: m, holder: m.holder };
}

/** A refusal whose message is sent verbatim (a path may hold any spacing; the default body is one shortened line). */
function refusal(entry: CatalogEntry, message: string = entry.message): HttpError {
  return new HttpError(entry, message, { error: entry.code, message });
}

type App = Parameters<FastifyPluginAsyncTypebox>[0];
/** The machine of each write's token, set by the onRequest hook. */
type Machines = WeakMap<object, string>;

/** Writes carry a member (or admin) token; its machine is the one the copy is of. */
function authorizeWrites(app: App, authorize: SurvivalRoutesOptions['authorize'], machineOf: Machines): void {
  app.addHook('onRequest', async (req) => {
    if (req.method === 'GET' || req.method === 'HEAD') return undefined; // reads follow the arbiter's own read rule (scope read)
    const who = await authorize(req.raw.rawHeaders);
    if (who === null || !isHost(who.machine)) throw refusal(ERRORS.UNAUTHORIZED);
    machineOf.set(req, who.machine);
    return undefined;
  });
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));
}

/** One blob, checked against its sha256 as it lands. */
function blobRoute(app: App, store: SurvivalStore, machineOf: Machines): void {
  app.put(
    '/v1/survival/:tier/:generation/blobs/:sha256',
    {
      config: { scope: 'member' },
      schema: {
        params: SurvivalBlobParams,
        response: { 200: SurvivalBlobStoredAnswer, 413: ErrorBody, 415: ErrorBody, 422: ErrorBody },
      },
    },
    async (req) => {
      const machine = machineOf.get(req) as string;
      const stream = req.body as Readable | undefined;
      if (req.headers['content-type'] !== 'application/octet-stream' || stream === undefined) {
        stream?.resume();
        throw refusal(ERRORS.UNSUPPORTED_MEDIA, 'a blob must be application/octet-stream');
      }
      const r = await store.putBlob(machine, req.params.sha256, stream as AsyncIterable<Buffer>);
      if (!r.ok) {
        stream.resume();
        throw refusal(r.error === 'too-large' ? ERRORS.TOO_LARGE : REPLICATION_ERRORS.CHECKSUM, r.message);
      }
      const bytes = r.bytes;
      const stored: SurvivalBlobStored = { stored: true, bytes };
      return stored;
    },
  );
}

/** Runs each call after the one before it has finished: commits never interleave. */
function serially(): <T>(fn: () => Promise<T>) => Promise<T> {
  let commits: Promise<unknown> = Promise.resolve();
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const p = commits.then(fn, fn);
    commits = p.catch(() => undefined);
    return p;
  };
}

/** The manifest, which publishes the generation whole once every file is verified. */
function commitRoute(
  app: App,
  store: SurvivalStore,
  keep: { readonly [T in Tier]: number },
  machineOf: Machines,
): void {
  const serial = serially();
  app.put(
    '/v1/survival/:tier/:generation',
    {
      config: { scope: 'member' },
      bodyLimit: 4 * 1024 * 1024,
      schema: {
        params: SurvivalParams,
        body: PushBody,
        response: {
          200: SurvivalCommittedAnswer,
          400: ErrorBody,
          403: ErrorBody,
          409: ErrorBody,
          413: ErrorBody,
          422: ErrorBody,
        },
      },
    },
    async (req) =>
      serial(async () => {
        const machine = machineOf.get(req) as string;
        const { tier, generation } = req.params;
        const read = await readManifest(req.body.manifest, tier, generation);
        if (!read.ok) throw refusal(REPLICATION_ERRORS.BAD_MANIFEST, read.message);
        const m = read.manifest;
        if (read.holder !== machine)
          throw refusal(
            ERRORS.WRONG_HOST,
            `the manifest's holder ${read.holder} is not the token's machine ${machine}`,
          );
        const sums = formatSums(m.entries);
        if (req.body.sums !== sums)
          throw refusal(REPLICATION_ERRORS.BAD_MANIFEST, 'SHA256SUMS does not match the manifest entries');
        const r = await store.commit(machine, m, sums, keep[tier]);
        if (!r.ok) throw refusal(COMMIT_ERRORS[r.error], r.message);
        const committed: SurvivalCommitted = { generation, files: m.entries.length };
        return committed;
      }),
  );
}

export const survivalRoutes: FastifyPluginAsync<SurvivalRoutesOptions> = async (instance, opts) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const store = opts.store;
  const keep = {
    core: opts.keep?.core ?? SURVIVAL_KEEP.core,
    big: opts.keep?.big ?? SURVIVAL_KEEP.big,
    obs: opts.keep?.obs ?? SURVIVAL_KEEP.obs,
  };
  const machineOf: Machines = new WeakMap();
  authorizeWrites(app, opts.authorize, machineOf);
  blobRoute(app, store, machineOf);
  commitRoute(app, store, keep, machineOf);
  app.get('/v1/survival', { config: { scope: 'read' } }, (): Promise<SurvivalList> => store.list());
};
