/**
 * The agent's two listeners (Fastify):
 *  - the unix socket for local fenced jobs and `hq` (no auth: the file mode is the fence):
 *    `GET /v1/fence?role=R` answered from memory (fence.ts: one answer, served by a plain
 *    node:http fast path in front of Fastify for the exact spelling of a known role and by the
 *    route for every other spelling) and its long poll (`&wait=S` with the decision last seen), `/v1/status`, `/v1/seen`, `/v1/primary`,
 *    `POST /v1/heartbeat`, `POST /v1/step-down`, `POST /v1/resume`, `POST /v1/events`
 *    (an event a local `hq` command reports, logged like the agent's own), and the runs of
 *    `hq fence run` supervisors (`POST /v1/runs`, `POST /v1/runs/{id}`, `DELETE /v1/runs/{id}`);
 *  - the TCP peer listener: `GET /v1/health` (no auth), `GET /v1/primary`, `GET /metrics`,
 *    and with the peer token `POST /v1/peer/confirm`, `GET /v1/peer`.
 * Both compile a route's schemas at its first request (lazy-schemas.ts).
 */
import type { Stats } from 'node:fs';
import { chmod, lstat, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import type { FastifyInstance, FastifyServerFactory } from 'fastify';
import type { Static } from 'typebox';
import { ERRORS, FENCE_WAIT_MAX_SECONDS, isHost } from '@hq/protocol';
// The routes' schemas as plain JSON, generated from their TypeBox definitions (../schemas/source.ts):
// the daemon does not load TypeBox's builder.
import {
  AgentStatus,
  ErrorBody,
  FenceQuery,
  HeartbeatReport,
  OkAnswer,
  PeerConfirmAnswer,
  PeerConfirmBody,
  PeerInfo,
  Primary,
  ReportedEventBody,
  RunClaimBody,
  RunClaimed,
  RunParams,
  RunRefused,
  RunStartedBody,
  SeenAnswer,
  SteppedDownAnswer,
} from '../schemas/generated.js';
import { realTimers, type Timers } from '@hq/runtime/clock';
import { ensureDir } from '@hq/runtime/files';
import { fastifyBase, type HqFastify } from '@hq/runtime/fastify-base';
import { HttpError } from '@hq/runtime/refusal';
import { versionedFactory } from '@hq/runtime/protocol';
import { sweepOnlyWhileConnected } from '@hq/runtime/idle-server';
import { VERSION } from '@hq/runtime/version';
import { peerTokenMatches } from '../tokens.js';
import type { AgentParts } from './parts.js';
import { agentStatus, peerInfo, primaryAnswer } from './summaries.js';
import { pidProblem } from './runs.js';
import { FENCE_CONTENT_TYPE, fenceFastPath } from './fence.js';
import { lazyCompilers } from './lazy-schemas.js';
import type { AgentMetrics } from './metrics.js';

/** Fastify as both hq daemons serve (@hq/runtime/fastify-base), with the agent's timeouts, its lazy schemas and its metric. */
function base(
  listener: string,
  metrics: AgentMetrics | null,
  host: () => string,
  serverFactory?: FastifyServerFactory,
): HqFastify {
  const app = fastifyBase({
    side: () => `hq-agent on ${host()}`,
    serverFactory,
    requestTimeoutMs: 10_000,
    connectionTimeoutMs: 10_000,
    // Fastify's compilers with these options, each route's schema compiled at its first request.
    fastify: { logger: false, schemaController: { compilersFactory: lazyCompilers() } },
  });
  // Node's check of the request deadlines runs while a connection is open, not every 30 s of an idle agent.
  void sweepOnlyWhileConnected(app.server);
  if (metrics !== null) {
    app.addHook('onResponse', async (req, reply) => {
      metrics.httpDuration.observe(
        { listener, method: req.method, route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
    });
  }
  return app;
}

// ---------------------------------------------------------------------------------------
// the unix socket

export { ReportedEventBody };
// biome-ignore lint/suspicious/noRedeclare: the schema and its static type share one name, as TypeBox code does
export type ReportedEventBody = Static<typeof ReportedEventBody>;
/** Fields every log line sets itself: a report's data may not carry them. */
const LINE_FIELDS: ReadonlySet<string> = new Set([
  'level',
  'time',
  'pid',
  'hostname',
  'msg',
  'category',
  'event',
  'host',
  'via',
  'component',
  'err',
]);

export interface SocketAppOptions {
  /** Answer `GET /v1/fence?role=R` before Fastify (default); false = the Fastify route only (tests compare the two). */
  readonly fastPath?: boolean;
}

/** What the socket serves: the fence, the summaries, heartbeats, step-downs, runs and reported events. */
export type SocketParts = Pick<
  AgentParts,
  'host' | 'clock' | 'settings' | 'log' | 'store' | 'fence' | 'link' | 'peers' | 'runs' | 'stepDowns'
>;

/** The socket's app: the fence first (fast path and route), then the summaries, the lease's own calls, runs and events. */
export function socketApp(
  parts: SocketParts,
  metrics: AgentMetrics | null,
  opts: SocketAppOptions = {},
): FastifyInstance {
  const fast = opts.fastPath === false ? null : fenceFastPath(() => parts.fence, metrics);
  const app = base('socket', metrics, () => parts.host, fast === null ? undefined : versionedFactory(fast.factory));
  let closing = false;
  app.addHook('preClose', (done) => {
    fast?.closing();
    // A long poll would hold the close for up to its wait: it is answered now, on a connection
    // that then closes (the listener's close already passed over it as busy).
    closing = true;
    // An app may be made, and closed, before its parts are usable (as the fast path allows).
    (parts as SocketParts | null)?.fence.releaseWaiters();
    done();
  });
  fenceRoute(app, parts, () => closing);
  summaryRoutes(app, parts);
  leaseRoutes(app, parts);
  runRoutes(app, parts);
  eventRoute(app, parts);
  return app as unknown as FastifyInstance;
}

/** `GET /v1/fence?role=R` for every spelling the fast path passes on, and its long poll. */
function fenceRoute(app: HqFastify, parts: SocketParts, closing: () => boolean): void {
  app.get('/v1/fence', { schema: { querystring: FenceQuery } }, async (req, reply) => {
    const q = req.query;
    const poll = [q.wait, q.run, q.reason, q.generation].filter((v) => v !== undefined).length;
    if (poll === 0 || !parts.fence.isRole(q.role)) {
      const r = parts.fence.reply(q.role);
      return reply.code(r.status).type(FENCE_CONTENT_TYPE).send(r.body);
    }
    if (poll !== 4)
      throw new HttpError(ERRORS.BAD_REQUEST, 'a long poll names wait, run, reason and generation together');
    const wait = Number(q.wait);
    if (wait > FENCE_WAIT_MAX_SECONDS)
      throw new HttpError(ERRORS.BAD_REQUEST, `wait must be at most ${FENCE_WAIT_MAX_SECONDS} seconds`);
    // The connection stays quiet while it waits: longer than the listener's idle timeout allows.
    req.raw.socket.setTimeout((wait + 10) * 1000);
    const r = await parts.fence.watch(
      q.role,
      { run: q.run === 'true', reason: q.reason as string, generation: Number(q.generation) },
      wait,
    );
    if (closing()) reply.header('connection', 'close');
    return reply.code(r.status).type(FENCE_CONTENT_TYPE).send(r.body);
  });
}

/** The summaries from memory: status, the seen generation, the primary. */
function summaryRoutes(app: HqFastify, parts: SocketParts): void {
  // Asked by idle callers (doctor, the status page): declared, but written by JSON.stringify so
  // an idle agent compiles no serializer for it.
  app.get(
    '/v1/status',
    { schema: { response: { 200: AgentStatus } }, serializerCompiler: () => JSON.stringify },
    async () => agentStatus(parts),
  );
  app.get('/v1/seen', { schema: { response: { 200: SeenAnswer } } }, async () => {
    const seen = parts.store.state.seen;
    return { seen: seen > 0, generation: seen };
  });
  app.get('/v1/primary', { schema: { response: { 200: Primary } } }, async () => primaryAnswer(parts.store.state));
}

/** What `hq` asks of the lease through the agent: a heartbeat now, a step-down before a release, its undoing. */
function leaseRoutes(app: HqFastify, parts: SocketParts): void {
  app.post('/v1/heartbeat', { schema: { response: { 200: HeartbeatReport } } }, async () => parts.link.heartbeat());
  app.post('/v1/step-down', { schema: { response: { 200: SteppedDownAnswer } } }, async () => {
    const ready = await parts.stepDowns.forRelease();
    return { ok: true as const, steppedDown: ready.steppedDown, childrenGone: ready.childrenGone, ran: ready.ran };
  });
  app.post('/v1/resume', { schema: { response: { 200: OkAnswer } } }, async () => {
    await parts.stepDowns.resume();
    return { ok: true as const };
  });
}

/** The runs of `hq fence run` supervisors: claimed before the spawn, started with their group, done. */
function runRoutes(app: HqFastify, parts: SocketParts): void {
  app.post(
    '/v1/runs',
    { schema: { body: RunClaimBody, response: { 200: RunClaimed, 409: RunRefused, 400: ErrorBody } } },
    async (req) => {
      if (!parts.fence.isRole(req.body.role))
        throw new HttpError(ERRORS.UNKNOWN_ROLE, `unknown role "${req.body.role}"`);
      const bad = pidProblem('supervisorPid', req.body.supervisorPid);
      if (bad !== null) throw new HttpError(ERRORS.BAD_REQUEST, bad);
      const a = parts.runs.claim(req.body);
      // A refused claim carries its reason: `{ok: false, reason}`.
      if (!a.ok) throw new HttpError(ERRORS.CONFLICT, a.reason, a);
      return a;
    },
  );
  app.post(
    '/v1/runs/:id',
    {
      schema: { params: RunParams, body: RunStartedBody, response: { 200: OkAnswer, 400: ErrorBody, 404: ErrorBody } },
    },
    async (req) => {
      const supervisor = parts.runs.supervisorOf(req.params.id);
      const bad = supervisor === undefined ? null : pidProblem('pgid', req.body.pgid, supervisor);
      if (bad !== null) throw new HttpError(ERRORS.BAD_REQUEST, bad);
      if (!parts.runs.started(req.params.id, req.body.pgid))
        throw new HttpError(ERRORS.NOT_FOUND, `no run ${req.params.id}`);
      return { ok: true as const };
    },
  );
  app.delete(
    '/v1/runs/:id',
    { schema: { params: RunParams, response: { 200: OkAnswer, 404: ErrorBody } } },
    async (req) => {
      if (!parts.runs.done(req.params.id)) throw new HttpError(ERRORS.NOT_FOUND, `no run ${req.params.id}`);
      return { ok: true as const };
    },
  );
}

/** An event a local `hq` command reports: one log line like the agent's own, with `via: "cli"` so a reader can tell who decided. */
function eventRoute(app: HqFastify, parts: SocketParts): void {
  app.post(
    '/v1/events',
    { schema: { body: ReportedEventBody, response: { 200: OkAnswer, 400: ErrorBody } } },
    async (req) => {
      const data = req.body.data ?? {};
      const taken = Object.keys(data).find((k) => LINE_FIELDS.has(k));
      if (taken !== undefined)
        throw new HttpError(ERRORS.BAD_REQUEST, `data.${taken} is a field the log line sets itself; rename it`);
      parts.log.info(
        { ...data, via: 'cli', category: req.body.category, event: req.body.event, host: parts.host },
        req.body.event,
      );
      return { ok: true as const };
    },
  );
}

/** Is a live process answering on this socket path? */
function socketAnswers(path: string, timers: Timers): Promise<boolean> {
  return new Promise((done) => {
    const s = connect(path);
    const t = timers.set(() => {
      s.destroy();
      done(true); // it accepted but did not finish: treat as live, never steal it
    }, 1000);
    s.once('connect', () => {
      timers.clear(t);
      s.end();
      done(true);
    });
    s.once('error', () => {
      timers.clear(t);
      done(false);
    });
  });
}

export class SocketInUse extends Error {
  override name = 'SocketInUse';
}

/**
 * Prepares the socket path: its directory (0750, or the state dir's 0700 when they are the
 * same), and a stale socket from a crash removed — unless a live agent answers on it.
 */
export async function prepareSocketPath(path: string, stateDir: string, timers: Timers = realTimers): Promise<void> {
  const dir = dirname(path);
  const problem = await ensureDir(dir, dir === stateDir ? 0o700 : 0o750);
  if (problem !== null) throw new SocketInUse(`socket directory ${problem}`);
  let st: Stats;
  try {
    st = await lstat(path);
  } catch {
    return;
  }
  if (!st.isSocket()) throw new SocketInUse(`${path} exists and is not a socket; refusing to replace it`);
  if (await socketAnswers(path, timers)) throw new SocketInUse(`another agent answers on ${path}`);
  await unlink(path);
}

export async function listenSocket(
  app: FastifyInstance,
  path: string,
  stateDir: string,
  timers: Timers = realTimers,
): Promise<void> {
  await prepareSocketPath(path, stateDir, timers);
  await app.listen({ path });
  await chmod(path, 0o660);
}

// ---------------------------------------------------------------------------------------
// the peer listener

/** What the peer listener serves: health, the primary, peer information and confirmations. */
export type PeerParts = Pick<AgentParts, 'host' | 'clock' | 'store' | 'peers' | 'peerToken'>;

export function peerApp(parts: PeerParts, metrics: AgentMetrics | null): FastifyInstance {
  const app = base('peer', metrics, () => parts.host);
  const requirePeer = async (req: { headers: { authorization?: string | string[] | undefined } }): Promise<void> => {
    if (!(await peerTokenMatches(parts.peerToken, req.headers.authorization))) throw new HttpError(ERRORS.UNAUTHORIZED);
  };
  app.get('/v1/health', async () => ({ status: 'ok', role: 'agent', host: parts.host, version: VERSION }));
  app.get('/v1/primary', { schema: { response: { 200: Primary } } }, async () => primaryAnswer(parts.store.state));
  app.get('/metrics', async (_req, reply) => {
    if (metrics === null) throw new HttpError(ERRORS.NOT_FOUND, 'metrics are off');
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get('/v1/peer', { preHandler: requirePeer, schema: { response: { 200: PeerInfo } } }, async () =>
    peerInfo(parts),
  );
  app.post(
    '/v1/peer/confirm',
    {
      preHandler: requirePeer,
      schema: {
        body: PeerConfirmBody,
        response: {
          200: PeerConfirmAnswer,
          400: ErrorBody,
          401: ErrorBody,
        },
      },
    },
    async (req) => {
      if (!isHost(req.body.host)) throw new HttpError(ERRORS.BAD_REQUEST, 'host must be a host name');
      const b = req.body;
      if (b.probe === true)
        return { confirmed: false, generation: primaryAnswer(parts.store.state).generation, reason: 'probe' };
      const answer = await parts.peers.confirm({
        host: b.host,
        generation: b.generation,
        ...(b.ttlSeconds !== undefined ? { ttlSeconds: b.ttlSeconds } : {}),
        ...(b.safetyMarginSeconds !== undefined ? { safetyMarginSeconds: b.safetyMarginSeconds } : {}),
      });
      return { confirmed: answer.confirmed, generation: answer.generation, reason: answer.reason };
    },
  );
  return app as unknown as FastifyInstance;
}
