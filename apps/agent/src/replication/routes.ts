/**
 * The standby's push routes on the agent's peer listener, every one behind the peer token:
 *
 *   GET    /v1/standby                                   → {acceptedGeneration, pushes, tiers[{tier, latest, generations}]}
 *   POST   /v1/standby/pushes              {manifest, sums, commit?} or {base, manifest, changed, removed, commit?}
 *                                                         → 200 {push, missing[sha256], have, chunked, committed?}
 *   PUT    /v1/standby/pushes/:push/recipes/:sha256      (application/octet-stream: the file's chunk list,
 *                                                          or with x-hq-base its delta from a kept file's)
 *                                                         → 200 {missing[[first, count]], have}
 *   PUT    /v1/standby/pushes/:push/chunks               (application/octet-stream: sha256 + bytes, repeated)
 *                                                         → 200 {received}
 *   PUT    /v1/standby/pushes/:push/blobs/:sha256        (application/octet-stream, header x-hq-offset)
 *                                                         → 200 {received, complete}   (a whole file, in pieces)
 *   POST   /v1/standby/pushes/:push/commit               → 200 {tier, generation, latest, received, linked}
 *   DELETE /v1/standby/pushes/:push                      → 200 {aborted}
 *
 * Refusals are thrown (`HttpError`, answered by the app's error handler) as `{error, message, …}`
 * with the replication catalog's status (409 for a stale lease generation). Register it on the peer app:
 *   `app.register(replicationPeerRoutes, { receiver, verifyPeer })`.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Readable } from 'node:stream';
import { BASE_HEADER, OFFSET_HEADER, REPLICATION_ERRORS } from '@hq/protocol';
import {
  BlobParams,
  ChunkBatchReceived,
  ChunkReceived,
  OffsetHeaders,
  PushBegun,
  StandbyPushBody,
  BaseHeaders,
  PushCommitted,
  PushParams,
  RecipeAccepted,
  RefusalBody,
} from '@hq/protocol/schemas';
import { HttpError } from '@hq/runtime/refusal';
import type { Refusal } from './errors.js';
import type { StandbyReceiver } from './receiver.js';

export interface ReplicationPeerRoutesOptions {
  readonly receiver: StandbyReceiver;
  /** Is this Authorization header value the peer token? (constant time, rotation-aware: the agent's). */
  readonly verifyPeer: (authorization: string | string[] | undefined) => boolean | Promise<boolean>;
  /** Largest manifest + sums body, bytes. Default 16 MiB (about 60 000 entries). */
  readonly manifestBodyLimit?: number;
}

/** The body stream (none for an empty body: an empty file's chunk list). */
const bodyStream = (body: unknown): Readable => (body instanceof Readable ? body : Readable.from([]));

/** The receiver's refusal, thrown to the app's error handler: `{error, message, …extra}` with its catalog status. */
function refused(r: Refusal): never {
  throw new HttpError(r.error, r.message, { error: r.error.code, message: r.message, ...(r.extra ?? {}) });
}

/** Exactly one Authorization header, and it is the peer token; else 401. */
async function requirePeerToken(
  req: FastifyRequest,
  verifyPeer: ReplicationPeerRoutesOptions['verifyPeer'],
): Promise<undefined> {
  // Node keeps only the first of two Authorization headers: count them in the raw list.
  let count = 0;
  for (let i = 0; i < req.raw.rawHeaders.length; i += 2)
    if (req.raw.rawHeaders[i]?.toLowerCase() === 'authorization') count++;
  if (count !== 1 || !(await verifyPeer(req.headers.authorization))) {
    throw new HttpError(REPLICATION_ERRORS.UNAUTHORIZED);
  }
  return undefined;
}

const typed = (instance: FastifyInstance) => instance.withTypeProvider<TypeBoxTypeProvider>();

/** The uploads of a push: a file's chunk list, a batch of chunks, or a piece of a whole file. */
function uploadRoutes(app: ReturnType<typeof typed>, receiver: StandbyReceiver): void {
  const octets = (type: string | undefined): void => {
    if (type !== 'application/octet-stream')
      refused({
        ok: false,
        error: REPLICATION_ERRORS.UNSUPPORTED_MEDIA,
        message: 'the body must be application/octet-stream',
      });
  };

  app.put(
    '/v1/standby/pushes/:push/recipes/:sha256',
    {
      schema: {
        params: BlobParams,
        headers: BaseHeaders,
        response: { 200: RecipeAccepted, '4xx': RefusalBody, '5xx': RefusalBody },
      },
    },
    async (req) => {
      octets(req.headers['content-type']);
      const r = await receiver.putRecipe(
        req.params.push,
        req.params.sha256,
        bodyStream(req.body),
        req.headers[BASE_HEADER],
      );
      if (!r.ok) refused(r);
      return { missing: r.missing, have: r.have };
    },
  );

  app.put(
    '/v1/standby/pushes/:push/chunks',
    { schema: { params: PushParams, response: { 200: ChunkBatchReceived, '4xx': RefusalBody, '5xx': RefusalBody } } },
    async (req) => {
      octets(req.headers['content-type']);
      const r = await receiver.putChunks(req.params.push, bodyStream(req.body));
      if (!r.ok) refused(r);
      return { received: r.received };
    },
  );

  app.put(
    '/v1/standby/pushes/:push/blobs/:sha256',
    {
      schema: {
        params: BlobParams,
        headers: OffsetHeaders,
        response: { 200: ChunkReceived, '4xx': RefusalBody, '5xx': RefusalBody },
      },
    },
    async (req) => {
      if (req.headers['content-type'] !== 'application/octet-stream') {
        refused({
          ok: false,
          error: REPLICATION_ERRORS.UNSUPPORTED_MEDIA,
          message: 'a blob chunk must be application/octet-stream',
        });
      }
      const offset = Number(req.headers[OFFSET_HEADER] ?? '0');
      const r = await receiver.putChunk(req.params.push, req.params.sha256, offset, req.body as Readable);
      if (!r.ok) refused(r);
      return { received: r.received, complete: r.complete };
    },
  );
}

export const replicationPeerRoutes: FastifyPluginAsync<ReplicationPeerRoutesOptions> = async (instance, opts) => {
  const app = typed(instance);
  const { receiver } = opts;

  app.addHook('onRequest', async (req) => requirePeerToken(req, opts.verifyPeer));

  // Blob chunks stay a stream: the handler writes them to disk as they arrive.
  app.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));

  app.get('/v1/standby', async () => receiver.status());

  app.post(
    '/v1/standby/pushes',
    {
      bodyLimit: opts.manifestBodyLimit ?? 16 * 1024 * 1024,
      schema: {
        body: StandbyPushBody,
        response: { 200: PushBegun, '4xx': RefusalBody, '5xx': RefusalBody },
      },
    },
    async (req) => {
      const r = await receiver.begin(req.body);
      if (!r.ok) refused(r);
      return {
        push: r.push,
        missing: r.missing,
        have: r.have,
        chunked: r.chunked,
        ...(r.committed === undefined ? {} : { committed: r.committed }),
      };
    },
  );

  uploadRoutes(app, receiver);

  app.post(
    '/v1/standby/pushes/:push/commit',
    {
      schema: {
        params: PushParams,
        response: { 200: PushCommitted, '4xx': RefusalBody, '5xx': RefusalBody },
      },
    },
    async (req) => {
      const r = await receiver.commit(req.params.push);
      if (!r.ok) refused(r);
      return { tier: r.tier, generation: r.generation, latest: r.latest, received: r.received, linked: r.linked };
    },
  );

  app.delete('/v1/standby/pushes/:push', { schema: { params: PushParams } }, async (req) => ({
    aborted: await receiver.abort(req.params.push),
  }));
};
