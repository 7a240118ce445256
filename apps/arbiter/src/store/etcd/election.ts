/**
 * One arbiter decides at a time: an election over an etcd lease, etcd's own recipe
 * (client/v3/concurrency/election.go). Each campaigner puts `{prefix}election/{lease id}` with
 * its lease; the live key with the lowest create_revision is elected; the others wait for the
 * deletion of the key just older than theirs, then look again.
 *
 * Guarantees:
 *  E1  etcd elects at most one campaigner at a time: keys only go away when their lease
 *      expires or is revoked, or by a guarded resign, and a campaigner is elected only when no
 *      older key is left under the prefix *and* its own key still exists (one txn).
 *  E2  `stillElected()` is decided on our own clock, never on etcd's lease TTL (TTLs reset to
 *      full on an etcd leader change: a minimum, not a maximum — etcd #9395, #13294). It is true
 *      while elapsed(send time of the last keep-alive etcd answered alive, now) < ttl − margin,
 *      elapsed = max(monotonic, wall), so a sleep or a stop (SIGSTOP) of this process can only
 *      shorten it. etcd counts the TTL from its *receipt* of that keep-alive, later than our
 *      send: while `stillElected()` is true, etcd has not expired our key, so nobody else can
 *      be elected — as long as the margin covers (a) the rate difference of the two clocks over
 *      one TTL and (b) etcd's election timeout: an etcd leader cut off from its followers still
 *      renews leases in its memory until it notices (≤ about one election timeout after the
 *      new leader, which restarts every TTL from its own promotion). The same holds for the
 *      grant: the first renewal is the grant request's send time.
 *  E3  A term ends for good: the first time it is found lapsed (a check, or a keep-alive tick),
 *      when etcd says the lease is gone, when our key is gone, on resign or abort. It never comes
 *      back; the caller campaigns again for a new term, which the protocol treats as an arbiter
 *      restart (S2.3's start wait from `electedAt`).
 *  E4  `guard()` is the compare every write of the elected side carries: our key still exists
 *      with our create_revision (the recipe's Proclaim). Two sides that both believe they are
 *      elected (one paused past its term and not yet checked) cannot both write.
 *  E5  Resign ends the term locally first (no decision after resign was called), then deletes
 *      our key under the guard, then revokes the lease.
 *
 * Not guaranteed: liveness while etcd has no quorum (nobody is elected then), or that a
 * campaigner is elected within a bound — only that the next is elected once the key before it
 * is gone (etcd deletes an expired lease's keys within ~0.5 s of its expiry).
 */
import { elapsed, type Stamp } from '@hq/lease-core';
import { every, pause, realTimers, stampClock, type StampClock, type Timers } from '@hq/runtime/clock';
import { cmp, op, type Compare, type EtcdClient, type KeyValue } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { etcdKeys } from './keys.js';

/** One reading of both clocks, seconds (lease-core's `Stamp`), the shell's clock; tests pass their own. */
export type { StampClock };

export interface ElectionOptions {
  /** The store's prefix; the election's keys go under `{prefix}/election/`. */
  readonly prefix: string;
  /** What observers see for this campaigner (its arbiter URL, for instance). */
  readonly value: string;
  /**
   * etcd lease TTL, whole seconds (default 10). Too small: a slow keep-alive or a busy etcd
   * ends terms for nothing; too large: a killed elected arbiter is replaced only that late.
   */
  readonly ttlSeconds?: number;
  /**
   * How long before send + ttl our side stops believing (default 2). Covers the rate difference
   * of our clock and etcd's leader's over one TTL, etcd's election timeout (1 s by default: E2)
   * and the time from a check to the decision's write. Too small: etcd could expire our key
   * while we still decide (the guard then refuses our writes, E4); too large: each term ends
   * that much before etcd would end it.
   */
  readonly marginSeconds?: number;
  /** Keep-alive period (default (ttl − margin) / 3): several tries fit in one validity. */
  readonly keepAliveSeconds?: number;
  readonly clock?: StampClock;
  /** The keep-alive ticks, the retry pauses and the watches' re-check period (default: real ones). */
  readonly timers?: Timers;
}

export const ELECTION_DEFAULTS = Object.freeze({ ttlSeconds: 10, marginSeconds: 2 });

export type Ending = 'aborted' | 'lapsed' | 'lease-gone' | 'key-gone' | 'resigned';

export interface Term {
  readonly key: string;
  readonly createRevision: bigint;
  readonly lease: bigint;
  /** When this side learned it was elected: the start waits of the protocol count from here. */
  readonly electedAt: Stamp;
  /** Settles once, with why the term ended (E3). */
  readonly ended: Promise<Ending>;
}

export type CampaignResult =
  | { readonly elected: true; readonly term: Term }
  | { readonly elected: false; readonly reason: Ending };

export interface Leader {
  readonly key: string;
  readonly value: string;
  readonly createRevision: bigint;
  readonly lease: bigint;
}

/** The last renewal etcd confirmed: our send time and the TTL it runs for. */
export interface Renewal {
  readonly sent: Stamp;
  readonly ttlSeconds: number;
}

/** Seconds of validity left by our clock (E2); ≤ 0: lapsed. */
export function validFor(r: Renewal, marginSeconds: number, now: Stamp): number {
  return r.ttlSeconds - marginSeconds - elapsed(r.sent, now);
}

function validate(o: ElectionOptions): { prefix: string; ttl: number; margin: number; keepAliveMs: number } {
  if (typeof o.prefix !== 'string' || o.prefix === '')
    throw new TypeError('election prefix must be a non-empty string');
  const ttl = o.ttlSeconds ?? ELECTION_DEFAULTS.ttlSeconds;
  if (!Number.isInteger(ttl) || ttl < 2) throw new TypeError('election ttlSeconds must be an integer ≥ 2');
  const margin = o.marginSeconds ?? ELECTION_DEFAULTS.marginSeconds;
  if (!(margin > 0 && margin < ttl)) throw new TypeError('election marginSeconds must be > 0 and below ttlSeconds');
  const keepAlive = o.keepAliveSeconds ?? (ttl - margin) / 3;
  if (!(keepAlive > 0 && keepAlive < ttl - margin))
    throw new TypeError('election keepAliveSeconds must be > 0 and below ttlSeconds − marginSeconds');
  return { prefix: etcdKeys(o.prefix).electionDir, ttl, margin, keepAliveMs: keepAlive * 1000 };
}

/** One campaign's state: from the lease grant to the end of its term. */
interface Session {
  readonly lease: bigint;
  readonly key: string;
  renewal: Renewal;
  createRevision: bigint;
  elected: boolean;
  electedAt: Stamp | null;
  ending: Ending | null;
  readonly stop: AbortController;
  readonly ended: Promise<Ending>;
  settle: (e: Ending) => void;
  /** Stops the keep-alive ticks. */
  stopKeepAlive: () => void;
}

export class Election {
  /** `{prefix}/election/`: every campaigner's key is under it. */
  readonly dir: string;
  readonly ttlSeconds: number;
  readonly marginSeconds: number;
  private readonly keepAliveMs: number;
  private readonly clock: StampClock;
  private readonly timers: Timers;
  private session: Session | null = null;

  constructor(
    private readonly client: EtcdClient,
    private readonly options: ElectionOptions,
  ) {
    const v = validate(options);
    this.dir = v.prefix;
    this.ttlSeconds = v.ttl;
    this.marginSeconds = v.margin;
    this.keepAliveMs = v.keepAliveMs;
    this.clock = options.clock ?? stampClock;
    this.timers = options.timers ?? realTimers;
  }

  /**
   * Campaigns until elected, the term ends first (E3) or the signal aborts. Throws an
   * `EtcdError` only when the lease cannot be granted; later etcd failures are retried while
   * the lease is valid by our clock.
   */
  async campaign(signal?: AbortSignal): Promise<CampaignResult> {
    if (this.session !== null && this.session.ending === null)
      throw new Error('this election is already campaigning or elected: resign first');
    if (signal?.aborted === true) return { elected: false, reason: 'aborted' };
    // 1. a lease, valid from the grant's send time (E2)
    const sent = this.clock.now();
    const grant = await this.client.leaseGrant(this.ttlSeconds);
    const s = this.open(grant.id, { sent, ttlSeconds: Math.min(this.ttlSeconds, grant.ttlSeconds) });
    const onAbort = (): void => this.end(s, 'aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
    if (aborted(signal)) this.end(s, 'aborted');
    try {
      // 2. our key, created once: the guarded create may be repeated after an indeterminate answer
      while (s.ending === null && s.createRevision === 0n) {
        try {
          const r = await this.client.txn({
            compare: [cmp.absent(s.key)],
            success: [op.put(s.key, this.options.value, { lease: s.lease })],
            failure: [op.range(s.key)],
          });
          const found = r.responses[0]?.type === 'range' ? r.responses[0].kvs[0] : undefined;
          s.createRevision = r.succeeded ? r.revision : (found?.createRevision ?? 0n);
        } catch (err) {
          if (this.fatal(s, err)) break;
          await this.pause(s);
        }
      }
      // 3. wait until no key older than ours is left, our own key still there (E1)
      while (s.ending === null) {
        try {
          const r = await this.client.txn({
            compare: [cmp.create(s.key, '==', s.createRevision)],
            success: [
              op.range(this.dir, {
                prefix: true,
                maxCreateRevision: s.createRevision - 1n,
                sort: { target: 'create', order: 'descend' },
                limit: 1,
              }),
            ],
          });
          if (!r.succeeded) {
            this.end(s, 'key-gone');
            break;
          }
          const older = r.responses[0]?.type === 'range' ? r.responses[0].kvs[0] : undefined;
          if (older === undefined) {
            if (!this.live(s)) break;
            s.elected = true;
            s.electedAt = this.clock.now();
            // a failure here is a bug of ours: the term ends rather than go on unwatched
            this.watchOwnKey(s, r.revision + 1n).catch(() => this.end(s, 'aborted'));
            return {
              elected: true,
              term: {
                key: s.key,
                createRevision: s.createRevision,
                lease: s.lease,
                electedAt: s.electedAt,
                ended: s.ended,
              },
            };
          }
          await this.waitFor(older.key, false, r.revision + 1n, (e) => e === 'delete', s.stop.signal);
        } catch (err) {
          if (this.fatal(s, err)) break;
          await this.pause(s);
        }
      }
      return { elected: false, reason: s.ending ?? 'aborted' };
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** True while this side is elected and its term valid by our clock (E2); false ends the term (E3). Check before each decision. */
  stillElected(): boolean {
    const s = this.session;
    return s?.elected === true && this.live(s);
  }

  /** Seconds the current term stays valid by our clock; 0 when not elected. */
  validForSeconds(): number {
    const s = this.session;
    if (s === null || !s.elected || !this.live(s)) return 0;
    return validFor(s.renewal, this.marginSeconds, this.clock.now());
  }

  /** The compare for every write of the elected side (E4). Throws when this side has no key. */
  guard(): Compare {
    const s = this.session;
    if (s === null || s.createRevision === 0n || s.ending !== null)
      throw new EtcdError('bad-request', 'election guard asked for without a campaign under way');
    return cmp.create(s.key, '==', s.createRevision);
  }

  /** Ends the term (E5): no decision after this call starts; then the guarded delete and the revoke. */
  async resign(): Promise<void> {
    const s = this.session;
    if (s === null || s.ending !== null) return;
    const guard = s.createRevision === 0n ? null : cmp.create(s.key, '==', s.createRevision);
    this.end(s, 'resigned', false);
    let deleted = false;
    let failure: unknown;
    if (guard !== null) {
      try {
        await this.client.txn({ compare: [guard], success: [op.delete(s.key)] });
        deleted = true;
      } catch (err) {
        failure = err;
      }
    }
    try {
      await this.client.leaseRevoke(s.lease);
    } catch (err) {
      // the key is deleted already, or it goes with the lease within the TTL
      if (!deleted) throw failure ?? err;
    }
  }

  /** The elected campaigner now, by a linearizable read; null when nobody is. */
  async leader(): Promise<Leader | null> {
    return (await this.readLeader()).leader;
  }

  /**
   * The elected campaigner, then each change of it, until the signal aborts. Watches the
   * prefix from each read's revision; after a compaction or a broken stream, reads again.
   */
  async *observe(signal: AbortSignal): AsyncGenerator<Leader | null, void, undefined> {
    let last: string | undefined;
    while (!signal.aborted) {
      try {
        const { leader, revision } = await this.readLeader();
        const id = leader === null ? '' : `${leader.key}@${leader.createRevision}`;
        if (id !== last) {
          last = id;
          yield leader;
        }
        await this.waitFor(this.dir, true, revision + 1n, () => true, signal);
      } catch (err) {
        if (signal.aborted) return;
        if (!isEtcdError(err)) throw err;
        await pause(this.timers, this.keepAliveMs, signal);
      }
    }
  }

  // -------------------------------------------------------------------------------------

  private async readLeader(): Promise<{ leader: Leader | null; revision: bigint }> {
    const r = await this.client.range(this.dir, {
      prefix: true,
      sort: { target: 'create', order: 'ascend' },
      limit: 1,
    });
    const kv: KeyValue | undefined = r.kvs[0];
    return {
      leader:
        kv === undefined ? null : { key: kv.key, value: kv.value, createRevision: kv.createRevision, lease: kv.lease },
      revision: r.revision,
    };
  }

  private open(lease: bigint, renewal: Renewal): Session {
    let settle!: (e: Ending) => void;
    const ended = new Promise<Ending>((res) => (settle = res));
    const s: Session = {
      lease,
      key: `${this.dir}${lease.toString(16)}`,
      renewal,
      createRevision: 0n,
      elected: false,
      electedAt: null,
      ending: null,
      stop: new AbortController(),
      ended,
      settle,
      stopKeepAlive: () => undefined,
    };
    this.session = s;
    s.stopKeepAlive = every(this.timers, this.keepAliveMs, () => void this.keepAlive(s));
    return s;
  }

  /** One keep-alive; ticks do not wait for each other, so one slow answer does not delay the next try. */
  private async keepAlive(s: Session): Promise<void> {
    if (!this.live(s)) return;
    const sent = this.clock.now();
    try {
      const k = await this.client.leaseKeepAlive(s.lease);
      if (!k.alive) return this.end(s, 'lease-gone');
      // an answer that arrives after the term lapsed does not revive it (E3)
      if (!this.live(s)) return;
      if (sent.mono > s.renewal.sent.mono) s.renewal = { sent, ttlSeconds: Math.min(this.ttlSeconds, k.ttlSeconds) };
    } catch (err) {
      // anything but a lease etcd says is gone: the next tick tries again (the clock decides, E2)
      if (isEtcdError(err, 'lease-not-found')) this.end(s, 'lease-gone');
    }
  }

  /** False once the term has ended; ends it when our clock says it lapsed (E2, E3). */
  private live(s: Session): boolean {
    if (s.ending !== null) return false;
    if (validFor(s.renewal, this.marginSeconds, this.clock.now()) > 0) return true;
    this.end(s, 'lapsed');
    return false;
  }

  /** True when the error ends the session: the lease is gone, or a bug (rethrown). Other etcd errors are retried. */
  private fatal(s: Session, err: unknown): boolean {
    if (!isEtcdError(err)) {
      this.end(s, 'aborted');
      throw err;
    }
    if (err.kind === 'lease-not-found') this.end(s, 'lease-gone');
    return s.ending !== null;
  }

  /** While elected: our key deleted by anything but our lease (an operator's `etcdctl del`) ends the term too. */
  private async watchOwnKey(s: Session, from: bigint): Promise<void> {
    let rev = from;
    while (s.ending === null) {
      await this.waitFor(s.key, false, rev, (e) => e === 'delete', s.stop.signal);
      if (s.ending !== null) return;
      try {
        const g = await this.client.get(s.key);
        if (g.kv?.createRevision !== s.createRevision) return this.end(s, 'key-gone');
        rev = g.revision + 1n;
      } catch {
        // unreachable etcd: the keep-alives decide (E2); look again next round
      }
    }
  }

  private end(s: Session, why: Ending, revoke = true): void {
    if (s.ending !== null) return;
    s.ending = why;
    s.elected = false;
    s.stopKeepAlive();
    s.stop.abort();
    s.settle(why);
    // best effort: our key goes now rather than at the lease's expiry
    if (revoke && why !== 'lease-gone') this.client.leaseRevoke(s.lease).catch(() => {});
  }

  private pause(s: Session): Promise<void> {
    return pause(this.timers, Math.min(this.keepAliveMs, 1000), s.stop.signal);
  }

  /**
   * Resolves on the first event that `wanted` accepts, on a re-check period (a watch on a
   * stopped member can go silent), on a broken watch (the caller reads again), or on abort.
   */
  private async waitFor(
    key: string,
    prefix: boolean,
    from: bigint,
    wanted: (type: 'put' | 'delete') => boolean,
    signal: AbortSignal,
  ): Promise<void> {
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = this.timers.set(() => stop.abort(), this.keepAliveMs);
    try {
      for await (const batch of this.client.watch(key, { prefix, startRevision: from, signal: stop.signal })) {
        if (batch.events.some((e) => wanted(e.type))) return;
      }
    } catch (err) {
      if (!isEtcdError(err)) throw err;
      // compacted or broken: the caller's next read covers whatever the watch would have said
    } finally {
      this.timers.clear(timer);
      signal.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }
}

/** A function, so that TypeScript does not narrow `signal.aborted` across awaits. */
const aborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;
