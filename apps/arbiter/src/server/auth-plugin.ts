/** Route scopes (SPEC §4): checked on every request before the body is read. */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { ERRORS } from '@hq/protocol';
import { authenticate } from '../auth.js';
import { HttpError } from '@hq/runtime/refusal';

export const authPlugin = fp(
  async (app: FastifyInstance) => {
    app.addHook('onRequest', async (req) => {
      const scope = req.routeOptions.config?.scope ?? 'none';
      if (scope === 'none') return;
      // A route that decides through `arbiter.submit` confirms a token from memory in its commit.
      const auth = await authenticate(app.hq.store, req.raw.rawHeaders, req.routeOptions.config?.tokenInCommit === true);
      if (!auth.ok) throw new HttpError(auth.status === 400 ? ERRORS.BAD_REQUEST : ERRORS.UNAUTHORIZED, auth.message);
      const p = auth.principal;
      req.principal = p;
      if (scope === 'read') {
        if (p === null && !app.hq.config.auth.openReads) throw new HttpError(ERRORS.UNAUTHORIZED);
        return;
      }
      if (p === null) throw new HttpError(ERRORS.UNAUTHORIZED);
      if (scope === 'admin' && p.scope !== 'admin') throw new HttpError(ERRORS.FORBIDDEN, 'this needs an admin token');
      if (scope === 'member' && p.scope !== 'member' && p.scope !== 'admin') {
        throw new HttpError(ERRORS.FORBIDDEN, 'this needs a member or admin token');
      }
      if (scope === 'heartbeat' && p.scope !== 'member') throw new HttpError(ERRORS.FORBIDDEN, 'heartbeats need a member token');
    });
  },
  { name: 'hq-auth', dependencies: ['hq-context'], fastify: '5.x' },
);
