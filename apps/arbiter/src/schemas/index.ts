import Type, { type Static } from 'typebox';
import { HOST_SCHEMA_PATTERN } from '../host-pattern.js';

export const Host = Type.String({ pattern: HOST_SCHEMA_PATTERN, maxLength: 32 });
/** A seen generation: 0 = never seen anything. */
export const Generation = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
/** A generation named in a request is a grant's fencing token: ≥ 1 (0 was never granted). */
export const GrantedGeneration = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
/** A cadence figure an agent reports (seconds, up to a year). */
const CadenceSeconds = Type.Number({ exclusiveMinimum: 0, maximum: 31_536_000 });
const Time = Type.Number();
const NullableTime = Type.Union([Type.Number(), Type.Null()]);

/**
 * A `title` names a schema that the OpenAPI document shares as `components.schemas[title]`
 * (server/openapi.ts `SHARED_SCHEMAS`); validation and serialization ignore it.
 */
export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() }, { title: 'Error' });
export type ErrorBodyT = Static<typeof ErrorBody>;

export const ViewOut = Type.Object({
  target: Type.String(),
  reachable: Type.Boolean(),
  ping: Type.Boolean(),
  health: Type.Boolean(),
  at: Time,
}, { title: 'LeaseView' });

export const LeaseRecord = Type.Object({
  name: Type.Literal('hq'),
  holder: Type.Union([Type.String(), Type.Null()]),
  generation: Type.Integer(),
  revision: Type.Integer(),
  acquiredAt: NullableTime,
  renewedAt: NullableTime,
  ttlSeconds: Time,
  safetyMarginSeconds: Time,
  expiresAt: NullableTime,
  expired: Type.Boolean(),
  released: Type.Boolean(),
  notBefore: NullableTime,
  views: Type.Object({}, { additionalProperties: ViewOut }),
  dualUnreachableStreak: Type.Integer(),
  lastCheckAt: NullableTime,
  promotedFrom: Type.Union([Type.String(), Type.Null()]),
  maintenance: Type.Boolean(),
  floorPending: Type.Boolean(),
  now: Time,
}, { title: 'LeaseRecord' });
export type LeaseRecordT = Static<typeof LeaseRecord>;

const Hold = Type.Union([Type.Number(), Type.Null()]);

export const OkLease = Type.Object({ ok: Type.Literal(true), lease: LeaseRecord, hold: Type.Optional(Hold) }, { title: 'LeaseGranted' });
export const Conflict = Type.Object({
  ok: Type.Literal(false),
  reason: Type.String(),
  lease: LeaseRecord,
  error: Type.String(),
  message: Type.String(),
}, { title: 'LeaseConflict' });

export const AcquireBody = Type.Object(
  { host: Host, seenGeneration: Type.Optional(Generation), requestTimeoutSeconds: Type.Optional(CadenceSeconds) },
  { additionalProperties: false },
);
export const RenewBody = Type.Object({ host: Host, generation: GrantedGeneration }, { additionalProperties: false });
export const ReleaseBody = Type.Object(
  { host: Host, generation: Type.Optional(GrantedGeneration), handoverTo: Type.Optional(Host), force: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export const ViewIn = Type.Object(
  { target: Host, reachable: Type.Boolean(), ping: Type.Boolean(), health: Type.Boolean() },
  { additionalProperties: false },
);
export const ConfirmationIn = Type.Object(
  { holder: Host, generation: GrantedGeneration, ageSeconds: Type.Number({ minimum: 0, maximum: 31_536_000 }) },
  { additionalProperties: false },
);
export const HeartbeatBody = Type.Object(
  {
    host: Host,
    generation: Type.Optional(GrantedGeneration),
    seenGeneration: Type.Optional(Generation),
    view: Type.Optional(ViewIn),
    confirmation: Type.Optional(ConfirmationIn),
    // The agent's cadence (it owns it; the arbiter checks the pairs across the sides).
    heartbeatSeconds: Type.Optional(CadenceSeconds),
    refreshSeconds: Type.Optional(CadenceSeconds),
    requestTimeoutSeconds: Type.Optional(CadenceSeconds),
  },
  { additionalProperties: false },
);
export type HeartbeatBodyT = Static<typeof HeartbeatBody>;
export const TimingProblemOut = Type.Object({
  host: Type.String(),
  arbiterKey: Type.String(),
  agentKey: Type.String(),
  message: Type.String(),
});
export const HeartbeatAnswer = Type.Object({
  outcome: Type.Union([Type.Literal('renewed'), Type.Literal('standby'), Type.Literal('no-lease'), Type.Literal('renew-refused')]),
  reason: Type.Union([Type.String(), Type.Null()]),
  lease: LeaseRecord,
  hold: Hold,
  /** Heartbeat again after this many seconds (the start wait needs this report), or null. */
  reportInSeconds: Type.Union([Type.Number(), Type.Null()]),
  /** The relations across the sides that this report breaks (empty when none). */
  timingProblems: Type.Array(TimingProblemOut),
  /** The worst-case failover now, as every place prints it. */
  failover: Type.String(),
  /** The candidates in promotion order (agents without configured peers find theirs here). */
  candidates: Type.Array(Type.String()),
});

export const TransferBody = Type.Object({ to: Host, force: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
export const MaintenanceBody = Type.Object(
  { enabled: Type.Boolean(), reason: Type.Optional(Type.String({ maxLength: 500 })) },
  { additionalProperties: false },
);

export const CheckAnswer = Type.Object({
  promoted: Type.Boolean(),
  streak: Type.Integer(),
  holder: Type.Union([Type.String(), Type.Null()]),
  generation: Type.Integer(),
  ping: Type.Boolean(),
  health: Type.Boolean(),
  promotee: Type.Union([Type.String(), Type.Null()]),
  skipped: Type.Optional(Type.String()),
});

/** Store etcd only: which arbiter decides, and the members as this arbiter last saw them. */
export const Arbiters = Type.Object({
  elected: Type.Boolean({ description: 'this arbiter is the elected one and decides' }),
  leader: Type.Union([Type.String(), Type.Null()], { description: "the elected arbiter's URL (null: none known)" }),
  self: Type.String({ description: "this arbiter's advertised URL" }),
  termSeconds: Type.Number({ description: "seconds this arbiter's term stays valid by its own clock (0 when not elected)" }),
  etcd: Type.Object({
    healthy: Type.Boolean({ description: 'a majority of the members answered with a raft leader' }),
    members: Type.Array(
      Type.Object({
        endpoint: Type.String(),
        ok: Type.Boolean(),
        leader: Type.Optional(Type.Union([Type.String(), Type.Null()])),
        version: Type.Optional(Type.String()),
        error: Type.Optional(Type.String()),
      }),
    ),
  }),
});
export type ArbitersT = Static<typeof Arbiters>;

export const Health = Type.Object({
  status: Type.Literal('ok'),
  role: Type.Literal('arbiter'),
  host: Type.String(),
  version: Type.String(),
  store: Type.Optional(Type.Union([Type.Literal('sqlite'), Type.Literal('etcd')])),
  arbiters: Type.Optional(Arbiters),
});
export const Primary = Type.Object({ known: Type.Boolean(), holder: Type.Union([Type.String(), Type.Null()]), generation: Type.Integer() });

/** Query strings are strings (no coercion): digits only, checked for range in the handler. */
export const EventsQuery = Type.Object(
  {
    after: Type.Optional(Type.String({ pattern: '^[0-9]{1,16}$' })),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,16}$' })),
    /** The newest N events (1–1000), oldest first. */
    tail: Type.Optional(Type.String({ pattern: '^[0-9]{1,16}$' })),
    /** Events at or after this arbiter time (epoch seconds, may be fractional). */
    since: Type.Optional(Type.String({ pattern: '^[0-9]{1,12}(\\.[0-9]{1,9})?$' })),
  },
  { additionalProperties: false },
);
export const EventOut = Type.Object({
  id: Type.Integer(),
  at: Time,
  category: Type.String(),
  event: Type.String(),
  host: Type.Union([Type.String(), Type.Null()]),
  data: Type.Object({}, { additionalProperties: true }),
}, { title: 'Event' });
export const EventsAnswer = Type.Object({ events: Type.Array(EventOut) });
