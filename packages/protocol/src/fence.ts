/**
 * The fence: the agent's answer to `GET /v1/fence?role=R`, and every reason a fence
 * answer, `hq fence check|run` or `hq guard` can give — the agent's decisions and the ones the
 * CLI mints when it cannot ask. Its own subpath (`@hq/protocol/fence`) so the fence path loads
 * this one module and nothing else of the contract.
 */

/** The agent's decisions (lease-core `fence`), in the documented order. */
export const FENCE_REASONS = Object.freeze([
  'holder',
  'quorum-standby',
  'within-ttl',
  'lock-delay',
  'not-holder',
  'stale-generation',
  'no-quorum-expired',
  'no-lease',
  'no-lease-after-seen',
  'fail-open',
] as const);

export type FenceReason = (typeof FENCE_REASONS)[number];

/** `GET /v1/fence?role=R` → 200. */
export interface FenceDecision {
  readonly run: boolean;
  readonly reason: FenceReason;
  readonly generation: number;
  readonly holder: string | null;
  readonly role: string;
  /** Seconds of validity left when `run` (null for fail-open: no bound). */
  readonly validForSeconds: number | null;
}

/** The CLI's own reason when the agent does not answer: nothing runs without it. */
export const AGENT_UNREACHABLE = 'agent-unreachable';
/** `hq fence run`: a re-check named another generation or holder than the one CMD started under. */
export const GENERATION_CHANGED = 'generation-changed';

/** What `hq fence check --json` prints when the agent does not answer. */
export interface FenceUnanswered {
  readonly run: false;
  readonly reason: typeof AGENT_UNREACHABLE;
  readonly generation: null;
  readonly holder: null;
  readonly role: string;
  readonly validForSeconds: null;
}

/**
 * The long poll of the fence, `GET /v1/fence?role=R&wait=S&run=…&reason=…&generation=…`: the
 * decision the caller last saw. The agent answers at once when its decision differs from it,
 * else when the decision changes or `wait` seconds pass.
 */
export interface FenceSeen {
  readonly run: boolean;
  readonly reason: string;
  readonly generation: number;
}

/** The longest `wait` of a long poll, in seconds. */
export const FENCE_WAIT_MAX_SECONDS = 300;

/** The path of a long poll on `role` that waits up to `waitSeconds` for a decision other than `seen`. */
export function fenceWaitPath(role: string, seen: FenceSeen, waitSeconds: number): string {
  const wait = Math.max(0, Math.min(FENCE_WAIT_MAX_SECONDS, Math.round(waitSeconds * 1000) / 1000));
  return `/v1/fence?role=${encodeURIComponent(role)}&wait=${wait}&run=${seen.run}&reason=${encodeURIComponent(seen.reason)}&generation=${seen.generation}`;
}

/** Why `hq fence run` skipped CMD or stopped it (its `skipped` and `lost` lines). */
export type FenceRunReason = FenceReason | typeof AGENT_UNREACHABLE | typeof GENERATION_CHANGED;

/**
 * Why `hq guard` allowed or refused a write (its `--json` answer and its `cli-override` /
 * `cli-refused` lines): the fence's own reason, or one of the guard's.
 */
export const GUARD_REASONS = Object.freeze([
  'fence',
  'never-seen',
  'never-seen-lease-exists',
  'never-seen-arbiter-unreachable',
  'non-operational-instance',
  'operational-instance',
  'outside-instance-root',
  'override',
] as const);

export type GuardReason = FenceReason | typeof AGENT_UNREACHABLE | (typeof GUARD_REASONS)[number];

const REASONS: ReadonlySet<unknown> = new Set(FENCE_REASONS);

export function isFenceReason(value: unknown): value is FenceReason {
  return REASONS.has(value);
}

/** Is this parsed answer a fence decision (every field, a known reason)? */
export function isFenceDecision(v: unknown): v is FenceDecision {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as { [k: string]: unknown };
  return (
    typeof o['run'] === 'boolean' &&
    isFenceReason(o['reason']) &&
    typeof o['generation'] === 'number' &&
    (o['holder'] === null || typeof o['holder'] === 'string') &&
    typeof o['role'] === 'string' &&
    (o['validForSeconds'] === null || typeof o['validForSeconds'] === 'number')
  );
}
