/** The agent's listeners: the bodies its routes validate and the answers they declare. */
import Type, { type TSchema } from 'typebox';
import {
  AGENT_HEARTBEAT_OUTCOMES,
  CONFIRM_REASONS,
  REPORTED_DATA_LIMITS,
  REPORTED_EVENTS,
  REPORTED_KEY_PATTERN,
  type ReportedCategory,
} from '../agent.js';
import { FENCE_REASONS } from '../fence.js';
import { CadenceSeconds, Generation, GrantedGeneration, Host, Literals } from './common.js';

/** `GET /v1/fence?role=R`: the role is checked against the configured ones by the route. */
export const FenceQuery = Type.Object({ role: Type.String() }, { additionalProperties: false });

/** `POST /v1/events`: flat scalar data under camelCase keys. */
export const ReportedData = Type.Record(
  Type.String({ pattern: REPORTED_KEY_PATTERN }),
  Type.Union([Type.String({ maxLength: REPORTED_DATA_LIMITS.maxString }), Type.Number(), Type.Boolean(), Type.Null()]),
  { maxProperties: REPORTED_DATA_LIMITS.maxFields },
);
const reported = <C extends ReportedCategory>(category: C) =>
  Type.Object(
    { category: Type.Literal(category), event: Literals(REPORTED_EVENTS[category]), data: Type.Optional(ReportedData) },
    { additionalProperties: false },
  );
export const ReportedEventBody = Type.Union([reported('hq.standby'), reported('control')]);

export const OkAnswer = Type.Object({ ok: Type.Literal(true) });

export const ConfirmBody = Type.Object(
  {
    host: Host,
    generation: GrantedGeneration,
    ttlSeconds: Type.Optional(CadenceSeconds),
    safetyMarginSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 31_536_000 })),
  },
  { additionalProperties: false },
);
export const ConfirmAnswer = Type.Object({
  confirmed: Type.Boolean(),
  generation: Type.Integer(),
  reason: Literals(CONFIRM_REASONS),
});

export const SteppedDownAnswer = Type.Object({
  ok: Type.Literal(true),
  steppedDown: Type.Integer(),
  childrenGone: Type.Boolean(),
  ran: Type.Boolean(),
});

/** A pid the agent may signal: never 1 (init; a process group of 1 would be kill(-1), every process). */
const Pid = Type.Integer({ minimum: 2, maximum: 4_194_304 });
export const RunClaimBody = Type.Object(
  {
    role: Type.String({ minLength: 1, maxLength: 64 }),
    generation: GrantedGeneration,
    graceSeconds: Type.Number({ minimum: 0, maximum: 3600 }),
    supervisorPid: Pid,
  },
  { additionalProperties: false },
);
export const RunStartedBody = Type.Object({ pgid: Pid }, { additionalProperties: false });
export const RunParams = Type.Object(
  { id: Type.String({ pattern: '^[0-9]{1,12}$' }) },
  { additionalProperties: false },
);
export const RunClaimed = Type.Object({ ok: Type.Literal(true), id: Type.String() });
/** The fence's reason, or `generation-changed` (the fence says run, for another generation). */
export const RunRefused = Type.Object({ ok: Type.Literal(false), reason: Type.String() });

/** A list the daemon hands over as it keeps it (readonly in the contract's types). */
const List = <T extends TSchema>(items: T) => Type.Immutable(Type.Array(items));
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const PeerConfirmation = Nullable(Type.Union([Type.Literal('confirmed'), Type.Literal('not-confirmed')]));

/** `POST /v1/heartbeat` on the socket → 200. */
export const HeartbeatReport = Type.Object({
  outcome: Literals(AGENT_HEARTBEAT_OUTCOMES),
  status: Nullable(Type.Integer()),
  problem: Nullable(Type.String()),
  holder: Nullable(Host),
  generation: Generation,
  peerConfirmation: PeerConfirmation,
  at: Type.Number(),
  timingProblems: List(Type.String()),
  failover: Nullable(Type.String()),
});

export const KnownLease = Type.Object({
  holder: Nullable(Host),
  generation: Generation,
  expired: Type.Boolean(),
  released: Type.Boolean(),
  floorPending: Type.Boolean(),
  ttlSeconds: Type.Number(),
  safetyMarginSeconds: Type.Number(),
});

export const ReportedCadence = Type.Object({
  heartbeatSeconds: Type.Number(),
  refreshSeconds: Type.Number(),
  requestTimeoutSeconds: Type.Number(),
});

/** `GET /v1/status` on the socket → 200. */
export const AgentStatus = Type.Object({
  host: Host,
  version: Type.String(),
  holder: Nullable(Host),
  generation: Generation,
  seen: Generation,
  known: Nullable(KnownLease),
  run: Type.Boolean(),
  reason: Literals(FENCE_REASONS),
  validForSeconds: Nullable(Type.Number()),
  arbiterOk: Type.Boolean(),
  stale: Type.Boolean(),
  lockDelaySeconds: Nullable(Type.Number()),
  floorPending: Type.Boolean(),
  startGuardSeconds: Nullable(Type.Number()),
  leaseTiming: Nullable(Type.Object({ ttlSeconds: Type.Number(), safetyMarginSeconds: Type.Number() })),
  cadence: ReportedCadence,
  timingProblems: List(Type.String()),
  tokenProblem: Nullable(Type.String()),
  failover: Nullable(Type.String()),
  gaveConfirmation: Nullable(
    Type.Object({ holder: Host, generation: Generation, ageSeconds: Type.Number(), waitSeconds: Type.Number() }),
  ),
  steppedDown: Generation,
  stepDownSeconds: Type.Number(),
  grant: Nullable(
    Type.Object({ generation: Generation, source: Type.Union([Type.Literal('arbiter'), Type.Literal('peer')]) }),
  ),
  pending: Nullable(Type.Object({ generation: Generation, startsInSeconds: Type.Number() })),
  lastHeartbeat: Nullable(Type.Object({ ...HeartbeatReport.properties, ageSeconds: Type.Number() })),
  peers: List(Host),
  peerPaths: Type.Record(Type.String(), Type.Object({ ok: Type.Boolean(), problem: Nullable(Type.String()) })),
  uptimeSeconds: Type.Number(),
});

/** `GET /v1/seen` on the socket → 200. */
export const SeenAnswer = Type.Object({ seen: Type.Boolean(), generation: Generation });

/** `GET /v1/peer` on the peer listener → 200. */
export const PeerInfo = Type.Object({
  host: Host,
  holder: Nullable(Host),
  generation: Generation,
  seenGeneration: Generation,
  gaveConfirmation: Nullable(Type.Object({ holder: Host, generation: Generation })),
});
