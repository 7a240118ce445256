import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { acceptGeneration, setMaintenance, transfer } from '@hq/lease-core';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import {
  AcceptGenerationAnswer,
  AcceptGenerationBody,
  CheckAnswer,
  ErrorBody,
  LeaseRefused,
  MaintenanceBody,
  OkLease,
  TransferBody,
} from '../schemas/generated.js';
import { ACCEPT_GENERATION_OP } from '../arbiter-shell.js';
import { answerVerdict, verdictOutcome } from './lease.js';

type App = Parameters<FastifyPluginAsyncTypebox>[0];

/** `POST /v1/check`: one check now; a skipped one answers what it would have looked at. */
function checkRoute(app: App): void {
  const { checker } = app.hq;
  app.post(
    '/v1/check',
    { config: { scope: 'admin' }, schema: { response: { 200: CheckAnswer, 409: ErrorBody } } },
    async (req) => {
      const body: unknown = req.body;
      if (
        body !== undefined &&
        (typeof body !== 'object' || body === null || Array.isArray(body) || Object.keys(body).length > 0)
      ) {
        throw new HttpError(ERRORS.BAD_REQUEST, 'body must be empty or {}');
      }
      const r = await checker.run(true);
      if (!r.ran) {
        if (r.reason === 'busy') throw new HttpError(ERRORS.CONFLICT, 'another check is running');
        const l = r.state.lease;
        return {
          promoted: false,
          streak: l.dualUnreachableStreak,
          holder: l.holder,
          generation: l.generation,
          ping: false,
          health: false,
          promotee: null,
          skipped: r.reason,
        };
      }
      return r.answer;
    },
  );
}

function transferRoute(app: App): void {
  const { arbiter } = app.hq;
  app.post(
    '/v1/lease/transfer',
    {
      config: { scope: 'admin', tokenInCommit: true },
      schema: { body: TransferBody, response: { 200: OkLease, 409: LeaseRefused, 400: ErrorBody } },
    },
    async (req, reply) => {
      const d = await arbiter.submit(
        'transfer',
        req.principal,
        req.headers['if-match'],
        (s, ctx) => transfer(s, ctx, req.body),
        verdictOutcome,
      );
      return answerVerdict(reply, d);
    },
  );
}

/** An admin accepts a generation the bounds refused as a report (an agent really saw it). */
function acceptGenerationRoute(app: App): void {
  const { arbiter } = app.hq;
  app.post(
    '/v1/lease/accept-generation',
    {
      config: { scope: 'admin', tokenInCommit: true },
      schema: { body: AcceptGenerationBody, response: { 200: AcceptGenerationAnswer, 400: ErrorBody, 409: ErrorBody } },
    },
    async (req, reply) => {
      const by = req.principal?.machine ?? null;
      const d = await arbiter.submit(
        ACCEPT_GENERATION_OP,
        req.principal,
        req.headers['if-match'],
        (s, ctx) => acceptGeneration(s, ctx, { generation: req.body.generation, by }, arbiter.limits),
        (a) => (a.ok ? 'accepted' : a.reason),
      );
      const lease = arbiter.record(d.state, d.now);
      reply.header('etag', `"${lease.revision}"`);
      const a = d.answer;
      if (!a.ok)
        throw new HttpError(
          ERRORS.GENERATION_CEILING,
          `generation ${req.body.generation} is not below the ceiling ${a.ceiling}: a floor there leaves nothing to grant; nothing was accepted`,
        );
      return { ok: true as const, floor: a.floor, was: a.was, lease };
    },
  );
}

function maintenanceRoute(app: App): void {
  const { arbiter } = app.hq;
  app.put(
    '/v1/maintenance',
    {
      config: { scope: 'admin', tokenInCommit: true },
      schema: { body: MaintenanceBody, response: { 200: OkLease, 409: LeaseRefused, 400: ErrorBody } },
    },
    async (req, reply) => {
      const d = await arbiter.submit(
        'maintenance',
        req.principal,
        req.headers['if-match'],
        (s, ctx) => setMaintenance(s, ctx, req.body),
        verdictOutcome,
      );
      return answerVerdict(reply, d);
    },
  );
}

export const adminRoutes: FastifyPluginAsyncTypebox = async (app) => {
  checkRoute(app);
  transferRoute(app);
  acceptGenerationRoute(app);
  maintenanceRoute(app);
};
