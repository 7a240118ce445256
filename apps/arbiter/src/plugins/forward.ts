/**
 * Store etcd: a mutation (any method but GET, HEAD, OPTIONS) that reaches an arbiter that is not
 * the elected one is passed, unchanged, to the elected arbiter, and its answer back unchanged —
 * status, headers, body (leadership.ts decides where: `route()`).
 *
 * Why a proxy and not a redirect: the agents and the CLI need nothing new (undici does not follow
 * a 307 by itself, and an old agent would treat it as a failure), the bearer token goes only
 * where the agent sent it and on to the arbiter it trusts, and a request is decided exactly once
 * — by the elected arbiter, which answers only after its commit (S4). The agent counts validity
 * from its own send time, so the extra hop only shortens what it believes, never lengthens it.
 *
 * Runs in `onRequest`, before authentication and before the body is read: the elected arbiter
 * authenticates and validates. A request that was forwarded once is never forwarded again (two
 * arbiters that disagree about who is elected answer 503 rather than loop). No elected arbiter
 * known, or the elected one unreachable: 503 `HQ_ERR_NOT_ELECTED` (the agents try their next
 * `arbiterUrls` entry or again later).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent } from 'undici';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import { JOIN_PATH } from '@hq/runtime/join-bundle';
import type { Leadership, Route } from '../leadership.js';

/** Marks a forwarded request: never forwarded twice. */
export const FORWARDED_HEADER = 'x-hq-forwarded-by';

/** Request headers not passed on (hop-by-hop, or set by the next hop itself). */
const HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'host',
  'proxy-connection',
  'te',
  'trailer',
]);

export interface ForwardOptions {
  readonly leadership: Leadership;
  /** The whole forwarded call, ms (default 10 000: the app's own request timeout). */
  readonly timeoutMs?: number;
}

export const forwardPlugin = fp(
  async (app: FastifyInstance, opts: ForwardOptions) => {
    const agent = new Agent({ keepAliveTimeout: 10_000, connect: { timeout: 2000 } });
    const timeoutMs = opts.timeoutMs ?? 10_000;
    app.addHook('onClose', async () => {
      await agent.close();
    });
    // Callback-style: a request this arbiter answers itself (every one on the elected arbiter)
    // passes without a promise; one to forward goes on to `forward`.
    app.addHook('onRequest', (req, reply, done) => {
      if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return done();
      // A join bundle's ticket is in this arbiter's dataDir (token writes need no election, as for `token issue`).
      if (req.url === JOIN_PATH) return done();
      const route = opts.leadership.route();
      if (route.to === 'self') return done();
      forward(req, reply, route).then(
        () => undefined, // answered: `done` is not called
        (err: unknown) => done(err as Error),
      );
    });
    const forward = async (
      req: FastifyRequest,
      reply: FastifyReply,
      route: Exclude<Route, { to: 'self' }>,
    ): Promise<void> => {
      // The reason verbatim (the default body is one shortened line).
      const refuse = (message: string): never => {
        throw new HttpError(ERRORS.NOT_ELECTED, message, { error: ERRORS.NOT_ELECTED.code, message });
      };
      if (route.to === 'none') return refuse(`${ERRORS.NOT_ELECTED.message}: ${route.why}`);
      if (req.headers[FORWARDED_HEADER] !== undefined)
        return refuse(
          `${ERRORS.NOT_ELECTED.message}: forwarded here by ${String(req.headers[FORWARDED_HEADER])}, but this arbiter is not elected either`,
        );
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      headers[FORWARDED_HEADER] = opts.leadership.self;
      const hasBody = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
      try {
        const res = await agent.request({
          origin: route.url,
          path: req.url,
          method: req.method as 'POST',
          headers,
          body: hasBody || req.headers['transfer-encoding'] !== undefined ? req.raw : null,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs),
        });
        reply.code(res.statusCode);
        for (const [k, v] of Object.entries(res.headers))
          if (v !== undefined && !HOP.has(k) && k !== 'content-length') reply.header(k, v);
        reply.send(Buffer.from(await res.body.arrayBuffer()));
      } catch (err) {
        req.log.warn({ err: (err as Error).message, to: route.url }, 'forwarding to the elected arbiter failed');
        refuse(`${ERRORS.NOT_ELECTED.message}: the elected arbiter ${route.url} did not answer`);
      }
    };
  },
  { name: 'hq-forward', dependencies: ['hq-context'], fastify: '5.x' },
);
