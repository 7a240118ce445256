import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorBody, EventsAnswer, EventsQuery } from '../schemas/generated.js';

export const DEFAULT_EVENTS_LIMIT = 100;
export const MAX_EVENTS_LIMIT = 1000;

export const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/events',
    {
      config: { scope: 'read' },
      schema: { querystring: EventsQuery, response: { 200: EventsAnswer, 400: ErrorBody } },
    },
    async (req) => {
      const { store } = app.hq;
      // The schema bounds every value; any combination is an answer: after and since are both
      // lower bounds (the later one wins), tail keeps the last events above them, and limit
      // caps the count (with tail, of the last ones).
      const q = req.query;
      let after = q.after === undefined ? 0 : Number(q.after);
      if (q.since !== undefined) after = Math.max(after, await store.sinceAfter(Number(q.since)));
      const limit =
        q.limit === undefined ? (q.tail === undefined ? DEFAULT_EVENTS_LIMIT : MAX_EVENTS_LIMIT) : Number(q.limit);
      if (q.tail === undefined) return { events: [...(await store.listEvents(after, limit))] };
      const count = Math.min(Number(q.tail), limit);
      return { events: [...(await store.listEvents(Math.max(after, await store.tailAfter(count)), count))] };
    },
  );
};
