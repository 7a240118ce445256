/** The arbiter's lease API: request bodies, answers, the record. */
import Type, { type Static } from 'typebox';
import { LEASE_REFUSALS } from '../errors.js';
import type * as P from '../lease.js';
import { HEARTBEAT_OUTCOMES, LEASE_WAITS, STEP_DOWN_REFUSALS } from '../lease.js';
import { CadenceSeconds, Generation, GrantedGeneration, Host, Literals, NullableTime, Time } from './common.js';

export const ViewOut = Type.Object(
  {
    target: Type.String(),
    reachable: Type.Boolean(),
    ping: Type.Boolean(),
    health: Type.Boolean(),
    at: Time,
  },
  { title: 'LeaseView' },
);

export const DisplacedOut = Type.Object(
  {
    host: Type.String(),
    generation: Type.Integer(),
    acknowledgedAt: NullableTime,
    savedSeconds: Type.Union([Type.Number(), Type.Null()]),
  },
  { title: 'DisplacedHolder' },
);

export const LeaseWaitOut = Type.Object(
  {
    kind: Literals(LEASE_WAITS),
    until: NullableTime,
    host: Type.Union([Type.String(), Type.Null()]),
    unreported: Type.Array(Type.String()),
    text: Type.String(),
  },
  { title: 'LeaseWait' },
);

export const LeaseRecord = Type.Object(
  {
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
    // An object of views by observer name (TypeBox does not type additionalProperties).
    views: Type.Unsafe<P.LeaseRecord['views']>(Type.Object({}, { additionalProperties: ViewOut })),
    dualUnreachableStreak: Type.Integer(),
    lastCheckAt: NullableTime,
    promotedFrom: Type.Union([Type.String(), Type.Null()]),
    maintenance: Type.Boolean(),
    floorPending: Type.Boolean(),
    displaced: Type.Union([DisplacedOut, Type.Null()]),
    now: Time,
    wait: Type.Optional(Type.Union([LeaseWaitOut, Type.Null()])),
  },
  { title: 'LeaseRecord' },
);

const Hold = Type.Union([Type.Number(), Type.Null()]);
const Refusal = Literals(LEASE_REFUSALS);

export const OkLease = Type.Object(
  { ok: Type.Literal(true), lease: LeaseRecord, hold: Type.Optional(Hold) },
  { title: 'LeaseGranted' },
);
export const Conflict = Type.Object(
  {
    ok: Type.Literal(false),
    reason: Refusal,
    lease: LeaseRecord,
    error: Type.String(),
    message: Type.String(),
  },
  { title: 'LeaseConflict' },
);

export const AcquireBody = Type.Object(
  { host: Host, seenGeneration: Type.Optional(Generation), requestTimeoutSeconds: Type.Optional(CadenceSeconds) },
  { additionalProperties: false },
);
export const RenewBody = Type.Object({ host: Host, generation: GrantedGeneration }, { additionalProperties: false });
export const ReleaseBody = Type.Object(
  {
    host: Host,
    generation: Type.Optional(GrantedGeneration),
    handoverTo: Type.Optional(Host),
    force: Type.Optional(Type.Boolean()),
    ran: Type.Optional(Type.Boolean()),
  },
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
export const PeerPathIn = Type.Object(
  {
    peer: Host,
    ok: Type.Boolean(),
    problem: Type.Union([Type.String({ maxLength: 400 }), Type.Null()]),
    ageSeconds: Type.Number({ minimum: 0, maximum: 31_536_000 }),
  },
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
    // Protocol 2: the agent's hq release, for the operator (hq doctor, the status page, hq_host_version).
    version: Type.Optional(Type.String({ pattern: '^[0-9A-Za-z][0-9A-Za-z.+-]{0,31}$' })),
    // Protocol 2: the agent's last probe of the confirmation path to each peer (the status page, hq_peer_path_ok).
    peerPaths: Type.Optional(Type.Array(PeerPathIn, { maxItems: 64 })),
  },
  { additionalProperties: false },
);
export const TimingProblemOut = Type.Object({
  host: Type.String(),
  arbiterKey: Type.String(),
  agentKey: Type.String(),
  message: Type.String(),
});
export const HeartbeatAnswer = Type.Object({
  outcome: Literals(HEARTBEAT_OUTCOMES),
  reason: Type.Union([Refusal, Type.Null()]),
  lease: LeaseRecord,
  hold: Hold,
  reportInSeconds: Type.Union([Type.Number(), Type.Null()]),
  timingProblems: Type.Array(TimingProblemOut),
  failover: Type.String(),
  candidates: Type.Array(Type.String()),
  stepDown: Type.Union([Type.Integer(), Type.Null()]),
});

export const StepDownAckBody = Type.Object(
  { host: Host, generation: GrantedGeneration, revision: Generation, ran: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export const StepDownAckAnswer = Type.Object({
  accepted: Type.Boolean(),
  reason: Type.Union([Literals(STEP_DOWN_REFUSALS), Type.Null()]),
  savedSeconds: Type.Union([Type.Number(), Type.Null()]),
  lease: LeaseRecord,
});

export const TransferBody = Type.Object(
  { to: Host, force: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
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
  termSeconds: Type.Number({
    description: "seconds this arbiter's term stays valid by its own clock (0 when not elected)",
  }),
  etcd: Type.Object({
    healthy: Type.Boolean({ description: 'a majority of the members answered with a raft leader' }),
    members: Type.Array(
      Type.Object({
        endpoint: Type.String(),
        ok: Type.Boolean(),
        leader: Type.Optional(Type.Union([Type.String(), Type.Null()])),
        version: Type.Optional(Type.String()),
        error: Type.Optional(Type.String()),
        dbSizeBytes: Type.Optional(
          Type.Number({ description: "the member's database file, bytes (what etcd compares with its quota)" }),
        ),
      }),
    ),
    space: Type.Optional(
      Type.Object(
        {
          dbSizeBytes: Type.Number({ description: 'the largest member database file, bytes' }),
          dbSizeInUseBytes: Type.Number({ description: 'of it, in use (the rest is given back by etcdctl defrag)' }),
          quotaBytes: Type.Number({
            description: "etcd's --quota-backend-bytes: as the members say it, else store.quotaBackendBytes",
          }),
          quotaFrom: Type.Union([Type.Literal('members'), Type.Literal('config')]),
          usedRatio: Type.Number({ description: 'dbSizeBytes / quotaBytes' }),
          alarm: Type.Boolean({ description: 'a member raised NOSPACE: etcd refuses every write' }),
          level: Type.Union([Type.Literal('ok'), Type.Literal('warn'), Type.Literal('bad')], {
            description: 'warn from 80 % of the quota, bad with the alarm',
          }),
          warning: Type.Union([Type.String(), Type.Null()], { description: 'what to do, one line (null at level ok)' }),
        },
        { description: 'how close etcd is to its space quota (absent until a member answered)' },
      ),
    ),
    compaction: Type.Optional(
      Type.Object({
        intervalSeconds: Type.Number({
          description: 'store.compactionIntervalSeconds (0: the arbiter never compacts)',
        }),
        revision: Type.Union([Type.Number(), Type.Null()], {
          description: 'the revision this arbiter last compacted to (null: none yet)',
        }),
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
export const Primary = Type.Object({
  known: Type.Boolean(),
  holder: Type.Union([Type.String(), Type.Null()]),
  generation: Type.Integer(),
});

/** Query strings are strings (no coercion); each pattern is the whole range. An event id: 15 digits stay below 2^53. */
const EventId = Type.String({ pattern: '^[0-9]{1,15}$', description: 'An event id: the answer starts after it.' });
/** How many events, 1 to 1000 (the most one answer holds). */
const EventCount = Type.String({ pattern: '^(?:[1-9][0-9]{0,2}|1000)$', description: 'A count from 1 to 1000.' });
export const EventsQuery = Type.Object(
  {
    after: Type.Optional(EventId),
    limit: Type.Optional(EventCount),
    tail: Type.Optional(EventCount),
    since: Type.Optional(Type.String({ pattern: '^[0-9]{1,12}(\\.[0-9]{1,9})?$' })),
  },
  { additionalProperties: false },
);
/** `GET /v1/events/stream?after=ID` (or `Last-Event-ID`). */
export const EventStreamQuery = Type.Object({ after: Type.Optional(EventId) }, { additionalProperties: false });
export const EventOut = Type.Object(
  {
    id: Type.Integer(),
    at: Time,
    category: Type.String(),
    event: Type.String(),
    host: Type.Union([Type.String(), Type.Null()]),
    data: Type.Unsafe<P.EventRecord['data']>(Type.Object({}, { additionalProperties: true })),
  },
  { title: 'Event' },
);
export const EventsAnswer = Type.Object({ events: Type.Array(EventOut) });
