/**
 * The agent's shell around lease-core, put together, and its life cycle. The parts, each along
 * one seam:
 *  - store.ts: the state and its disk — decide → persist (fsync) → swap → log, one at a time;
 *  - fence.ts: the fence from memory, and the socket's fence answer (fast path and route);
 *  - arbiter-link.ts: heartbeats and lease reads, one exchange in flight at a time;
 *  - peers.ts: peer confirmation, asked (the holder, arbiter down) and given (a standby);
 *  - runs.ts: the fenced children the supervisors registered;
 *  - step-down.ts: ending them and telling the arbiter when this host lost the lease.
 * This class opens them in order, starts and stops them, and answers the summaries the
 * listeners serve (status, primary, peer info) from memory.
 */
import { queryFence, settle, type AgentSettings, type AgentState, type LeaseEvent, type Stamp } from '@hq/lease-core';
import { NEVER_FAIL_OPEN } from '@hq/protocol';
import type {
  AgentStatus,
  ConfirmAnswer,
  ConfirmRequest,
  FenceDecision,
  HeartbeatReport,
  PeerInfo,
  PrimaryAnswer,
  ReportedCategory,
  ReportedEvent,
  RunClaim,
  RunClaimAnswer,
} from '@hq/protocol';
import { VERSION } from '@hq/runtime/version';
import type { AgentConfig } from '../config.js';
import type { StampClock as Clock, Timers } from '@hq/runtime/clock';
import type { ProbeResult } from '@hq/runtime/probe';
import type { StatePaths } from '../state.js';
import { TokenFile } from '../tokens.js';
import { ArbiterLink } from './arbiter-link.js';
import { Fence } from './fence.js';
import type { AgentObserver, Log } from './observe.js';
import { Peers } from './peers.js';
import { Runs } from './runs.js';
import { StepDowns, type ReleaseReady } from './step-down.js';
import { AgentStore } from './store.js';

export { VERSION };
export type { AgentObserver, Log } from './observe.js';

export type ResolvedConfig = AgentConfig & { readonly arbiterUrl: string };

export interface AgentOptions {
  readonly config: ResolvedConfig;
  readonly clock: Clock;
  readonly log: Log;
  readonly observer?: AgentObserver;
  /** Replaces the ping ⊕ health probe (tests). */
  readonly probe?: (target: string) => Promise<ProbeResult>;
  /** The timers of the fence's long polls (tests; default the real ones). */
  readonly timers?: Timers;
  /** The timers of the arbiter link (refresh, extra heartbeats) and of the runs' polls (tests; default the real ones). */
  readonly linkTimers?: Timers;
}

export class Agent {
  readonly settings: AgentSettings;
  readonly token: TokenFile;
  readonly peerToken: TokenFile;
  /** The fence answers (the socket's fast path and route serve them). */
  readonly fencing: Fence;
  readonly startedWall: number;
  private readonly peers: Peers;
  private readonly link: ArbiterLink;
  /** The fenced children the supervisors registered. */
  readonly runs: Runs;
  private readonly stepDowns: StepDowns;

  private constructor(
    private readonly opts: AgentOptions,
    private readonly store: AgentStore,
    settings: AgentSettings,
    peers: Peers,
    peerToken: TokenFile,
  ) {
    const c = opts.config;
    this.settings = settings;
    this.token = new TokenFile(c.tokenFile);
    this.peerToken = peerToken;
    this.peers = peers;
    this.startedWall = store.state.started.wall;
    const parts = { settings, clock: opts.clock, log: opts.log, observer: opts.observer };
    this.fencing = new Fence({ ...parts, memory: store, roles: c.roles, timers: opts.timers });
    // A long poll on the fence learns of every change of the state at once.
    store.onCommit(() => this.fencing.changed());
    this.link = new ArbiterLink({
      ...parts,
      config: c,
      store,
      peers,
      token: this.token,
      probe: opts.probe,
      timers: opts.linkTimers,
    });
    this.runs = new Runs({
      fence: (role) => this.fencing.decide(role),
      clock: opts.clock,
      timers: opts.linkTimers,
      log: opts.log,
    });
    this.stepDowns = new StepDowns({ ...parts, store, runs: this.runs, link: this.link, peers });
  }

  /** Opens the state (see `AgentStore.open`: a refused file fails closed) and builds the parts. */
  static async open(opts: AgentOptions): Promise<Agent> {
    const c = opts.config;
    const settings: AgentSettings = {
      host: c.hostName,
      requestTimeoutSeconds: c.requestTimeoutSeconds,
      failOpenRoles: c.failOpenRoles,
    };
    const { store, given } = await AgentStore.open({
      stateDir: c.stateDir,
      settings,
      clock: opts.clock,
      log: opts.log,
    });
    const peerToken = new TokenFile(c.peerTokenFile);
    const peers = new Peers({
      config: c,
      settings,
      store,
      clock: opts.clock,
      log: opts.log,
      observer: opts.observer,
      peerToken,
      given,
    });
    return new Agent(opts, store, settings, peers, peerToken);
  }

  get config(): ResolvedConfig {
    return this.opts.config;
  }

  get host(): string {
    return this.opts.config.hostName;
  }

  get paths(): StatePaths {
    return this.store.paths;
  }

  get lastHeartbeat(): HeartbeatReport | null {
    return this.link.lastHeartbeat;
  }

  /** Why the member token does not work right now (unreadable, or refused by the arbiter), else null. */
  get tokenProblem(): string | null {
    return this.link.tokenProblem;
  }

  now(): Stamp {
    return this.opts.clock.now();
  }

  /** The current state (for status pages and tests). */
  snapshot(): AgentState {
    return this.store.state;
  }

  // -------------------------------------------------------------------------------------
  // life cycle

  start(): void {
    this.link.start();
  }

  async stop(): Promise<void> {
    await this.link.stop();
    await this.stepDowns.idle();
    await this.store.drain();
  }

  /** `handoverOnStop`: hand the lease to a standby before stopping (see `StepDowns.handOverOnStop`). */
  handOverOnStop(): Promise<string | null> {
    return this.stepDowns.handOverOnStop();
  }

  // -------------------------------------------------------------------------------------
  // what the listeners ask

  isRole(role: string): boolean {
    return this.fencing.isRole(role);
  }

  /** The fence from memory (no I/O). The caller checks the role first. */
  fence(role: string): FenceDecision {
    return this.fencing.decide(role);
  }

  /** The roles this host may run now (for the registry's duties); quiet: no log, no metric. */
  duties(): string[] {
    return this.fencing.duties();
  }

  /** Seconds of validity left for a non-fail-open role, 0 when it may not run. */
  validForSeconds(): number {
    return this.fencing.validForSeconds();
  }

  /** One heartbeat now (waits for an exchange in flight first). */
  heartbeat(): Promise<HeartbeatReport> {
    return this.link.heartbeat();
  }

  /** A cheap read between heartbeats: `GET /v1/lease`, never a confirmation. */
  refresh(): Promise<HeartbeatReport> {
    return this.link.refresh();
  }

  /** A peer asks this agent to confirm it: decided, persisted (fsync), then answered (S2.2). */
  confirm(req: ConfirmRequest): Promise<ConfirmAnswer> {
    return this.peers.confirm(req);
  }

  /** This agent's cadence, as it reports it with every heartbeat (S6: the agent owns it). */
  cadence(): { heartbeatSeconds: number; refreshSeconds: number; requestTimeoutSeconds: number } {
    return this.link.cadence();
  }

  /** Before a release or handover: persisted, and every fenced child of the generation ended. */
  stepDown(): Promise<ReleaseReady> {
    return this.stepDowns.forRelease();
  }

  /** Undoes a step-down whose release the arbiter refused. */
  resume(): Promise<void> {
    return this.stepDowns.resume();
  }

  /** A supervisor registers its run before it spawns the child (the caller checked the role). */
  claimRun(claim: RunClaim): RunClaimAnswer {
    return this.runs.claim(claim);
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
  // the summaries: memory only

  status(): AgentStatus {
    const now = this.now();
    const { state: s, decision: d } = queryFence(this.store.state, NEVER_FAIL_OPEN, now, this.settings);
    const last = this.link.lastHeartbeat;
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
      startGuardSeconds:
        s.startGuardUntilMono === null
          ? 0
          : Number.isFinite(s.startGuardUntilMono)
            ? Math.max(0, s.startGuardUntilMono - now.mono)
            : null,
      leaseTiming:
        s.known === null ? null : { ttlSeconds: s.known.ttlSeconds, safetyMarginSeconds: s.known.safetyMarginSeconds },
      cadence: this.cadence(),
      timingProblems: last?.timingProblems ?? [],
      tokenProblem: this.link.tokenProblem,
      failover: last?.failover ?? null,
      gaveConfirmation:
        s.gave === null
          ? null
          : {
              holder: s.gave.holder,
              generation: s.gave.generation,
              ageSeconds: now.mono - s.gave.at.mono,
              waitSeconds: Math.max(0, s.gave.untilMono - now.mono),
            },
      steppedDown: s.steppedDown,
      stepDownSeconds: this.runs.endBoundSeconds(),
      grant: s.current === null ? null : { generation: s.current.generation, source: s.current.source },
      pending:
        s.pending === null
          ? null
          : { generation: s.pending.generation, startsInSeconds: Math.max(0, s.pending.startMono - now.mono) },
      lastHeartbeat: last === null ? null : { ...last, ageSeconds: now.wall - last.at },
      peers: this.peers.hosts(),
      peerPaths: Object.fromEntries(
        [...this.peers.peerPaths].map(([peer, problem]) => [peer, { ok: problem === null, problem }]),
      ),
      uptimeSeconds: now.mono - s.started.mono,
    };
  }

  primary(): PrimaryAnswer {
    const s = this.store.state;
    const k = s.known;
    return { known: k !== null && k.holder !== null, holder: k?.holder ?? null, generation: k?.generation ?? s.seen };
  }

  /** The confirmation path to each peer as the last probe found it (null: it works). */
  get peerPaths(): ReadonlyMap<string, string | null> {
    return this.peers.peerPaths;
  }

  peerInfo(): PeerInfo {
    const s = settle(this.store.state, this.now());
    return {
      host: this.host,
      holder: s.known?.holder ?? null,
      generation: s.known?.generation ?? 0,
      seenGeneration: s.seen,
      gaveConfirmation: s.gave === null ? null : { holder: s.gave.holder, generation: s.gave.generation },
    };
  }
}
