/**
 * The Fastify both daemons serve on: hq's limits, JSON without prototype poisoning, the schema
 * checks that change nothing they check, and the one way of answering what went wrong — every
 * refusal and Fastify's own 4xx in `{error, message}` (refusal.ts), a known path asked with
 * another method a 405, an unknown one a 404, anything unexpected a 500 without detail — with
 * the protocol version on every answer. Each daemon adds its own errors, hooks and routes.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerFactory,
  type FastifyServerOptions,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { versionHooks } from './protocol.js';
import { INTERNAL_BODY, RouteMethods, answerRouterError, refusalOf } from './refusal.js';

/** 64 KiB: every hq body is a few hundred bytes; anything larger is an error or an attack. */
export const BODY_LIMIT = 64 * 1024;

export type HqFastify = FastifyInstance<
  Server,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface FastifyBaseOptions {
  /** Who answers, for a refused protocol version: `hq-agent on mbp`. */
  readonly side: () => string;
  /** Milliseconds to receive a whole request (slow-loris bound). */
  readonly requestTimeoutMs: number;
  /** Milliseconds a socket may stay idle. */
  readonly connectionTimeoutMs: number;
  /** The server a fast path answers in front of Fastify (already versioned). */
  readonly serverFactory?: FastifyServerFactory | undefined;
  /** Fastify options one daemon alone sets: its logger, keep-alive and closing, its schema compilers. */
  readonly fastify?: FastifyServerOptions;
  /** The daemon's own errors, tried first: answers one and returns the reply, or returns undefined. */
  readonly ownErrors?: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined;
}

export function fastifyBase(opts: FastifyBaseOptions): HqFastify {
  const app = Fastify({
    ...(opts.serverFactory !== undefined ? { serverFactory: opts.serverFactory } : {}),
    ...opts.fastify,
    bodyLimit: BODY_LIMIT,
    requestTimeout: opts.requestTimeoutMs,
    connectionTimeout: opts.connectionTimeoutMs,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
    // The router's own refusals (a path parameter over 100 characters, a bad percent escape)
    // answer in hq's shape like every other error, never Fastify's.
    frameworkErrors: (err, _req, reply) => answerRouterError(err, reply),
  }).withTypeProvider<TypeBoxTypeProvider>();
  // Every route's URL and methods, for the 405 of a known path asked with another method; 404 otherwise.
  const known = new RouteMethods();
  app.addHook('onRoute', (r) => known.add(r.url, r.method));
  app.setNotFoundHandler((req, reply) => known.answerUnknown(req, reply));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const own = opts.ownErrors?.(err, req, reply);
    if (own !== undefined) return own;
    const refusal = refusalOf(err);
    if (refusal !== null) return reply.code(refusal.status).send(refusal.body);
    req.log.error({ err, route: req.routeOptions.url }, 'request failed');
    return reply.code(500).send(INTERNAL_BODY);
  });
  // First, so every answer — a forwarded one, a refusal, a 404 — carries the version, and a
  // version this side does not serve goes no further.
  const versions = versionHooks(opts.side);
  app.addHook('onRequest', versions.onRequest);
  app.addHook('preValidation', versions.preValidation);
  return app as unknown as HqFastify;
}
