/**
 * The agent's shell around lease-core. Every change follows one path:
 *   gather inputs (an answer and its send/receive stamps) → a lease-core decision →
 *   persist `persisted(next)` (+ seen-generation), fsync'd → swap the in-memory state → log.
 * So nothing the agent answers (a fence, a peer confirmation) can get ahead of its disk (S2.2).
 *
 * Arbiter exchanges are sequential: one request in flight at a time (`exclusive`). Decisions
 * are serialized separately (`commit`) so a peer confirmation arriving during a heartbeat
 * decides on the newest state, never on a copy the heartbeat took before it sent.
 */
import { scheduleCron, type Schedule } from '@hq/runtime';
import {
  asksPeers,
  fence,
  renewEverySeconds,
  initialAgent,
  onArbiterAnswer,
  onArbiterFailure,
  onConfirmRequest,
  onPeerResults,
  parseRecord,
  persisted,
  resume,
  settle,
  stepDown,
  type AgentSettings,
  type AgentState,
  type AgentStep,
  type ConfirmAnswer,
  type ConfirmRequest,
  type FenceDecision,
  type LeaseEvent,
  type ReportedCategory,
  type ReportedEvent,
  type PeerResult,
  type Persisted,
  type Stamp,
} from '@hq/lease-core';
import type { AgentConfig } from '../config.js';
import { healthUrlOf, peersFromCandidates } from '../config.js';
import type { Clock } from '../clock.js';
import { ArbiterEndpoints, joinUrl, requestJson, type HttpResult } from '../http.js';
import { probe as probeHost, type ProbeResult } from '../probe.js';
import { loadPersisted, loadSeen, statePaths, writePersisted, writeSeen, type StatePaths } from '../state.js';
import { TokenFile } from '../tokens.js';

import { VERSION } from '@hq/lease-core/version';

export { VERSION };

export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/** What the metrics module observes; every hook optional. */
export interface AgentObserver {
  fence?(d: FenceDecision): void;
  heartbeat?(outcome: string): void;
  peerConfirm?(result: string): void;
}

export type ResolvedConfig = AgentConfig & { readonly arbiterUrl: string };

export interface AgentOptions {
  readonly config: ResolvedConfig;
  readonly clock: Clock;
  readonly log: Log;
  readonly observer?: AgentObserver;
  /** Replaces the ping ⊕ health probe (tests). */
  readonly probe?: (target: string) => Promise<ProbeResult>;
}

export type HeartbeatOutcome = 'renewed' | 'standby' | 'no-lease' | 'renew-refused' | 'unreachable' | 'refused' | 'invalid-answer';

export interface HeartbeatReport {
  readonly outcome: HeartbeatOutcome;
  readonly status: number | null;
  readonly problem: string | null;
  readonly holder: string | null;
  readonly generation: number;
  readonly peerConfirmation: 'confirmed' | 'not-confirmed' | null;
  readonly at: number;
  /** What the arbiter said about this host's cadence against its lease timing (S6). */
  readonly timingProblems: readonly string[];
  /** The arbiter's worst-case failover sentence, as it prints it everywhere. */
  readonly failover: string | null;
}

interface GivenRecord {
  readonly holder: string;
  readonly generation: number;
  /** Monotonic reading no later than the moment it was given (a lower bound of its age). */
  readonly atMono: number;
}

export class Agent {
  readonly settings: AgentSettings;
  readonly paths: StatePaths;
  readonly token: TokenFile;
  readonly peerToken: TokenFile;
  private state: AgentState;
  private lastJson: string | null = null;
  private lastSeenWritten: number;
  private exchanges: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  private commits: Promise<unknown> = Promise.resolve();
  private given: GivenRecord | null;
  private task: Schedule | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;
  /** An extra heartbeat before the next cron tick: a renewal the TTL needs, or a report the arbiter asked for. */
  private soonTimer: { readonly timer: NodeJS.Timeout; readonly atMono: number } | null = null;
  /** The peers: configured, or the other candidates the arbiter names (tailnet addresses). */
  private peers: ReadonlyMap<string, string>;
  private lastTimingKey = '';
  private stopped = false;
  lastHeartbeat: HeartbeatReport | null = null;
  /** Why the member token does not work right now (unreadable, or refused by the arbiter), else null. */
  tokenProblem: string | null = null;
  private readonly lastFence = new Map<string, string>();
  readonly startedWall: number;
  /** `arbiterUrls` (or `arbiterUrl` alone): tried in order, the next on failure. */
  private readonly arbiters: ArbiterEndpoints;

  private constructor(
    private readonly opts: AgentOptions,
    state: AgentState,
    seenOnDisk: number,
    given: GivenRecord | null,
  ) {
    const c = opts.config;
    this.settings = { host: c.hostName, requestTimeoutSeconds: c.requestTimeoutSeconds, failOpenRoles: c.failOpenRoles };
    this.peers = c.peers;
    this.paths = statePaths(c.stateDir);
    this.token = new TokenFile(c.tokenFile);
    this.peerToken = new TokenFile(c.peerTokenFile);
    this.arbiters = new ArbiterEndpoints(c.arbiterUrls ?? [c.arbiterUrl]);
    this.state = state;
    this.lastSeenWritten = seenOnDisk;
    this.given = given;
    this.startedWall = state.started.wall;
  }

  /**
   * Reads `local.json` and `seen-generation` and builds the start state. A corrupt or insecure
   * file is refused and logged; the agent then fails closed: the start guard applies as if a
   * confirmation had been given (S2.2), never a crash.
   */
  static async open(opts: AgentOptions): Promise<Agent> {
    const c = opts.config;
    const paths = statePaths(c.stateDir);
    const started = opts.clock.now();
    const local = await loadPersisted(paths.local);
    const seenFile = await loadSeen(paths.seen);
    let fromDisk: Persisted | null = null;
    let failClosed = false;
    if (local.kind === 'ok') fromDisk = local.value;
    else if (local.kind === 'refused') {
      failClosed = true;
      opts.log.error({ category: 'hq.lease', event: 'state-refused', file: paths.local, problem: local.problem }, 'state file refused, failing closed');
    }
    let seen = 0;
    if (seenFile.kind === 'ok') seen = seenFile.value;
    else if (seenFile.kind === 'refused') {
      failClosed = true;
      opts.log.error({ category: 'hq.lease', event: 'state-refused', file: paths.seen, problem: seenFile.problem }, 'state file refused, failing closed');
    }
    if (failClosed) {
      // Fail closed: behave as if a confirmation and a lock-delay were on record.
      // Fail closed: behave as if a confirmation and a lock-delay were on record. The lease
      // timing is the arbiter's (S6): what the file kept, else the first record's (lease-core).
      fromDisk = {
        holder: fromDisk?.holder ?? null,
        generation: fromDisk?.generation ?? 0,
        confirmedAt: null,
        ttlSeconds: fromDisk?.ttlSeconds ?? 0,
        safetyMarginSeconds: fromDisk?.safetyMarginSeconds ?? 0,
        gaveConfirmation: fromDisk?.gaveConfirmation ?? null,
        lockDelayPending: true,
      };
    }
    const settings: AgentSettings = { host: c.hostName, requestTimeoutSeconds: c.requestTimeoutSeconds, failOpenRoles: c.failOpenRoles };
    const state = initialAgent(settings, started, seen, fromDisk);
    const gave = fromDisk?.gaveConfirmation ?? null;
    const given = gave === null ? null : { holder: gave.holder, generation: gave.generation, atMono: started.mono };
    const agent = new Agent(opts, state, seenFile.kind === 'ok' ? seenFile.value : -1, given);
    if (state.startGuardUntilMono !== null) {
      opts.log.warn(
        {
          category: 'hq.lease',
          event: 'start-guard',
          host: c.hostName,
          seconds: Number.isFinite(state.startGuardUntilMono) ? state.startGuardUntilMono - started.mono : 'until the first record states the lease timing',
        },
        'a confirmation or lock-delay was on record: nothing runs before the start guard ends',
      );
    }
    // Write the start state at once: replaces a refused file and keeps the flags on disk.
    await agent.commit((s) => ({ state: s, events: [] }));
    return agent;
  }

  get config(): ResolvedConfig {
    return this.opts.config;
  }

  get host(): string {
    return this.opts.config.hostName;
  }

  now(): Stamp {
    return this.opts.clock.now();
  }

  /** The current state (for status pages and tests). */
  snapshot(): AgentState {
    return this.state;
  }

  // -------------------------------------------------------------------------------------
  // decisions: decide → persist → swap → log

  private commit(decide: (s: AgentState) => AgentStep): Promise<AgentStep> {
    const run = async (): Promise<AgentStep> => {
      const step = decide(this.state);
      await this.persist(step.state);
      this.state = step.state;
      for (const e of step.events) this.logEvent(e);
      return step;
    };
    const p = this.commits.then(run, run);
    this.commits = p.catch(() => undefined);
    return p;
  }

  private async persist(state: AgentState): Promise<void> {
    const p = persisted(state, this.now());
    const json = JSON.stringify(p);
    if (json !== this.lastJson) {
      await writePersisted(this.paths.local, p);
      this.lastJson = json;
    }
    if (state.seen !== this.lastSeenWritten) {
      await writeSeen(this.paths.seen, state.seen);
      this.lastSeenWritten = state.seen;
    }
  }

  private logEvent(e: LeaseEvent): void {
    this.opts.log.info({ ...e.data, category: e.category, event: e.event, host: e.host }, e.event);
  }

  /**
   * An event a local `hq` command reports (`POST /v1/events`; the route has checked the pair
   * against lease-core's REPORTED_EVENTS and the data's shape): one log line like the agent's own,
   * with `via: "cli"` so a reader can tell who decided.
   */
  reportEvent(category: ReportedCategory, event: ReportedEvent, data: LeaseEvent['data']): void {
    this.opts.log.info({ ...data, via: 'cli', category, event, host: this.host }, event);
  }

  // -------------------------------------------------------------------------------------
  // the fence and the summaries: memory only

  isRole(role: string): boolean {
    return this.config.roles.includes(role);
  }

  /** The fence from memory (no I/O). The caller checks the role first. */
  fence(role: string): FenceDecision {
    const now = this.now();
    // lease-core asks the shell to settle on every query: a validity once seen over stays over.
    // Memory only (no I/O here); settling only drops grants and flags, so the disk stays the
    // more cautious copy until the next commit writes it.
    this.state = settle(this.state, now);
    const d = fence(this.state, role, now, this.settings);
    this.opts.observer?.fence?.(d);
    // Logged when a role's decision changes, not on every query (a supervisor asks often).
    const key = `${d.run}:${d.reason}:${d.generation}:${d.holder ?? ''}`;
    if (this.lastFence.get(role) !== key) {
      this.lastFence.set(role, key);
      this.opts.log.info(
        { category: 'hq.fence', event: d.run ? 'allowed' : 'skipped', host: this.host, role, reason: d.reason, generation: d.generation, holder: d.holder },
        d.run ? 'allowed' : 'skipped',
      );
    }
    return d;
  }

  /** The roles this host may run now (for the registry's duties); quiet: no log, no metric. */
  duties(): string[] {
    const now = this.now();
    return this.config.roles.filter((r) => fence(this.state, r, now, this.settings).run);
  }

  /** Seconds of validity left for a non-fail-open role, 0 when it may not run. */
  validForSeconds(): number {
    const d = fence(this.state, 'ledger-cli', this.now(), this.settings);
    return d.run && d.validForSeconds !== null ? Math.max(0, d.validForSeconds) : 0;
  }

  status(): object {
    const now = this.now();
    const s = settle(this.state, now);
    const d = fence(s, 'ledger-cli', now, this.settings);
    return {
      host: this.host,
      version: VERSION,
      holder: s.known?.holder ?? null,
      generation: s.known?.generation ?? s.seen,
      seen: s.seen,
      known: s.known,
      run: d.run,
      reason: d.reason,
      validForSeconds: d.run ? d.validForSeconds : 0,
      arbiterOk: s.arbiterOk,
      stale: s.stale,
      lockDelaySeconds: s.waitUntilMono === Infinity ? null : Math.max(0, s.waitUntilMono - now.mono),
      floorPending: s.known?.floorPending ?? false,
      startGuardSeconds: s.startGuardUntilMono === null ? 0 : Number.isFinite(s.startGuardUntilMono) ? Math.max(0, s.startGuardUntilMono - now.mono) : null,
      leaseTiming: s.known === null ? null : { ttlSeconds: s.known.ttlSeconds, safetyMarginSeconds: s.known.safetyMarginSeconds },
      cadence: this.cadence(),
      timingProblems: this.lastHeartbeat?.timingProblems ?? [],
      tokenProblem: this.tokenProblem,
      failover: this.lastHeartbeat?.failover ?? null,
      gaveConfirmation:
        s.gave === null
          ? null
          : { holder: s.gave.holder, generation: s.gave.generation, ageSeconds: now.mono - s.gave.at.mono, waitSeconds: Math.max(0, s.gave.untilMono - now.mono) },
      steppedDown: s.steppedDown,
      grant: s.current === null ? null : { generation: s.current.generation, source: s.current.source },
      pending: s.pending === null ? null : { generation: s.pending.generation, startsInSeconds: Math.max(0, s.pending.startMono - now.mono) },
      lastHeartbeat: this.lastHeartbeat === null ? null : { ...this.lastHeartbeat, ageSeconds: now.wall - this.lastHeartbeat.at },
      peers: [...this.peers.keys()],
      uptimeSeconds: now.mono - s.started.mono,
    };
  }

  primary(): { known: boolean; holder: string | null; generation: number } {
    const k = this.state.known;
    return { known: k !== null && k.holder !== null, holder: k?.holder ?? null, generation: k?.generation ?? this.state.seen };
  }

  peerInfo(): object {
    const s = settle(this.state, this.now());
    return {
      host: this.host,
      holder: s.known?.holder ?? null,
      generation: s.known?.generation ?? 0,
      seenGeneration: s.seen,
      gaveConfirmation: s.gave === null ? null : { holder: s.gave.holder, generation: s.gave.generation },
    };
  }

  // -------------------------------------------------------------------------------------
  // arbiter exchanges (one in flight)

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

  private async memberToken(): Promise<string | null> {
    const t = await this.token.get();
    if (!t.ok) {
      // Loud: without its token this host can neither renew nor report (rotation gone wrong).
      this.noteTokenProblem(`${this.config.tokenFile}: ${t.problem}`);
      return null;
    }
    return t.token;
  }

  private arbiterCall(method: 'GET' | 'POST', path: string, body: unknown, token: string | null): Promise<HttpResult> {
    return this.arbiters.request({ method, path, body, token, timeoutSeconds: this.config.requestTimeoutSeconds });
  }

  private probe(target: string): Promise<ProbeResult> {
    if (this.opts.probe !== undefined) return this.opts.probe(target);
    return probeHost(target, {
      tailscaleBin: this.config.tailscaleBin,
      healthUrl: healthUrlOf(this.config, target),
      timeoutSeconds: this.config.probeTimeoutSeconds,
    });
  }

  /** One heartbeat now (waits for an exchange in flight first). */
  heartbeat(): Promise<HeartbeatReport> {
    return this.exclusive(() => this.doHeartbeat());
  }

  /** The cron tick: skipped while an exchange is still running or queued. */
  private tick(): void {
    if (this.stopped || this.waiting > 0) return;
    void this.heartbeat().catch((err: unknown) => this.opts.log.error({ err }, 'heartbeat failed'));
  }

  private lastConfirmation(now: Stamp): { holder: string; generation: number; ageSeconds: number } | null {
    const s = this.state;
    if (s.gave !== null) return { holder: s.gave.holder, generation: s.gave.generation, ageSeconds: Math.max(0, now.mono - s.gave.at.mono) };
    if (this.given !== null) return { holder: this.given.holder, generation: this.given.generation, ageSeconds: Math.max(0, now.mono - this.given.atMono) };
    return null;
  }

  /** This agent's cadence, as it reports it with every heartbeat (S6: the agent owns it). */
  cadence(): { heartbeatSeconds: number; refreshSeconds: number; requestTimeoutSeconds: number } {
    const c = this.config;
    return { heartbeatSeconds: c.heartbeatSeconds, refreshSeconds: c.refreshSeconds, requestTimeoutSeconds: c.requestTimeoutSeconds };
  }

  private async doHeartbeat(): Promise<HeartbeatReport> {
    const s0 = this.state;
    const known = s0.known;
    const host = this.host;
    const holderHere = known !== null && known.holder === host;
    const body: { [k: string]: unknown } = { host, seenGeneration: s0.seen, ...this.cadence() };
    if (holderHere) {
      body['generation'] = known.generation;
    } else {
      if (known !== null && known.holder !== null) {
        const view = await this.probe(known.holder);
        body['view'] = { target: view.target, reachable: view.reachable, ping: view.ping, health: view.health };
      }
      const c = this.lastConfirmation(this.now());
      if (c !== null) body['confirmation'] = c;
    }
    const token = await this.memberToken();
    const sent = this.now();
    const res = await this.arbiterCall('POST', '/v1/heartbeat', body, token);
    const received = this.now();
    const report = await this.absorb(res, sent, received, 'heartbeat');
    this.lastHeartbeat = report;
    if (report.status === 401 || report.status === 403) this.noteTokenProblem(`the arbiter refuses the member token (HTTP ${report.status}: ${report.problem ?? ''})`);
    else if (report.status === 200 && this.tokenProblem !== null) {
      this.tokenProblem = null;
      this.opts.log.info({ category: 'hq.lease', event: 'token-ok', host: this.host }, 'the member token works again');
    }
    this.opts.observer?.heartbeat?.(report.outcome);
    this.noteTiming(report);
    this.scheduleRefresh();
    this.scheduleSoon(res, 'heartbeat');
    return report;
  }

  /** A broken member token: an error line on each change, the metric, `status()` (hq doctor). */
  private noteTokenProblem(problem: string): void {
    if (this.tokenProblem !== problem) {
      this.opts.log.error({ category: 'hq.lease', event: 'token-unavailable', host: this.host, problem }, 'member token does not work');
    }
    this.tokenProblem = problem;
  }

  /** The arbiter's word on this host's cadence: a change is a warning once (S6: never silent). */
  private noteTiming(report: HeartbeatReport): void {
    const key = report.timingProblems.join('\n');
    if (key === this.lastTimingKey || report.status !== 200) return;
    this.lastTimingKey = key;
    if (key === '') this.opts.log.info({ category: 'control', event: 'timing-ok', host: this.host }, 'the arbiter reports no timing problem');
    else this.opts.log.warn({ category: 'control', event: 'timing-problem', host: this.host, problems: report.timingProblems }, 'the arbiter reports a timing problem');
  }

  /**
   * An extra heartbeat before the next cron tick, the earliest of: the arbiter asked for a
   * report (`reportInSeconds`: its start wait needs one that counts), and — while this host holds
   * the lease — the renewal the TTL needs (three per validity, S6), whatever the cron says.
   */
  private scheduleSoon(res: HttpResult, via: 'heartbeat' | 'refresh'): void {
    if (this.stopped) return;
    const waits: number[] = [];
    if (via === 'heartbeat' && res.kind === 'answer' && res.status === 200) {
      const b = res.body as { reportInSeconds?: unknown; candidates?: unknown } | null;
      if (typeof b?.reportInSeconds === 'number' && Number.isFinite(b.reportInSeconds) && b.reportInSeconds >= 0) waits.push(b.reportInSeconds);
      if (Array.isArray(b?.candidates) && b.candidates.every((h) => typeof h === 'string')) this.peers = peersFromCandidates(this.config, b.candidates as string[]);
    }
    const k = this.state.known;
    if (k !== null && k.holder === this.host && !k.released) {
      const every = renewEverySeconds(k.ttlSeconds, k.safetyMarginSeconds, this.config.heartbeatSeconds);
      if (every < this.config.heartbeatSeconds) waits.push(every);
      // A refresh that shows this host promoted (or handed the lease): only a heartbeat's
      // renewal confirms it, so that heartbeat comes now rather than at the next cron tick.
      if (via === 'refresh' && this.state.current === null && this.state.pending === null && !k.floorPending) waits.push(0);
    }
    if (waits.length === 0) return;
    const seconds = Math.min(...waits);
    const atMono = this.now().mono + seconds;
    if (this.soonTimer !== null) {
      if (this.soonTimer.atMono <= atMono) return;
      clearTimeout(this.soonTimer.timer);
    }
    const timer = setTimeout(() => {
      this.soonTimer = null;
      this.tick();
    }, Math.min(2 ** 31 - 1, Math.ceil(seconds * 1000)));
    this.soonTimer = { timer, atMono };
  }

  /** Folds an arbiter answer (heartbeat or refresh) into the state; asks the peers when needed. */
  private async absorb(res: HttpResult, sent: Stamp, received: Stamp, via: 'heartbeat' | 'refresh'): Promise<HeartbeatReport> {
    const base = { status: null as number | null, problem: null as string | null, at: received.wall, timingProblems: [] as string[], failover: null as string | null };
    let outcome: HeartbeatOutcome;
    let trigger: 'unreachable' | 'held-renewal' | 'other' = 'other';
    let status: number | null = null;
    let problem: string | null = null;
    if (res.kind === 'unreachable') {
      outcome = 'unreachable';
      problem = res.problem;
      const wasOk = this.state.arbiterOk;
      await this.commit((s) => onArbiterFailure(s));
      trigger = 'unreachable';
      // lease-core logs the transition (arbiter-unreachable); repeats go to debug.
      (wasOk ? this.opts.log.warn : this.opts.log.debug).call(this.opts.log, { category: 'hq.lease', via, problem }, 'arbiter request failed');
    } else if (res.status !== 200) {
      status = res.status;
      const b = res.body as { error?: unknown; message?: unknown } | null;
      problem = typeof b?.message === 'string' ? b.message : `HTTP ${res.status}`;
      outcome = res.status >= 500 ? 'unreachable' : 'refused';
      if (res.status >= 500) trigger = 'unreachable';
      await this.commit((s) => onArbiterFailure(s));
      this.opts.log.warn({ category: 'hq.lease', event: 'arbiter-refused', via, status, error: b?.error ?? null, problem }, 'arbiter refused the request');
    } else {
      status = 200;
      const b = res.body as { outcome?: unknown; lease?: unknown; hold?: unknown; timingProblems?: unknown; failover?: unknown } | null;
      if (via === 'heartbeat' && Array.isArray(b?.timingProblems)) {
        for (const p of b.timingProblems) {
          const m = (p as { message?: unknown } | null)?.message;
          if (typeof m === 'string') base.timingProblems.push(m);
        }
      }
      if (via === 'heartbeat' && typeof b?.failover === 'string') base.failover = b.failover;
      const leaseInput = via === 'refresh' ? b : b?.lease;
      const parsed = parseRecord(leaseInput);
      const hold = typeof b?.hold === 'number' && Number.isFinite(b.hold) ? b.hold : null;
      const o = via === 'refresh' ? 'refresh' : b?.outcome;
      if (!parsed.ok || (via === 'heartbeat' && (typeof o !== 'string' || !['renewed', 'standby', 'no-lease', 'renew-refused'].includes(o)))) {
        outcome = 'invalid-answer';
        problem = parsed.ok ? 'outcome missing or unknown' : parsed.problem;
        await this.commit((s) => onArbiterFailure(s));
        this.opts.log.warn({ category: 'hq.lease', event: 'arbiter-invalid-answer', via, problem }, 'arbiter answer refused');
      } else {
        const record = parsed.value;
        outcome = via === 'refresh' ? (record.holder === this.host ? 'renewed' : 'standby') : (o as HeartbeatOutcome);
        const confirms = via === 'heartbeat' && o === 'renewed';
        await this.commit((s) => onArbiterAnswer(s, { record, confirms, hold: confirms ? hold : null }, sent, received, this.settings));
        if (confirms && hold !== null && hold > record.now) trigger = 'held-renewal';
      }
    }
    let peerConfirmation: HeartbeatReport['peerConfirmation'] = null;
    const k = this.state.known;
    if (via === 'heartbeat' && k !== null && asksPeers(this.state, trigger)) {
      peerConfirmation = (await this.askPeers(k.generation, k.ttlSeconds, k.safetyMarginSeconds)) ? 'confirmed' : 'not-confirmed';
    }
    const after = this.state.known;
    return {
      ...base,
      outcome,
      status,
      problem,
      holder: after?.holder ?? null,
      generation: after?.generation ?? this.state.seen,
      peerConfirmation,
    };
  }

  /**
   * Rule ③ (L2): the arbiter is down and this host holds the lease; every standby peer is
   * asked to confirm it. lease-core decides whether the answers make a validity.
   */
  private async askPeers(generation: number, ttlSeconds: number, safetyMarginSeconds: number): Promise<boolean> {
    const peers = [...this.peers.entries()];
    const hosts = peers.map(([h]) => h);
    const t = await this.peerToken.get();
    if (!t.ok) this.opts.log.warn({ category: 'hq.lease', event: 'peer-token-unavailable', problem: t.problem }, 'peer token unavailable');
    const sent = this.now();
    const results: PeerResult[] = await Promise.all(
      peers.map(async ([peer, url]): Promise<PeerResult> => {
        if (!t.ok) return { peer, answered: false };
        const r = await requestJson({
          method: 'POST',
          url: joinUrl(url, '/v1/peer/confirm'),
          body: { host: this.host, generation, ttlSeconds, safetyMarginSeconds },
          token: t.token,
          timeoutSeconds: this.config.requestTimeoutSeconds,
        });
        if (r.kind !== 'answer' || r.status !== 200) return { peer, answered: false };
        const b = r.body as { confirmed?: unknown; generation?: unknown } | null;
        const res: PeerResult = { peer, answered: true };
        return {
          ...res,
          ...(typeof b?.confirmed === 'boolean' ? { confirmed: b.confirmed } : {}),
          ...(typeof b?.generation === 'number' && Number.isSafeInteger(b.generation) && b.generation >= 0 ? { generation: b.generation } : {}),
        };
      }),
    );
    const received = this.now();
    const step = await this.commit((s) => onPeerResults(s, results, hosts, sent, received, this.settings));
    const ok = step.events.some((e) => e.event === 'quorum-standby');
    this.opts.observer?.peerConfirm?.(ok ? 'confirmed' : 'not-confirmed');
    if (!ok) {
      this.opts.log.warn(
        { category: 'hq.lease', event: 'no-quorum', generation, answers: results.map((r) => `${r.peer}:${r.answered ? String(r.confirmed) : 'no-answer'}`).join(',') },
        'peers did not confirm',
      );
    }
    return ok;
  }

  /** A cheap read between heartbeats: `GET /v1/lease`, never a confirmation. */
  refresh(): Promise<HeartbeatReport> {
    return this.exclusive(async () => {
      const token = await this.memberToken();
      const sent = this.now();
      const res = await this.arbiterCall('GET', '/v1/lease', undefined, token);
      const received = this.now();
      const report = await this.absorb(res, sent, received, 'refresh');
      this.scheduleRefresh();
      this.scheduleSoon(res, 'refresh');
      return report;
    });
  }

  private scheduleRefresh(): void {
    if (this.stopped) return;
    if (this.refreshTimer !== null) clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      if (this.stopped) return;
      if (this.waiting > 0) return this.scheduleRefresh();
      void this.refresh().catch((err: unknown) => this.opts.log.error({ err }, 'refresh failed'));
    }, this.config.refreshSeconds * 1000);
  }

  // -------------------------------------------------------------------------------------
  // peer confirmation asked of this agent

  /** Decides, persists `gaveConfirmation` (fsync), and only then returns the answer (S2.2). */
  async confirm(req: ConfirmRequest): Promise<ConfirmAnswer> {
    let answer: ConfirmAnswer | null = null;
    const step = await this.commit((s) => {
      const r = onConfirmRequest(s, req, this.now(), this.settings);
      answer = r.answer;
      return r;
    });
    const a = answer as ConfirmAnswer | null;
    if (a === null) throw new Error('no answer');
    if (a.confirmed && step.state.gave !== null) {
      this.given = { holder: step.state.gave.holder, generation: step.state.gave.generation, atMono: step.state.gave.at.mono };
    }
    return a;
  }

  // -------------------------------------------------------------------------------------
  // release support

  async stepDown(): Promise<void> {
    await this.commit((s) => ({ state: stepDown(s), events: [] }));
    this.opts.log.info({ category: 'hq.lease', event: 'step-down', host: this.host, generation: this.state.steppedDown }, 'stepped down');
  }

  async resume(): Promise<void> {
    await this.commit((s) => ({ state: resume(s), events: [] }));
    this.opts.log.info({ category: 'hq.lease', event: 'resume', host: this.host }, 'resumed after a refused release');
  }

  // -------------------------------------------------------------------------------------
  // life cycle

  start(): void {
    this.task = scheduleCron(this.config.heartbeatCron, 'hq-heartbeat', () => this.tick());
    this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.task !== null) await this.task.stop();
    this.task = null;
    if (this.refreshTimer !== null) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    if (this.soonTimer !== null) clearTimeout(this.soonTimer.timer);
    this.soonTimer = null;
    await this.exchanges.catch(() => undefined);
    await this.commits.catch(() => undefined);
  }
}

