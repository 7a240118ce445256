import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { heartbeat, stepDownAsked } from '@hq/lease-core';
import { PROTOCOL_HEADER, PROTOCOL_UNSTATED, spokenVersion, type TimingProblem } from '@hq/protocol';
import { actFor } from '../plugins/context.js';
import { ErrorBody, HeartbeatAnswer, HeartbeatBody } from '../schemas/generated.js';
import { failoverOf, leaseTimingOf, reportedTiming } from '../timing.js';

const NO_PROBLEMS: readonly TimingProblem[] = Object.freeze([]);

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
      // S6: the pairs across the sides, from the cadence this very report states.
      const problems = config.candidates.includes(body.host)
        ? reportedTiming(config, timing, body.host, body)
        : NO_PROBLEMS;
      const noted = arbiter.noteTiming(body.host, problems, d.state);
      if (noted !== undefined) await noted;
      // The version the report speaks (the hook served it) and, from protocol 2, the release it names.
      const spoken = spokenVersion(req.headers[PROTOCOL_HEADER]);
      arbiter.noteVersion(body.host, spoken.ok ? spoken.version : PROTOCOL_UNSTATED, body.version ?? null);
      const paths = arbiter.notePeerPaths(body.host, body.peerPaths);
      if (paths !== undefined) await paths;
      return {
        outcome: d.answer.outcome,
        reason: d.answer.reason,
        lease: arbiter.record(d.state, d.now),
        hold: arbiter.hold(d),
        reportInSeconds: d.answer.reportInSeconds,
        // Shared, frozen arrays (the serializer only reads them): no copy per answer.
        timingProblems: problems as TimingProblem[],
        failover: failoverOf(config, d.state).text,
        candidates: config.candidates as string[],
        // The displaced holder learns at once that its acknowledgement is awaited.
        stepDown: stepDownAsked(d.state, d.ctx, body.host),
      };
    },
  );
};
