/**
 * The TypeBox definitions of every schema the agent's daemon checks at run time: its config file
 * and the bodies, parameters and answers of its listeners' routes. They are the source, not what
 * the daemon loads: `node scripts/gen-schemas.mjs` writes them as plain JSON into
 * generated.ts, which config.ts and daemon/servers.ts import — so the daemon never loads
 * TypeBox's builder (`typebox`, about 9 MiB of an idle agent's VmRSS; docs/BENCH.md "Where the
 * idle agent's memory goes"), only `typebox/schema` to check the config. test/agent/schemas.test.ts
 * checks that generated.ts is what the script writes from this file.
 */
import Type from 'typebox';
import { GENERATION_CEILING, HOST_SCHEMA_PATTERN, ROLE_SCHEMA_PATTERN } from '@hq/protocol';

import { Host } from '@hq/protocol/schemas';

export {
  AgentStatus,
  HeartbeatReport,
  OkAnswer,
  PeerInfo,
  Primary,
  RunClaimBody,
  RunClaimed,
  RunParams,
  RunRefused,
  RunStartedBody,
  SeenAnswer,
  SteppedDownAnswer,
} from '@hq/protocol/schemas';
// `POST /v1/events`: a category, one of its closed list of events, flat scalar data under camelCase keys.
export { ReportedEventBody } from '@hq/protocol/schemas';

// ---------------------------------------------------------------------------------------
// the config file (config.ts)

const Seconds = Type.Number({ exclusiveMinimum: 0 });
const Url = Type.String({ pattern: '^https?://' });
const HostMap = (value: ReturnType<typeof Type.String>) =>
  Type.Record(Type.String({ pattern: HOST_SCHEMA_PATTERN }), value);

/** The agent's config file: unknown keys refused (config.ts names the key and its owner). */
export const AgentConfigSchema = Type.Object(
  {
    hostName: Type.Optional(Host),
    arbiter: Type.Optional(Host),
    arbiterUrl: Type.Optional(Url),
    /** Several arbiters (store etcd): tried in order, the next on failure; the first is `arbiterUrl`. */
    arbiterUrls: Type.Optional(Type.Array(Url, { minItems: 1, maxItems: 8 })),
    heartbeatCron: Type.Optional(Type.String()),
    refreshSeconds: Type.Optional(Seconds),
    failOpenRoles: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    roles: Type.Optional(Type.Array(Type.String({ minLength: 1, pattern: ROLE_SCHEMA_PATTERN }), { minItems: 1 })),
    healthUrls: Type.Optional(HostMap(Url)),
    tailnetDomain: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9.-]+$' })),
    tailscaleBin: Type.Optional(Type.String()),
    probeTimeoutSeconds: Type.Optional(Seconds),
    requestTimeoutSeconds: Type.Optional(Seconds),
    listen: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
        },
        { additionalProperties: false },
      ),
    ),
    stateDir: Type.Optional(Type.String({ minLength: 1 })),
    socketPath: Type.Optional(Type.String({ minLength: 1 })),
    tokenFile: Type.Optional(Type.String({ minLength: 1 })),
    peers: Type.Optional(HostMap(Url)),
    peerTokenFile: Type.Optional(Type.String({ minLength: 1 })),
    /** A `query`-scope arbiter token for `hq primary --write-join` (else the member token goes into the join file). */
    queryTokenFile: Type.Optional(Type.String({ minLength: 1 })),
    /** How other hosts reach this agent's peer listener (a bare origin); see `advertisedUrl`. */
    advertiseUrl: Type.Optional(Url),
    /** On SIGTERM the holder hands the lease to a standby heard from recently, then exits. */
    handoverOnStop: Type.Optional(Type.Boolean()),
    /** Standby replication; validated by `replication/config.ts`, where it is used. */
    replication: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);

// ---------------------------------------------------------------------------------------
// the listeners (daemon/servers.ts)

export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() });

/**
 * `GET /v1/fence?role=R` (the route; the fast path answers the exact spelling before it), and its
 * long poll `&wait=S&run=…&reason=…&generation=…` (the decision the caller last saw; all four or
 * none). Query values are strings: their spelling is the check.
 */
export const FenceQuery = Type.Object(
  {
    role: Type.String(),
    wait: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}(\\.[0-9]{1,3})?$' })),
    run: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
    reason: Type.Optional(Type.String({ pattern: '^[a-z-]{1,32}$' })),
    generation: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$' })),
  },
  { additionalProperties: false },
);

/** `POST /v1/peer/confirm`. */
export const PeerConfirmBody = Type.Object(
  {
    host: Host,
    // Above the ceiling is no real generation: refused, never confirmed or adopted.
    generation: Type.Integer({ minimum: 1, maximum: GENERATION_CEILING }),
    // The lease timing of the holder's record (S6: the arbiter's), so the wait this
    // confirmation imposes covers the validity it extends.
    ttlSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 31_536_000 })),
    safetyMarginSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 31_536_000 })),
    // A probe proves the path (listener, peer token, schema) while the arbiter is up: it is
    // answered without deciding, recording or granting anything.
    probe: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export const PeerConfirmAnswer = Type.Object({
  confirmed: Type.Boolean(),
  generation: Type.Integer(),
  reason: Type.String(),
});
