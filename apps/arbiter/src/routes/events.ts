import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ERRORS } from '@hq/lease-core';
import { HttpError } from '../server/context.js';
import { ErrorBody, EventsAnswer, EventsQuery } from '../schemas/index.js';

export const DEFAULT_EVENTS_LIMIT = 100;
export const MAX_EVENTS_LIMIT = 1000;

export const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/events',
    { config: { scope: 'read' }, schema: { querystring: EventsQuery, response: { 200: EventsAnswer, 400: ErrorBody } } },
    async (req) => {
      const after = req.query.after === undefined ? 0 : Number(req.query.after);
      const limit = req.query.limit === undefined ? DEFAULT_EVENTS_LIMIT : Number(req.query.limit);
      if (!Number.isSafeInteger(after)) throw new HttpError(ERRORS.BAD_REQUEST, 'after must be a safe integer ≥ 0');
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_EVENTS_LIMIT) {
        throw new HttpError(ERRORS.BAD_REQUEST, `limit must be an integer from 1 to ${MAX_EVENTS_LIMIT}`);
      }
      return { events: [...app.hq.store.listEvents(after, limit)] };
    },
  );
};
