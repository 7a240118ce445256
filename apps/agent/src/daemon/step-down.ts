/**
 * The step-down, in the order lease-core A7 asks for:
 *  1. the decision is persisted (fsync) before anything else — the store's commit of the state
 *     that names it (a lost generation: `ackDue`; a release: `stepDown`); from then on the fence
 *     answers no for that generation;
 *  2. every fenced child of it the agent knows of is ended (runs.ts: TERM, KILL after the grace,
 *     gone);
 *  3. only then the arbiter hears of it: the acknowledgement `{host, generation, revision}`
 *     (`POST /v1/lease/stepped-down`) for a lost generation, the release for a release.
 * A crash between 1 and 3 sends nothing: the arbiter's lock-delay runs out as it would have.
 */
import {
  acknowledged,
  releaseSent,
  resume,
  stepDown,
  unvouched,
  type AgentSettings,
  type AgentState,
  type AckDue,
} from '@hq/lease-core';
import type { StepDownRefusal } from '@hq/protocol';
import type { StampClock as Clock } from '@hq/runtime/clock';
import type { HttpResult } from '@hq/runtime/http';
import type { ArbiterLink } from './arbiter-link.js';
import type { AgentObserver, Log } from './observe.js';
import type { Peers } from './peers.js';
import type { Runs } from './runs.js';
import type { AgentStore } from './store.js';

export interface StepDownOptions {
  readonly store: AgentStore;
  readonly runs: Runs;
  readonly link: ArbiterLink;
  readonly peers: Peers;
  readonly settings: AgentSettings;
  readonly clock: Clock;
  readonly log: Log;
  readonly observer?: AgentObserver | undefined;
}

/** How often an acknowledgement is tried when the arbiter does not answer (it asks again at the next heartbeat). */
const ACK_TRIES = 2;

export interface ReleaseReady {
  readonly steppedDown: number;
  /** False when a child of that generation may still run (see `Runs.end`). */
  readonly childrenGone: boolean;
  /** This life of the agent ran that generation (lease-core `AgentState.ran`). */
  readonly ran: boolean;
}

export class StepDowns {
  private working: Promise<void> | null = null;

  constructor(private readonly o: StepDownOptions) {
    o.store.onCommit((s) => this.noticed(s));
  }

  /** Resolves when no acknowledgement is under way (tests, stop). */
  async idle(): Promise<void> {
    while (this.working !== null) await this.working;
  }

  /** After every commit: an acknowledgement is owed and none is under way → end the children, then send it. */
  private noticed(state: AgentState): void {
    if (state.ackDue === null || this.working !== null) return;
    this.working = this.acknowledgeAll()
      .catch((err: unknown) =>
        this.o.log.error({ err, category: 'hq.lease', event: 'step-down-failed' }, 'step-down failed'),
      )
      .finally(() => {
        this.working = null;
      });
  }

  private async acknowledgeAll(): Promise<void> {
    for (let due = this.o.store.state.ackDue; due !== null; due = this.o.store.state.ackDue)
      await this.acknowledgeOne(due);
  }

  private async acknowledgeOne(due: AckDue): Promise<void> {
    const host = this.o.settings.host;
    const ended = await this.o.runs.end(due.generation);
    if (!ended.gone) {
      this.o.log.warn(
        {
          category: 'hq.lease',
          event: 'step-down-unacknowledged',
          host,
          generation: due.generation,
          problem: ended.problem,
        },
        'step-down-unacknowledged',
      );
      this.o.observer?.stepDown?.('unacknowledged');
      // Never for this generation, even if asked again: a second look would find no child it knows.
      await this.o.store.commit((s) => ({ state: unvouched(s, due.generation), events: [] }));
      return;
    }
    let res: HttpResult | null = null;
    for (let i = 0; i < ACK_TRIES; i++) {
      res = await this.o.link.acknowledge({ host, generation: due.generation, revision: due.revision, ran: due.ran });
      if (res.kind === 'answer' && res.status < 500) break;
    }
    const b =
      res !== null && res.kind === 'answer' && res.status === 200
        ? (res.body as { accepted?: unknown; reason?: unknown; savedSeconds?: unknown } | null)
        : null;
    const data = { host, generation: due.generation, revision: due.revision, children: ended.ended };
    if (b === null) {
      const problem = res === null ? 'not sent' : res.kind === 'unreachable' ? res.problem : `HTTP ${res.status}`;
      this.o.log.warn(
        { category: 'hq.lease', event: 'step-down-unacknowledged', ...data, problem },
        'step-down-unacknowledged',
      );
      this.o.observer?.stepDown?.('unreachable');
    } else if (b.accepted === true) {
      this.o.log.info(
        { category: 'hq.lease', event: 'step-down-acknowledged', ...data, savedSeconds: b.savedSeconds ?? null },
        'step-down-acknowledged',
      );
      this.o.observer?.stepDown?.('acknowledged');
    } else {
      // Late, duplicate, …: the arbiter needed nothing more (the lock-delay is over, or waits for another).
      this.o.log.info(
        { category: 'hq.lease', event: 'step-down-acknowledged', ...data, refused: b.reason as StepDownRefusal },
        'step-down-acknowledged',
      );
      this.o.observer?.stepDown?.('refused');
    }
    await this.o.store.commit((s) => ({ state: acknowledged(s, due.generation), events: [] }));
  }

  /**
   * `POST /v1/step-down`, before a release or handover: 1. persisted, 2. the children of that
   * generation ended; then the release may leave (it must within one request timeout of this).
   */
  async forRelease(): Promise<ReleaseReady> {
    await this.o.store.commit((s) => ({ state: stepDown(s), events: [] }));
    const g = this.o.store.state.steppedDown;
    this.o.log.info(
      { category: 'hq.lease', event: 'step-down', host: this.o.settings.host, generation: g, via: 'release' },
      'step-down',
    );
    const ended = await this.o.runs.end(g);
    if (!ended.gone)
      this.o.log.warn(
        { category: 'hq.lease', event: 'step-down-children-unknown', generation: g, problem: ended.problem },
        'step-down-children-unknown',
      );
    await this.o.store.commit((s) => ({ state: releaseSent(s, this.o.clock.now(), this.o.settings), events: [] }));
    return { steppedDown: g, childrenGone: ended.gone, ran: this.o.store.state.ran >= g && g > 0 };
  }

  /** Undoes a release step-down whose release the arbiter refused. */
  async resume(): Promise<void> {
    await this.o.store.commit((s) => ({ state: resume(s), events: [] }));
    this.o.log.info(
      { category: 'hq.lease', event: 'resume', host: this.o.settings.host },
      'resumed after a refused release',
    );
  }

  /**
   * `handoverOnStop`: the holder, stopping, hands the lease to the first standby (in the
   * arbiter's promotion order) it will take — the arbiter refuses one not heard from recently
   * (`target-silent`), and the next is tried. Nothing when this host does not hold the lease, or
   * when a child may still run (a handover has no lock-delay). Returns the target, or null.
   */
  async handOverOnStop(): Promise<string | null> {
    const host = this.o.settings.host;
    const s = this.o.store.state;
    const k = s.known;
    if (k === null || k.holder !== host || k.released || k.floorPending || k.generation <= s.steppedDown) return null;
    const generation = k.generation;
    const ready = await this.forRelease();
    if (!ready.childrenGone) {
      await this.resume();
      this.o.log.warn(
        { category: 'hq.lease', event: 'handover-skipped', host, generation, reason: 'children-unknown' },
        'handover-skipped',
      );
      return null;
    }
    let refusals = 0;
    const targets = this.o.peers.hosts().filter((h) => h !== host);
    for (const to of targets) {
      const r = await this.o.link.release({ host, generation, handoverTo: to });
      if (r.kind === 'answer' && r.status === 200) {
        this.o.log.info(
          { category: 'hq.lease', event: 'handed-over', host, generation, to, via: 'handoverOnStop' },
          'handed-over',
        );
        return to;
      }
      const reason = r.kind === 'answer' ? (r.body as { reason?: unknown } | null)?.reason : null;
      this.o.log.warn(
        {
          category: 'hq.lease',
          event: 'handover-refused',
          host,
          generation,
          to,
          status: r.kind === 'answer' ? r.status : null,
          reason: reason ?? null,
        },
        'handover-refused',
      );
      // Unknown outcome (no answer): the agent's own records settle it (lease-core `releasing`).
      if (r.kind !== 'answer') return null;
      refusals++;
      if (reason !== 'target-silent') break;
    }
    if (refusals > 0 || targets.length === 0) await this.resume();
    return null;
  }
}
