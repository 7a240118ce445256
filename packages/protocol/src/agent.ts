/**
 * The agent's two listeners: the unix socket (`hq` and fenced jobs; the fence itself is
 * in ./fence.ts) and the peer listener (other agents, the arbiter's probe).
 */
import type { FenceReason } from './fence.js';
import type { Host } from './host.js';
import { HEARTBEAT_OUTCOMES } from './lease.js';

// ---------------------------------------------------------------------------------------
// the unix socket

/** `GET /v1/seen`. */
export interface SeenAnswer {
  readonly seen: boolean;
  readonly generation: number;
}

/**
 * `POST /v1/step-down`: persisted, and every fenced child of that generation the agent knows of
 * ended (TERM, KILL after its grace, gone). Send the release within one request timeout of this
 * answer: after one more, a record that still names this host undoes the step-down by itself.
 */
export interface SteppedDownAnswer {
  readonly ok: true;
  readonly steppedDown: number;
  /** False when a child may still run (one the agent could not signal, or never learned the group of). */
  readonly childrenGone: boolean;
  /** This life of the agent ran that generation (the arbiter may then skip the start wait for the handover). */
  readonly ran: boolean;
}

/**
 * `POST /v1/runs`: an `hq fence run` supervisor registers its run before it spawns the child,
 * so the agent can end it on a step-down even if the supervisor died.
 */
export interface RunClaim {
  readonly role: string;
  /** The generation the fence answered run for; refused unless the fence still says so. */
  readonly generation: number;
  /** The supervisor's `--grace`: SIGKILL this long after SIGTERM. */
  readonly graceSeconds: number;
  /** The supervisor's pid: while it lives and has not reported the group, the agent waits for it. */
  readonly supervisorPid: number;
}

/** `POST /v1/runs` → 200 with the run's id, or 409 (the fence does not say run for that generation now). */
export type RunClaimAnswer =
  | { readonly ok: true; readonly id: string }
  | { readonly ok: false; readonly reason: FenceReason | 'generation-changed' };

/** `POST /v1/runs/{id}`: the child's process group (its leader's pid), right after the spawn. */
export interface RunStarted {
  readonly pgid: number;
}

/** `POST /v1/resume` and `POST /v1/events`. */
export interface OkAnswer {
  readonly ok: true;
}

/** A heartbeat as the agent saw it: the arbiter's outcome, or why there was none. */
export const AGENT_HEARTBEAT_OUTCOMES = Object.freeze([
  ...HEARTBEAT_OUTCOMES,
  'unreachable',
  'refused',
  'invalid-answer',
] as const);

export type AgentHeartbeatOutcome = (typeof AGENT_HEARTBEAT_OUTCOMES)[number];

const AGENT_OUTCOMES: ReadonlySet<unknown> = new Set(AGENT_HEARTBEAT_OUTCOMES);

export function isAgentHeartbeatOutcome(value: unknown): value is AgentHeartbeatOutcome {
  return AGENT_OUTCOMES.has(value);
}

/** `POST /v1/heartbeat` on the socket: one heartbeat now, and what came of it. */
export interface HeartbeatReport {
  readonly outcome: AgentHeartbeatOutcome;
  readonly status: number | null;
  readonly problem: string | null;
  readonly holder: Host | null;
  readonly generation: number;
  readonly peerConfirmation: 'confirmed' | 'not-confirmed' | null;
  readonly at: number;
  /** What the arbiter said about this host's cadence against its lease timing (S6). */
  readonly timingProblems: readonly string[];
  /** The arbiter's worst-case failover sentence, as it prints it everywhere. */
  readonly failover: string | null;
}

/** The lease as the agent last learned it from the arbiter. */
export interface KnownLease {
  readonly holder: Host | null;
  readonly generation: number;
  readonly expired: boolean;
  readonly released: boolean;
  readonly floorPending: boolean;
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
}

/** The cadence an agent owns and reports with every heartbeat (S6). */
export interface ReportedCadence {
  readonly heartbeatSeconds: number;
  readonly refreshSeconds: number;
  readonly requestTimeoutSeconds: number;
}

/** `GET /v1/status` on the socket (`hq doctor`, `hq lease release`, `hq standby`). */
export interface AgentStatus {
  readonly host: Host;
  readonly version: string;
  readonly holder: Host | null;
  readonly generation: number;
  readonly seen: number;
  readonly known: KnownLease | null;
  /** The fence for `ledger-cli` (never fail-open). */
  readonly run: boolean;
  readonly reason: FenceReason;
  readonly validForSeconds: number | null;
  readonly arbiterOk: boolean;
  readonly stale: boolean;
  /** Null while the floor is pending (the wait has no end yet). */
  readonly lockDelaySeconds: number | null;
  readonly floorPending: boolean;
  /** Null while the start guard's length is unknown (until the first record). */
  readonly startGuardSeconds: number | null;
  readonly leaseTiming: { readonly ttlSeconds: number; readonly safetyMarginSeconds: number } | null;
  readonly cadence: ReportedCadence;
  readonly timingProblems: readonly string[];
  readonly tokenProblem: string | null;
  readonly failover: string | null;
  readonly gaveConfirmation: {
    readonly holder: Host;
    readonly generation: number;
    readonly ageSeconds: number;
    readonly waitSeconds: number;
  } | null;
  readonly steppedDown: number;
  /** The longest a step-down can take now (the fenced children's graces): `hq lease release` waits this long for it. */
  readonly stepDownSeconds: number;
  readonly grant: { readonly generation: number; readonly source: 'arbiter' | 'peer' } | null;
  readonly pending: { readonly generation: number; readonly startsInSeconds: number } | null;
  readonly lastHeartbeat: (HeartbeatReport & { readonly ageSeconds: number }) | null;
  readonly peers: readonly Host[];
  /** The confirmation path to each peer as the last probe found it. */
  readonly peerPaths: { readonly [peer: string]: { readonly ok: boolean; readonly problem: string | null } };
  readonly uptimeSeconds: number;
}

/**
 * The events a CLI command reports to its local agent (`POST /v1/events`), so they land in the
 * agent's log beside its own: the sender side of standby replication (`hq standby
 * snapshot|promote|role`) and primary resolution (`hq primary`). A closed list per category:
 * the agent refuses any other pair, so a log reader can rely on these names.
 */
export const REPORTED_EVENTS = Object.freeze({
  'hq.standby': Object.freeze([
    'generation',
    'failed',
    'config-host-local-stripped',
    'promoted',
    'promote-refused',
    'role',
  ] as const),
  control: Object.freeze(['primary-resolved'] as const),
});

export type ReportedCategory = keyof typeof REPORTED_EVENTS;
export type ReportedEvent<C extends ReportedCategory = ReportedCategory> = (typeof REPORTED_EVENTS)[C][number];

/** A reported event's data: at most this many flat scalar fields (strings at most 256 characters). */
export const REPORTED_DATA_LIMITS = Object.freeze({ maxFields: 24, maxString: 256 });

/** A reported field's name: a camelCase word. */
export const REPORTED_KEY_PATTERN = '^[a-z][A-Za-z0-9]{0,31}$';

export type ReportedData = { readonly [key: string]: string | number | boolean | null };

/** `POST /v1/events` on the socket. */
export type ReportedEventBody = {
  readonly [C in ReportedCategory]: {
    readonly category: C;
    readonly event: ReportedEvent<C>;
    readonly data?: ReportedData;
  };
}[ReportedCategory];

// ---------------------------------------------------------------------------------------
// the peer listener

/** `GET /v1/peer` (peer token). */
export interface PeerInfo {
  readonly host: Host;
  readonly holder: Host | null;
  readonly generation: number;
  readonly seenGeneration: number;
  readonly gaveConfirmation: { readonly holder: Host; readonly generation: number } | null;
}

/** `POST /v1/peer/confirm` (peer token): the holder asks a standby to confirm it (rule ③, L2). */
export interface ConfirmRequest {
  readonly host: Host;
  readonly generation: number;
  /** The lease timing of the requester's record (S6: the arbiter's): its validity, which this confirmation extends. */
  readonly ttlSeconds?: number;
  readonly safetyMarginSeconds?: number;
}

/** Why a standby confirmed or refused. */
export const CONFIRM_REASONS = Object.freeze([
  'confirmed',
  'self',
  'higher-generation',
  'other-holder',
  'holding',
  'unknown-timing',
] as const);

export type ConfirmReason = (typeof CONFIRM_REASONS)[number];

/** `POST /v1/peer/confirm` → 200. */
export interface ConfirmAnswer {
  readonly confirmed: boolean;
  /** The standby's seen generation: a higher one than the requester's blocks it. */
  readonly generation: number;
  readonly reason: ConfirmReason;
}
