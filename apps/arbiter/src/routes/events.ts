import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import { ErrorBody, EventsAnswer, EventsQuery } from '../schemas/generated.js';

export const DEFAULT_EVENTS_LIMIT = 100;
export const MAX_EVENTS_LIMIT = 1000;

export const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/events',
    { config: { scope: 'read' }, schema: { querystring: EventsQuery, response: { 200: EventsAnswer, 400: ErrorBody } } },
    async (req) => {
      const { store } = app.hq;
      const starts = [req.query.after, req.query.tail, req.query.since].filter((x) => x !== undefined).length;
      if (starts > 1) throw new HttpError(ERRORS.BAD_REQUEST, 'give at most one of after, tail and since');
      if (req.query.tail !== undefined) {
        const tail = Number(req.query.tail);
        if (!Number.isSafeInteger(tail) || tail < 1 || tail > MAX_EVENTS_LIMIT) throw new HttpError(ERRORS.BAD_REQUEST, `tail must be an integer from 1 to ${MAX_EVENTS_LIMIT}`);
        if (req.query.limit !== undefined) throw new HttpError(ERRORS.BAD_REQUEST, 'tail sets the count; leave out limit');
        return { events: [...(await store.listEvents(await store.tailAfter(tail), tail))] };
      }
      const after = req.query.since !== undefined ? await store.sinceAfter(Number(req.query.since)) : req.query.after === undefined ? 0 : Number(req.query.after);
      const limit = req.query.limit === undefined ? DEFAULT_EVENTS_LIMIT : Number(req.query.limit);
      if (!Number.isSafeInteger(after)) throw new HttpError(ERRORS.BAD_REQUEST, 'after must be a safe integer ≥ 0');
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_EVENTS_LIMIT) {
        throw new HttpError(ERRORS.BAD_REQUEST, `limit must be an integer from 1 to ${MAX_EVENTS_LIMIT}`);
      }
      return { events: [...(await store.listEvents(after, limit))] };
    },
  );
};
