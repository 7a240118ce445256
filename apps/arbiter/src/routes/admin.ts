import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { setMaintenance, transfer } from '@hq/lease-core';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import { CheckAnswer, Conflict, ErrorBody, MaintenanceBody, OkLease, TransferBody } from '../schemas/generated.js';
import { answerVerdict, verdictOutcome } from './lease.js';

export const adminRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { arbiter, checker } = app.hq;

  app.post('/v1/check', { config: { scope: 'admin' }, schema: { response: { 200: CheckAnswer, 409: ErrorBody } } }, async (req) => {
    const body: unknown = req.body;
    if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body) || Object.keys(body).length > 0)) {
      throw new HttpError(ERRORS.BAD_REQUEST, 'body must be empty or {}');
    }
    const r = await checker.run(true);
    if (!r.ran) {
      if (r.reason === 'busy') throw new HttpError(ERRORS.CONFLICT, 'another check is running');
      const l = r.state.lease;
      return { promoted: false, streak: l.dualUnreachableStreak, holder: l.holder, generation: l.generation, ping: false, health: false, promotee: null, skipped: r.reason };
    }
    return r.answer;
  });

  app.post(
    '/v1/lease/transfer',
    { config: { scope: 'admin', tokenInCommit: true }, schema: { body: TransferBody, response: { 200: OkLease, 409: Conflict, 400: ErrorBody } } },
    async (req, reply) => {
      const d = await arbiter.submit('transfer', req.principal, req.headers['if-match'], (s, ctx) => transfer(s, ctx, req.body), verdictOutcome);
      return answerVerdict(reply, d, false, null);
    },
  );

  app.put(
    '/v1/maintenance',
    { config: { scope: 'admin', tokenInCommit: true }, schema: { body: MaintenanceBody, response: { 200: OkLease, 409: Conflict, 400: ErrorBody } } },
    async (req, reply) => {
      const d = await arbiter.submit('maintenance', req.principal, req.headers['if-match'], (s, ctx) => setMaintenance(s, ctx, req.body), verdictOutcome);
      return answerVerdict(reply, d, false, null);
    },
  );
};
