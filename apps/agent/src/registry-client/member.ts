/**
 * The agent's registry membership: registers this machine at the arbiter with its
 * load and duties, and keeps the record alive.
 *
 *  1. The first exchange (at `start()`) registers `{id, name, kind: "machine", machine, attrs,
 *     observedAt, ttlMs}`; after that every `intervalMs` (30 s) a heartbeat renews it with fresh
 *     attrs, and every `refreshMs` (300 s) the whole record is registered again.
 *  2. A heartbeat answered 404 (the record expired or the arbiter lost it) re-registers at once,
 *     in the same exchange.
 *  3. On failure the next attempt waits 30 s, 60 s, 120 s, … up to `maxBackoffMs` (300 s); the
 *     first success resets it.
 *  4. A failure reason is logged only when it differs from the previous one (no log storm while
 *     the arbiter is down); the first success after failures logs once that it recovered.
 *
 * The same schedule keeps the agent's instance resource (`kind: "instance"`, id `{host}-agent`,
 * attrs `{service, endpoint, version}`) beside the machine: one `Member` per resource, with
 * `id`, `kind` and `attrs` given.
 *
 * The token is read through `token()` on every exchange (rotation needs no restart) and sent only
 * to `arbiterUrl`. Clock and timers are injectable: tests drive time, nothing sleeps.
 */
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { realTimers, wallClockMs, type MsClock, type Timers } from '@hq/runtime/clock';
import { describe, keepAliveFor, joinUrl, requestJson, type HttpResult, type Requester } from '@hq/runtime/http';

/** Heartbeat period: the seeds' 30 s. */
export const MEMBER_INTERVAL_MS = 30_000;
/** Full re-registration: name, kind and duties may have changed; 300 s bounds how stale they get. */
export const MEMBER_REFRESH_MS = 300_000;
/** Backoff ceiling: an arbiter back from an outage sees every member within 5 minutes. */
export const MEMBER_MAX_BACKOFF_MS = 300_000;
/** Record TTL: four missed heartbeats. Shorter flaps on a slow network; longer hides a dead machine. */
export const MEMBER_TTL_MS = 120_000;

/** The agent's instance resource id: `{host}-agent` (the registry's `{host}-{service}` form). */
export function instanceId(host: string): string {
  return `${host}-agent`;
}

export interface LoadSample {
  readonly loadAvg: readonly number[];
  readonly cpuCount: number;
  readonly freeMem: number;
  readonly totalMem: number;
  readonly observedAt: number;
}

export function sampleLoad(now: number): LoadSample {
  return {
    loadAvg: loadavg().map((x) => Math.round(x * 100) / 100),
    cpuCount: cpus().length,
    freeMem: freemem(),
    totalMem: totalmem(),
    observedAt: now,
  };
}

export interface MemberLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface MemberOptions {
  readonly arbiterUrl: string;
  /** This machine (its host name); also the resource id. */
  readonly machine: string;
  /** The member token, or null when there is none (then every exchange fails and backs off). */
  readonly token: () => Promise<string | null>;
  /** The duties / roles this machine serves (reported as `attrs.duties`). */
  readonly duties?: () => readonly string[];
  readonly name?: string;
  /** The resource id (default: `machine`). */
  readonly id?: string;
  /** Default `machine`; an `instance` is a service on the machine. */
  readonly kind?: 'machine' | 'instance';
  /** The resource's attrs at `now` (default: the machine's load and duties). */
  readonly attrs?: (now: number) => { [k: string]: unknown };
  readonly ttlMs?: number;
  readonly intervalMs?: number;
  readonly refreshMs?: number;
  readonly maxBackoffMs?: number;
  readonly requestTimeoutMs?: number;
  /** Epoch milliseconds. */
  readonly clock?: MsClock;
  readonly timers?: Timers;
  readonly request?: Requester;
  readonly load?: (now: number) => LoadSample;
  readonly log?: MemberLog;
}

export type ExchangeOutcome =
  | { readonly ok: true; readonly action: 'registered' | 'renewed' | 're-registered'; readonly nextInMs: number }
  | { readonly ok: false; readonly reason: string; readonly nextInMs: number };

const silent: MemberLog = { info: () => undefined, warn: () => undefined };

export class Member {
  private readonly o: Required<Omit<MemberOptions, 'duties' | 'name' | 'log' | 'id' | 'kind' | 'attrs'>> & {
    duties: () => readonly string[];
    name: string;
    log: MemberLog;
    id: string;
    kind: 'machine' | 'instance';
    attrs: ((now: number) => { [k: string]: unknown }) | null;
  };
  private registeredAt: number | null = null;
  private failures = 0;
  private lastReason: string | null = null;
  private timer: unknown = null;
  private running = false;
  private inFlight: Promise<ExchangeOutcome> | null = null;

  constructor(opts: MemberOptions) {
    this.o = {
      arbiterUrl: opts.arbiterUrl,
      machine: opts.machine,
      token: opts.token,
      duties: opts.duties ?? (() => []),
      name: opts.name ?? opts.id ?? opts.machine,
      id: opts.id ?? opts.machine,
      kind: opts.kind ?? 'machine',
      attrs: opts.attrs ?? null,
      ttlMs: opts.ttlMs ?? MEMBER_TTL_MS,
      intervalMs: opts.intervalMs ?? MEMBER_INTERVAL_MS,
      refreshMs: opts.refreshMs ?? MEMBER_REFRESH_MS,
      maxBackoffMs: opts.maxBackoffMs ?? MEMBER_MAX_BACKOFF_MS,
      requestTimeoutMs: opts.requestTimeoutMs ?? 5000,
      clock: opts.clock ?? wallClockMs,
      timers: opts.timers ?? realTimers,
      request: opts.request ?? requestJson,
      load: opts.load ?? sampleLoad,
      log: opts.log ?? silent,
    };
  }

  /** Registers now, then keeps going on its own schedule until `stop()`. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== null) this.o.timers.clear(this.timer);
    this.timer = null;
    if (this.inFlight !== null) await this.inFlight.catch(() => undefined);
  }

  get status(): { registered: boolean; failures: number; lastReason: string | null } {
    return { registered: this.registeredAt !== null, failures: this.failures, lastReason: this.lastReason };
  }

  /** The delay after `failures` consecutive failures: 30 s, 60 s, 120 s, … capped. */
  backoffMs(failures: number): number {
    if (failures <= 0) return this.o.intervalMs;
    return Math.min(this.o.maxBackoffMs, this.o.intervalMs * 2 ** Math.min(failures - 1, 30));
  }

  private schedule(ms: number): void {
    if (!this.running) return;
    this.timer = this.o.timers.set(() => {
      this.timer = null;
      const p = this.exchange();
      this.inFlight = p;
      void p.then((r) => {
        if (this.inFlight === p) this.inFlight = null;
        this.schedule(r.nextInMs);
      });
    }, ms);
  }

  private attrs(now: number): { [k: string]: unknown } {
    if (this.o.attrs !== null) return this.o.attrs(now);
    const l = this.o.load(now);
    return {
      loadAvg: [...l.loadAvg],
      cpuCount: l.cpuCount,
      freeMem: l.freeMem,
      totalMem: l.totalMem,
      observedAt: Math.round(l.observedAt),
      duties: [...this.o.duties()],
    };
  }

  private async register(token: string, now: number): Promise<HttpResult> {
    const body = {
      id: this.o.id,
      name: this.o.name,
      kind: this.o.kind,
      machine: this.o.machine,
      attrs: this.attrs(now),
      observedAt: Math.round(now),
      ttlMs: this.o.ttlMs,
    };
    return this.o.request({
      method: 'POST',
      url: joinUrl(this.o.arbiterUrl, '/v1/resources/register'),
      body,
      token: { token, url: this.o.arbiterUrl },
      timeoutSeconds: this.o.requestTimeoutMs / 1000,
      keepAlive: this.keepAlive,
    });
  }

  /** At 30 s the connection closes with the answer (`keepAliveFor`). */
  private get keepAlive(): boolean {
    return keepAliveFor(this.o.intervalMs / 1000);
  }

  /** One exchange (register, renew, or renew → 404 → register). Never throws. */
  async exchange(): Promise<ExchangeOutcome> {
    const now = this.o.clock.now();
    let token: string | null;
    try {
      token = await this.o.token();
    } catch {
      token = null;
    }
    if (token === null) return this.failed('no member token');
    const due = this.registeredAt === null || now - this.registeredAt >= this.o.refreshMs;
    let action: 'registered' | 'renewed' | 're-registered' = 'registered';
    let r: HttpResult;
    if (due) r = await this.register(token, now);
    else {
      r = await this.o.request({
        method: 'POST',
        url: joinUrl(this.o.arbiterUrl, `/v1/resources/${encodeURIComponent(this.o.id)}/heartbeat`),
        body: { attrs: this.attrs(now) },
        token: { token, url: this.o.arbiterUrl },
        timeoutSeconds: this.o.requestTimeoutMs / 1000,
        keepAlive: this.keepAlive,
      });
      action = 'renewed';
      if (r.kind === 'answer' && r.status === 404) {
        // 2. The record is gone: register again at once, not after a backoff.
        this.registeredAt = null;
        r = await this.register(token, this.o.clock.now());
        action = 're-registered';
      }
    }
    if (r.kind === 'answer' && r.status === 200) {
      if (action !== 'renewed') this.registeredAt = now;
      if (this.lastReason !== null)
        this.o.log.info(
          {
            category: 'control',
            event: 'registry-ok',
            machine: this.o.machine,
            resource: this.o.id,
            after: this.lastReason,
            failures: this.failures,
          },
          'registry reachable again',
        );
      this.failures = 0;
      this.lastReason = null;
      return { ok: true, action, nextInMs: this.o.intervalMs };
    }
    return this.failed(describe(r));
  }

  private failed(reason: string): ExchangeOutcome {
    this.failures++;
    const nextInMs = this.backoffMs(this.failures);
    if (reason !== this.lastReason) {
      this.o.log.warn(
        {
          category: 'control',
          event: 'registry-failed',
          machine: this.o.machine,
          resource: this.o.id,
          reason,
          retryInSeconds: nextInMs / 1000,
        },
        'registry exchange failed',
      );
      this.lastReason = reason;
    }
    return { ok: false, reason, nextInMs };
  }
}
