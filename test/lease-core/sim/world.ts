/**
 * A deterministic simulator of one hq fleet — an arbiter and two or three candidates with
 * their agents and fenced workers — driven only through lease-core's decisions.
 *
 * Real time advances in ticks of `DT` seconds. Each host has its own clocks: `wall` and `mono`
 * advance at the host's rate (drift), `mono` stops while the host sleeps (macOS), `wall` may
 * jump. Messages cross links with a delay; a cut link (either direction alone) drops them. A
 * crash loses a process's memory but keeps its disk (local.json, seen-generation, hq.db),
 * unless the fault wipes the arbiter's database. A paused process (SIGSTOP) does nothing and
 * queues what it receives; its fenced worker, a separate process, runs on until the deadline
 * it was given (S3) and stops there.
 *
 * A worker told to stop (SIGTERM) exits after up to `GRACE` seconds, never after the deadline its
 * supervisor holds. A holder that learns it lost the lease steps down (lease-core A7): it
 * persists that first, then waits until its worker is gone, then acknowledges to the arbiter,
 * which may end the lock-delay (G6). Operations with the old holder alive — forced transfers,
 * handovers by the holder's CLI — and replayed (late, duplicated) acknowledgements are drawn
 * like faults.
 *
 * After every tick the checker looks at what the *workers* did — the real effects — and at
 * what the arbiter granted.
 */
import * as core from '../../../packages/lease-core/src/index.js';
import type {
  AgentSettings,
  AgentState,
  ArbiterSettings,
  ArbiterState,
  Boot,
  LeaseEvent,
  Persisted,
  Stamp,
} from '../../../packages/lease-core/src/index.js';
import type * as protocol from '../../../packages/protocol/src/index.js';
import type { Host } from '../../../packages/protocol/src/index.js';
import { Rng } from './rng.js';

export const DT = 0.1;
/** Longest time a fenced child takes to exit after SIGTERM (the supervisor's `--grace`). */
export const GRACE = 2;

/**
 * The order of a step-down: persist, children gone, acknowledge — or one of the two
 * broken orders the mutants use: the acknowledgement before the persisted step-down (the old
 * state answers the fence meanwhile), or before the children are gone.
 */
export type StepDownOrder = 'persist-kill-ack' | 'ack-before-persist' | 'ack-before-gone';

/** The decision set the simulator drives; mutants replace parts of it. */
export interface Decisions {
  readonly core: typeof core;
  /** Turns a host's true clock reading into what its agent process reads. */
  readonly agentStamp: (s: Stamp) => Stamp;
  /** Which stamp the agent passes as the send time of an answered request. */
  readonly sentStamp: (sent: Stamp, received: Stamp) => Stamp;
  /** Post-processes every arbiter step (a mutant may strip a mechanism). */
  readonly arbiterStep: <A>(step: core.Step<A>, before: ArbiterState, ctx: core.Context) => core.Step<A>;
  /** Post-processes every agent state (a mutant may drop the standby's own wait). */
  readonly agentState: (s: AgentState) => AgentState;
  readonly stepDownOrder: StepDownOrder;
}

export const REAL: Decisions = {
  core,
  agentStamp: (s) => s,
  sentStamp: (sent) => sent,
  arbiterStep: (step) => step,
  agentState: (s) => s,
  stepDownOrder: 'persist-kill-ack',
};

export interface SimConfig {
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
  readonly heartbeatSeconds: number;
  readonly checkSeconds: number;
  readonly refreshSeconds: number;
  readonly requestTimeoutSeconds: number;
  readonly viewFreshSeconds: number;
  readonly promoteAfterChecks: number;
  readonly candidates: readonly Host[];
  /** Largest clock-rate error (fraction). */
  readonly drift: number;
}

export const FAST: SimConfig = {
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  heartbeatSeconds: 1,
  checkSeconds: 1,
  refreshSeconds: 1,
  requestTimeoutSeconds: 3,
  viewFreshSeconds: 3,
  promoteAfterChecks: 2,
  candidates: ['mbp', 'node-b'],
  drift: 0.01,
};

export const ARBITER = 'cloud-vm';
/** Every fault is over by then (schedule.ts HEALED_BY): an agent killed mid-step-down is back by it. */
const HEALED_BY_SIM = 45;

// ----------------------------------------------------------------------------- clocks

class HostClock {
  wall: number;
  mono: number;
  asleep = false;
  constructor(
    readonly rate: number,
    wall0: number,
    mono0: number,
  ) {
    this.wall = wall0;
    this.mono = mono0;
  }
  advance(dt: number): void {
    this.wall += dt * this.rate;
    if (!this.asleep) this.mono += dt * this.rate;
  }
  stamp(): Stamp {
    return { wall: this.wall, mono: this.mono };
  }
}

// ----------------------------------------------------------------------------- network

type Payload =
  | { kind: 'heartbeat'; id: number; body: protocol.HeartbeatRequest }
  | { kind: 'acquire'; id: number; body: protocol.AcquireRequest; operator: true }
  | { kind: 'read'; id: number }
  | {
      kind: 'answer';
      id: number;
      record: protocol.LeaseRecord;
      confirms: boolean;
      hold: number | null;
      stepDown: number | null;
    }
  | { kind: 'stepped-down'; id: number; body: protocol.StepDownAck }
  | { kind: 'release'; id: number; body: protocol.ReleaseRequest }
  | { kind: 'verdict'; id: number; ok: boolean }
  | { kind: 'confirm'; id: number; body: protocol.ConfirmRequest }
  | { kind: 'confirm-answer'; id: number; answer: protocol.ConfirmAnswer };

interface Message {
  readonly from: Host;
  readonly to: Host;
  readonly at: number;
  readonly payload: Payload;
}

export interface Fault {
  readonly kind:
    | 'cut'
    | 'cut-one-way'
    | 'delay'
    | 'crash-agent'
    | 'crash-arbiter'
    | 'wipe-arbiter'
    | 'pause-agent'
    | 'pause-arbiter'
    | 'sleep'
    | 'jump'
    | 'transfer'
    | 'handover'
    | 'crash-step-down'
    | 'replay-ack'
    | 'restart-move'
    | 'outage-restart';
  readonly start: number;
  readonly length: number;
  readonly a: Host;
  readonly b: Host;
  /** Wall jump size (seconds, signed) or delay size. */
  readonly amount: number;
  /** crash-step-down: where in the step-down the agent is killed (its worker lives on). */
  readonly phase?: 'persisted' | 'children-gone';
  /** transfer / handover: skip the target's liveness check. */
  readonly force?: boolean;
}

// ----------------------------------------------------------------------------- processes

interface Inflight {
  readonly id: number;
  readonly kind: 'heartbeat' | 'read';
  readonly sent: Stamp;
}

interface PeerRound {
  readonly id: number;
  readonly sent: Stamp;
  readonly results: Map<Host, core.PeerResult>;
}

interface Worker {
  running: boolean;
  generation: number;
  /** Deadline of the current run: the fence's validForSeconds from `at`, elapsed max(mono, wall). */
  at: Stamp | null;
  validFor: number;
  /** Sim time the child exits after SIGTERM, or null while it was not told to stop. */
  stopAt: number | null;
}

/** A step-down in progress (A7): the acknowledgement owed, and where the agent is with it. */
interface StepDownJob {
  readonly generation: number;
  readonly revision: number;
  readonly ran: boolean;
  phase: 'killing' | 'acking';
  /** ack-before-persist: the decided state, committed only once the acknowledgement is answered. */
  deferred: AgentState | null;
  /** ack-before-persist: the run it killed first (a new one may start meanwhile). */
  victim: RunRecord | null;
  ackId: number;
  sent: Stamp | null;
  tries: number;
}

/** `hq lease release --handover-to` on the holder: step down, children gone, release. */
interface HandoverJob {
  readonly generation: number;
  readonly to: Host;
  readonly force: boolean;
  readonly ran: boolean;
  phase: 'killing' | 'releasing';
  id: number;
  sent: Stamp | null;
}

class Agent {
  up = true;
  paused = false;
  state: AgentState;
  disk: { persisted: Persisted | null; seen: number } = { persisted: null, seen: 0 };
  inflight: Inflight | null = null;
  round: PeerRound | null = null;
  nextHeartbeat = 0;
  nextRefresh = 0;
  inbox: Message[] = [];
  worker: Worker = { running: false, generation: 0, at: null, validFor: 0, stopAt: null };
  job: StepDownJob | null = null;
  handover: HandoverJob | null = null;
  /** crash-step-down armed: killed when the step-down reaches this phase. */
  crashAt: { phase: 'persisted' | 'children-gone'; until: number; down: number } | null = null;
  constructor(
    readonly host: Host,
    readonly clock: HostClock,
    readonly settings: AgentSettings,
    readonly d: Decisions,
    private readonly onCommit: (s: AgentState) => void,
  ) {
    this.state = this.d.core.initialAgent(settings, this.stamp(), 0, null);
  }
  stamp(): Stamp {
    return this.d.agentStamp(this.clock.stamp());
  }
  boot(): void {
    this.up = true;
    this.paused = false;
    this.inflight = null;
    this.round = null;
    this.inbox = [];
    this.job = null;
    this.handover = null;
    const now = this.stamp();
    this.state = this.d.core.initialAgent(this.settings, now, this.disk.seen, this.disk.persisted);
    this.nextHeartbeat = now.mono;
    this.nextRefresh = now.mono;
  }
  /** Writes the disk before the new state may answer anyone (S2.2). */
  commit(next: AgentState): void {
    if (next === this.state) return;
    const s = this.d.agentState(next);
    this.disk = { persisted: this.d.core.persisted(s, this.stamp()), seen: s.seen };
    this.state = s;
    this.onCommit(s);
  }
}

export interface GrantRecord {
  readonly generation: number;
  readonly holder: Host;
  readonly at: number;
}

export interface RunRecord {
  readonly host: Host;
  readonly generation: number;
  readonly start: number;
  end: number;
}

/** A transfer or handover made while the old holder's agent was up. */
export interface Move {
  readonly kind: 'transfer' | 'handover';
  readonly at: number;
  readonly from: Host;
  readonly to: Host;
  readonly generation: number;
  /** Sim time the new holder's worker first ran at that generation, or null. */
  ranAt: number | null;
  /** The arbiter accepted the old holder's acknowledgement for it. */
  acknowledged: boolean;
}

export interface Violation {
  readonly property: 'S1' | 'S2' | 'S5' | 'S6' | 'L1';
  readonly at: number;
  readonly detail: string;
}

export class World {
  t = 0;
  readonly rng: Rng;
  readonly clocks = new Map<Host, HostClock>();
  readonly agents = new Map<Host, Agent>();
  readonly arbiterSettings: ArbiterSettings;
  readonly agentSettings: Map<Host, AgentSettings>;
  readonly messages: Message[] = [];
  readonly faults: Fault[];
  // arbiter process and its disk
  arbiterUp = true;
  arbiterPaused = false;
  arbiterInbox: Message[] = [];
  db: ArbiterState;
  boot: Boot;
  arbiterStart: { wall: number; mono: number } = { wall: 0, mono: 0 };
  nextCheck = 0;
  // machines switched off for good (L1 phase)
  readonly dead = new Set<Host>();
  // history
  readonly runs: RunRecord[] = [];
  readonly grants: GrantRecord[] = [];
  readonly violations: Violation[] = [];
  readonly events: LeaseEvent[] = [];
  readonly probeHistory: { at: number; holder: Host | null; reachable: boolean }[] = [];
  readonly viewReports = new Map<Host, { at: number; target: Host; reachable: boolean }>();
  promotions = 0;
  /** Planned moves (transfers, handovers) with the old holder alive, for the statistics. */
  readonly moves: Move[] = [];
  /** Every acknowledgement each agent sent, for the replays. */
  private readonly acksSent = new Map<Host, protocol.StepDownAck[]>();
  /** Agents killed mid-step-down, and when they come back. */
  private readonly reboots: { host: Host; at: number }[] = [];
  private nextId = 1;
  private operatorWanted = true;
  private operatorNext = 0.5;
  private operatorInflight: { id: number; sentAt: number } | null = null;
  private maxRunGeneration = 0;
  private maxObserved = 0;
  private readonly observed = new Map<number, Host>();

  constructor(
    seed: number,
    readonly cfg: SimConfig,
    readonly d: Decisions,
    faults: readonly Fault[],
  ) {
    this.rng = new Rng(seed);
    this.faults = [...faults];
    const hosts = [ARBITER, ...cfg.candidates];
    for (const h of hosts) {
      const rate = 1 + (this.rng.next() * 2 - 1) * cfg.drift;
      this.clocks.set(h, new HostClock(rate, 1_700_000_000 + this.rng.next() * 100, this.rng.next() * 1000));
    }
    this.arbiterSettings = {
      arbiter: ARBITER,
      candidates: cfg.candidates,
      ttlSeconds: cfg.ttlSeconds,
      safetyMarginSeconds: cfg.safetyMarginSeconds,
      promoteAfterChecks: cfg.promoteAfterChecks,
      viewFreshSeconds: cfg.viewFreshSeconds,
    };
    this.agentSettings = new Map();
    for (const h of cfg.candidates) {
      const s: AgentSettings = {
        host: h,
        requestTimeoutSeconds: cfg.requestTimeoutSeconds,
        failOpenRoles: [],
      };
      this.agentSettings.set(h, s);
      this.agents.set(h, new Agent(h, this.clock(h), s, d, (st) => this.observe(st)));
    }
    this.db = this.freshDb();
    this.boot = this.startArbiter();
    for (const a of this.agents.values()) a.boot();
  }

  clock(h: Host): HostClock {
    return this.clocks.get(h) as HostClock;
  }

  private freshDb(): ArbiterState {
    return {
      lease: { ...this.d.core.emptyLease(this.cfg.ttlSeconds), floorPending: true },
      observers: new Map(),
      floor: 0,
    };
  }

  /** The arbiter's `now`: wall at start + monotonic elapsed (a wall jump does not move it). */
  arbiterNow(): number {
    const c = this.clock(ARBITER);
    return this.arbiterStart.wall + (c.mono - this.arbiterStart.mono);
  }

  private startArbiter(): Boot {
    const c = this.clock(ARBITER);
    this.arbiterStart = { wall: c.wall, mono: c.mono };
    this.arbiterUp = true;
    this.arbiterPaused = false;
    this.arbiterInbox = [];
    this.nextCheck = c.mono + this.cfg.checkSeconds;
    const boot = this.d.core.newBoot(this.arbiterNow());
    this.db = this.d.core.atRestart(this.db, { now: this.arbiterNow(), settings: this.arbiterSettings, boot });
    return boot;
  }

  private ctx(): core.Context {
    return { now: this.arbiterNow(), settings: this.arbiterSettings, boot: this.boot };
  }

  // --------------------------------------------------------------------------- network

  private linkCut(from: Host, to: Host): boolean {
    if (this.dead.has(from) || this.dead.has(to)) return true;
    if (this.asleep(from) || this.asleep(to)) return true;
    for (const f of this.faults) {
      if (this.t < f.start || this.t >= f.start + f.length) continue;
      if (f.kind === 'cut' && ((f.a === from && f.b === to) || (f.a === to && f.b === from))) return true;
      if (f.kind === 'cut-one-way' && f.a === from && f.b === to) return true;
    }
    return false;
  }

  private delay(from: Host, to: Host): number {
    let d = 0.005 + this.rng.next() * 0.15;
    for (const f of this.faults) {
      if (f.kind !== 'delay' || this.t < f.start || this.t >= f.start + f.length) continue;
      if ((f.a === from && f.b === to) || (f.a === to && f.b === from)) d += f.amount * this.rng.next();
    }
    return d;
  }

  private asleep(h: Host): boolean {
    return this.clocks.get(h)?.asleep ?? false;
  }

  send(from: Host, to: Host, payload: Payload): void {
    if (this.linkCut(from, to)) return;
    this.messages.push({ from, to, at: this.t + this.delay(from, to), payload });
  }

  id(): number {
    return this.nextId++;
  }

  // --------------------------------------------------------------------------- faults

  private applyFaults(): void {
    for (const f of this.faults) {
      const starts = this.t >= f.start && this.t - DT < f.start;
      const ends = this.t >= f.start + f.length && this.t - DT < f.start + f.length;
      if (!starts && !ends) continue;
      switch (f.kind) {
        case 'crash-agent': {
          const a = this.agents.get(f.a) as Agent;
          if (starts) {
            a.up = false;
            if (a.worker.running) this.stopWorker(a); // kill -9 of the agent and its supervisor tree
          }
          if (ends && !this.dead.has(f.a)) a.boot();
          break;
        }
        case 'pause-agent': {
          const a = this.agents.get(f.a) as Agent;
          if (starts) a.paused = true;
          if (ends) a.paused = false;
          break;
        }
        case 'crash-arbiter':
        case 'wipe-arbiter':
          if (starts) {
            this.arbiterUp = false;
            if (f.kind === 'wipe-arbiter') this.db = this.freshDb();
          }
          if (ends) this.boot = this.startArbiter();
          break;
        case 'pause-arbiter':
          if (starts) this.arbiterPaused = true;
          if (ends) this.arbiterPaused = false;
          break;
        case 'sleep':
          this.clock(f.a).asleep = starts;
          if (ends) this.clock(f.a).asleep = false;
          break;
        case 'jump':
          if (starts) this.clock(f.a).wall += f.amount;
          break;
        case 'transfer':
          if (starts) this.adminTransfer(f.a, f.force === true);
          break;
        case 'handover':
          if (starts) this.startHandover(f.a, f.force === true);
          break;
        case 'crash-step-down':
          if (starts)
            (this.agents.get(f.a) as Agent).crashAt = {
              phase: f.phase ?? 'persisted',
              until: HEALED_BY_SIM - f.length,
              down: f.length,
            };
          break;
        case 'replay-ack':
          if (starts) this.replayAck(f.a);
          break;
        default:
          break;
      }
    }
  }

  // --------------------------------------------------------------------------- arbiter

  private arbiterRecord(): protocol.LeaseRecord {
    return this.d.core.toRecord(this.db.lease, this.db.observers, this.arbiterNow());
  }

  private arbiterApply<A>(fn: (s: ArbiterState, c: core.Context) => core.Step<A>): core.Step<A> {
    const before = this.db;
    const ctx = this.ctx();
    const step = this.d.arbiterStep(fn(before, ctx), before, ctx);
    this.db = step.next;
    this.boot = step.boot;
    this.events.push(...step.events);
    this.noteGrant(before);
    return step;
  }

  /**
   * S1 at the arbiter: a grant (a new generation, or a pending floor completed) must lie above
   * every generation any agent has observed so far, or be that very tenure. A generation the
   * arbiter granted but no agent ever heard of, and then lost with its database, is no token
   * anyone holds: it may be granted again, and the observed-tenure check below stays silent.
   */
  private noteGrant(before: ArbiterState): void {
    const l = this.db.lease;
    if (l.holder === null || l.floorPending) return;
    if (l.generation === before.lease.generation && l.holder === before.lease.holder && !before.lease.floorPending)
      return;
    this.grants.push({ generation: l.generation, holder: l.holder, at: this.t });
    const same = l.generation === this.maxObserved && this.observed.get(l.generation) === l.holder;
    if (l.generation <= this.maxObserved && !same) {
      this.violate(
        'S1',
        `generation ${l.generation} granted to ${l.holder} after generation ${this.maxObserved} was observed`,
      );
    }
  }

  /** S1 at the agents: one holder per generation, across every agent and all time. */
  observe(a: AgentState): void {
    const k = a.known;
    if (k === null || k.holder === null || k.floorPending || a.stale) return;
    const prev = this.observed.get(k.generation);
    if (prev === undefined) {
      this.observed.set(k.generation, k.holder);
      this.maxObserved = Math.max(this.maxObserved, k.generation);
    } else if (prev !== k.holder) {
      this.violate('S1', `generation ${k.generation} observed with holder ${prev} and with holder ${k.holder}`);
    }
  }

  private arbiterReceive(m: Message): void {
    const p = m.payload;
    const host = m.from;
    if (p.kind === 'heartbeat') {
      const step = this.arbiterApply((s, c) => this.d.core.heartbeat(s, c, p.body));
      if (p.body.view !== undefined)
        this.viewReports.set(host, { at: this.t, target: p.body.view.target, reachable: p.body.view.reachable });
      this.reply(host, p.id, step.answer.outcome === 'renewed');
    } else if (p.kind === 'acquire') {
      const step = this.arbiterApply((s, c) => this.d.core.acquire(s, c, p.body));
      this.reply(host, p.id, step.answer.ok, true);
    } else if (p.kind === 'read') {
      this.reply(host, p.id, false);
    } else if (p.kind === 'stepped-down') {
      const step = this.arbiterApply((s, c) => this.d.core.steppedDown(s, c, p.body));
      if (step.answer.ok) {
        const move = this.moves.findLast((m) => m.from === p.body.host && m.generation === this.db.lease.generation);
        if (move !== undefined) move.acknowledged = true;
      }
      this.send(ARBITER, host, { kind: 'verdict', id: p.id, ok: step.answer.ok });
    } else if (p.kind === 'release') {
      const before = this.db.lease;
      const step = this.arbiterApply((s, c) => this.d.core.release(s, c, p.body));
      if (step.answer.ok && p.body.handoverTo !== undefined) this.noteMove('handover', before, p.body.handoverTo);
      this.send(ARBITER, host, { kind: 'verdict', id: p.id, ok: step.answer.ok });
    }
  }

  private reply(to: Host, id: number, confirms: boolean, operator = false): void {
    const ctx = this.ctx();
    const hold = this.d.core.renewHold(ctx, this.boot, this.db);
    const stepDown = operator ? null : this.d.core.stepDownAsked(this.db, ctx, to);
    this.send(ARBITER, to, {
      kind: 'answer',
      id: operator ? -id : id,
      record: this.arbiterRecord(),
      confirms,
      hold,
      stepDown,
    });
  }

  // --------------------------------------------------------------------------- planned moves

  /** `hq failover --to H` from an admin machine: applied at the arbiter when it is serving. */
  private adminTransfer(to: Host, force: boolean): void {
    if (!this.arbiterUp || this.arbiterPaused) return;
    const before = this.db.lease;
    const step = this.arbiterApply((s, c) => this.d.core.transfer(s, c, { to, force }));
    if (step.answer.ok) this.noteMove('transfer', before, to);
  }

  private noteMove(kind: Move['kind'], before: core.LeaseState, to: Host): void {
    const from = before.holder;
    const agent = from === null ? undefined : this.agents.get(from);
    if (from === null || from === to || agent === undefined || !agent.up || this.dead.has(from)) return;
    this.moves.push({
      kind,
      at: this.t,
      from,
      to,
      generation: this.db.lease.generation,
      ranAt: null,
      acknowledged: false,
    });
  }

  /** The holder's CLI: `hq lease release --handover-to H` (step down, children gone, release). */
  private startHandover(to: Host, force: boolean): void {
    const a = [...this.agents.values()].find(
      (x) => x.host !== to && x.state.known?.holder === x.host && !x.state.known.released,
    );
    if (a === undefined || !a.up || a.paused || this.asleep(a.host) || a.handover !== null) return;
    const g = a.state.known?.generation ?? 0;
    if (g <= a.state.steppedDown) return;
    a.commit(this.d.core.stepDown(a.state));
    a.handover = { generation: g, to, force, ran: a.state.ran >= g, phase: 'killing', id: this.id(), sent: null };
  }

  private handoverTick(a: Agent, now: Stamp): void {
    const h = a.handover;
    if (h === null) return;
    if (h.phase === 'killing' && (this.d.stepDownOrder === 'ack-before-gone' || !a.worker.running)) {
      h.phase = 'releasing';
      h.sent = now;
      a.commit(this.d.core.releaseSent(a.state, now, a.settings));
      this.send(a.host, ARBITER, {
        kind: 'release',
        id: h.id,
        body: { host: a.host, generation: h.generation, handoverTo: h.to, force: h.force, ran: h.ran },
      });
    } else if (
      h.phase === 'releasing' &&
      h.sent !== null &&
      this.d.core.elapsed(h.sent, now) > a.settings.requestTimeoutSeconds
    ) {
      // No answer: the outcome is unknown; the agent's own records tell (lease-core `releasing`).
      a.handover = null;
    }
  }

  /** A copy of an acknowledgement this host sent earlier reaches the arbiter again (late, duplicated). */
  private replayAck(host: Host): void {
    const sent = this.acksSent.get(host) ?? [];
    if (sent.length === 0) return;
    this.send(host, ARBITER, { kind: 'stepped-down', id: this.id(), body: this.rng.pick(sent) });
  }

  // --------------------------------------------------------------------------- step-down (A7)

  /**
   * The agent owes an acknowledgement: its step-down is persisted (the commit that set ackDue),
   * the fence answers no, so the supervisor TERMs the worker; once the worker is gone the
   * acknowledgement goes out (retried twice on a timeout). A mutant may acknowledge earlier.
   */
  private stepDownTick(a: Agent, now: Stamp): void {
    const due = a.state.ackDue;
    if (a.job === null && due !== null) {
      a.job = {
        generation: due.generation,
        revision: due.revision,
        ran: due.ran,
        phase: 'killing',
        deferred: null,
        victim: null,
        ackId: 0,
        sent: null,
        tries: 0,
      };
      if (this.crashHere(a, 'persisted')) return;
    }
    const job = a.job;
    if (job === null) return;
    const gone = job.victim !== null ? job.victim.end !== Infinity : !a.worker.running;
    if (job.phase === 'killing' && (gone || this.d.stepDownOrder === 'ack-before-gone')) {
      if (this.d.stepDownOrder !== 'ack-before-gone' && this.crashHere(a, 'children-gone')) return;
      this.sendAck(a, job, now);
    } else if (
      job.phase === 'acking' &&
      job.sent !== null &&
      this.d.core.elapsed(job.sent, now) > a.settings.requestTimeoutSeconds
    ) {
      if (job.tries < 3) this.sendAck(a, job, now);
      else this.finishAck(a, job);
    }
  }

  private sendAck(a: Agent, job: StepDownJob, now: Stamp): void {
    job.phase = 'acking';
    job.sent = now;
    job.tries++;
    if (job.ackId === 0) job.ackId = this.id();
    const body: protocol.StepDownAck = {
      host: a.host,
      generation: job.generation,
      revision: job.revision,
      ran: job.ran,
    };
    const log = this.acksSent.get(a.host) ?? [];
    log.push(body);
    this.acksSent.set(a.host, log);
    this.send(a.host, ARBITER, { kind: 'stepped-down', id: job.ackId, body });
  }

  private finishAck(a: Agent, job: StepDownJob): void {
    a.job = null;
    const base = job.deferred ?? a.state;
    a.commit(this.d.core.acknowledged(base, job.generation));
  }

  /** crash-step-down: kill -9 of the agent alone (its worker runs on to its deadline). */
  private crashHere(a: Agent, phase: 'persisted' | 'children-gone'): boolean {
    const c = a.crashAt;
    if (c === null || c.phase !== phase || this.t > c.until) return false;
    a.crashAt = null;
    a.up = false;
    a.job = null;
    a.handover = null;
    this.reboots.push({ host: a.host, at: this.t + c.down });
    return true;
  }

  private probe(holder: Host): core.Probe {
    const machineUp = !this.dead.has(holder) && !this.asleep(holder);
    const roundTrip = !this.linkCut(ARBITER, holder) && !this.linkCut(holder, ARBITER);
    const agent = this.agents.get(holder);
    const agentServing = agent?.up === true && !agent.paused;
    return { ping: machineUp && roundTrip, health: machineUp && roundTrip && agentServing };
  }

  private arbiterTick(): void {
    if (!this.arbiterUp || this.arbiterPaused) return;
    const due = this.arbiterInbox.splice(0);
    for (const m of due) this.arbiterReceive(m);
    const c = this.clock(ARBITER);
    if (c.mono >= this.nextCheck) {
      this.nextCheck = c.mono + this.cfg.checkSeconds;
      const holder = this.db.lease.holder;
      const probe = holder === null ? null : this.probe(holder);
      const before = this.db.lease;
      const step = this.arbiterApply((s, ctx) => this.d.core.check(s, ctx, probe));
      this.probeHistory.push({ at: this.t, holder, reachable: probe !== null && (probe.ping || probe.health) });
      if (step.answer.promoted) this.auditPromotion(before, step.answer.holder as Host);
    }
  }

  /** S5, checked from the simulator's own records, not from lease-core's. */
  private auditPromotion(before: core.LeaseState, promotee: Host): void {
    this.promotions++;
    const n = this.cfg.promoteAfterChecks;
    const last = this.probeHistory.slice(-n);
    if (last.length < n || last.some((p) => p.reachable || p.holder !== before.holder)) {
      this.violate('S5', `promotion of ${promotee} without ${n} failed probes of ${before.holder}`);
    }
    const v = this.viewReports.get(promotee);
    if (
      v === undefined ||
      v.reachable ||
      v.target !== before.holder ||
      this.t - v.at > this.cfg.viewFreshSeconds / (1 - this.cfg.drift) + 1
    ) {
      this.violate('S5', `promotion of ${promotee} without its fresh view of ${before.holder} as unreachable`);
    }
    if (promotee === before.holder) this.violate('S5', `self-promotion of ${promotee}`);
  }

  // --------------------------------------------------------------------------- agents

  private agentTick(a: Agent): void {
    this.workerTick(a);
    if (!a.up || a.paused || this.asleep(a.host) || this.dead.has(a.host)) return;
    const core = this.d.core;
    const now = a.stamp();
    const s = a.settings;
    for (const m of a.inbox.splice(0)) this.agentReceive(a, m);
    this.stepDownTick(a, a.stamp());
    this.handoverTick(a, a.stamp());
    if (!a.up) return; // killed mid-step-down
    // ack-before-persist: the agent awaits its acknowledgement before it commits anything
    if (a.job?.deferred != null) {
      this.fenceWorker(a);
      return;
    }
    // request timeout: the answer, if any, will be discarded
    if (a.inflight !== null && core.elapsed(a.inflight.sent, now) > s.requestTimeoutSeconds) {
      a.inflight = null;
      a.commit(core.onArbiterFailure(a.state).state);
      this.startPeerRound(a);
    }
    if (a.round !== null && core.elapsed(a.round.sent, now) > s.requestTimeoutSeconds) this.finishPeerRound(a);
    if (a.inflight === null && now.mono >= a.nextHeartbeat) {
      a.nextHeartbeat = now.mono + this.cfg.heartbeatSeconds;
      a.nextRefresh = now.mono + this.cfg.refreshSeconds;
      this.sendHeartbeat(a, now);
    } else if (a.inflight === null && now.mono >= a.nextRefresh) {
      a.nextRefresh = now.mono + this.cfg.refreshSeconds;
      const id = this.id();
      a.inflight = { id, kind: 'read', sent: now };
      this.send(a.host, ARBITER, { kind: 'read', id });
    }
    a.commit(core.settle(a.state, a.stamp()));
    this.fenceWorker(a);
  }

  private sendHeartbeat(a: Agent, now: Stamp): void {
    const st = a.state;
    const id = this.id();
    a.inflight = { id, kind: 'heartbeat', sent: now };
    const holder = st.known?.holder ?? null;
    const body: { -readonly [K in keyof protocol.HeartbeatRequest]: protocol.HeartbeatRequest[K] } = {
      host: a.host,
      seenGeneration: st.seen,
      heartbeatSeconds: this.cfg.heartbeatSeconds,
      refreshSeconds: this.cfg.refreshSeconds,
      requestTimeoutSeconds: this.cfg.requestTimeoutSeconds,
    };
    if (holder === a.host) body.generation = st.known?.generation ?? 0;
    else if (holder !== null) {
      const machineUp = !this.dead.has(holder) && !this.asleep(holder);
      const rt = !this.linkCut(a.host, holder) && !this.linkCut(holder, a.host);
      const peer = this.agents.get(holder);
      const ping = machineUp && rt;
      const health = ping && peer?.up === true && !peer.paused;
      body.view = { target: holder, reachable: ping || health, ping, health };
    }
    if (st.gave !== null) {
      body.confirmation = {
        holder: st.gave.holder,
        generation: st.gave.generation,
        ageSeconds: Math.max(0, now.mono - st.gave.at.mono),
      };
    }
    this.send(a.host, ARBITER, { kind: 'heartbeat', id, body });
  }

  private agentReceive(a: Agent, m: Message): void {
    const core = this.d.core;
    const p = m.payload;
    if (p.kind === 'answer') {
      if (a.inflight === null || a.inflight.id !== p.id) return; // aborted request
      const sent = a.inflight.sent;
      a.inflight = null;
      const received = a.stamp();
      const summary = core.parseRecord(p.record);
      if (!summary.ok) throw new Error(`simulator produced an unparsable record: ${summary.problem}`);
      const step = core.onArbiterAnswer(
        a.state,
        { record: summary.value, confirms: p.confirms, hold: p.hold, stepDown: p.stepDown },
        this.d.sentStamp(sent, received),
        received,
        a.settings,
      );
      this.events.push(...step.events);
      const due = step.state.ackDue;
      if (this.d.stepDownOrder === 'ack-before-persist' && due !== null && due !== a.state.ackDue && a.job === null) {
        // The mutant: kill the children and acknowledge first, commit the step-down afterwards.
        const victim = a.worker.running
          ? (this.runs.findLast((r) => r.host === a.host && r.end === Infinity) ?? null)
          : null;
        a.job = {
          generation: due.generation,
          revision: due.revision,
          ran: due.ran,
          phase: 'killing',
          deferred: step.state,
          victim,
          ackId: 0,
          sent: null,
          tries: 0,
        };
        this.terminate(a);
        return;
      }
      a.commit(step.state);
      // A renewal behind a hold (S2.3) keeps a running holder alive only through its peers.
      if (p.confirms && p.hold !== null && p.hold > p.record.now) this.startPeerRound(a);
    } else if (p.kind === 'confirm') {
      const step = core.onConfirmRequest(a.state, p.body, a.stamp(), a.settings);
      this.events.push(...step.events);
      a.commit(step.state); // persisted before the answer leaves (S2.2)
      this.send(a.host, m.from, { kind: 'confirm-answer', id: p.id, answer: step.answer });
    } else if (p.kind === 'verdict') {
      const job = a.job;
      const h = a.handover;
      if (job !== null && job.phase === 'acking' && job.ackId === p.id) this.finishAck(a, job);
      else if (h !== null && h.phase === 'releasing' && h.id === p.id) {
        a.handover = null;
        if (!p.ok) a.commit(core.resume(a.state)); // refused: the lease is still ours
      }
    } else if (p.kind === 'confirm-answer') {
      if (a.round === null || a.round.id !== p.id) return;
      a.round.results.set(m.from, {
        peer: m.from,
        answered: true,
        confirmed: p.answer.confirmed,
        generation: p.answer.generation,
      });
      if (a.round.results.size === this.cfg.candidates.length - 1) this.finishPeerRound(a);
    }
  }

  private startPeerRound(a: Agent): void {
    const known = a.state.known;
    if (!this.d.core.asksPeers(a.state, { kind: 'no-answer' }) || known === null || a.round !== null) return;
    const id = this.id();
    a.round = { id, sent: a.stamp(), results: new Map() };
    for (const peer of this.cfg.candidates) {
      if (peer !== a.host)
        this.send(a.host, peer, {
          kind: 'confirm',
          id,
          body: {
            host: a.host,
            generation: known.generation,
            ttlSeconds: known.ttlSeconds,
            safetyMarginSeconds: known.safetyMarginSeconds,
          },
        });
    }
  }

  private finishPeerRound(a: Agent): void {
    const round = a.round;
    if (round === null) return;
    a.round = null;
    const peers = this.cfg.candidates.filter((p) => p !== a.host);
    const results = peers.map((p) => round.results.get(p) ?? { peer: p, answered: false });
    const received = a.stamp();
    const step = this.d.core.onPeerResults(
      a.state,
      results,
      peers,
      this.d.sentStamp(round.sent, received),
      received,
      a.settings,
    );
    this.events.push(...step.events);
    a.commit(step.state);
  }

  /** The `hq fence run` supervisor: asks the fence each tick it can, else runs to its deadline. */
  private fenceWorker(a: Agent): void {
    const now = a.stamp();
    const f = this.d.core.fence(a.state, 'cron', now, a.settings);
    const w = a.worker;
    if (f.run) {
      if (w.running && w.stopAt !== null) return; // still exiting after SIGTERM; a new one starts after
      if (!w.running || w.generation !== f.generation) {
        if (w.running) this.endRun(a.host);
        this.startRun(a.host, f.generation);
      }
      w.running = true;
      w.generation = f.generation;
      w.at = now;
      w.validFor = f.validForSeconds ?? 0;
      w.stopAt = null;
    } else if (w.running) {
      this.terminate(a);
    }
  }

  /** SIGTERM to the worker: it exits within GRACE (its deadline still holds, see workerTick). */
  private terminate(a: Agent): void {
    const w = a.worker;
    if (!w.running || w.stopAt !== null) return;
    w.stopAt = this.t + this.rng.next() * GRACE;
    if (w.stopAt <= this.t) this.stopWorker(a);
  }

  private stopWorker(a: Agent): void {
    a.worker.running = false;
    a.worker.stopAt = null;
    this.endRun(a.host);
  }

  /**
   * The supervisor kills the child when the validity it was last told about ends, measured on
   * the same clocks as the agent's (S3) — also while the agent itself is paused or gone.
   */
  private workerTick(a: Agent): void {
    const w = a.worker;
    if (!w.running || w.at === null) return;
    if (this.d.core.elapsed(w.at, a.stamp()) >= w.validFor || (w.stopAt !== null && this.t >= w.stopAt))
      this.stopWorker(a);
  }

  private startRun(host: Host, generation: number): void {
    this.runs.push({ host, generation, start: this.t, end: Infinity });
    for (const m of this.moves) if (m.to === host && m.generation === generation && m.ranAt === null) m.ranAt = this.t;
    if (generation < this.maxRunGeneration)
      this.violate('S1', `${host} runs generation ${generation} after ${this.maxRunGeneration} ran`);
    this.maxRunGeneration = Math.max(this.maxRunGeneration, generation);
    for (const r of this.runs) {
      if (r.end === Infinity && r.host !== host)
        this.violate('S2', `${host} (generation ${generation}) runs while ${r.host} (generation ${r.generation}) runs`);
    }
  }

  private endRun(host: Host): void {
    for (const r of this.runs) if (r.host === host && r.end === Infinity) r.end = this.t;
  }

  // --------------------------------------------------------------------------- operator

  /** The person who runs `hq lease acquire --wait` on the first candidate when no one holds. */
  private operatorTick(): void {
    if (!this.operatorWanted || this.t < this.operatorNext) return;
    const who = this.cfg.candidates.find((c) => !this.dead.has(c)) as Host;
    const a = this.agents.get(who) as Agent;
    if (this.operatorInflight !== null && this.t - this.operatorInflight.sentAt < this.cfg.requestTimeoutSeconds)
      return;
    const id = this.id();
    this.operatorInflight = { id, sentAt: this.t };
    this.operatorNext = this.t + 2;
    this.send(who, ARBITER, {
      kind: 'acquire',
      id,
      body: { host: who, seenGeneration: a.disk.seen, requestTimeoutSeconds: this.cfg.requestTimeoutSeconds },
      operator: true,
    });
  }

  /** Asks the operator to acquire again (after the faults, if no one holds a live lease). */
  wantOperator(): void {
    this.operatorWanted = true;
    this.operatorNext = this.t;
  }

  // --------------------------------------------------------------------------- the loop

  private deliver(): void {
    const due: Message[] = [];
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const m = this.messages[i] as Message;
      if (m.at <= this.t) {
        due.push(m);
        this.messages.splice(i, 1);
      }
    }
    due.sort((x, y) => x.at - y.at);
    for (const m of due) {
      if (m.payload.kind === 'answer' && m.payload.id < 0) {
        // the operator's CLI: it only reports; the agent learns at its next heartbeat
        if (m.payload.confirms) this.operatorWanted = false;
        this.operatorInflight = null;
        continue;
      }
      if (m.to === ARBITER) {
        if (this.arbiterUp) this.arbiterInbox.push(m);
      } else {
        const a = this.agents.get(m.to) as Agent;
        if (a.up && !this.dead.has(m.to)) a.inbox.push(m);
      }
    }
  }

  step(): void {
    this.t += DT;
    for (const c of this.clocks.values()) c.advance(DT);
    this.applyFaults();
    for (let i = this.reboots.length - 1; i >= 0; i--) {
      const r = this.reboots[i] as { host: Host; at: number };
      if (this.t < r.at) continue;
      this.reboots.splice(i, 1);
      if (!this.dead.has(r.host)) (this.agents.get(r.host) as Agent).boot();
    }
    this.deliver();
    this.operatorTick();
    this.arbiterTick();
    for (const a of this.agents.values()) this.agentTick(a);
  }

  runUntil(t: number): void {
    while (this.t < t) this.step();
  }

  /** Switches a machine off for good (its worker stops with it). */
  kill(host: Host): void {
    this.dead.add(host);
    const a = this.agents.get(host) as Agent;
    a.up = false;
    if (a.worker.running) this.stopWorker(a);
  }

  runningHost(): RunRecord | null {
    return this.runs.find((r) => r.end === Infinity) ?? null;
  }

  violate(property: Violation['property'], detail: string): void {
    this.violations.push({ property, at: Math.round(this.t * 100) / 100, detail });
  }

  hasFaultActive(): boolean {
    return this.faults.some((f) => this.t >= f.start && this.t < f.start + f.length);
  }
}
