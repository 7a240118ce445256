/**
 * Checks (S5): probe the holder, record the arbiter's view, count the
 * streak, maybe promote — the decision is lease-core `check`. The probe runs *before* the
 * transaction: read the holder, probe it, then inside the transaction re-read and skip when
 * the holder changed meanwhile (the probe is about someone else).
 *
 * Two checks never overlap. In the daemon, a scheduled tick finding a check running is
 * skipped (counted as `skipped`); `POST /v1/check` waits for the running one and then runs
 * its own. Across processes (`hq-arbiter check` from a system cron beside a running daemon)
 * a lock row in SQLite's `meta` table, taken and released in immediate transactions, keeps
 * them apart: the one-shot command waits for it (bounded), a scheduled tick skips.
 */
import { isSilent } from './timing.js';
import { randomBytes } from 'node:crypto';
import { healthOk, magicDnsSuffix, tailnetHealthUrl, tailscalePing } from '@hq/runtime/probe';
import { scheduleCron, scheduleDeps, type Schedule } from '@hq/runtime/schedule';
import type { Logger } from 'pino';
import type { ArbiterState, Probe } from '@hq/lease-core';
import type { CheckAnswer } from '@hq/protocol';
import { check } from '@hq/lease-core';
import { GenerationRefused, type Arbiter } from './arbiter-shell.js';
import type { ArbiterConfig } from './config.js';
import type { Metrics } from './metrics.js';
import type { CheckLock, EventInput, LeaseRecords } from './store/store.js';
import { pause, realTimers, type MsClock, type Timers } from '@hq/runtime/clock';

export interface Prober {
  probe(host: string): Promise<Probe>;
}

/**
 * `tailscale ping` ⊕ the health URL, both bounded by `probeTimeoutSeconds`, counted in the probe
 * metrics. A host without a pinned health URL is probed at `http://{host}.{tailnetDomain}:{port}`,
 * `port` being the agents' peer port the caller names.
 */
export class TailnetProber implements Prober {
  private domain: string | null;
  private domainLookup: Promise<string | null> | null = null;
  private warned = false;

  constructor(
    private readonly config: ArbiterConfig,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly peerPort: number,
  ) {
    this.domain = config.tailnetDomain;
  }

  /** MagicDNS suffix from `tailscale status --json`, asked once (retried only after a failure). */
  private async tailnetDomain(): Promise<string | null> {
    if (this.domain !== null) return this.domain;
    if (this.config.tailscaleBin === '') return null;
    this.domainLookup ??= magicDnsSuffix(this.config.tailscaleBin, this.config.probeTimeoutSeconds).then((r) => {
      if (r.ok) {
        this.domain = r.suffix;
        return this.domain;
      }
      if (!this.warned) this.log.warn({ problem: r.problem }, 'tailnet domain unknown');
      this.warned = true;
      this.domainLookup = null;
      return null;
    });
    return this.domainLookup;
  }

  async ping(host: string): Promise<boolean> {
    if (this.config.tailscaleBin === '') return false;
    const ok = await tailscalePing(this.config.tailscaleBin, host, this.config.probeTimeoutSeconds);
    this.metrics.probes.inc({ kind: 'ping', result: ok ? 'ok' : 'fail' });
    return ok;
  }

  async healthUrl(host: string): Promise<string | null> {
    const pinned = this.config.healthUrls.get(host);
    if (pinned !== undefined) return pinned;
    const domain = await this.tailnetDomain();
    return domain === null ? null : tailnetHealthUrl(host, domain, this.peerPort);
  }

  async health(host: string): Promise<boolean> {
    const ok = await healthOk(await this.healthUrl(host), this.config.probeTimeoutSeconds);
    this.metrics.probes.inc({ kind: 'health', result: ok ? 'ok' : 'fail' });
    return ok;
  }

  async probe(host: string): Promise<Probe> {
    const [ping, health] = await Promise.all([this.ping(host), this.health(host)]);
    return { ping, health };
  }
}

export type ArbiterCheckOutcome =
  | { readonly ran: true; readonly answer: CheckAnswer; readonly state: ArbiterState }
  | { readonly ran: false; readonly reason: 'busy' | 'holder-changed'; readonly state: ArbiterState };

class HolderChanged extends Error {}

export interface CheckerDeps {
  readonly arbiter: Arbiter;
  /** Reads for a skipped check's answer; the lock that keeps two checks from overlapping. */
  readonly store: LeaseRecords & CheckLock;
  readonly prober: Prober;
  readonly metrics: Metrics;
  readonly log: Logger;
  /**
   * The wall clock in epoch ms (`wallClockMs`; tests drive it) for the check lock's times and
   * the `checkCron` schedule: the lock row is compared across processes (a daemon and
   * `hq-arbiter check`), each with its own arbiter clock, so it is stamped in wall time.
   */
  readonly wallClockMs: MsClock;
  /** The wait for another check's lock and the check schedule (default real timers). */
  readonly timers?: Timers;
}

export class Checker {
  private running: Promise<ArbiterCheckOutcome> | null = null;
  private task: Schedule | null = null;
  private readonly owner = `${process.pid}-${randomBytes(6).toString('hex')}`;
  /** Per candidate: the heartbeat time (or start) a silence was already reported for. */
  private readonly silent = new Map<string, number>();

  constructor(private readonly deps: CheckerDeps) {}

  private get config(): ArbiterConfig {
    return this.deps.arbiter.config;
  }

  /** How long a lock holder may keep the lock: two probe timeouts plus slack. */
  private get lockMs(): number {
    return Math.ceil(this.config.probeTimeoutSeconds * 2000) + 5000;
  }

  /** A check now. `wait`: wait for a running check (in this process and in others) first. */
  async run(wait: boolean): Promise<ArbiterCheckOutcome> {
    if (this.running !== null) {
      if (!wait) {
        this.deps.metrics.checks.inc({ result: 'skipped' });
        return { ran: false, reason: 'busy', state: await this.deps.store.read() };
      }
      await this.running.catch(() => undefined);
      return this.run(wait);
    }
    const p = this.locked(wait);
    this.running = p;
    try {
      return await p;
    } finally {
      this.running = null;
    }
  }

  private async locked(wait: boolean): Promise<ArbiterCheckOutcome> {
    const wall = this.deps.wallClockMs;
    const deadline = wall.now() + this.lockMs;
    for (;;) {
      const now = wall.now();
      if (await this.deps.store.tryCheckLock(this.owner, now, now + this.lockMs)) break;
      if (!wait || wall.now() >= deadline) {
        this.deps.metrics.checks.inc({ result: 'skipped' });
        return { ran: false, reason: 'busy', state: await this.deps.store.read() };
      }
      await pause(this.deps.timers ?? realTimers, 100);
    }
    try {
      return await this.once();
    } finally {
      await this.deps.store.releaseCheckLock(this.owner);
    }
  }

  private async once(): Promise<ArbiterCheckOutcome> {
    const { arbiter, prober, metrics } = this.deps;
    const before = await arbiter.read();
    const holder = before.lease.holder;
    const probe = holder === null ? null : await prober.probe(holder);
    let result: ArbiterCheckOutcome;
    try {
      const d = await arbiter.decide(
        'check',
        undefined,
        (state, ctx) => {
          if (state.lease.holder !== holder) throw new HolderChanged();
          return check(state, ctx, probe);
        },
        (a) => (a.promoted ? 'promoted' : a.streak > 0 ? 'unreachable' : 'ok'),
      );
      const a = d.answer;
      metrics.checks.inc({
        result:
          holder === null ? 'no-holder' : a.promoted ? 'promoted' : a.ping || a.health ? 'reachable' : 'unreachable',
      });
      result = { ran: true, answer: a, state: d.state };
    } catch (err) {
      if (!(err instanceof HolderChanged)) throw err;
      metrics.checks.inc({ result: 'skipped' });
      result = { ran: false, reason: 'holder-changed', state: await arbiter.read() };
    }
    await this.noteSilence(result.state);
    return result;
  }

  /**
   * Agent silence: no heartbeat from a candidate for more than 2 × the interval it reported. A
   * candidate never heard from has reported none: it is silent after two of the arbiter's own
   * check intervals (the arbiter assumes no agent cadence, S6).
   */
  private async noteSilence(state: ArbiterState): Promise<void> {
    const { arbiter } = this.deps;
    const now = arbiter.now();
    const events: EventInput[] = [];
    for (const host of this.config.candidates) {
      const o = state.observers.get(host);
      const since = o?.lastHeartbeatAt ?? arbiter.boot.startAt;
      const interval = o?.heartbeatSeconds ?? this.config.checkSeconds;
      if (isSilent(now - since, interval)) {
        if (this.silent.get(host) !== since) {
          this.silent.set(host, since);
          events.push({
            at: now,
            category: 'control',
            event: 'agent-silent',
            host,
            data: {
              lastHeartbeatAt: o?.lastHeartbeatAt ?? null,
              silentSeconds: Math.round((now - since) * 1000) / 1000,
              intervalSeconds: interval,
            },
          });
        }
      } else {
        this.silent.delete(host);
      }
    }
    if (events.length > 0) await arbiter.note(events);
  }

  /** Starts the `checkCron` schedule. A tick that finds a check running is skipped. */
  start(): void {
    if (this.task !== null) return;
    this.task = scheduleCron(
      this.config.checkCron,
      'hq-check',
      async () => {
        try {
          await this.run(false);
        } catch (err) {
          // A promotion the generation ceiling refused is an event already (and in hq doctor).
          if (err instanceof GenerationRefused)
            this.deps.log.warn({ message: err.message }, 'check refused by the generation ceiling');
          else this.deps.log.error({ err }, 'check failed');
        }
      },
      scheduleDeps(this.deps.timers, this.deps.wallClockMs),
    );
  }

  /** Stops the schedule and waits for a running check to end. */
  async stop(): Promise<void> {
    if (this.task !== null) {
      await this.task.stop();
      this.task = null;
    }
    await this.running?.catch(() => undefined);
  }
}
