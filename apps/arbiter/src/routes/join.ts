/**
 * `POST /v1/join`: a joining candidate redeems its bundle's one-time secret (no token: the secret
 * is the credential). The first redemption issues the host's member token (replacing any earlier
 * one) and answers with the fleet's peer token and the host's config, signed by the arbiter's
 * identity key over the host's nonce; every later one is refused. `dryRun` answers the same
 * payload without tokens and leaves the bundle unused.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import { ErrorBody, JoinAnswer, JoinBody } from '../schemas/generated.js';
import { fleetPayload, joinProblem, loadIdentity, readPeerToken, redeemTicket, signJoin } from '../join.js';
import { reissueToken } from '../auth.js';

export const joinRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { config, store } = app.hq;
  app.post(
    '/v1/join',
    {
      config: { scope: 'none' },
      schema: { body: JoinBody, response: { 200: JoinAnswer, 400: ErrorBody, 401: ErrorBody } },
    },
    async (req) => {
      const { host, secret, nonce } = req.body;
      const dryRun = req.body.dryRun === true;
      const now = app.hq.arbiter.now(); // epoch seconds
      const problem = joinProblem(config, host);
      if (problem !== null) throw new HttpError(ERRORS.JOIN_REFUSED, problem);
      const identity = await loadIdentity(config.dataDir);
      const peerToken = await readPeerToken(config.dataDir);
      if (identity === null || peerToken === null)
        throw new HttpError(
          ERRORS.JOIN_REFUSED,
          'this arbiter printed no join bundle (its dataDir holds no identity key or peer token)',
        );
      const r = await redeemTicket(config.dataDir, host, secret, now, dryRun);
      if (!r.ok) {
        req.log.warn({ category: 'control', event: 'join-refused', host }, r.problem);
        throw new HttpError(ERRORS.JOIN_REFUSED, r.problem);
      }
      const memberToken = dryRun ? null : (await reissueToken(store, host, 'member', now)).token;
      if (!dryRun)
        req.log.info({ category: 'control', event: 'joined', host }, `${host} joined: its member token was issued`);
      return signJoin(
        identity,
        nonce,
        fleetPayload(config, host, r.arbiterUrl, { memberToken, peerToken: dryRun ? null : peerToken }),
      );
    },
  );
};
