/**
 * The fence, from memory only: "may this host run role R now?" (SPEC §5). One implementation
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
 * two queries); what is ready before the question is everything around it: per role the last
 * decision's body without its `validForSeconds` (`Answered`: rebuilt, and logged, only when
 * the decision changes in anything else), its counter, and the headers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyServerFactory } from 'fastify';
import { fence, queryFence, type AgentSettings, type AgentState } from '@hq/lease-core';
import { ERRORS, NEVER_FAIL_OPEN, PROTOCOL_HEADER, PROTOCOL_VERSION, type FenceDecision } from '@hq/protocol';
import type { FenceSeen } from '@hq/protocol/fence';
import { elapsed, monotonicSeconds, realTimers, type Stamp, type StampClock as Clock, type Timers } from '@hq/runtime/clock';
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

/** `validForSeconds` as JSON.stringify writes a number or null. */
const jsonNumber = (v: number | null): string => (v !== null && Number.isFinite(v) ? String(v) : 'null');

/** Stands in for `validForSeconds` while a body's text around it is made. */
const MARK = JSON.stringify('\u0000hq-valid-for\u0000');

/**
 * One role's answer made ready: the last decision's JSON cut around its `validForSeconds`, so a
 * query whose decision differs from the last one only in that number costs a concatenation.
 * `body(d)` is exactly `JSON.stringify(d)` (test/agent/fence-answer.test.ts).
 */
export class Answered {
  private run = false;
  private reason = '';
  private generation = -1;
  private holder: string | null = null;
  private role = '';
  private head = '';
  private tail = '';
  /** The bytes of `head` + `tail` (the number between them is ASCII). */
  private bytes = 0;
  private ready = false;

  /** Makes `d` the decision answered; true when it differs from the last one in more than its validity. */
  update(d: FenceDecision): boolean {
    if (this.ready && d.run === this.run && d.reason === this.reason && d.generation === this.generation && d.holder === this.holder && d.role === this.role) return false;
    const text = JSON.stringify({ ...d, validForSeconds: MARK });
    // The mark is after the role and the holder (lastIndexOf: neither can fool it) and before `run` and `reason`.
    const at = text.lastIndexOf(JSON.stringify(MARK));
    this.head = text.slice(0, at);
    this.tail = text.slice(at + JSON.stringify(MARK).length);
    this.bytes = Buffer.byteLength(this.head) + Buffer.byteLength(this.tail);
    this.run = d.run;
    this.reason = d.reason;
    this.generation = d.generation;
    this.holder = d.holder;
    this.role = d.role;
    this.ready = true;
    return true;
  }

  /** The body of `d`, the decision last given to `update`. */
  body(d: FenceDecision): string {
    return this.head + jsonNumber(d.validForSeconds) + this.tail;
  }

  /** The body's length in bytes (`Buffer.byteLength(this.body(d))`). */
  byteLength(d: FenceDecision): number {
    return this.bytes + jsonNumber(d.validForSeconds).length;
  }
}

export class Fence {
  private readonly roles: ReadonlySet<string>;
  /** `/v1/fence?role=R` → R for every configured role a query can spell without escapes. */
  private readonly exact: ReadonlyMap<string, string>;
  /** Each role's answer made ready; a line in the log when it changes, not on every query. */
  private readonly answered = new Map<string, Answered>();
  /** The long polls waiting now. */
  private readonly waiters = new Set<Waiter>();

  constructor(private readonly o: FenceOptions) {
    this.roles = new Set(o.roles);
    this.exact = new Map(o.roles.filter((r) => FENCE_URL.test(r)).map((r) => [`/v1/fence?role=${r}`, r]));
    for (const r of o.roles) this.answered.set(r, new Answered());
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
    return this.answer(role).d;
  }

  /** The decision for a configured role (logged on a change, counted) and its role's answer, made ready for it. */
  answer(role: string): { readonly d: FenceDecision; readonly a: Answered } {
    const q = queryFence(this.o.memory.state, role, this.o.clock.now(), this.o.settings);
    this.o.memory.keepSettled(q.state);
    const d = q.decision;
    this.o.observer?.fence?.(d);
    let a = this.answered.get(role);
    if (a === undefined) this.answered.set(role, (a = new Answered()));
    if (a.update(d)) {
      this.o.log.info(
        { category: 'hq.fence', event: d.run ? 'allowed' : 'skipped', host: this.o.settings.host, role, reason: d.reason, generation: d.generation, holder: d.holder },
        d.run ? 'allowed' : 'skipped',
      );
    }
    return { d, a };
  }

  /** The answer for any role: its decision, or a 400 for a role that is not configured. */
  reply(role: string): FenceReply {
    if (!this.roles.has(role)) {
      return { status: 400, body: JSON.stringify({ error: ERRORS.UNKNOWN_ROLE.code, message: `unknown role "${role}": not one of ${this.o.roles.join(', ')}` }) };
    }
    return this.replyKnown(role);
  }

  /** The answer for a role known to be configured. */
  replyKnown(role: string): FenceReply {
    const { d, a } = this.answer(role);
    return { status: 200, body: a.body(d) };
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
        if (s !== null) boundary = timers.set(() => ((boundary = null), w.wake()), Math.ceil(s * 1000) + 1);
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
export function fenceFastPath(fencing: () => Fence, metrics: AgentMetrics | null): { factory: FastifyServerFactory; closing(): void } {
  const timer = metrics?.httpDuration.labels({ listener: 'socket', method: 'GET', route: '/v1/fence', status: '200' }) ?? null;
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
      let answer: { readonly d: FenceDecision; readonly a: Answered };
      try {
        answer = f.answer(role);
      } catch {
        return handler(req, res); // the route answers (its error handler: a 500 without detail)
      }
      const { d, a } = answer;
      // The route's header order: the version (its onRequest hook), then Fastify's two.
      res.writeHead(200, [PROTOCOL_HEADER, version, 'content-type', FENCE_CONTENT_TYPE, 'content-length', String(a.byteLength(d))]);
      res.end(a.body(d));
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
  return { factory, closing: () => void (closing = true) };
}
