/**
 * The agent's state and its disk. Every change follows one path:
 *   a lease-core decision on the newest state → persist `persisted(next)` (+ seen-generation),
 *   fsync'd → swap the in-memory state → log its events.
 * So nothing the agent answers (a fence, a peer confirmation) can get ahead of its disk (S2.2).
 * Decisions are serialized (`commit`): a peer confirmation arriving during a heartbeat decides
 * on the newest state, never on a copy the heartbeat took before it sent.
 */
import {
  initialAgent,
  persisted,
  type AgentSettings,
  type AgentState,
  type AgentStep,
  type GivenConfirmation,
  type LeaseEvent,
  type Persisted,
} from '@hq/lease-core';
import type { StampClock as Clock } from '@hq/runtime/clock';
import { loadPersisted, loadSeen, statePaths, writePersisted, writeSeen, type StatePaths } from '../state.js';
import type { Log } from './observe.js';

export interface StoreOptions {
  readonly stateDir: string;
  readonly settings: AgentSettings;
  readonly clock: Clock;
  readonly log: Log;
}

export class AgentStore {
  private current: AgentState;
  private lastJson: string | null = null;
  private lastSeenWritten: number;
  private commits: Promise<unknown> = Promise.resolve();
  private readonly watchers: ((state: AgentState) => void)[] = [];

  private constructor(
    readonly paths: StatePaths,
    private readonly clock: Clock,
    private readonly log: Log,
    state: AgentState,
    seenOnDisk: number,
  ) {
    this.current = state;
    this.lastSeenWritten = seenOnDisk;
  }

  /**
   * Reads `local.json` and `seen-generation` and builds the start state, then writes it at once
   * (it replaces a refused file and keeps the flags on disk). A corrupt or insecure file is
   * refused and logged; the agent then fails closed: the start guard applies as if a
   * confirmation had been given (S2.2), never a crash. `given` is the confirmation local.json
   * kept, dated no earlier than this start (reported with heartbeats).
   */
  static async open(o: StoreOptions): Promise<{ store: AgentStore; given: GivenConfirmation | null }> {
    const paths = statePaths(o.stateDir);
    const started = o.clock.now();
    const local = await loadPersisted(paths.local);
    const seenFile = await loadSeen(paths.seen);
    let fromDisk: Persisted | null = null;
    let failClosed = false;
    if (local.kind === 'ok') fromDisk = local.value;
    else if (local.kind === 'refused') {
      failClosed = true;
      o.log.error(
        { category: 'hq.lease', event: 'state-refused', file: paths.local, problem: local.problem },
        'state file refused, failing closed',
      );
    }
    let seen = 0;
    if (seenFile.kind === 'ok') seen = seenFile.value;
    else if (seenFile.kind === 'refused') {
      failClosed = true;
      o.log.error(
        { category: 'hq.lease', event: 'state-refused', file: paths.seen, problem: seenFile.problem },
        'state file refused, failing closed',
      );
    }
    if (failClosed) {
      // Behave as if a confirmation and a lock-delay were on record. The lease timing is the
      // arbiter's (S6): what the file kept, else the first record's (lease-core).
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
    const state = initialAgent(o.settings, started, seen, fromDisk);
    const gave = fromDisk?.gaveConfirmation ?? null;
    const given = gave === null ? null : { holder: gave.holder, generation: gave.generation, atMono: started.mono };
    const store = new AgentStore(paths, o.clock, o.log, state, seenFile.kind === 'ok' ? seenFile.value : -1);
    if (state.startGuardUntilMono !== null) {
      o.log.warn(
        {
          category: 'hq.lease',
          event: 'start-guard',
          host: o.settings.host,
          seconds: Number.isFinite(state.startGuardUntilMono)
            ? state.startGuardUntilMono - started.mono
            : 'until the first record states the lease timing',
        },
        'a confirmation or lock-delay was on record: nothing runs before the start guard ends',
      );
    }
    await store.commit((s) => ({ state: s, events: [] }));
    return { store, given };
  }

  /** The current state (memory). */
  get state(): AgentState {
    return this.current;
  }

  /**
   * Memory only: the settled copy a fence query made (lease-core `queryFence`). Settling only
   * drops grants and flags, so the disk stays the more cautious copy until the next commit.
   */
  keepSettled(state: AgentState): void {
    this.current = state;
  }

  /** decide → persist → swap → log, one at a time. */
  commit(decide: (s: AgentState) => AgentStep): Promise<AgentStep> {
    const run = async (): Promise<AgentStep> => {
      const step = decide(this.current);
      await this.persist(step.state);
      this.current = step.state;
      for (const e of step.events) this.logEvent(e);
      for (const w of this.watchers) w(step.state);
      return step;
    };
    const p = this.commits.then(run, run);
    this.commits = p.catch(() => undefined);
    return p;
  }

  /** Called with every committed state, after it is on disk (the step-down watches for `ackDue`). */
  onCommit(watch: (state: AgentState) => void): void {
    this.watchers.push(watch);
  }

  /** Resolves when every commit asked so far is done. */
  async drain(): Promise<void> {
    await this.commits.catch(() => undefined);
  }

  private async persist(state: AgentState): Promise<void> {
    const p = persisted(state, this.clock.now());
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
    this.log.info({ ...e.data, category: e.category, event: e.event, host: e.host }, e.event);
  }
}
