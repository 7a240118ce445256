/**
 * The Fastify app: plugins → routes, one error handler. Bad input is always a 4xx with
 * `{error, message}` from the catalog; a 5xx never shows its detail; no stack ever leaves.
 */
import {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Logger } from 'pino';
import type { IncomingMessage } from 'node:http';
import { ERRORS } from '@hq/protocol';
import { authPlugin } from '../plugins/auth.js';
import { contextPlugin, type HqContext } from '../plugins/context.js';
import { BODY_LIMIT, fastifyBase, type HqFastify } from '@hq/runtime/fastify-base';
import { oneLine } from '@hq/runtime/refusal';
import { PreconditionFailed } from '../if-match.js';
import { healthRoutes } from '../routes/health.js';
import { leaseRoutes } from '../routes/lease.js';
import { heartbeatRoutes } from '../routes/heartbeat.js';
import { adminRoutes } from '../routes/admin.js';
import { eventRoutes } from '../routes/events.js';
import { metricsRoutes } from '../routes/metrics.js';
import { registerOpenApi } from './openapi.js';
import { statusPage, statusPageOptions } from '../routes/status-page/index.js';
import type { HostLoad } from '../routes/status-page/model.js';
import { type EventWaiters, eventStreamRoutes } from '../routes/events-stream.js';
import { survivalRoutes } from '../routes/survival.js';
import { FileSurvivalStore } from '../store/sqlite/survival.js';
import { joinRoutes } from '../routes/join.js';
import { authenticate } from '../auth.js';
import { leaseFastPath } from './fast-path.js';
import { CasError, NotElectedError } from '../store/store.js';
import { isEtcdError } from '../store/etcd/errors.js';
import { versionedFactory } from '@hq/runtime/protocol';
import { type Timers, realTimers } from '@hq/runtime/clock';

export interface AppOptions {
  readonly hq: HqContext;
  readonly log: Logger;
  /** Milliseconds to receive a whole request (slow-loris bound). */
  readonly requestTimeoutMs?: number;
  /** Milliseconds a socket may stay idle. */
  readonly connectionTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
  /**
   * The operator pages: status page (`GET /`) and the event stream, woken by `waiters` after
   * every commit. The daemon serves them; tests that register them with their own options
   * (test/operator) leave this out.
   */
  readonly operator?: {
    readonly waiters: EventWaiters;
    readonly load?: ((host: string) => HostLoad | null) | undefined;
  };
  /** `GET /v1/lease` answered in front of Fastify (default true; false = the route only, for tests that compare). */
  readonly fastPath?: boolean;
  /** The timer that bounds the read of a refused body (tests; default the real ones). */
  readonly timers?: Timers;
}

/** How long a refused body is read before its 413 goes out anyway (a client that never stops). */
const LINGER_MS = 2_000;

/** Reads and drops the rest of `req`'s body, then `next()`: at its end, or after LINGER_MS on `timers`. */
function lingerThen(req: IncomingMessage, timers: Timers, next: () => void): void {
  let gone = false;
  const go = (): void => {
    if (gone) return;
    gone = true;
    timers.clear(timer);
    req.removeListener('end', go);
    req.removeListener('close', go);
    next();
  };
  const timer = timers.set(go, LINGER_MS);
  req.once('end', go);
  req.once('close', go);
  req.resume();
}

/**
 * The app, built in order: the Fastify base both daemons share (hq's limits, the one error
 * handler with the arbiter's store errors, the unknown-route answer, the protocol version), JSON
 * only, the closing and lingering hooks, the request-duration metric, then the plugins, the
 * API's routes and (for the daemon) the operator pages.
 */
export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const fast = opts.fastPath === false ? null : leaseFastPath(() => opts.hq);
  const app = createFastify(opts, fast);
  acceptJsonOnly(app);
  closeAndLinger(app, fast, opts.timers ?? realTimers);
  observeDurations(app, opts.hq);
  await registerPlugins(app, opts.hq);
  await registerApiRoutes(app, opts.hq);
  if (opts.operator !== undefined) await registerOperatorPages(app, opts.hq, opts.operator);
  return app;
}

type FastPath = ReturnType<typeof leaseFastPath>;
type App = HqFastify;

/** The shared base with the arbiter's logger and timeouts, serving `GET /v1/lease` in front of it when `fast` is given. */
function createFastify(opts: AppOptions, fast: FastPath | null): App {
  return fastifyBase({
    side: () => `hq-arbiter on ${opts.hq.config.arbiter}`,
    serverFactory: fast === null ? undefined : versionedFactory(fast.factory),
    requestTimeoutMs: opts.requestTimeoutMs ?? 10_000,
    connectionTimeoutMs: opts.connectionTimeoutMs ?? 30_000,
    fastify: {
      loggerInstance: opts.log as unknown as FastifyBaseLogger,
      logController: new LogController({ disableRequestLogging: true }),
      keepAliveTimeout: opts.keepAliveTimeoutMs ?? 10_000,
      return503OnClosing: true,
      forceCloseConnections: 'idle',
      routerOptions: { ignoreTrailingSlash: false },
    },
    ownErrors: storeErrors,
  });
}

/** JSON only (415 otherwise). An empty JSON body is "no body" (e.g. POST /v1/check). */
function acceptJsonOnly(app: App): void {
  app.removeAllContentTypeParsers();
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (req, body, done) => {
    if (body === '') {
      done(null, undefined);
      return;
    }
    json(req, body as string, done);
  });
}

/** The arbiter's own errors, before the shared refusals: a lost If-Match and the store's refusals. */
function storeErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  if (err instanceof PreconditionFailed) {
    reply.header('etag', `"${err.revision}"`);
    return reply.code(412).send({ error: ERRORS.PRECONDITION.code, message: err.message });
  }
  // Store etcd: not elected (a term that just ended), or etcd did not answer — nothing decided.
  if (err instanceof NotElectedError)
    return reply.code(503).send({ error: ERRORS.NOT_ELECTED.code, message: ERRORS.NOT_ELECTED.message });
  // The record kept changing under every retry (other writers on the prefix): nothing decided.
  if (err instanceof CasError) {
    req.log.warn({ route: req.routeOptions.url }, 'the record kept changing under the decision: answered 503');
    return reply.code(503).send({
      error: ERRORS.STORE_UNAVAILABLE.code,
      message:
        'the lease record kept changing under the decision (other writers on the store): nothing was decided; send again',
    });
  }
  if (isEtcdError(err) && err.kind !== 'bad-request') {
    req.log.warn({ err: err.message, route: req.routeOptions.url }, 'store unavailable');
    return reply.code(503).send({
      error: ERRORS.STORE_UNAVAILABLE.code,
      message: oneLine(
        `${ERRORS.STORE_UNAVAILABLE.message} (${err.kind}${err.kind === 'indeterminate' ? ': the last write may have applied; the next decision reads it back' : ''})`,
      ),
    });
  }
  return undefined;
}

/** Once closing, answers end their connection; a refused body is read before its 413 goes out. */
function closeAndLinger(app: App, fast: FastPath | null, timers: Timers): void {
  // Once closing, answers in flight end their connection, so close() need not wait for keep-alive.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    fast?.closing();
  });
  // Callback-style hooks (here and in the version, forward and auth hooks): every request runs
  // them, and a synchronous one costs no promise and no turn of the microtask queue.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    // A body refused before it was read (413: Fastify answers on the Content-Length alone and
    // closes the connection): read the rest first, for at most LINGER_MS. A socket closed with
    // unread data is reset, and a reset can drop the answer before the client reads it
    // (RFC 9112 §9.6, lingering close; test/faults/hostile.test.ts sends such bodies whole).
    if (reply.statusCode === 413 && !req.raw.complete) return lingerThen(req.raw, timers, () => done(null, payload));
    done(null, payload);
  });
}

/** The request-duration histogram, by method, route and status. */
function observeDurations(app: App, hq: HqContext): void {
  app.addHook('onResponse', (req, reply, done) => {
    hq.metrics.http.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
}

/** The context every route is handed, forwarding (store etcd), then authentication. */
async function registerPlugins(app: App, hq: HqContext): Promise<void> {
  await app.register(contextPlugin, { hq });
  // Store etcd: before authentication, a mutation on an arbiter that does not decide goes to the one that does.
  const leadership = hq.leadership ?? null;
  if (leadership !== null) {
    const { forwardPlugin } = await import('../plugins/forward.js'); // undici: loaded only for etcd
    await app.register(forwardPlugin, { leadership });
  }
  await app.register(authPlugin);
}

/** The API: the OpenAPI document first (@fastify/swagger learns routes from an onRoute hook), then every route. */
async function registerApiRoutes(app: App, hq: HqContext): Promise<void> {
  await registerOpenApi(app, { version: hq.version, openReads: hq.config.auth.openReads });
  await app.register(healthRoutes);
  await app.register(leaseRoutes);
  await app.register(heartbeatRoutes);
  await app.register(adminRoutes);
  await app.register(eventRoutes);
  await app.register(metricsRoutes);
  await app.register(joinRoutes);
}

/** The daemon's operator pages: the status page, the event stream, and the survival copies' routes. */
async function registerOperatorPages(
  app: App,
  hq: HqContext,
  operator: NonNullable<AppOptions['operator']>,
): Promise<void> {
  await app.register(statusPage, statusPageOptions(hq, { load: operator.load }));
  await app.register(eventStreamRoutes, {
    listEvents: (after, limit) => hq.store.listEvents(after, limit),
    tailAfter: (n) => hq.store.tailAfter(n),
    waiters: operator.waiters,
    nowMs: () => hq.arbiter.now() * 1000,
  });
  // Survival copies of the holder's state: under {dataDir}/survival, or in etcd.
  await app.register(survivalRoutes, {
    store: hq.survival ?? new FileSurvivalStore(hq.config.dataDir),
    authorize: async (raw) => {
      const r = await authenticate(hq.store, raw);
      return r.ok && r.principal !== null ? { machine: r.principal.machine } : null;
    },
  });
}
