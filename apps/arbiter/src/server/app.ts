/**
 * The Fastify app: plugins → routes, one error handler. Bad input is always a 4xx with
 * `{error, message}` from the catalog; a 5xx never shows its detail; no stack ever leaves.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { IncomingMessage } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ERRORS } from '@hq/protocol';
import { authPlugin } from '../plugins/auth.js';
import { contextPlugin, type HqContext } from '../plugins/context.js';
import { INTERNAL_BODY, RouteMethods, answerRouterError, oneLine, refusalOf } from '@hq/runtime/refusal';
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
import { versionHooks, versionedFactory } from '@hq/runtime/protocol';

/** 64 KiB: every hq body is a few hundred bytes; anything larger is an error or an attack. */
export const BODY_LIMIT = 64 * 1024;

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
}

/** How long a refused body is read before its 413 goes out anyway (a client that never stops). */
const LINGER_MS = 2_000;

/** Reads and drops the rest of `req`'s body, then `next()`: at its end, or after LINGER_MS. */
function lingerThen(req: IncomingMessage, next: () => void): void {
  let gone = false;
  const go = (): void => {
    if (gone) return;
    gone = true;
    clearTimeout(timer);
    req.removeListener('end', go);
    req.removeListener('close', go);
    next();
  };
  const timer = setTimeout(go, LINGER_MS);
  req.once('end', go);
  req.once('close', go);
  req.resume();
}

/**
 * The app, built in order: Fastify with hq's limits, JSON only, the one error handler and the
 * unknown-route answer, the closing and lingering hooks, the request-duration metric, the protocol
 * version, then the plugins, the API's routes and (for the daemon) the operator pages.
 */
export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const fast = opts.fastPath === false ? null : leaseFastPath(() => opts.hq);
  const app = createFastify(opts, fast);
  answerUnknownRoutes(app);
  acceptJsonOnly(app);
  answerErrors(app);
  closeAndLinger(app, fast);
  observeDurations(app, opts.hq);
  speakProtocolVersion(app, opts.hq);
  await registerPlugins(app, opts.hq);
  await registerApiRoutes(app, opts.hq);
  if (opts.operator !== undefined) await registerOperatorPages(app, opts.hq, opts.operator);
  return app;
}

type FastPath = ReturnType<typeof leaseFastPath>;
type App = ReturnType<typeof createFastify>;

/** Fastify with hq's limits and timeouts, serving `GET /v1/lease` in front of it when `fast` is given. */
function createFastify(opts: AppOptions, fast: FastPath | null) {
  return Fastify({
    ...(fast !== null ? { serverFactory: versionedFactory(fast.factory) } : {}),
    loggerInstance: opts.log as unknown as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    requestTimeout: opts.requestTimeoutMs ?? 10_000,
    connectionTimeout: opts.connectionTimeoutMs ?? 30_000,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 10_000,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
    routerOptions: { ignoreTrailingSlash: false },
    // The router's own refusals (a path parameter over 100 characters, a bad percent escape)
    // answer in hq's shape like every other error, never Fastify's.
    frameworkErrors: (err, _req, reply) => answerRouterError(err, reply),
  }).withTypeProvider<TypeBoxTypeProvider>();
}

/** Every route's URL and methods, for the 405 of a known path asked with another method; 404 otherwise. */
function answerUnknownRoutes(app: App): void {
  const known = new RouteMethods();
  app.addHook('onRoute', (r) => known.add(r.url, r.method));
  app.setNotFoundHandler((req, reply) => known.answerUnknown(req, reply));
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

/** The one error handler: a lost If-Match, the store's refusals, every route's and Fastify's 4xx, else a 500 without detail. */
function answerErrors(app: App): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
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
    // Every route's refusal and Fastify's own 4xx, as both hq apps answer them.
    const refusal = refusalOf(err);
    if (refusal !== null) return reply.code(refusal.status).send(refusal.body);
    req.log.error({ err, route: req.routeOptions.url }, 'request failed');
    return reply.code(500).send(INTERNAL_BODY);
  });
}

/** Once closing, answers end their connection; a refused body is read before its 413 goes out. */
function closeAndLinger(app: App, fast: FastPath | null): void {
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
    if (reply.statusCode === 413 && !req.raw.complete) return lingerThen(req.raw, () => done(null, payload));
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

/**
 * The protocol version (docs/PROTOCOL.md "Versions"): first, so every answer — a forwarded one,
 * a refusal, a 404 — carries it, and a version this arbiter does not serve goes no further.
 */
function speakProtocolVersion(app: App, hq: HqContext): void {
  const versions = versionHooks(() => `hq-arbiter on ${hq.config.arbiter}`);
  app.addHook('onRequest', versions.onRequest);
  app.addHook('preValidation', versions.preValidation);
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
