/** The one shared capability every route uses: the arbiter shell, its checker and its store. */
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import type { Arbiter } from '../arbiter-shell.js';
import type { Checker } from '../checks.js';
import type { ArbiterConfig } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { EventLog, TokenStore } from '../store/store.js';
import type { Principal } from '../auth.js';
import type { Leadership } from '../leadership.js';
import type { SurvivalStore } from '../survival/store.js';

/** Who may call a route: nobody needs a token, any valid token (or none with openReads), … */
export type RouteScope = 'none' | 'read' | 'member' | 'heartbeat' | 'admin';

export interface HqContext {
  readonly arbiter: Arbiter;
  readonly checker: Checker;
  /** What routes use directly: the event log and the tokens (lease state goes through `arbiter`). */
  readonly store: EventLog & TokenStore;
  readonly metrics: Metrics;
  readonly config: ArbiterConfig;
  readonly version: string;
  /** Store etcd: the election (who decides, where mutations go); null with SQLite. */
  readonly leadership?: Leadership | null;
  /** Where survival copies live (store etcd: under the prefix); default: files under `{dataDir}/survival`. */
  readonly survival?: SurvivalStore;
}

declare module 'fastify' {
  interface FastifyInstance {
    hq: HqContext;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    scope?: RouteScope;
    /**
     * The route decides through `arbiter.submit(op, req.principal, …)`, whose commit confirms
     * the token: the token may be let in from the store's memory (`TokenStore.knownToken`).
     * Only such a route may set it; every other request reads its token.
     */
    tokenInCommit?: boolean;
  }
}

/** A member token acts only for its own machine (403 HQ_ERR_WRONG_HOST). */
export function actFor(req: FastifyRequest, host: string): void {
  const p = req.principal;
  if (p !== null && p.scope === 'member' && p.machine !== host) {
    const message = `this member token belongs to "${p.machine}", not "${host}"`;
    req.server.hq.arbiter.notes.noteRefused(host, message);
    throw new HttpError(ERRORS.WRONG_HOST, message);
  }
}

export const contextPlugin = fp(
  async (app: FastifyInstance, opts: { hq: HqContext }) => {
    app.decorate('hq', opts.hq);
    app.decorateRequest('principal', null);
  },
  { name: 'hq-context', fastify: '5.x' },
);
