import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { heartbeat, heartbeatAnswer } from '@hq/lease-core';
import { PROTOCOL_HEADER, PROTOCOL_UNSTATED, spokenVersion } from '@hq/protocol';
import { actFor } from '../plugins/context.js';
import { ErrorBody, HeartbeatAnswer, HeartbeatBody } from '../schemas/generated.js';
import { leaseTimingOf } from '../timing.js';

/** The answer as the route's schema types it (mutable arrays; the serializer only reads them). */
type HeartbeatAnswerT = Static<typeof HeartbeatAnswer>;

export const heartbeatRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { arbiter, config } = app.hq;
  const timing = leaseTimingOf(config);
  app.post(
    '/v1/heartbeat',
    {
      config: { scope: 'heartbeat', tokenInCommit: true },
      schema: {
        body: HeartbeatBody,
        response: {
          200: HeartbeatAnswer,
          400: ErrorBody,
          401: ErrorBody,
          403: ErrorBody,
          409: ErrorBody,
          412: ErrorBody,
        },
      },
    },
    async (req) => {
      const body = req.body;
      actFor(req, body.host);
      const d = await arbiter.submit(
        'heartbeat',
        req.principal,
        req.headers['if-match'],
        (s, ctx) => heartbeat(s, ctx, body),
        (a) => a.outcome,
        body.host,
      );
      const answer = heartbeatAnswer(d.answer, d.state, d.ctx, body, timing);
      const { notes } = arbiter;
      const noted = notes.noteTiming(body.host, answer.timingProblems, d.state);
      if (noted !== undefined) await noted;
      // The version the report speaks (the hook served it) and, from protocol 2, the release it names.
      const spoken = spokenVersion(req.headers[PROTOCOL_HEADER]);
      notes.noteVersion(body.host, spoken.ok ? spoken.version : PROTOCOL_UNSTATED, body.version ?? null);
      const paths = notes.notePeerPaths(body.host, body.peerPaths);
      if (paths !== undefined) await paths;
      // Shared, frozen arrays (the serializer only reads them): no copy per answer.
      return answer as HeartbeatAnswerT;
    },
  );
};
