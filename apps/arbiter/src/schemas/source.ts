/**
 * The TypeBox definitions of every schema the arbiter checks at run time: its config file and
 * the bodies, parameters, headers and answers of its routes (most of them the protocol's,
 * `@hq/protocol/schemas`, re-exported here). They are the source, not what the daemon loads:
 * `node scripts/gen-schemas.mjs` writes them as plain JSON into generated.ts, which config.ts,
 * the routes and the OpenAPI document import — so the daemon never loads TypeBox's builder
 * (about 680 ES modules; docs/BENCH.md "Where the idle agent's memory goes" for the per-library
 * table), and its checker only for a config the quick check cannot pass.
 * test/arbiter/schemas.test.ts checks that generated.ts is what the script writes from this file.
 */
import Type from 'typebox';
import { HOST_SCHEMA_PATTERN } from '@hq/protocol';
import { Conflict, ErrorBody, GrantedGeneration, LeaseRecord } from '@hq/protocol/schemas';

export {
  AcquireBody,
  CheckAnswer,
  Conflict,
  Deleted,
  ErrorBody,
  EventStreamQuery,
  EventsAnswer,
  EventsQuery,
  Health,
  HeartbeatAnswer,
  HeartbeatBody,
  LeaseIdHeaders,
  LeaseRecord,
  MaintenanceBody,
  ManifestSchema,
  OkLease,
  PortLeaseAnswer,
  PortLeaseBody,
  PortLeasesAnswer,
  PortParams,
  PortReleased,
  Primary,
  PushBody,
  RegisterBody,
  ReleaseBody,
  RenewBody,
  ResourceHeartbeatBody,
  ResourceOut,
  ResourceParams,
  ResourcesAnswer,
  ResourcesQuery,
  StepDownAckAnswer,
  StepDownAckBody,
  SurvivalBlobParams,
  SurvivalBlobStoredAnswer,
  SurvivalCommittedAnswer,
  SurvivalParams,
  TransferBody,
} from '@hq/protocol/schemas';
export { StatusAnswer } from './status.js';

/** One band of ports, both ends included. */
const PortRange = Type.Object(
  { from: Type.Integer({ minimum: 1, maximum: 65535 }), to: Type.Integer({ minimum: 1, maximum: 65535 }) },
  { additionalProperties: false },
);
/** The registry's `portBands` (its request and answer schemas are the protocol's). */
const PortBandsConfig = Type.Object(
  {
    reserved: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: 1024 })),
    test: Type.Optional(PortRange),
    offline: Type.Optional(PortRange),
  },
  { additionalProperties: false },
);

/** A lease decision's 409: the conflict with the record, or a refusal by the generation bounds (`{error, message}`). */
export const LeaseRefused = Type.Union([Conflict, ErrorBody]);
/** `POST /v1/lease/accept-generation` (admin): a generation an agent really saw, above the report bound. */
export const AcceptGenerationBody = Type.Object({ generation: GrantedGeneration }, { additionalProperties: false });
export const AcceptGenerationAnswer = Type.Object({
  ok: Type.Literal(true),
  floor: Type.Integer(),
  was: Type.Integer(),
  lease: LeaseRecord,
});

/** `GET /v1/events/stream`'s answer, as the OpenAPI document describes it. */
export const EventStreamText = Type.String({
  description: 'text/event-stream: `id: N`, `event: hq`, `data: {id, at, category, event, host, data}`',
});
/** `POST /v1/join`: the one-time secret of a join bundle, the joining host's nonce, and whether to consume it. */
export const JoinBody = Type.Object(
  {
    host: Type.String({ pattern: HOST_SCHEMA_PATTERN }),
    secret: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    nonce: Type.String({ pattern: '^[0-9a-f]{32,128}$' }),
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
/** `POST /v1/join`'s answer: the payload as signed JSON text, the identity key (SPKI DER) and the Ed25519 signature, base64. */
export const JoinAnswer = Type.Object(
  { payload: Type.String(), publicKey: Type.String(), signature: Type.String() },
  { additionalProperties: false },
);
/** `GET /`'s answer, as the OpenAPI document describes it. */
export const StatusPageHtml = Type.String({ description: 'text/html' });

// ---------------------------------------------------------------------------------------
// the config file (config.ts)

const HostName = Type.String({ pattern: HOST_SCHEMA_PATTERN });
const Seconds = Type.Number({ exclusiveMinimum: 0, maximum: 31_536_000 });

export const ConfigSchema = Type.Object(
  {
    arbiter: Type.Optional(HostName),
    candidates: Type.Optional(Type.Array(HostName, { minItems: 1, maxItems: 32 })),
    standby: Type.Optional(HostName),
    ttlSeconds: Type.Optional(Seconds),
    viewFreshSeconds: Type.Optional(Seconds),
    promoteAfterChecks: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    safetyMarginSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 31_536_000 })),
    checkCron: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    healthUrls: Type.Optional(Type.Record(Type.String(), Type.String({ minLength: 1, maxLength: 2048 }))),
    tailnetDomain: Type.Optional(Type.String({ pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$' })),
    tailscaleBin: Type.Optional(Type.String({ maxLength: 4096 })),
    probeTimeoutSeconds: Type.Optional(Seconds),
    listen: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
        },
        { additionalProperties: false },
      ),
    ),
    dataDir: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    /** Where the state lives: SQLite in dataDir (the default) or an etcd cluster (several arbiters). */
    store: Type.Optional(
      Type.Object(
        {
          kind: Type.Union([Type.Literal('sqlite'), Type.Literal('etcd')]),
          endpoints: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems: 1, maxItems: 16 }),
          ),
          prefix: Type.Optional(Type.String({ minLength: 2, maxLength: 200 })),
          dialTimeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 300 })),
          requestTimeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 300 })),
          electionTtlSeconds: Type.Optional(Type.Integer({ minimum: 2, maximum: 3600 })),
          advertiseUrl: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
          compactionIntervalSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })),
          quotaBackendBytes: Type.Optional(Type.Integer({ minimum: 65_536, maximum: 1_099_511_627_776 })),
          tls: Type.Optional(
            Type.Object(
              {
                caFile: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
                certFile: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
                keyFile: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
              },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    auth: Type.Optional(Type.Object({ openReads: Type.Optional(Type.Boolean()) }, { additionalProperties: false })),
    /** The registry's port bands (see registry/README.md). */
    portBands: Type.Optional(PortBandsConfig),
    /** The event log's bounded history (swept hourly and at start). */
    events: Type.Optional(
      Type.Object(
        {
          maxAgeDays: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 36_500 })),
          maxCount: Type.Optional(Type.Integer({ minimum: 100, maximum: 10_000_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    hooks: Type.Optional(
      Type.Object(
        {
          urls: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: 32 })),
          command: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { minItems: 1, maxItems: 64 }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
