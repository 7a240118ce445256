/** Where the document is served. */
export const OPENAPI_PATH = '/v1/openapi.json';

/** The document's tags; every operation has exactly one of them. */
export const TAGS = [
  { name: 'lease', description: "The lease record, its decisions and the agents' heartbeats." },
  { name: 'admin', description: 'Operator verbs: a check now, forced transfer, maintenance.' },
  { name: 'events', description: 'The event log.' },
  { name: 'registry', description: 'The fleet registry: machines and port leases.' },
  { name: 'survival', description: "Survival copies of the holder's state." },
  { name: 'operator', description: 'Health, status page, metrics and this document.' },
] as const;
export type Tag = (typeof TAGS)[number]['name'];

export interface OperationText {
  readonly operationId: string;
  readonly summary: string;
  readonly tag: Tag;
  /** The description of the 200 answer. */
  readonly ok: string;
}

/** Every operation of the arbiter, by `METHOD url` (Fastify's URL, `:param`). */
export const OPERATIONS: Readonly<Record<string, OperationText>> = Object.freeze({
  'GET /v1/openapi.json': {
    operationId: 'getOpenApi',
    summary: 'This OpenAPI document',
    tag: 'operator',
    ok: 'The OpenAPI 3.1 document.',
  },
  'GET /v1/health': {
    operationId: 'getHealth',
    summary: 'Liveness of the arbiter',
    tag: 'operator',
    ok: 'The arbiter is up.',
  },
  'GET /metrics': {
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    tag: 'operator',
    ok: 'Prometheus text exposition (the names: docs/REFERENCE.md, "Metrics").',
  },
  'GET /': { operationId: 'getStatusPage', summary: 'The status page (HTML)', tag: 'operator', ok: 'The status page.' },
  'GET /v1/status': {
    operationId: 'getStatus',
    summary: 'What the status page shows, as JSON',
    tag: 'operator',
    ok: 'The status model.',
  },
  'GET /v1/lease': {
    operationId: 'getLease',
    summary: 'Read the lease record',
    tag: 'lease',
    ok: 'The lease record; the ETag header is its revision.',
  },
  'GET /v1/primary': {
    operationId: 'getPrimary',
    summary: 'Which host holds the lease',
    tag: 'lease',
    ok: 'The holder and its generation, or known: false.',
  },
  'POST /v1/lease/acquire': {
    operationId: 'acquireLease',
    summary: 'Acquire the lease for a host',
    tag: 'lease',
    ok: 'Granted (or renewed, when the host already holds it).',
  },
  'POST /v1/lease/renew': {
    operationId: 'renewLease',
    summary: 'Renew the lease by its holder',
    tag: 'lease',
    ok: 'Renewed.',
  },
  'POST /v1/lease/release': {
    operationId: 'releaseLease',
    summary: 'Release the lease, optionally handing it over',
    tag: 'lease',
    ok: 'Released (or handed over).',
  },
  'POST /v1/lease/stepped-down': {
    operationId: 'ackStepDown',
    summary: 'The displaced holder stepped down with no fenced child alive: end the lock-delay',
    tag: 'lease',
    ok: 'Whether the acknowledgement ended the lock-delay, and the record.',
  },
  'POST /v1/heartbeat': {
    operationId: 'postHeartbeat',
    summary: "An agent's heartbeat: renew, or report its view",
    tag: 'lease',
    ok: 'The outcome and the lease record.',
  },
  'POST /v1/join': {
    operationId: 'redeemJoin',
    summary: "Redeem a join bundle's one-time secret: the host's config and tokens, signed",
    tag: 'admin',
    ok: 'The signed payload (tokens left out in a dry run).',
  },
  'POST /v1/check': {
    operationId: 'runCheck',
    summary: 'Run one check of the holder now',
    tag: 'admin',
    ok: 'What the check saw and whether it promoted.',
  },
  'POST /v1/lease/transfer': {
    operationId: 'transferLease',
    summary: 'Force a failover to a host',
    tag: 'admin',
    ok: 'Transferred: the target holds generation + 1 after the lock-delay.',
  },
  'POST /v1/lease/accept-generation': {
    operationId: 'acceptGeneration',
    summary: 'Accept a reported generation the report bound refused (an agent really saw it)',
    tag: 'admin',
    ok: 'The floor now; the next reports are measured from it.',
  },
  'PUT /v1/maintenance': {
    operationId: 'setMaintenance',
    summary: 'Turn maintenance on or off',
    tag: 'admin',
    ok: 'Maintenance set.',
  },
  'GET /v1/events': {
    operationId: 'listEvents',
    summary: 'Read the event log',
    tag: 'events',
    ok: 'Events in ascending id.',
  },
  'GET /v1/events/stream': {
    operationId: 'streamEvents',
    summary: 'Follow the event log (Server-Sent Events)',
    tag: 'events',
    ok: 'An event stream.',
  },
  'POST /v1/resources/register': {
    operationId: 'registerResource',
    summary: 'Register (or re-register) a machine or instance',
    tag: 'registry',
    ok: 'The registered resource.',
  },
  'POST /v1/resources/:id/heartbeat': {
    operationId: 'heartbeatResource',
    summary: 'Keep a registered resource alive',
    tag: 'registry',
    ok: 'The renewed resource.',
  },
  'GET /v1/resources': {
    operationId: 'listResources',
    summary: 'List the live resources',
    tag: 'registry',
    ok: 'The live resources.',
  },
  'DELETE /v1/resources/:id': {
    operationId: 'deleteResource',
    summary: 'Remove a resource',
    tag: 'registry',
    ok: 'Removed.',
  },
  'POST /v1/leases/port': {
    operationId: 'leasePort',
    summary: 'Lease the lowest free test port',
    tag: 'registry',
    ok: 'The leased port and its lease id.',
  },
  'GET /v1/leases/port': {
    operationId: 'listPortLeases',
    summary: 'List the live port leases',
    tag: 'registry',
    ok: 'The live port leases.',
  },
  'POST /v1/leases/port/:port/heartbeat': {
    operationId: 'renewPortLease',
    summary: 'Renew a port lease',
    tag: 'registry',
    ok: 'Renewed.',
  },
  'DELETE /v1/leases/port/:port': {
    operationId: 'releasePortLease',
    summary: 'Release a port lease',
    tag: 'registry',
    ok: 'Released.',
  },
  'GET /v1/survival': {
    operationId: 'listSurvival',
    summary: 'List the survival copies',
    tag: 'survival',
    ok: 'The survival generations per tier.',
  },
  'PUT /v1/survival/:tier/:generation/blobs/:sha256': {
    operationId: 'putSurvivalBlob',
    summary: 'Upload one blob of a survival copy',
    tag: 'survival',
    ok: 'Stored.',
  },
  'PUT /v1/survival/:tier/:generation': {
    operationId: 'putSurvivalGeneration',
    summary: 'Commit a survival generation (manifest and sums)',
    tag: 'survival',
    ok: 'Committed.',
  },
});
