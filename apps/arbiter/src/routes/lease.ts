import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ArbiterState, Context, Step, Verdict } from '@hq/lease-core';
import { acquire, release, renew, steppedDown } from '@hq/lease-core';
import { refusalError, type LeaseRefusal } from '@hq/protocol';
import type { Decided } from '../arbiter-shell.js';
import { HttpError } from '@hq/runtime/refusal';
import { actFor } from '../plugins/context.js';
import {
  AcquireBody,
  ErrorBody,
  LeaseRefused,
  LeaseRecord,
  OkLease,
  Primary,
  ReleaseBody,
  RenewBody,
  StepDownAckAnswer,
  StepDownAckBody,
} from '../schemas/generated.js';

export const verdictOutcome = (v: Verdict): string => (v.ok ? 'ok' : v.reason);

/** 200 `{ok:true, lease, hold?}`, or throws the 409 refusal that carries the lease: `{ok:false, reason, lease, error, message}`. */
/** `hold`: the S2.3 hold of an acquire's or renewal's answer; left out (undefined) by every other step. */
export function answerVerdict(reply: FastifyReply, d: Decided<Verdict>, hold?: number | null) {
  const lease = reply.server.hq.arbiter.record(d.state, d.now);
  reply.header('etag', `"${lease.revision}"`);
  if (d.answer.ok) return hold === undefined ? { ok: true as const, lease } : { ok: true as const, lease, hold };
  const reason: LeaseRefusal = d.answer.reason;
  const entry = refusalError(reason);
  // A refusal event may carry a more precise line (a silent target: when it was last heard).
  const said = d.events.find((e) => e.data['reason'] === reason && typeof e.data['message'] === 'string')?.data[
    'message'
  ];
  const message =
    typeof said === 'string' ? said : refusalLine(reason, entry.message, lease, reply.server.hq.config.candidates);
  throw new HttpError(entry, message, { ok: false, reason, lease, error: entry.code, message });
}

/** The catalog's line with what the caller needs next: who holds the lease, which hosts are candidates. */
function refusalLine(
  reason: LeaseRefusal,
  generic: string,
  lease: { holder: string | null; generation: number },
  candidates: readonly string[],
): string {
  if (reason === 'held' && lease.holder !== null)
    return `the lease is held by ${lease.holder} (generation ${lease.generation}); it moves by a handover from ${lease.holder} (hq lease release --handover-to HOST) or hq failover --to HOST`;
  if (reason === 'not-candidate') return `${generic} (candidates: ${candidates.join(', ')})`;
  return generic;
}

const mutationResponses = {
  200: OkLease,
  409: LeaseRefused,
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  412: ErrorBody,
};

type App = Parameters<FastifyPluginAsyncTypebox>[0];

/** The record and the primary, for any reader. */
function readRoutes(app: App): void {
  const { arbiter } = app.hq;
  app.get(
    '/v1/lease',
    { config: { scope: 'read' }, schema: { response: { 200: LeaseRecord } } },
    async (_req, reply) => {
      const record = await arbiter.currentRecord();
      reply.header('etag', `"${record.revision}"`);
      return record;
    },
  );

  app.get('/v1/primary', { config: { scope: 'read' }, schema: { response: { 200: Primary } } }, async () => {
    const { lease } = await arbiter.read();
    return { known: lease.holder !== null && lease.generation > 0, holder: lease.holder, generation: lease.generation };
  });
}

/** Acquire, renew and release: each a member's step for its own host. */
function memberRoutes(app: App): void {
  const { arbiter } = app.hq;
  /**
   * A member acting for its own host: one lease step decided in one commit, answered as a verdict
   * (an acquire's and a renewal's answer carries the S2.3 hold).
   */
  const memberStep =
    <B extends { readonly host: string }>(
      op: 'acquire' | 'renew' | 'release',
      decide: (s: ArbiterState, ctx: Context, body: B) => Step<Verdict>,
      answersHold: boolean,
    ) =>
    async (req: FastifyRequest & { readonly body: B }, reply: FastifyReply) => {
      actFor(req, req.body.host);
      const d = await arbiter.submit(
        op,
        req.principal,
        req.headers['if-match'],
        (s, ctx) => decide(s, ctx, req.body),
        verdictOutcome,
        req.body.host,
      );
      return answerVerdict(reply, d, answersHold ? arbiter.hold(d) : undefined);
    };
  const member = { scope: 'member', tokenInCommit: true } as const;

  app.post(
    '/v1/lease/acquire',
    { config: member, schema: { body: AcquireBody, response: mutationResponses } },
    memberStep('acquire', acquire, true),
  );
  app.post(
    '/v1/lease/renew',
    { config: member, schema: { body: RenewBody, response: mutationResponses } },
    memberStep('renew', renew, true),
  );
  app.post(
    '/v1/lease/release',
    { config: member, schema: { body: ReleaseBody, response: mutationResponses } },
    memberStep('release', release, false),
  );
}

/** The displaced holder's step-down acknowledgement: a refusal is an answer, not an error. */
function steppedDownRoute(app: App): void {
  const { arbiter } = app.hq;
  app.post(
    '/v1/lease/stepped-down',
    {
      config: { scope: 'member', tokenInCommit: true },
      schema: {
        body: StepDownAckBody,
        response: {
          200: StepDownAckAnswer,
          400: ErrorBody,
          401: ErrorBody,
          403: ErrorBody,
          409: ErrorBody,
          412: ErrorBody,
        },
      },
    },
    async (req, reply) => {
      actFor(req, req.body.host);
      const d = await arbiter.submit(
        'stepped-down',
        req.principal,
        req.headers['if-match'],
        (s, ctx) => steppedDown(s, ctx, req.body),
        (a) => (a.ok ? 'accepted' : a.reason),
        req.body.host,
      );
      const lease = arbiter.record(d.state, d.now);
      reply.header('etag', `"${lease.revision}"`);
      const a = d.answer;
      return a.ok
        ? { accepted: true, reason: null, savedSeconds: a.savedSeconds, lease }
        : { accepted: false, reason: a.reason, savedSeconds: null, lease };
    },
  );
}

export const leaseRoutes: FastifyPluginAsyncTypebox = async (app) => {
  readRoutes(app);
  memberRoutes(app);
  steppedDownRoute(app);
};
