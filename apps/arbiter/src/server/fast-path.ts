/**
 * The lease read's fast path, in front of Fastify (its `serverFactory`): `GET /v1/lease`,
 * spelled exactly so, with a request that authenticates for the `read` scope, is answered by a
 * plain node:http handler from the store's cached state — the route's own answer: the same
 * record (`arbiter.record()`), the same bytes (test/arbiter/fast-path.test.ts compares them
 * with the Fastify route's), the same headers (content-type, content-length, ETag) and the same
 * request-duration metric. Everything else — any other path or query, HEAD, a request that
 * does not authenticate (Fastify answers its 400/401), and anything once the app closes
 * (Fastify's 503 and `connection: close`) — goes to Fastify unchanged.
 *
 * Why: the read is the most frequent request (`curl arbiter:8470/v1/lease`, dashboards, the
 * agents' refresh) and Fastify's routing, hooks and reply machinery were about half of its cost
 * (docs/BENCH.md).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyServerFactory } from 'fastify';
import type { ArbiterState } from '@hq/lease-core';
import { authenticate, type AuthResult } from '../auth.js';
import { monotonicSeconds } from '@hq/runtime/clock';
import { isPromise, type Awaitable } from '../awaitable.js';
import type { HqContext } from '../plugins/context.js';

export interface FastPath {
  readonly factory: FastifyServerFactory;
  /** From the app's preClose on: every request goes to Fastify (which answers 503 while closing). */
  closing(): void;
}

export function leaseFastPath(hq: () => HqContext): FastPath {
  let closing = false;
  let timer: ((seconds: number) => void) | null = null;
  const factory: FastifyServerFactory = (handler, options) => {
    const opts = options as { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number };
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (closing || req.method !== 'GET' || req.url !== '/v1/lease') return handler(req, res);
      const t0 = monotonicSeconds();
      const { arbiter, store, config, metrics } = hq();
      const refused = (auth: AuthResult): boolean => !auth.ok || (auth.principal === null && !config.auth.openReads);
      const answer = (auth: AuthResult, state: ArbiterState | null): void => {
        if (refused(auth) || state === null) return void handler(req, res);
        let body: string;
        let revision: number;
        try {
          const record = arbiter.record(state);
          revision = record.revision;
          body = JSON.stringify(record);
        } catch {
          return void handler(req, res); // the route answers (its error handler: a 500 without detail)
        }
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          etag: `"${revision}"`,
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
        if (timer === null) {
          const h = metrics.http.labels({ method: 'GET', route: '/v1/lease', status: '200' });
          timer = (s) => h.observe(s);
        }
        timer(monotonicSeconds() - t0);
      };
      // SQLite answers both at once (no extra turn of the loop); a network store later.
      const auth = authenticate(store, req.rawHeaders);
      if (!isPromise(auth) && refused(auth)) return handler(req, res);
      let state: Awaitable<ArbiterState> | null;
      try {
        state = arbiter.read();
      } catch {
        state = null;
      }
      if (!isPromise(auth) && !isPromise(state)) return answer(auth, state);
      Promise.all([auth, Promise.resolve(state).catch(() => null)]).then(
        ([a, s]) => answer(a, s),
        () => void handler(req, res),
      );
    });
    // What Fastify sets on the server it creates itself (it leaves a factory's server alone).
    server.keepAliveTimeout = opts.keepAliveTimeout ?? 72_000;
    server.requestTimeout = opts.requestTimeout ?? 0;
    server.setTimeout(opts.connectionTimeout ?? 0);
    return server as Server;
  };
  return {
    factory,
    closing: () => {
      closing = true;
    },
  };
}
