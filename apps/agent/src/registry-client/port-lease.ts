/**
 * The port-lease keeper (the seeds' port-lease heartbeat): keeps one leased port alive
 * and says — once — when it is lost.
 *
 *  1. The deadline is `last success + ttl − margin`, where "last success" is the *send* time of
 *     the request that succeeded (the arbiter renewed at or after it, so its expiry is never
 *     earlier than ours). It is armed at start from the allocation's send time and re-armed
 *     from every successful renewal.
 *  2. Renewals go out every `renewEveryMs` (30 s) — sooner when the TTL is short, so that at
 *     least two attempts fit before the deadline — each with a `requestTimeoutMs` (1 s) bound;
 *     a late answer is abandoned, never acted on.
 *  3. A failed renewal (unreachable, timeout, 5xx, 401) is retried every `retryEveryMs` (5 s).
 *  4. The lease is lost when the deadline passes, or at once when the arbiter answers 400, 403,
 *     404 or 409 (malformed, not ours, expired/unknown, another lease id). `onLeaseLost` is
 *     called exactly once; nothing is renewed after it.
 *  5. `stop()` ends the schedule and releases the lease (`DELETE`, one attempt) unless it was lost.
 *
 * The margin is 10 s, or a third of the TTL when that is shorter (a 3 s test TTL still works).
 * Clock (epoch ms, sleep-safe by default) and timers are injectable: tests drive time.
 */
import { fieldsOf } from '@hq/protocol/answer';
import { realTimers, sleepSafeClockMs, type Timers } from '@hq/runtime/clock';
import { describe, keepAliveFor, joinUrl, requestJson, type Requester } from '@hq/runtime/http';

export const RENEW_EVERY_MS = 30_000;
export const RETRY_EVERY_MS = 5_000;
/** An answer later than this is discarded: a renewal that slow proves little about the lease. */
export const RENEW_TIMEOUT_MS = 1_000;
/** Clock-rate and scheduling allowance shaved off the TTL. */
export const LEASE_MARGIN_MS = 10_000;

/** The statuses that end a lease at once (the arbiter says it is not, or no longer, ours). */
export const LOSS_STATUSES: ReadonlySet<number> = new Set([400, 403, 404, 409]);

export type LeaseLoss =
  | { readonly reason: 'deadline'; readonly detail: string }
  | { readonly reason: 'refused'; readonly status: number; readonly detail: string };

export interface PortLeaseOptions {
  readonly arbiterUrl: string;
  readonly token: string;
  readonly port: number;
  readonly leaseId: string;
  readonly ttlMs: number;
  /** Clock time at which the allocating request was sent. */
  readonly acquiredAt: number;
  readonly onLeaseLost: (loss: LeaseLoss) => void;
  readonly renewEveryMs?: number;
  readonly retryEveryMs?: number;
  readonly requestTimeoutMs?: number;
  readonly marginMs?: number;
  readonly clock?: { now(): number };
  readonly timers?: Timers;
  readonly request?: Requester;
  readonly log?: (event: string, data: { [k: string]: unknown }) => void;
}

export function leaseMargin(ttlMs: number, marginMs = LEASE_MARGIN_MS): number {
  return Math.min(marginMs, ttlMs / 3);
}

export class PortLeaseKeeper {
  private readonly clock: { now(): number };
  private readonly timers: Timers;
  private readonly request: Requester;
  private ttlMs: number;
  private lastSuccess: number;
  private renewTimer: unknown = null;
  private deadlineTimer: unknown = null;
  private inFlight: Promise<void> | null = null;
  private state: 'idle' | 'running' | 'lost' | 'stopped' = 'idle';
  private failures = 0;

  constructor(private readonly o: PortLeaseOptions) {
    this.clock = o.clock ?? sleepSafeClockMs();
    this.timers = o.timers ?? realTimers;
    this.request = o.request ?? requestJson;
    this.ttlMs = o.ttlMs;
    this.lastSuccess = o.acquiredAt;
  }

  get deadline(): number {
    return this.lastSuccess + this.ttlMs - leaseMargin(this.ttlMs, this.o.marginMs);
  }

  get lost(): boolean {
    return this.state === 'lost';
  }

  /** The renewal period: `renewEveryMs`, or half the time to the deadline for short TTLs. */
  get renewEveryMs(): number {
    const usable = this.ttlMs - leaseMargin(this.ttlMs, this.o.marginMs);
    return Math.max(1, Math.min(this.o.renewEveryMs ?? RENEW_EVERY_MS, usable / 2));
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    this.armDeadline();
    this.scheduleRenew(this.renewEveryMs);
  }

  /** Stops renewing; releases the lease unless it was lost. Returns whether the arbiter confirmed. */
  async stop(): Promise<{ released: boolean }> {
    const wasRunning = this.state === 'running' || this.state === 'idle';
    if (this.state !== 'lost') this.state = 'stopped';
    this.clearTimers();
    if (this.inFlight !== null) await this.inFlight;
    if (!wasRunning) return { released: false };
    const r = await this.request({
      method: 'DELETE',
      url: joinUrl(this.o.arbiterUrl, `/v1/leases/port/${this.o.port}`),
      headers: { 'x-port-lease-id': this.o.leaseId },
      token: { token: this.o.token, url: this.o.arbiterUrl },
      timeoutSeconds: (this.o.requestTimeoutMs ?? RENEW_TIMEOUT_MS) / 1000,
    });
    const released = r.kind === 'answer' && r.status === 200;
    this.o.log?.(released ? 'port-released' : 'port-release-failed', {
      port: this.o.port,
      ...(released ? {} : { problem: describe(r) }),
    });
    return { released };
  }

  private clearTimers(): void {
    if (this.renewTimer !== null) this.timers.clear(this.renewTimer);
    if (this.deadlineTimer !== null) this.timers.clear(this.deadlineTimer);
    this.renewTimer = null;
    this.deadlineTimer = null;
  }

  private armDeadline(): void {
    if (this.deadlineTimer !== null) this.timers.clear(this.deadlineTimer);
    const ms = Math.max(0, this.deadline - this.clock.now());
    this.deadlineTimer = this.timers.set(() => {
      this.deadlineTimer = null;
      // A timer may fire early relative to a sleep-safe clock; only the clock decides.
      if (this.clock.now() >= this.deadline)
        this.lose({ reason: 'deadline', detail: `no successful renewal since ${this.ttlMs} ms TTL minus margin` });
      else this.armDeadline();
    }, ms);
  }

  private scheduleRenew(ms: number): void {
    if (this.state !== 'running') return;
    if (this.renewTimer !== null) this.timers.clear(this.renewTimer);
    this.renewTimer = this.timers.set(() => {
      this.renewTimer = null;
      const p = this.renew();
      this.inFlight = p;
      void p.then(() => {
        if (this.inFlight === p) this.inFlight = null;
      });
    }, ms);
  }

  private lose(loss: LeaseLoss): void {
    if (this.state !== 'running') return;
    this.state = 'lost';
    this.clearTimers();
    this.o.log?.('port-lease-lost', { port: this.o.port, ...loss });
    this.o.onLeaseLost(loss);
  }

  private async renew(): Promise<void> {
    if (this.state !== 'running') return;
    const sentAt = this.clock.now();
    if (sentAt >= this.deadline)
      return this.lose({ reason: 'deadline', detail: 'the deadline passed before the renewal was sent' });
    const r = await this.request({
      method: 'POST',
      url: joinUrl(this.o.arbiterUrl, `/v1/leases/port/${this.o.port}/heartbeat`),
      headers: { 'x-port-lease-id': this.o.leaseId },
      token: { token: this.o.token, url: this.o.arbiterUrl },
      timeoutSeconds: (this.o.requestTimeoutMs ?? RENEW_TIMEOUT_MS) / 1000,
      keepAlive: keepAliveFor(this.renewEveryMs / 1000),
    });
    if (this.state !== 'running') return;
    if (r.kind === 'answer' && r.status === 200) {
      const ttl = fieldsOf(r.body).ttlMs;
      if (typeof ttl === 'number' && Number.isSafeInteger(ttl) && ttl > 0) this.ttlMs = Math.min(this.ttlMs, ttl);
      this.lastSuccess = sentAt;
      if (this.failures > 0) this.o.log?.('port-lease-renewed', { port: this.o.port, after: this.failures });
      this.failures = 0;
      this.armDeadline();
      return this.scheduleRenew(this.renewEveryMs);
    }
    if (r.kind === 'answer' && LOSS_STATUSES.has(r.status))
      return this.lose({ reason: 'refused', status: r.status, detail: describe(r) });
    this.failures++;
    if (this.failures === 1)
      this.o.log?.('port-lease-renew-failed', {
        port: this.o.port,
        problem: describe(r),
        retryInMs: this.o.retryEveryMs ?? RETRY_EVERY_MS,
      });
    this.scheduleRenew(Math.min(this.o.retryEveryMs ?? RETRY_EVERY_MS, this.renewEveryMs));
  }
}
