/** Route scopes: checked on every request before the body is read. */
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ERRORS } from '@hq/protocol';
import { authenticate, type AuthResult } from '../auth.js';
import { isPromise, type Awaitable } from '../awaitable.js';
import type { RouteScope } from './context.js';
import { HttpError } from '@hq/runtime/refusal';

export const authPlugin = fp(
  async (app: FastifyInstance) => {
    // Callback-style: a token let in from memory (a deciding route, store etcd) or read
    // synchronously (SQLite) passes without a promise; a read over the network goes on when it answers.
    app.addHook('onRequest', (req, _reply, done) => {
      const scope = req.routeOptions.config?.scope ?? 'none';
      if (scope === 'none') return done();
      // A route that decides through `arbiter.submit` confirms a token from memory in its commit.
      let auth: Awaitable<AuthResult>;
      try {
        auth = authenticate(app.hq.store, req.raw.rawHeaders, req.routeOptions.config?.tokenInCommit === true);
      } catch (err) {
        return done(err as Error);
      }
      if (!isPromise(auth)) return done(admit(app, req, scope, auth));
      auth.then(
        (a) => done(admit(app, req, scope, a)),
        (err: unknown) => done(err as Error),
      );
    });
  },
  { name: 'hq-auth', dependencies: ['hq-context'], fastify: '5.x' },
);

/** Sets the request's principal when `auth` lets it in for `scope`; else the refusal to answer. */
function admit(app: FastifyInstance, req: FastifyRequest, scope: RouteScope, auth: AuthResult): HttpError | undefined {
  if (!auth.ok) return new HttpError(auth.status === 400 ? ERRORS.BAD_REQUEST : ERRORS.UNAUTHORIZED, auth.message);
  const p = auth.principal;
  req.principal = p;
  if (scope === 'read') {
    if (p === null && !app.hq.config.auth.openReads) return new HttpError(ERRORS.UNAUTHORIZED);
    return undefined;
  }
  if (p === null) return new HttpError(ERRORS.UNAUTHORIZED);
  if (scope === 'admin' && p.scope !== 'admin') return new HttpError(ERRORS.FORBIDDEN, 'this needs an admin token');
  if (scope === 'member' && p.scope !== 'member' && p.scope !== 'admin') {
    return new HttpError(ERRORS.FORBIDDEN, 'this needs a member or admin token');
  }
  if (scope === 'heartbeat' && p.scope !== 'member')
    return new HttpError(ERRORS.FORBIDDEN, 'heartbeats need a member token');
  return undefined;
}
