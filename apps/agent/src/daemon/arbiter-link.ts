/**
 * The agent's link to the arbiter: a heartbeat on the cron (and sooner when the TTL or the
 * arbiter asks for one), a cheap lease read between heartbeats (`refresh`), one exchange in
 * flight at a time (`exclusive`). Each answer has its own path:
 *  - a heartbeat answer (`outcome`, `lease`, `hold`, `timingProblems`, `failover`,
 *    `reportInSeconds`, `candidates`) may confirm this host (outcome `renewed`), and may lead the
 *    holder to ask its peers (lease-core `asksPeers`);
 *  - a lease read is the record alone, never a confirmation.
 * A failed exchange (no answer, not 200, a body that does not read) takes one path for both.
 * Each ends in one lease-core step committed to the store (decide → persist → swap → log):
 * link-answers.ts; the calls themselves (endpoints, probe, a wrong URL) are arbiter-calls.ts.
 */
import { scheduleCron, scheduleDeps, type Schedule } from '@hq/runtime/schedule';
import { VERSION } from '@hq/runtime/version';
import {
  confirmationToReport,
  heartbeatContent,
  heartbeatProbe,
  refreshEverySeconds,
  renewEverySeconds,
  reportWanted,
  type AgentSettings,
  type ReportedCadence,
} from '@hq/lease-core';
import { readHeartbeatAnswer, type HeartbeatReport, type ReleaseRequest, type StepDownAck } from '@hq/protocol';
import type { AgentConfig } from '../config.js';
import { realTimers, type StampClock as Clock, type Timers } from '@hq/runtime/clock';
import type { HttpResult } from '@hq/runtime/http';
import type { ProbeResult } from '@hq/runtime/probe';
import { tokenFileFix, type TokenFile } from '../tokens.js';
import type { AgentObserver, Log } from './observe.js';
import type { Peers } from './peers.js';
import type { AgentStore } from './store.js';
import { ArbiterCalls } from './arbiter-calls.js';
import { LinkAnswers } from './link-answers.js';

export interface LinkOptions {
  readonly config: AgentConfig & { readonly arbiterUrl: string };
  readonly settings: AgentSettings;
  readonly store: AgentStore;
  readonly peers: Peers;
  readonly clock: Clock;
  /** The refresh and the extra heartbeats (default real timers). */
  readonly timers?: Timers | undefined;
  readonly log: Log;
  readonly observer?: AgentObserver | undefined;
  readonly token: TokenFile;
  /** Replaces the ping ⊕ health probe (tests). */
  readonly probe?: ((target: string) => Promise<ProbeResult>) | undefined;
}

export class ArbiterLink {
  lastHeartbeat: HeartbeatReport | null = null;
  /** Why the member token does not work right now (unreadable, or refused by the arbiter), else null. */
  tokenProblem: string | null = null;
  private exchanges: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  private task: Schedule | null = null;
  private refreshTimer: unknown = null;
  /** An extra heartbeat before the next cron tick: a renewal the TTL needs, or a report the arbiter asked for. */
  private soonTimer: { readonly timer: unknown; readonly atMono: number } | null = null;
  private lastTimingKey = '';
  private stopped = false;
  /** The calls (arbiter-calls.ts) and what their answers mean (link-answers.ts). */
  private readonly calls: ArbiterCalls;
  private readonly answers: LinkAnswers;
  private readonly timers: Timers;

  constructor(private readonly o: LinkOptions) {
    this.timers = o.timers ?? realTimers;
    this.calls = new ArbiterCalls(o);
    this.answers = new LinkAnswers(o, this.calls);
  }

  /** This agent's cadence, as it reports it with every heartbeat (S6: the agent owns it). */
  cadence(): ReportedCadence {
    const c = this.o.config;
    return {
      heartbeatSeconds: c.heartbeatSeconds,
      refreshSeconds: c.refreshSeconds,
      requestTimeoutSeconds: c.requestTimeoutSeconds,
    };
  }

  /** Heartbeats on the cron from now on, the first one at once. */
  start(): void {
    this.task = scheduleCron(this.o.config.heartbeatCron, 'hq-heartbeat', () => this.tick(), scheduleDeps(this.timers));
    this.tick();
  }

  /** No further exchange starts; resolves when the one in flight is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.task !== null) await this.task.stop();
    this.task = null;
    if (this.refreshTimer !== null) this.timers.clear(this.refreshTimer);
    this.refreshTimer = null;
    if (this.soonTimer !== null) this.timers.clear(this.soonTimer.timer);
    this.soonTimer = null;
    await this.exchanges.catch(() => undefined);
  }

  /** One heartbeat now (waits for an exchange in flight first). */
  heartbeat(): Promise<HeartbeatReport> {
    return this.exclusive(() => this.doHeartbeat());
  }

  /** A cheap read between heartbeats: `GET /v1/lease`, never a confirmation. */
  refresh(): Promise<HeartbeatReport> {
    return this.exclusive(async () => {
      const token = await this.memberToken();
      const sent = this.o.clock.now();
      const res = await this.calls.call('GET', '/v1/lease', undefined, token);
      const received = this.o.clock.now();
      const report = await this.answers.absorbLease(res, sent, received);
      this.scheduleRefresh();
      // A refresh that shows this host promoted (or handed the lease): only a heartbeat's
      // renewal confirms it, so that heartbeat comes now rather than at the next cron tick.
      const s = this.o.store.state;
      const k = s.known;
      const unconfirmed =
        k !== null &&
        k.holder === this.o.settings.host &&
        !k.released &&
        s.current === null &&
        s.pending === null &&
        !k.floorPending;
      // The arbiter's start wait or floor waits for this host's report or acknowledgement: now, not at the next tick.
      const asked = res.kind === 'answer' && res.status === 200 && reportWanted(res.body, this.o.settings.host);
      this.scheduleSoon(unconfirmed || asked ? [0] : []);
      // A broken path (often only a peer started after this agent) is probed again at each lease
      // read until it works, so the finding is not a stale alarm for a whole heartbeat interval.
      if (report.status === 200 && this.o.peers.anyBroken) this.probePeers();
      return report;
    });
  }

  // -------------------------------------------------------------------------------------
  // the heartbeat

  private async doHeartbeat(): Promise<HeartbeatReport> {
    const s0 = this.o.store.state;
    const target = heartbeatProbe(s0);
    const view = target === null ? null : await this.calls.probe(target);
    const confirmation = confirmationToReport(this.o.store.state, this.o.peers.given, this.o.clock.now());
    const peerPaths = this.o.peers.peerPathReports();
    const body = {
      ...heartbeatContent(
        s0,
        this.cadence(),
        view === null ? null : { target: view.target, reachable: view.reachable, ping: view.ping, health: view.health },
        confirmation,
      ),
      // Protocol 2 (the client leaves it out for an arbiter of protocol 1): the operator sees this host's release.
      version: VERSION,
      // Protocol 2 too: what the last probes found of the path to each peer (the arbiter's status page shows a broken one).
      ...(peerPaths.length === 0 ? {} : { peerPaths }),
    };
    const token = await this.memberToken();
    const sent = this.o.clock.now();
    // A renewal decided twice is a renewal: a heartbeat whose answer did not come goes to the next arbiter.
    const res = await this.calls.call('POST', '/v1/heartbeat', body, token, true);
    const received = this.o.clock.now();
    const answer = res.kind === 'answer' && res.status === 200 ? readHeartbeatAnswer(res.body) : null;
    const absorbed = await this.answers.absorbHeartbeat(res, answer, sent, received);
    // Refused for want of a readable token: the report names the file's problem, not the arbiter's 401.
    const report =
      token === null && this.tokenProblem !== null && absorbed.outcome === 'refused'
        ? { ...absorbed, problem: this.tokenProblem }
        : absorbed;
    this.lastHeartbeat = report;
    if (report.status === 200 && this.answers.unreachableSaid !== null) {
      this.answers.unreachableSaid = null;
      this.o.log.info(
        { category: 'hq.lease', event: 'arbiter-reachable', url: this.calls.url },
        `the arbiter at ${this.calls.url} answers again`,
      );
    }
    // Without a token the arbiter's 401 says nothing new: the local reason (a file at 0644, say) stays the one shown.
    if ((report.status === 401 || report.status === 403) && token !== null)
      this.noteTokenProblem(`the arbiter refuses the member token (HTTP ${report.status}: ${report.problem ?? ''})`);
    else if (report.status === 200 && this.tokenProblem !== null) {
      this.tokenProblem = null;
      this.o.log.info(
        { category: 'hq.lease', event: 'token-ok', host: this.o.settings.host },
        'the member token works again',
      );
    }
    this.o.observer?.heartbeat?.(report.outcome);
    this.noteTiming(report);
    this.scheduleRefresh();
    if (!this.stopped && answer !== null && answer.candidates !== null) this.o.peers.setCandidates(answer.candidates);
    // While the arbiter answers, prove the path an outage would need (not awaited: the heartbeat's
    // answer is what counts now); a changed finding goes to the arbiter in a heartbeat at once,
    // not at the next cron tick (one extra heartbeat per change, none while nothing changes).
    if (answer !== null) this.probePeers();
    this.scheduleSoon(answer !== null && answer.reportInSeconds !== null ? [answer.reportInSeconds] : []);
    return report;
  }

  /** Probes the peer paths in the background; a changed finding is reported by a heartbeat now. */
  private probePeers(): void {
    if (this.stopped) return;
    void this.o.peers
      .probe()
      .then((changed) => changed && this.scheduleSoon([0]))
      .catch((err: unknown) => this.o.log.error({ err }, 'peer probe failed'));
  }

  // -------------------------------------------------------------------------------------
  // the step-down's calls: beside the exchanges, not behind a heartbeat in flight

  /** `POST /v1/lease/stepped-down`: this host stepped down from a generation, no child alive. */
  async acknowledge(ack: StepDownAck): Promise<HttpResult> {
    return this.calls.call('POST', '/v1/lease/stepped-down', ack, await this.memberToken());
  }

  /** `POST /v1/lease/release` (handoverOnStop). */
  async release(body: ReleaseRequest): Promise<HttpResult> {
    return this.calls.call('POST', '/v1/lease/release', body, await this.memberToken());
  }

  // -------------------------------------------------------------------------------------
  // exchanges, tokens, timers

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.waiting++;
    const run = async (): Promise<T> => {
      try {
        return await fn();
      } finally {
        this.waiting--;
      }
    };
    const p = this.exchanges.then(run, run);
    this.exchanges = p.catch(() => undefined);
    return p;
  }

  /** The cron tick: skipped while an exchange is still running or queued. */
  private tick(): void {
    if (this.stopped || this.waiting > 0) return;
    void this.heartbeat().catch((err: unknown) => this.o.log.error({ err }, 'heartbeat failed'));
  }

  private async memberToken(): Promise<string | null> {
    const t = await this.o.token.get();
    if (!t.ok) {
      // Loud: without its token this host can neither renew nor report (rotation gone wrong).
      this.noteTokenProblem(`${t.problem}; ${tokenFileFix(t.problem, this.o.config.tokenFile, this.o.settings.host)}`);
      return null;
    }
    return t.token;
  }

  /** A broken member token: an error line on each change, the metric, `status()` (hq doctor). */
  private noteTokenProblem(problem: string): void {
    if (this.tokenProblem !== problem) {
      this.o.log.error(
        { category: 'hq.lease', event: 'token-unavailable', host: this.o.settings.host, problem },
        'member token does not work',
      );
    }
    this.tokenProblem = problem;
  }

  /** The arbiter's word on this host's cadence: a change is a warning once (S6: never silent). */
  private noteTiming(report: HeartbeatReport): void {
    const key = report.timingProblems.join('\n');
    if (key === this.lastTimingKey || report.status !== 200) return;
    this.lastTimingKey = key;
    const host = this.o.settings.host;
    if (key === '')
      this.o.log.info({ category: 'control', event: 'timing-ok', host }, 'the arbiter reports no timing problem');
    else
      this.o.log.warn(
        { category: 'control', event: 'timing-problem', host, problems: report.timingProblems },
        'the arbiter reports a timing problem',
      );
  }

  private scheduleRefresh(): void {
    if (this.stopped) return;
    if (this.refreshTimer !== null) this.timers.clear(this.refreshTimer);
    this.refreshTimer = this.timers.set(() => {
      this.refreshTimer = null;
      if (this.stopped) return;
      if (this.waiting > 0) return this.scheduleRefresh();
      void this.refresh().catch((err: unknown) => this.o.log.error({ err }, 'refresh failed'));
    }, refreshEverySeconds(this.o.store.state.known, this.o.config.refreshSeconds) * 1000);
  }

  /**
   * An extra heartbeat before the next cron tick, the earliest of `waits` (the arbiter asked
   * for a report, `reportInSeconds`: its start wait needs one that counts; a refresh showed
   * this host unconfirmed) and — while this host holds the lease — the renewal the TTL needs
   * (three per validity, S6), whatever the cron says.
   */
  private scheduleSoon(waits: number[]): void {
    if (this.stopped) return;
    const k = this.o.store.state.known;
    if (k !== null && k.holder === this.o.settings.host && !k.released) {
      const every = renewEverySeconds(k.ttlSeconds, k.safetyMarginSeconds, this.o.config.heartbeatSeconds);
      if (every < this.o.config.heartbeatSeconds) waits.push(every);
    }
    if (waits.length === 0) return;
    const seconds = Math.min(...waits);
    const atMono = this.o.clock.now().mono + seconds;
    if (this.soonTimer !== null) {
      if (this.soonTimer.atMono <= atMono) return;
      this.timers.clear(this.soonTimer.timer);
    }
    const timer = this.timers.set(
      () => {
        this.soonTimer = null;
        this.tick();
      },
      Math.min(2 ** 31 - 1, Math.ceil(seconds * 1000)),
    );
    this.soonTimer = { timer, atMono };
  }
}
