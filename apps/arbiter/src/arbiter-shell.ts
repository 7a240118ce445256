/**
 * The thin shell around lease-core: read → decide → write (one transaction) → tell.
 * `Arbiter.decide` is the only way a lease decision reaches the store. It owns the in-memory
 * `Boot` of this life (S2.3/S2.4), replaced by the one a decision returns, after commit. What the
 * arbiter remembers of its hosts beside the record is `HostNotes` (host-notes.ts), held here.
 */
import type { ArbiterSettings, ArbiterState, Boot, Context, Step } from '@hq/lease-core';
import type { LeaseRecord } from '@hq/protocol';
import {
  atRestart,
  boundRefusal,
  GENERATION_LIMITS,
  newBoot,
  refusalLine,
  renewHold,
  recordOf,
  type GenerationLimits,
  type GenerationRefusal,
} from '@hq/lease-core';
import type { ArbiterConfig } from './config.js';
import { GroupCommitQueue } from './group-commit.js';
import type { SecondsClock } from '@hq/runtime/clock';
import type { EventSink } from './events.js';
import type { Metrics } from './metrics.js';
import { ERRORS } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import {
  CasError,
  NotElectedError,
  type EventInput,
  type EventLog,
  type EventRow,
  type LeaseRecords,
  type Outcome,
  type TokenStore,
} from './store/store.js';
import { tokenStands, type Principal } from './auth.js';
import { andThen, isPromise, type Awaitable } from './awaitable.js';
import { HostNotes } from './host-notes.js';
import { ifMatchAccepts, ifMatchStale, PreconditionFailed } from './if-match.js';

/**
 * A decision whose step would break the generation bounds (lease-core generation-bound.ts): a
 * report that jumps too far, or a grant above the ceiling. Nothing of it was written; the request
 * is answered 409 with the one line, and the shell logs, counts and remembers it.
 */
export class GenerationRefused extends HttpError {
  constructor(
    readonly refusal: GenerationRefusal,
    readonly host: string | null,
  ) {
    super(refusal.kind === 'ceiling' ? ERRORS.GENERATION_CEILING : ERRORS.GENERATION_JUMP, refusalLine(refusal, host));
    this.name = 'GenerationRefused';
  }
}

/** The op of the admin's acceptance: its step raises the floor past the jump bound on purpose. */
export const ACCEPT_GENERATION_OP = 'accept-generation';

export interface Decided<A> {
  readonly answer: A;
  readonly state: ArbiterState;
  readonly now: number;
  /** The context after commit (with the new boot), for `hold` and the record. */
  readonly ctx: Context;
  readonly events: readonly EventRow[];
}

export interface ArbiterDeps {
  readonly config: ArbiterConfig;
  /** The record CAS for decisions, the event log for shell-side events (`note`), the tokens a commit confirms. */
  readonly store: LeaseRecords & EventLog & Pick<TokenStore, 'findToken' | 'knownToken'>;
  readonly clock: SecondsClock;
  readonly sink: EventSink;
  readonly metrics: Metrics;
  /** Store etcd: true only while this arbiter is the elected one and its takeover is done (leadership.ts L1). */
  readonly mayDecide?: () => boolean;
  /** The generation bounds; the constants of lease-core unless a test widens them. */
  readonly limits?: GenerationLimits;
}

/** A decision waiting for its transaction. */
interface Pending {
  readonly op: string;
  /** The sha256 of a token let in from memory, which the commit confirms (`Principal.confirm`). */
  readonly confirm: string | undefined;
  readonly ifMatch: string | undefined;
  readonly decide: (state: ArbiterState, ctx: Context) => Step<unknown>;
  readonly outcome: (a: unknown) => string;
  /** Whose report the decision takes (the body's host): named when the report is refused. */
  readonly host: string | null;
}

/** A request whose token no longer stands when its decision commits: what `authenticate` answers. */
const unauthorized = (): HttpError => new HttpError(ERRORS.UNAUTHORIZED, 'the token is not valid');

/** How often a batch is decided again after a lost compare-and-swap before its requests fail. */
const CAS_RETRIES = 3;

type Ran = { readonly ok: true; readonly decided: Decided<unknown> } | { readonly ok: false; readonly error: unknown };

export function settingsOf(config: ArbiterConfig): ArbiterSettings {
  return {
    arbiter: config.arbiter,
    candidates: config.candidates,
    standby: config.standby,
    ttlSeconds: config.ttlSeconds,
    safetyMarginSeconds: config.safetyMarginSeconds,
    promoteAfterChecks: config.promoteAfterChecks,
    viewFreshSeconds: config.viewFreshSeconds,
  };
}

export class Arbiter {
  readonly settings: ArbiterSettings;
  private bootState: Boot;

  /** What the arbiter remembers of its hosts beside the record (versions, paths, refusals). */
  readonly notes: HostNotes;

  constructor(readonly deps: ArbiterDeps) {
    this.settings = settingsOf(deps.config);
    this.bootState = newBoot(deps.clock.now());
    const { config, clock, sink } = deps;
    this.notes = new HostNotes({ config, clock, sink, tell: (events) => this.note(events) });
  }

  get limits(): GenerationLimits {
    return this.deps.limits ?? GENERATION_LIMITS;
  }

  /**
   * A decision's error on its way to the answer: a generation refusal is noted, counted and
   * written as an event (logged at warn, hooked) before the 409 goes out. Returns the error.
   */
  private async noteGenerationRefused(err: unknown): Promise<unknown> {
    if (!(err instanceof GenerationRefused)) return err;
    const r = err.refusal;
    const generation = r.kind === 'ceiling' ? r.generation : r.reported;
    this.notes.noteGenerationRefusal({
      at: this.now(),
      host: err.host,
      kind: r.kind,
      generation,
      message: err.message,
    });
    this.deps.metrics.generationRefused.inc({ reason: r.kind });
    const data: EventInput['data'] =
      r.kind === 'ceiling'
        ? { reason: r.kind, generation: r.generation, ceiling: r.ceiling }
        : { reason: r.kind, reported: r.reported, known: r.known, limit: r.limit };
    await this.note([
      {
        at: this.now(),
        category: 'control',
        event: 'generation-refused',
        host: err.host,
        data: { ...data, message: err.message },
      },
    ]).catch(() => undefined);
    return err;
  }

  get boot(): Boot {
    return this.bootState;
  }

  get config(): ArbiterConfig {
    return this.deps.config;
  }

  now(): number {
    return this.deps.clock.now();
  }

  context(now: number = this.now()): Context {
    return { now, settings: this.settings, boot: this.bootState };
  }

  /** The last committed state (a value with SQLite, a promise with etcd): for answers, never for a decision. */
  read(): Awaitable<ArbiterState> {
    return this.deps.store.read();
  }

  /** The record as answers show it (lease-core `recordOf`). */
  record(state: ArbiterState, now: number = this.now()): LeaseRecord {
    return recordOf(state, this.context(now));
  }

  /** The API record of the last committed state. */
  async currentRecord(): Promise<LeaseRecord> {
    return this.record(await this.read());
  }

  /** S2.3 `hold` for an answer, from the state and boot after commit. */
  hold(d: Decided<unknown>): number | null {
    return renewHold(d.ctx, d.ctx.boot, d.state);
  }

  /**
   * One decision, now. `decide` gets the state read inside the transaction; `ifMatch` is checked
   * against that same state (412 when stale). Events are written with the state, then logged
   * and hooked after commit; the new boot replaces the old one after commit too.
   */
  async decide<A>(
    op: string,
    ifMatch: string | undefined,
    decide: (state: ArbiterState, ctx: Context) => Step<A>,
    outcome: (a: A) => string,
  ): Promise<Decided<A>> {
    const [result] = await this.run([{ op, confirm: undefined, ifMatch, decide, outcome, host: null }] as Pending[]);
    if (!(result as Ran).ok) throw await this.noteGenerationRefused((result as { error: unknown }).error);
    return (result as { decided: Decided<A> }).decided;
  }

  /**
   * The same decision through group commit: decisions submitted in one turn of the event loop
   * (requests read from many sockets at once) share one transaction and so one fsync, each
   * deciding on the state the one before it left. An answer still goes out only after its
   * decision is committed to disk (S4). Used by the request routes; checks decide directly.
   * `by` is the request's principal: a token it was let in on from memory (`confirm`) is
   * confirmed by the group's commit, and the decision refuses itself (401) when the token no
   * longer stands there.
   */
  submit<A>(
    op: string,
    by: Principal | null,
    ifMatch: string | undefined,
    decide: (state: ArbiterState, ctx: Context) => Step<A>,
    outcome: (a: A) => string,
    host: string | null = null,
  ): Promise<Decided<A>> {
    const queue = (): Promise<Decided<A>> =>
      (
        this.group.submit({ op, confirm: by?.confirm, ifMatch, decide, outcome, host } as Pending) as Promise<
          Decided<A>
        >
      ).catch(async (err: unknown) => {
        throw await this.noteGenerationRefused(err);
      });
    if (ifMatch === undefined) return queue();
    // A stale If-Match against the committed revision (the cache: no write lock) loses now;
    // this is what serial decisions would answer, as the queued ones only raise the revision.
    return Promise.resolve(
      andThen(this.read(), (state) => {
        const revision = state.lease.revision;
        if (!ifMatchStale(ifMatch, revision)) return queue();
        const hash = by?.confirm;
        if (hash === undefined) return Promise.reject(new PreconditionFailed(revision));
        // A token from memory is confirmed before this refusal too: a revoked one is 401, not 412.
        return Promise.resolve(this.deps.store.findToken(hash)).then((row) => {
          throw tokenStands(row, hash) ? new PreconditionFailed(revision) : unauthorized();
        });
      }),
    );
  }

  private readonly group = new GroupCommitQueue<Pending, Decided<unknown>>((batch) =>
    andThen(this.run(batch), (ran) =>
      ran.map((r) => (r.ok ? { ok: true, value: r.decided } : { ok: false, error: r.error })),
    ),
  );

  /** Runs in flight with a promise (etcd); a new run waits for them: two never decide at once. */
  private inFlight = 0;
  private tail: Promise<unknown> = Promise.resolve();

  /**
   * Decides `batch` in one transaction, after every run before it (a SQLite run is synchronous,
   * so it never waits; an etcd run is a chain of promises, and a check's decision must not
   * interleave with a group's). A lost compare-and-swap — another writer moved the record
   * between our read and our write — decides the batch again on the new state, a few times.
   */
  private run(batch: readonly Pending[]): Awaitable<readonly Ran[]> {
    const go = (): Awaitable<readonly Ran[]> => this.runAgainOnCas(batch, CAS_RETRIES);
    if (this.inFlight === 0) {
      const r = go();
      return isPromise(r) ? this.track(r) : r;
    }
    return this.track(this.tail.then(go));
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inFlight++;
    const done = p.finally(() => this.inFlight--);
    this.tail = done.catch(() => undefined);
    return done;
  }

  private runAgainOnCas(batch: readonly Pending[], left: number): Awaitable<readonly Ran[]> {
    let r: Awaitable<readonly Ran[]>;
    try {
      r = this.runOnce(batch);
    } catch (err) {
      if (err instanceof CasError && left > 0) return this.runAgainOnCas(batch, left - 1);
      throw err;
    }
    if (!isPromise(r)) return r;
    return r.catch((err: unknown) => {
      if (err instanceof CasError && left > 0) return this.runAgainOnCas(batch, left - 1);
      throw err;
    });
  }

  /** One transaction for `batch`; boot, metrics, log and hooks after its commit. */
  private runOnce(batch: readonly Pending[]): Awaitable<readonly Ran[]> {
    if (this.deps.mayDecide?.() === false) throw new NotElectedError();
    const now = this.now();
    const startBoot = this.bootState;
    let boot = startBoot;
    const steps: Array<Step<unknown> | undefined> = [];
    const boots: Boot[] = [];
    const store = this.deps.store;
    const tokens = batch.flatMap((p) => (p.confirm === undefined ? [] : [p.confirm]));
    const committed = store.transactAll(
      batch.map((p, i) => (state: ArbiterState) => {
        // The row as the commit confirms it (read with the state, or compared in the write).
        if (p.confirm !== undefined && !tokenStands(store.knownToken?.(p.confirm), p.confirm)) throw unauthorized();
        if (p.ifMatch !== undefined && !ifMatchAccepts(p.ifMatch, state.lease.revision))
          throw new PreconditionFailed(state.lease.revision);
        const s = p.decide(state, { now, settings: this.settings, boot });
        // Before the step counts for anything (its boot, its write): the generation bounds.
        const bound = p.op === ACCEPT_GENERATION_OP ? null : boundRefusal(state, s.next, this.limits);
        if (bound !== null) throw new GenerationRefused(bound, bound.kind === 'ceiling' ? s.next.lease.holder : p.host);
        steps[i] = s;
        if (s.boot.startAt === boot.startAt) boot = s.boot;
        boots[i] = boot;
        const events: EventInput[] = s.events.map((e) => ({
          at: now,
          category: e.category,
          event: e.event,
          host: e.host,
          data: e.data,
        }));
        return { next: s.next, events, result: s.answer };
      }),
      tokens,
    );
    return andThen(committed, (outcomes) => this.told(batch, outcomes, steps, boots, startBoot, boot, now));
  }

  /**
   * After the commit: the new boot, then metrics, log and hooks, and each decision's answer.
   * The boot is replaced only if it is still the one the run started from: a takeover while an
   * etcd run was in flight made a new boot (L3), which an older run must not put back.
   */
  private told(
    batch: readonly Pending[],
    outcomes: readonly Outcome[],
    steps: ReadonlyArray<Step<unknown> | undefined>,
    boots: readonly Boot[],
    startBoot: Boot,
    boot: Boot,
    now: number,
  ): readonly Ran[] {
    if (this.bootState === startBoot) this.bootState = boot;
    // The operations counter moves once per op and outcome of the group (the same totals as one
    // `inc` per decision, before any answer goes out; prom-client hashes the labels per call).
    const counted = new Map<string, Map<string, number>>();
    const ran = outcomes.map((o, i): Ran => {
      if (!o.ok) return { ok: false, error: o.error };
      const p = batch[i] as Pending;
      const step = steps[i] as Step<unknown>;
      const outcome = p.outcome(step.answer);
      let byOutcome = counted.get(p.op);
      if (byOutcome === undefined) {
        byOutcome = new Map();
        counted.set(p.op, byOutcome);
      }
      byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
      for (const e of o.committed.events) {
        // A promotion is the arbiter's own move; a forced transfer is an operator's (counted per op).
        if (e.event === 'promoted' && e.data['via'] !== 'transfer') this.deps.metrics.promotions.inc();
        const saved = e.data['savedSeconds'];
        if (e.event === 'stepped-down' && typeof saved === 'number') this.deps.metrics.stepDownSaved.inc(saved);
      }
      this.deps.sink.emit(o.committed.events);
      // The context after this decision (its boot), for `hold` and the record.
      const ctx: Context = { now, settings: this.settings, boot: boots[i] as Boot };
      return {
        ok: true,
        decided: { answer: step.answer, state: o.committed.state, now, ctx, events: o.committed.events },
      };
    });
    for (const [op, byOutcome] of counted)
      for (const [outcome, n] of byOutcome) this.deps.metrics.operations.inc({ op, outcome }, n);
    return ran;
  }

  /**
   * Once at daemon start, before the first decision: lease-core `atRestart` clamps the stored
   * times of the previous life to this start (its clock may have jumped while we were down).
   */
  async restart(): Promise<void> {
    // A lost compare-and-swap (another writer since this store's last commit: the arbiter
    // elected before a takeover, a one-shot command) decides again on the state it returned.
    for (let left = CAS_RETRIES; ; left--) {
      const ctx = this.context();
      try {
        await this.deps.store.transact((state) => ({ next: atRestart(state, ctx), events: [], result: null }));
        return;
      } catch (err) {
        if (!(err instanceof CasError) || left === 0) throw err;
      }
    }
  }

  /**
   * Store etcd: this arbiter was just elected. For the protocol a takeover is a restart with the
   * state kept (leadership.ts L3): a new boot now — S2.3's start wait counts from the takeover —
   * then `restart`, before the first decision of the term.
   */
  async takeOver(): Promise<void> {
    // Runs of the last term still in flight finish (or fail on the guard) first.
    await this.tail;
    this.bootState = newBoot(this.now());
    await this.restart();
  }

  /** Shell-side events (agent silence): one row each, then log and hooks. */
  async note(events: readonly EventInput[]): Promise<void> {
    const rows = await this.deps.store.appendEvents(events);
    this.deps.sink.emit(rows);
  }
}
