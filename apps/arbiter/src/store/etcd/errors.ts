/**
 * Everything that can go wrong talking to etcd, as one typed error. The etcd store answers
 * each kind with one clear line (503 for the first three, never a stack), so the kinds say what
 * a caller may conclude, not how the failure looked on the wire:
 *
 *   unavailable      no member answered in time (refused, unreachable, timed out): nothing applied
 *   no-quorum        a member answered that it has no raft leader: nothing applied
 *   indeterminate    a write was sent and its answer never came (timeout, connection lost, etcd's
 *                    own "request timed out"): it MAY have applied (etcd api_guarantees.md).
 *                    Re-read before deciding again; never resend it blindly.
 *   compacted        the revision asked for is compacted away: re-read, then watch from the
 *                    read's header revision (etcd #8668)
 *   lease-not-found  the lease expired or was revoked
 *   auth             etcd refused our credentials or permissions
 *   bad-request      etcd refused the request itself (malformed, too large, too many operations,
 *                    a future revision): a bug on our side, not an outage
 *
 * The rule that decides between the first three for a write is in `classifyAnswer` and
 * `classifyTransport`: only an answer that proves the request was not proposed (connection
 * refused before sending, "no leader", "too many requests") makes a write `unavailable` or
 * `no-quorum`; anything after the request left us is `indeterminate`.
 */
export type EtcdErrorKind =
  | 'unavailable'
  | 'no-quorum'
  | 'indeterminate'
  | 'compacted'
  | 'lease-not-found'
  | 'auth'
  | 'bad-request';

export class EtcdError extends Error {
  override readonly name = 'EtcdError';
  /** For `compacted`: etcd's compact revision, when it named one (watch cancellations do). */
  readonly compactRevision: bigint | undefined;

  constructor(
    readonly kind: EtcdErrorKind,
    message: string,
    opts: { compactRevision?: bigint; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.compactRevision = opts.compactRevision;
  }
}

export function isEtcdError(err: unknown, kind?: EtcdErrorKind): err is EtcdError {
  return err instanceof EtcdError && (kind === undefined || err.kind === kind);
}

/** gRPC status codes etcd answers with (google.golang.org/grpc/codes). */
const GRPC = Object.freeze({
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  OUT_OF_RANGE: 11,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
});

/** Unavailable answers that etcd gives before proposing anything: safe to try another member, even for a write. */
const NOT_PROPOSED = ['etcdserver: no leader', 'etcdserver: too many requests', 'etcdserver: not capable'];

/**
 * What one member's answer means. `retry` says the call may go on to the next member (the
 * request certainly did not apply, or it was a read); otherwise the error is final.
 */
export interface Verdict {
  readonly error: EtcdError;
  readonly retry: boolean;
}

/** An etcd error answer (`{code, message}` of a unary call, `{grpc_code, message}` in a stream), classified. */
export function classifyAnswer(grpcCode: number, message: string, write: boolean, where: string): Verdict {
  const line = `etcd ${where}: ${message}`;
  if (message === 'etcdserver: no leader')
    return { error: new EtcdError('no-quorum', `${line} (the member has no raft leader: no quorum)`), retry: true };
  switch (grpcCode) {
    case GRPC.OUT_OF_RANGE:
      return message.includes('compacted')
        ? { error: new EtcdError('compacted', line), retry: false }
        : { error: new EtcdError('bad-request', line), retry: false };
    case GRPC.NOT_FOUND:
      return message.includes('lease not found')
        ? { error: new EtcdError('lease-not-found', line), retry: false }
        : { error: new EtcdError('bad-request', line), retry: false };
    case GRPC.PERMISSION_DENIED:
    case GRPC.UNAUTHENTICATED:
      return { error: new EtcdError('auth', line), retry: false };
    case GRPC.INVALID_ARGUMENT:
      // etcd answers a missing user name (auth enabled, no token) as an invalid argument
      return message.includes('user name') || message.includes('auth')
        ? { error: new EtcdError('auth', line), retry: false }
        : { error: new EtcdError('bad-request', line), retry: false };
    case GRPC.FAILED_PRECONDITION:
      return { error: new EtcdError('bad-request', line), retry: false };
    case GRPC.RESOURCE_EXHAUSTED:
      // the space quota alarm (NOSPACE): refused before applying
      return { error: new EtcdError('unavailable', line), retry: false };
    default:
      // UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN and any other code
      if (!write || NOT_PROPOSED.includes(message)) return { error: new EtcdError('unavailable', line), retry: true };
      return { error: new EtcdError('indeterminate', `${line} (the write may have applied)`), retry: false };
  }
}

/** undici / socket error codes raised before a byte of the request left: no write can have applied. */
const BEFORE_SEND = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** A transport failure (no answer at all), classified the same way. `timedOut`: our own deadline fired. */
export function classifyTransport(err: unknown, write: boolean, where: string, timedOut: boolean): Verdict {
  const code = (err as { code?: unknown }).code;
  const why = timedOut
    ? 'no answer within the request timeout'
    : typeof code === 'string'
      ? code
      : err instanceof Error
        ? err.message
        : String(err);
  if (typeof code === 'string' && BEFORE_SEND.has(code) && !timedOut) {
    return { error: new EtcdError('unavailable', `etcd ${where}: ${why}`, { cause: err }), retry: true };
  }
  if (!write) return { error: new EtcdError('unavailable', `etcd ${where}: ${why}`, { cause: err }), retry: true };
  return {
    error: new EtcdError('indeterminate', `etcd ${where}: ${why} after the write was sent (it may have applied)`, {
      cause: err,
    }),
    retry: false,
  };
}
