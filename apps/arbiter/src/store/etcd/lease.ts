/**
 * EtcdStore — the lease side's seams (../store.ts: LeaseRecords, EventLog, TokenStore,
 * CheckLock, StoreAdmin) in an etcd cluster, under the installation's prefix (keys.ts), through
 * the JSON-gateway client (client.ts). Several arbiters and the one-shot commands open the same
 * prefix; the elected arbiter alone decides (election.ts, ../../leadership.ts). Here the record's
 * reads and writes; the event log is events.ts, the token rows tokens.ts, the state's value
 * state-key.ts, whole-prefix paging, backup and restore prefix.ts.
 *
 * Invariants:
 *  - The lease record, the floor and the views are one value (`{prefix}/state`). Every
 *    decision is made on the value etcd holds when the decision commits: its write is one txn
 *    that compares the key's mod_revision with the one decided on (the compare-and-swap), and a
 *    decision that writes nothing is confirmed by a txn of that compare alone (a linearizable
 *    read through raft: never a stale member, C1). The value decided on is this store's last
 *    commit (or the one a lost compare returned) when it has one, else a linearizable read; a
 *    stale one only loses its compare. A lost compare is `CasError`, nothing written. The
 *    record's own `revision` still rises by one per lease write (the ETag, and what S1's fencing
 *    tokens are checked against).
 *  - A request let in on a token from memory (`knownToken`) is confirmed by its group's
 *    commit: the token's key is read with the state decided on, or compared in the first
 *    write (or compare-only txn) of the group. A token changed since — revoked by any process
 *    — loses that compare like a moved state (`CasError`, nothing written), and the group is
 *    decided again on the row as it is now: a revocation holds from the next request on.
 *  - A decision's events are written in the same txn as its state, their ids from
 *    `{prefix}/events/seq`, compared in the same txn: ids ascend, are never reused, and an
 *    event is never visible without the state it came with. A txn's events share keys, up to
 *    EVENTS_PER_KEY a key (event-keys.ts).
 *  - While a `guard` is set (the elected arbiter's `Election.guard()`), every state write also
 *    compares the election key: an arbiter whose term ended — paused past its etcd lease, cut
 *    off — cannot write, even if it has not noticed yet (`NotElectedError`, nothing written).
 *  - A write whose answer never came (`indeterminate`, etcd api_guarantees.md) is never resent
 *    blindly: the store re-reads and tells from the values whether its write applied; when it
 *    cannot tell, the caller gets the indeterminate error (503) and its next decision re-reads.
 *  - Nothing here reads a clock: times come in as parameters, like SQLite's.
 */
import type { ArbiterState } from '@hq/lease-core';
import { emptyLease } from '@hq/lease-core';
import {
  CasError,
  NotElectedError,
  type Committed,
  type ConfirmTokens,
  type Decision,
  type EventInput,
  type EventRow,
  type LeaseStore,
  type Outcome,
  type Scope,
  type TokenRow,
} from '../store.js';
import { cmp, op, type Compare, type EtcdClient, type TxnOp, type TxnResult } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { etcdKeys, MAX_TXN_OPS, type EtcdKeys } from './keys.js';
import { eventKvs, MAX_EVENTS_PER_TXN, type EventKv } from './event-keys.js';
import { decideAll, leaseChanged, transactOne, type Decided } from '../decide-all.js';
import { EtcdEventLog } from './events.js';
import { backupPrefix, restorePrefix } from './prefix.js';
import { appliedWrite, type Base, baseOf, decodeState, encodeState, rangeKv, SEQ_RETRIES, seqOf } from './state-key.js';
import { EtcdTokens } from './tokens.js';

export { NotElectedError };

export { encodeState } from './state-key.js';
export { encodeEvent } from './event-keys.js';

export { pagesOf, PrefixNotEmptyError, type PrefixKv, writeNewPrefix } from './prefix.js';

export interface EtcdStoreOptions {
  readonly client: EtcdClient;
  readonly prefix: string;
  /** The TTL written into the first record of a new prefix. */
  readonly ttlSeconds: number;
  /** Close the client with the store (a store opened for one command). */
  readonly ownsClient?: boolean;
}

export class EtcdStore implements LeaseStore {
  readonly keys: EtcdKeys;
  readonly client: EtcdClient;
  private ownsClient: boolean;
  private closed = false;
  /** The election compare every state write carries while set (the elected arbiter's). */
  private guard: (() => Compare) | null = null;
  /**
   * The state and event sequence as this store last committed them or a lost compare returned
   * them, with their mod_revisions; null when unknown (after an error). The next decision starts
   * from it instead of a read — one etcd round trip per decision instead of two — and its txn's
   * compare makes that exactly as safe as a read: on a value that moved it commits nothing.
   */
  private last: Base | null = null;
  /** The event log and the token rows (events.ts, tokens.ts): this store's seams beside the record. */
  private readonly events: EtcdEventLog;
  private readonly tokens: EtcdTokens;

  private constructor(
    opts: EtcdStoreOptions,
    readonly createdNow: boolean,
  ) {
    this.client = opts.client;
    this.keys = etcdKeys(opts.prefix);
    this.ownsClient = opts.ownsClient === true;
    this.events = new EtcdEventLog(this.client, this.keys);
    this.tokens = new EtcdTokens(this.client, this.keys);
  }

  /**
   * Opens the store on `prefix`, writing the first record when there is none (S2.4: a store
   * created now does not know the generation floor yet, so the record says it is pending).
   */
  static async open(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const keys = etcdKeys(opts.prefix);
    const first = encodeState({
      lease: { ...emptyLease(opts.ttlSeconds), floorPending: true },
      observers: new Map(),
      floor: 0,
    });
    let created: boolean;
    try {
      created = (await opts.client.txn({ compare: [cmp.absent(keys.state)], success: [op.put(keys.state, first)] }))
        .succeeded;
    } catch (err) {
      if (!isEtcdError(err, 'indeterminate')) throw err;
      // Ours or another opener's, the record exists now (or the next open writes it): a pending
      // floor is the safe reading either way.
      created = (await opts.client.get(keys.state)).kv?.value === first;
    }
    return new EtcdStore(opts, created);
  }

  /** Every state write from now on also compares `guard()` (null: none, as for a one-shot command). */
  setGuard(guard: (() => Compare) | null): void {
    this.guard = guard;
  }

  // -------------------------------------------------------------------------------------
  // LeaseRecords

  async read(): Promise<ArbiterState> {
    const { kv } = await this.client.get(this.keys.state);
    if (kv === undefined)
      throw new Error(`etcd has no ${this.keys.state}: the store was not opened (or its prefix was deleted)`);
    return decodeState(kv.value);
  }

  transact<T>(decide: (state: ArbiterState) => Decision<T>): Promise<Committed<T>> {
    return Promise.resolve(transactOne((d) => this.transactAll(d), decide));
  }

  /**
   * 1. one linearizable read of the state and the event sequence (one txn: one revision);
   * 2. every decision, each on the state the one before left (a throwing one left out);
   * 3. the writes, in txns of at most MAX_EVENTS_PER_TXN events (in keys of EVENTS_PER_KEY), each comparing
   *    the state's and the sequence's mod_revision (and the election key when guarded): one
   *    txn in practice; a group with more events than fit is split in order, each part
   *    committed on the one before, and a part that fails fails the decisions from it on.
   */
  async transactAll(
    decisions: readonly ((state: ArbiterState) => Decision<unknown>)[],
    tokens: ConfirmTokens = [],
  ): Promise<readonly Outcome[]> {
    if (decisions.length === 0) return [];
    // The group's tokens are confirmed by the read it decides on, or else by its first commit's compares.
    let confirm = [...new Set(tokens)];
    if (confirm.length + 3 > MAX_TXN_OPS) {
      await this.readTokens(confirm);
      confirm = [];
    }
    const remembered = this.last;
    this.last = null;
    const start = remembered ?? (await this.readBase(confirm));
    const checks = remembered === null ? [] : confirm;
    const before = start.state;

    const { decided } = decideAll(before, decisions);

    // Parts: consecutive decisions whose writes fit one txn.
    // (the state's put, the sequence's put, the events' keys: at most MAX_EVENTS_PER_TXN events)
    const parts: number[][] = [];
    let events = 0;
    for (const [i, d] of decided.entries()) {
      const n = d.ok ? d.events.length : 0;
      if (n > MAX_EVENTS_PER_TXN)
        throw new EtcdError(
          'bad-request',
          `a decision with ${n} events does not fit one etcd txn (${MAX_EVENTS_PER_TXN} events)`,
        );
      const last = parts[parts.length - 1];
      if (last === undefined || events + n > MAX_EVENTS_PER_TXN) {
        parts.push([i]);
        events = n;
      } else {
        last.push(i);
        events += n;
      }
    }

    const outcomes: Outcome[] = new Array(decided.length);
    let base: Base = start;
    for (const [k, part] of parts.entries()) {
      let next = base.state;
      const inputs: EventInput[] = [];
      for (const i of part) {
        const d = decided[i] as Decided;
        if (!d.ok) continue;
        next = d.state;
        inputs.push(...d.events);
      }
      const stateChanged =
        leaseChanged(base.state, next) || next.floor !== base.state.floor || next.observers !== base.state.observers;
      let written: { base: Base; firstId: number };
      try {
        written = await this.writePart(base, next, stateChanged, inputs, k === 0 ? checks : []);
      } catch (error) {
        if (k === 0) throw error;
        // The parts before committed; this one and everything decided on it fail.
        for (const p of parts.slice(k)) for (const i of p) outcomes[i] = { ok: false, error };
        return outcomes;
      }
      base = written.base;
      let id = written.firstId;
      for (const i of part) {
        const d = decided[i] as Decided;
        outcomes[i] = d.ok
          ? {
              ok: true,
              committed: { state: d.state, events: d.events.map((e) => ({ ...e, id: id++ })), result: d.result },
            }
          : { ok: false, error: d.error };
      }
    }
    this.last = { ...base, confirmed: false };
    return outcomes;
  }

  /** One linearizable read of the state, the event sequence and `tokens`' keys (one txn: one revision). */
  private async readBase(tokens: ConfirmTokens = []): Promise<Base> {
    const r = await this.client.txn({
      compare: [],
      success: [
        op.range(this.keys.state),
        op.range(this.keys.eventSeq),
        ...tokens.map((h) => op.range(this.keys.token(h))),
      ],
    });
    const base = baseOf(r, true);
    if (base === null)
      throw new Error(`etcd has no ${this.keys.state}: the store was not opened (or its prefix was deleted)`);
    this.noteTokens(r, 2, tokens);
    return base;
  }
  /** Linearizable reads of `tokens`' keys, as many per txn as etcd takes. */
  private readTokens(tokens: ConfirmTokens): Promise<void> {
    return this.tokens.readTokens(tokens);
  }

  /** Keeps the token rows a txn's ranges from `from` on returned; true when one differs from the kept one. */
  private noteTokens(r: TxnResult, from: number, tokens: ConfirmTokens): boolean {
    return this.tokens.note(r, from, tokens);
  }

  /** `tokens`' keys compared with the revision each was last read at (an unknown one: absent). */
  private tokenCompares(tokens: ConfirmTokens): Compare[] {
    return this.tokens.compares(tokens);
  }

  /** Remembers what a lost compare's failure branch returned (the state's value, the sequence) for the next decision. */
  private remember(r: TxnResult): void {
    this.last = baseOf(r, false);
  }

  /**
   * A part with nothing to write. The decision (a refusal, an answer) may still have stood on a
   * remembered state and on tokens from memory (a confirmed base read them with it): then a
   * compare alone tells whether etcd still holds them (a read-only txn, linearizable).
   */
  private async confirmPart(
    base: Base,
    next: ArbiterState,
    tokens: ConfirmTokens,
  ): Promise<{ base: Base; firstId: number }> {
    if (!base.confirmed) {
      const r = await this.client.txn({
        compare: [cmp.mod(this.keys.state, '==', base.stateRev), ...this.tokenCompares(tokens)],
        success: [],
        failure: [
          op.range(this.keys.state),
          op.range(this.keys.eventSeq),
          ...tokens.map((h) => op.range(this.keys.token(h))),
        ],
      });
      if (!r.succeeded) {
        this.noteTokens(r, 2, tokens);
        this.remember(r);
        throw new CasError();
      }
    }
    return { base: { ...base, state: next, confirmed: true }, firstId: base.seq + 1 };
  }

  /**
   * One attempt's txn: the state compared at the revision the decisions read, the sequence when
   * events are appended, the election's guard and the tokens; on success the state (`value`,
   * null when unchanged) and the events. The failure branch returns the state's value, the
   * sequence, the guard's key and the tokens: a lost compare tells why and remembers the state.
   */
  private partTxn(
    base: Base,
    value: string | null,
    seq: number,
    seqRev: bigint,
    rows: number,
    eventPuts: readonly EventKv[],
    tokens: ConfirmTokens,
  ): { compare: Compare[]; success: TxnOp[]; failure: TxnOp[]; guard: Compare | null } {
    const guard = this.guard?.() ?? null;
    const compare: Compare[] = [cmp.mod(this.keys.state, '==', base.stateRev)];
    if (rows > 0) compare.push(cmp.mod(this.keys.eventSeq, '==', seqRev));
    if (guard !== null) compare.push(guard);
    compare.push(...this.tokenCompares(tokens));
    const success: TxnOp[] = [];
    if (value !== null) success.push(op.put(this.keys.state, value));
    if (rows > 0) {
      success.push(op.put(this.keys.eventSeq, String(seq + rows)));
      for (const kv of eventPuts) success.push(op.put(kv.key, kv.value));
    }
    const failure: TxnOp[] = [op.range(this.keys.state), op.range(this.keys.eventSeq)];
    if (guard !== null) failure.push(op.range(guard.key, { keysOnly: true }));
    failure.push(...tokens.map((h) => op.range(this.keys.token(h))));
    return { compare, success, failure, guard };
  }

  /**
   * One part's txn. A lost compare of the sequence alone (an event appended by another
   * process) takes the next ids and tries again: the decisions still stand on the state they
   * read. Returns the new base and the id of the part's first event.
   */
  private async writePart(
    base: Base,
    next: ArbiterState,
    stateChanged: boolean,
    events: readonly EventInput[],
    tokens: ConfirmTokens,
  ): Promise<{ base: Base; firstId: number }> {
    if (!stateChanged && events.length === 0) return this.confirmPart(base, next, tokens);
    let seq = base.seq;
    let seqRev = base.seqRev;
    const value = encodeState(next);
    for (let attempt = 0; ; attempt++) {
      const rows: EventRow[] = events.map((e, i) => ({ ...e, id: seq + 1 + i }));
      const eventPuts = eventKvs(this.keys, rows);
      const done = (stateRev: bigint, newSeqRev: bigint): { base: Base; firstId: number } => ({
        base: {
          state: next,
          stateRev: stateChanged ? stateRev : base.stateRev,
          seq: seq + rows.length,
          seqRev: rows.length > 0 ? newSeqRev : seqRev,
          confirmed: true,
        },
        firstId: seq + 1,
      });
      const { guard, ...txn } = this.partTxn(
        base,
        stateChanged ? value : null,
        seq,
        seqRev,
        rows.length,
        eventPuts,
        tokens,
      );
      let r: TxnResult;
      try {
        r = await this.client.txn(txn);
      } catch (err) {
        if (!isEtcdError(err, 'indeterminate')) throw err;
        const applied = await this.applied(stateChanged ? value : null, eventPuts.at(-1));
        if (!applied.known) throw err;
        if (!applied.yes) throw new EtcdError('unavailable', `${err.message}; read back: it did not apply`);
        return done(applied.stateRev, applied.seqRev);
      }
      if (r.succeeded) return done(r.revision, r.revision);
      if (guard !== null && rangeKv(r, 2)?.createRevision !== (guard.against as bigint)) throw new NotElectedError();
      // A token that changed (revoked, by any process) fails like a moved state: decided again.
      const tokenMoved = this.noteTokens(r, guard !== null ? 3 : 2, tokens);
      if (rangeKv(r, 0)?.modRevision !== base.stateRev || tokenMoved) {
        this.remember(r);
        throw new CasError();
      }
      if (attempt >= SEQ_RETRIES) throw new CasError();
      const seqNow = rangeKv(r, 1);
      seq = seqOf(seqNow);
      seqRev = seqNow?.modRevision ?? 0n;
    }
  }
  /** After an indeterminate write: did it apply? (state-key.ts) */
  private applied(value: string | null, last: EventKv | undefined): ReturnType<typeof appliedWrite> {
    return appliedWrite(this.client, this.keys, value, last);
  }

  // -------------------------------------------------------------------------------------
  // EventLog (events.ts)

  appendEvents(events: readonly EventInput[]): Promise<readonly EventRow[]> {
    return this.events.appendEvents(events);
  }

  listEvents(after: number, limit: number): Promise<readonly EventRow[]> {
    return this.events.listEvents(after, limit);
  }

  tailAfter(n: number): Promise<number> {
    return this.events.tailAfter(n);
  }

  sinceAfter(at: number): Promise<number> {
    return this.events.sinceAfter(at);
  }

  sweepEvents(olderThan: number, keep: number): Promise<number> {
    return this.events.sweepEvents(olderThan, keep);
  }

  // -------------------------------------------------------------------------------------
  // TokenStore (tokens.ts)

  insertToken(machine: string, scope: Scope, sha256: string, created: number): Promise<void> {
    return this.tokens.insertToken(machine, scope, sha256, created);
  }

  findToken(sha256: string): Promise<TokenRow | undefined> {
    return this.tokens.findToken(sha256);
  }

  knownToken(sha256: string): TokenRow | undefined {
    return this.tokens.knownToken(sha256);
  }

  replaceToken(machine: string, scope: Scope, sha256: string, created: number): Promise<number> {
    return this.tokens.replaceToken(machine, scope, sha256, created);
  }

  revokeTokens(machine: string, at: number): Promise<number> {
    return this.tokens.revokeTokens(machine, at);
  }

  revokeToken(machine: string, id: number, at: number): Promise<number> {
    return this.tokens.revokeToken(machine, id, at);
  }

  listTokens(): Promise<readonly TokenRow[]> {
    return this.tokens.listTokens();
  }

  hasActiveAdmin(): Promise<boolean> {
    return this.tokens.hasActiveAdmin();
  }

  // -------------------------------------------------------------------------------------
  // CheckLock

  async tryCheckLock(owner: string, nowMs: number, untilMs: number): Promise<boolean> {
    for (let attempt = 0; attempt <= SEQ_RETRIES; attempt++) {
      const { kv } = await this.client.get(this.keys.checkLock);
      if (kv !== undefined) {
        const held = JSON.parse(kv.value) as { owner: string; until: number };
        if (held.owner !== owner && held.until > nowMs) return false;
      }
      const r = await this.client.txn({
        compare: [cmp.mod(this.keys.checkLock, '==', kv?.modRevision ?? 0n)],
        success: [op.put(this.keys.checkLock, JSON.stringify({ owner, until: untilMs }))],
      });
      if (r.succeeded) return true;
    }
    return false;
  }

  async releaseCheckLock(owner: string): Promise<void> {
    const { kv } = await this.client.get(this.keys.checkLock);
    if (kv === undefined || (JSON.parse(kv.value) as { owner: string }).owner !== owner) return;
    await this.client.txn({
      compare: [cmp.mod(this.keys.checkLock, '==', kv.modRevision)],
      success: [op.delete(this.keys.checkLock)],
    });
  }

  // -------------------------------------------------------------------------------------
  // StoreAdmin
  /**
   * Every key under the prefix but the election's and the compaction's, read at one revision, written as one JSON
   * document, owner-only, atomically (prefix.ts).
   */
  backup(to: string): Promise<void> {
    return backupPrefix(this.client, this.keys, to);
  }

  /** Writes a backup's keys under `prefix`, which must hold nothing yet (prefix.ts). */
  static restore(client: EtcdClient, prefix: string, from: string): Promise<number> {
    return restorePrefix(client, prefix, from);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) await this.client.close();
  }
}
