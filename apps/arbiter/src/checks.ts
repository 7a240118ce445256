/**
 * Checks (SPEC §1 "check", S5): probe the holder, record the arbiter's view, count the
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
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { scheduleCron, type Schedule } from '@hq/runtime';
import type { Logger } from 'pino';
import type { ArbiterState, Probe } from '@hq/lease-core';
import type { CheckAnswer } from '@hq/protocol';
import { check } from '@hq/lease-core';
import type { Arbiter } from './arbiter.js';
import type { ArbiterConfig } from './config.js';
import type { Metrics } from './metrics.js';
import type { CheckLock, EventInput, LeaseRecords } from './store/store.js';

export interface Prober {
  probe(host: string): Promise<Probe>;
}

function run(bin: string, args: readonly string[], timeoutMs: number): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20, shell: false, windowsHide: true }, (err, stdout) => {
      if (err === null) resolve({ code: 0, stdout: String(stdout) });
      else resolve({ code: typeof err.code === 'number' ? err.code : -1, stdout: String(stdout ?? '') });
    });
  });
}

/** `tailscale ping` ⊕ the health URL, both bounded by `probeTimeoutSeconds`. */
export class TailnetProber implements Prober {
  private domain: string | null;
  private domainLookup: Promise<string | null> | null = null;
  private warned = false;

  constructor(
    private readonly config: ArbiterConfig,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {
    this.domain = config.tailnetDomain;
  }

  private get timeoutMs(): number {
    return Math.max(1, Math.round(this.config.probeTimeoutSeconds * 1000));
  }

  /** MagicDNS suffix from `tailscale status --json`, asked once (retried only after a failure). */
  private async tailnetDomain(): Promise<string | null> {
    if (this.domain !== null) return this.domain;
    if (this.config.tailscaleBin === '') return null;
    this.domainLookup ??= run(this.config.tailscaleBin, ['status', '--json'], this.timeoutMs).then((r) => {
      let suffix: unknown = null;
      try {
        suffix = r.code === 0 ? (JSON.parse(r.stdout) as { MagicDNSSuffix?: unknown }).MagicDNSSuffix : null;
      } catch {
        suffix = null;
      }
      if (typeof suffix === 'string' && /^[a-z0-9.-]{1,253}$/i.test(suffix)) {
        this.domain = suffix.replace(/\.$/, '');
        return this.domain;
      }
      if (!this.warned) this.log.warn({ code: r.code }, 'tailnet domain unknown');
      this.warned = true;
      this.domainLookup = null;
      return null;
    });
    return this.domainLookup;
  }

  async ping(host: string): Promise<boolean> {
    const bin = this.config.tailscaleBin;
    if (bin === '') return false;
    const t = this.config.probeTimeoutSeconds;
    const r = await run(bin, ['ping', '-c', '1', '--timeout', `${t}s`, host], this.timeoutMs);
    const ok = r.code === 0 && r.stdout.includes('pong');
    this.metrics.probes.inc({ kind: 'ping', result: ok ? 'ok' : 'fail' });
    return ok;
  }

  async healthUrl(host: string): Promise<string | null> {
    const pinned = this.config.healthUrls.get(host);
    if (pinned !== undefined) return pinned;
    const domain = await this.tailnetDomain();
    return domain === null ? null : `http://${host}.${domain}:8471/v1/health`;
  }

  async health(host: string): Promise<boolean> {
    const url = await this.healthUrl(host);
    if (url === null) {
      this.metrics.probes.inc({ kind: 'health', result: 'fail' });
      return false;
    }
    let ok = false;
    try {
      const res = await request(url, {
        method: 'GET',
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      await res.body.dump();
      ok = res.statusCode === 200;
    } catch {
      ok = false;
    }
    this.metrics.probes.inc({ kind: 'health', result: ok ? 'ok' : 'fail' });
    return ok;
  }

  async probe(host: string): Promise<Probe> {
    const [ping, health] = await Promise.all([this.ping(host), this.health(host)]);
    return { ping, health };
  }
}

export type CheckResult =
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
}

export class Checker {
  private running: Promise<CheckResult> | null = null;
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
  async run(wait: boolean): Promise<CheckResult> {
    if (this.running !== null) {
      if (!wait) {
        this.deps.metrics.checks.inc({ result: 'skipped' });
        return { ran: false, reason: 'busy', state: this.deps.store.read() };
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

  private async locked(wait: boolean): Promise<CheckResult> {
    const deadline = Date.now() + this.lockMs;
    while (!this.deps.store.tryCheckLock(this.owner, Date.now(), Date.now() + this.lockMs)) {
      if (!wait || Date.now() >= deadline) {
        this.deps.metrics.checks.inc({ result: 'skipped' });
        return { ran: false, reason: 'busy', state: this.deps.store.read() };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    try {
      return await this.once();
    } finally {
      this.deps.store.releaseCheckLock(this.owner);
    }
  }

  private async once(): Promise<CheckResult> {
    const { arbiter, prober, metrics } = this.deps;
    const before = arbiter.read();
    const holder = before.lease.holder;
    const probe = holder === null ? null : await prober.probe(holder);
    let result: CheckResult;
    try {
      const d = arbiter.decide(
        'check',
        undefined,
        (state, ctx) => {
          if (state.lease.holder !== holder) throw new HolderChanged();
          return check(state, ctx, probe);
        },
        (a) => (a.promoted ? 'promoted' : a.streak > 0 ? 'unreachable' : 'ok'),
      );
      const a = d.answer;
      metrics.checks.inc({ result: holder === null ? 'no-holder' : a.promoted ? 'promoted' : a.ping || a.health ? 'reachable' : 'unreachable' });
      result = { ran: true, answer: a, state: d.state };
    } catch (err) {
      if (!(err instanceof HolderChanged)) throw err;
      metrics.checks.inc({ result: 'skipped' });
      result = { ran: false, reason: 'holder-changed', state: arbiter.read() };
    }
    this.noteSilence(result.state);
    return result;
  }

  /**
   * Agent silence: no heartbeat from a candidate for more than 2 × the interval it reported. A
   * candidate never heard from has reported none: it is silent after two of the arbiter's own
   * check intervals (the arbiter assumes no agent cadence, S6).
   */
  private noteSilence(state: ArbiterState): void {
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
            data: { lastHeartbeatAt: o?.lastHeartbeatAt ?? null, silentSeconds: Math.round((now - since) * 1000) / 1000, intervalSeconds: interval },
          });
        }
      } else {
        this.silent.delete(host);
      }
    }
    if (events.length > 0) arbiter.note(events);
  }

  /** Starts the `checkCron` schedule. A tick that finds a check running is skipped. */
  start(): void {
    if (this.task !== null) return;
    this.task = scheduleCron(this.config.checkCron, 'hq-check', async () => {
      try {
        await this.run(false);
      } catch (err) {
        this.deps.log.error({ err }, 'check failed');
      }
    });
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
