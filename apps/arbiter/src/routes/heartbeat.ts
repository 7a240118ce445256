import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { heartbeat } from '@hq/lease-core';
import { actFor } from '../server/context.js';
import { ErrorBody, HeartbeatAnswer, HeartbeatBody } from '../schemas/index.js';

export const heartbeatRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { arbiter } = app.hq;
  app.post(
    '/v1/heartbeat',
    { config: { scope: 'heartbeat' }, schema: { body: HeartbeatBody, response: { 200: HeartbeatAnswer, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 412: ErrorBody } } },
    async (req) => {
      actFor(req, req.body.host);
      const d = await arbiter.submit('heartbeat', req.headers['if-match'], (s, ctx) => heartbeat(s, ctx, req.body), (a) => a.outcome);
      return { outcome: d.answer.outcome, reason: d.answer.reason, lease: arbiter.record(d.state, d.now), hold: arbiter.hold(d) };
    },
  );
};
