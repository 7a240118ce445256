/**
 * The fence, from memory only: "may this host run role R now?". One implementation
 * answers the socket's `GET /v1/fence?role=R` — the decision (lease-core `queryFence`: the
 * state settled once, the decision on it, the settled copy kept), its log line when a role's
 * decision changes, its counter, and the answer's bytes — for both ways in:
 *  - the fast path, a plain node:http handler in front of Fastify (its `serverFactory`), for
 *    `GET /v1/fence?role=R` spelled exactly so with R a configured role;
 *  - the Fastify route behind it, for every other spelling (an unknown role, a percent-encoded,
 *    duplicated or extra query key, HEAD, …) and anything while the app closes (Fastify's 503).
 * Both send `reply(role)`'s bytes with the same headers (test/agent/fence-fast-path.test.ts
 * compares them byte for byte). No I/O here: a supervisor asks often.
 *
 * The decision is made for every query (the state settles, a validity boundary may pass between
 * two queries); the body is `JSON.stringify` of it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyServerFactory } from 'fastify';
import { fence, queryFence, type AgentSettings, type AgentState } from '@hq/lease-core';
import { ERRORS, NEVER_FAIL_OPEN, PROTOCOL_HEADER, PROTOCOL_VERSION, type FenceDecision } from '@hq/protocol';
import type { FenceSeen } from '@hq/protocol/fence';
import {
  elapsed,
  monotonicSeconds,
  realTimers,
  type Stamp,
  type StampClock as Clock,
  type Timers,
} from '@hq/runtime/clock';
import { sendsVersion } from '@hq/runtime/protocol';
import type { AgentMetrics } from './metrics.js';
import type { AgentObserver, Log } from './observe.js';

/** Where the fence reads the state and keeps the settled copy (the store). */
export interface FenceMemory {
  readonly state: AgentState;
  keepSettled(state: AgentState): void;
}

export interface FenceOptions {
  readonly memory: FenceMemory;
  readonly clock: Clock;
  readonly settings: AgentSettings;
  /** The configured roles, in the config's order (the unknown-role message lists them so). */
  readonly roles: readonly string[];
  readonly log: Log;
  readonly observer?: AgentObserver | undefined;
  /** The timers of the long polls (default: the real ones). */
  readonly timers?: Timers | undefined;
}

/** A long poll waiting for its role's decision to change. */
interface Waiter {
  /** Decide again: answer when the decision differs, else wait for the next boundary. */
  wake(): void;
  /** Answer now, whatever the decision. */
  finish(): void;
}

/**
 * Seconds until the next instant at which the passing of time alone can change a decision on
 * `state` (a grant starting or running out, a lock-delay, a start guard or a given confirmation
 * ending), or null when none is ahead: between them only a commit can change it.
 */
export function nextBoundarySeconds(state: AgentState, now: Stamp): number | null {
  const ahead: number[] = [];
  const mono = (m: number | null | undefined): void => {
    if (m !== null && m !== undefined && Number.isFinite(m) && m > now.mono) ahead.push(m - now.mono);
  };
  mono(state.startGuardUntilMono);
  mono(state.waitUntilMono);
  mono(state.gave?.untilMono);
  for (const g of [state.current, state.pending]) {
    if (g === null) continue;
    mono(g.startMono);
    const left = g.seconds - elapsed(g.sent, now);
    if (left > 0) ahead.push(left);
  }
  return ahead.length === 0 ? null : Math.min(...ahead);
}

/** Does `d` differ from what a long-polling caller last saw (its run, reason or generation)? */
export function differsFrom(d: FenceDecision, seen: FenceSeen): boolean {
  return d.run !== seen.run || d.reason !== seen.reason || d.generation !== seen.generation;
}

/** One answer of `GET /v1/fence` as it goes on the wire. */
export interface FenceReply {
  readonly status: 200 | 400;
  /** The JSON body: the decision, or the unknown-role error. */
  readonly body: string;
}

/** The label Fastify gives a JSON reply; the fast path sends the same. */
export const FENCE_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A role as a fenced job spells it in the query (roles are `[a-z0-9-]`: nothing to percent-decode). */
const FENCE_URL = /^[a-z0-9-]+$/;

/** Does `d` differ from `last` in more than its validity (a line in the log)? */
const changed = (d: FenceDecision, last: FenceDecision | undefined): boolean =>
  last === undefined ||
  d.run !== last.run ||
  d.reason !== last.reason ||
  d.generation !== last.generation ||
  d.holder !== last.holder;

export class Fence {
  private readonly roles: ReadonlySet<string>;
  /** `/v1/fence?role=R` → R for every configured role a query can spell without escapes. */
  private readonly exact: ReadonlyMap<string, string>;
  /** Each role's last decision: a line in the log when it changes, not on every query. */
  private readonly last = new Map<string, FenceDecision>();
  /** The long polls waiting now. */
  private readonly waiters = new Set<Waiter>();

  constructor(private readonly o: FenceOptions) {
    this.roles = new Set(o.roles);
    this.exact = new Map(o.roles.filter((r) => FENCE_URL.test(r)).map((r) => [`/v1/fence?role=${r}`, r]));
  }

  isRole(role: string): boolean {
    return this.roles.has(role);
  }

  /** The configured role a request URL asks for when it is spelled exactly `/v1/fence?role=R`. */
  exactQuery(url: string): string | undefined {
    return this.exact.get(url);
  }

  /** The decision for a configured role (the caller checked it): logged on a change, counted. */
  decide(role: string): FenceDecision {
    const q = queryFence(this.o.memory.state, role, this.o.clock.now(), this.o.settings);
    this.o.memory.keepSettled(q.state);
    const d = q.decision;
    this.o.observer?.fence?.(d);
    if (changed(d, this.last.get(role))) {
      this.last.set(role, d);
      this.o.log.info(
        {
          category: 'hq.fence',
          event: d.run ? 'allowed' : 'skipped',
          host: this.o.settings.host,
          role,
          reason: d.reason,
          generation: d.generation,
          holder: d.holder,
        },
        d.run ? 'allowed' : 'skipped',
      );
    }
    return d;
  }

  /** The answer for any role: its decision, or a 400 for a role that is not configured. */
  reply(role: string): FenceReply {
    if (!this.roles.has(role)) {
      return {
        status: 400,
        body: JSON.stringify({
          error: ERRORS.UNKNOWN_ROLE.code,
          message: `unknown role "${role}": not one of ${this.o.roles.join(', ')}`,
        }),
      };
    }
    return this.replyKnown(role);
  }

  /** The answer for a role known to be configured. */
  replyKnown(role: string): FenceReply {
    return { status: 200, body: JSON.stringify(this.decide(role)) };
  }

  /**
   * The long poll: the role's answer as soon as its decision differs from `seen`, else when it
   * changes (a commit: `changed()`, or a boundary in time: `nextBoundarySeconds`), else after
   * `waitSeconds`. Waiting costs nothing between those instants: no timer runs but the two.
   */
  watch(role: string, seen: FenceSeen, waitSeconds: number): Promise<FenceReply> {
    const timers = this.o.timers ?? realTimers;
    const peek = (): FenceDecision => fence(this.o.memory.state, role, this.o.clock.now(), this.o.settings);
    if (waitSeconds <= 0 || differsFrom(peek(), seen)) return Promise.resolve(this.replyKnown(role));
    return new Promise((done) => {
      let boundary: unknown = null;
      const disarm = (): void => {
        if (boundary !== null) timers.clear(boundary);
        boundary = null;
      };
      // A millisecond past the boundary, so the decision made then is on its far side.
      const arm = (): void => {
        disarm();
        const s = nextBoundarySeconds(this.o.memory.state, this.o.clock.now());
        if (s === null) return;
        boundary = timers.set(
          () => {
            boundary = null;
            w.wake();
          },
          Math.ceil(s * 1000) + 1,
        );
      };
      const w: Waiter = {
        wake: () => (differsFrom(peek(), seen) ? w.finish() : arm()),
        finish: () => {
          if (!this.waiters.delete(w)) return;
          disarm();
          timers.clear(deadline);
          done(this.replyKnown(role));
        },
      };
      const deadline = timers.set(() => w.finish(), waitSeconds * 1000);
      this.waiters.add(w);
      arm();
    });
  }

  /** The state changed (a commit): every long poll decides again. */
  changed(): void {
    if (this.waiters.size === 0) return; // every commit comes here; most have no long poll waiting
    for (const w of [...this.waiters]) w.wake();
  }

  /** Answers every long poll now (the listener closes). */
  releaseWaiters(): void {
    for (const w of [...this.waiters]) w.finish();
  }

  /** How many long polls wait now (status, tests). */
  get waiting(): number {
    return this.waiters.size;
  }

  /** The roles this host may run now (for the registry's duties); quiet: no log, no metric. */
  duties(): string[] {
    const now = this.o.clock.now();
    return this.o.roles.filter((r) => fence(this.o.memory.state, r, now, this.o.settings).run);
  }

  /** Seconds of validity left for a non-fail-open role, 0 when it may not run. */
  validForSeconds(): number {
    const d = fence(this.o.memory.state, NEVER_FAIL_OPEN, this.o.clock.now(), this.o.settings);
    return d.run && d.validForSeconds !== null ? Math.max(0, d.validForSeconds) : 0;
  }
}

/**
 * The fast path as Fastify's `serverFactory`: the exact query of a configured role is answered
 * here with `Fence.replyKnown`'s bytes; everything else goes to Fastify unchanged. The fence is
 * looked up at the first request (the app may be created before the agent is usable); the
 * request-duration metric is recorded under the route's own labels.
 */
export function fenceFastPath(
  fencing: () => Fence,
  metrics: AgentMetrics | null,
): { factory: FastifyServerFactory; closing(): void } {
  const timer =
    metrics?.httpDuration.labels({ listener: 'socket', method: 'GET', route: '/v1/fence', status: '200' }) ?? null;
  let closing = false;
  const factory: FastifyServerFactory = (handler, options) => {
    const opts = options as { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number };
    // Marked: the version header goes in the one writeHead (versionedFactory passes its text).
    const listener = sendsVersion((req: IncomingMessage, res: ServerResponse, version = String(PROTOCOL_VERSION)) => {
      if (req.method !== 'GET' || closing) return handler(req, res);
      const f = fencing();
      const role = f.exactQuery(req.url ?? '');
      if (role === undefined) return handler(req, res);
      const t0 = monotonicSeconds();
      let body: string;
      try {
        body = f.replyKnown(role).body;
      } catch {
        return handler(req, res); // the route answers (its error handler: a 500 without detail)
      }
      // The route's header order: the version (its onRequest hook), then Fastify's two.
      const length = String(Buffer.byteLength(body));
      res.writeHead(200, [PROTOCOL_HEADER, version, 'content-type', FENCE_CONTENT_TYPE, 'content-length', length]);
      res.end(body);
      timer?.observe(monotonicSeconds() - t0);
      return undefined;
    });
    const server = createServer(listener);
    // What Fastify sets on the server it creates itself (it leaves a factory's server alone).
    server.keepAliveTimeout = opts.keepAliveTimeout ?? 72_000;
    server.requestTimeout = opts.requestTimeout ?? 0;
    server.setTimeout(opts.connectionTimeout ?? 0);
    return server as Server;
  };
  return {
    factory,
    closing: () => {
      closing = true;
    },
  };
}
