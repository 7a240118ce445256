/**
 * EtcdStore — the lease side's seams (../store.ts: LeaseRecords, EventLog, TokenStore,
 * CheckLock, StoreAdmin) in an etcd cluster, under the installation's prefix (keys.ts), through
 * the JSON-gateway client (client.ts). Several arbiters and the one-shot commands open the same
 * prefix; the elected arbiter alone decides (election.ts, ../../leadership.ts).
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
import { readFile } from 'node:fs/promises';
import type { ArbiterState, LeaseState, Observer } from '@hq/lease-core';
import { emptyLease } from '@hq/lease-core';
import { writeAtomicSync } from '@hq/runtime/files';
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
import { cmp, op, type Compare, type EtcdClient, type KeyValue, type TxnOp, type TxnResult } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { etcdKeys, MAX_TXN_OPS, type EtcdKeys } from './keys.js';
import { encodeEventKey, eventKvs, eventsOf, MAX_EVENTS_PER_TXN, type EventKv } from './event-keys.js';
import { decideAll, leaseChanged, transactOne, type Decided } from '../decide-all.js';

export { NotElectedError };

interface StoredState {
  readonly lease: LeaseState;
  readonly floor: number;
  readonly observers: { readonly [name: string]: Observer };
}

export function encodeState(s: ArbiterState): string {
  const observers: Record<string, Observer> = {};
  for (const name of [...s.observers.keys()].sort()) {
    const o = s.observers.get(name) as Observer;
    observers[name] = {
      ...o,
      refreshSeconds: o.refreshSeconds ?? null,
      requestTimeoutSeconds: o.requestTimeoutSeconds ?? null,
    };
  }
  return JSON.stringify({ lease: s.lease, floor: s.floor, observers } satisfies StoredState);
}

function decodeState(text: string): ArbiterState {
  const s = JSON.parse(text) as StoredState;
  return { lease: s.lease, floor: s.floor, observers: new Map(Object.entries(s.observers)) };
}

export { encodeEvent } from './event-keys.js';

const seqOf = (kv: KeyValue | undefined): number => (kv === undefined ? 0 : Number(kv.value));

const rangeKv = (r: TxnResult, i: number): KeyValue | undefined => {
  const x = r.responses[i];
  return x?.type === 'range' ? x.kvs[0] : undefined;
};

/** The state and the sequence from a txn's first two ranges (state, then sequence); null without a state. */
function baseOf(r: TxnResult, confirmed: boolean): Base | null {
  const s = rangeKv(r, 0);
  const q = rangeKv(r, 1);
  return s === undefined
    ? null
    : { state: decodeState(s.value), stateRev: s.modRevision, seq: seqOf(q), seqRev: q?.modRevision ?? 0n, confirmed };
}

interface Base {
  readonly state: ArbiterState;
  readonly stateRev: bigint;
  readonly seq: number;
  readonly seqRev: bigint;
  /** True when etcd was seen to hold this state (a read, a commit) after the decision began; false for a remembered one. */
  readonly confirmed: boolean;
}

/**
 * How often a write lost only to another writer of a key it does not decide on (the event or
 * token sequence) is tried again. Every lost round is another writer's commit, so with N writers
 * at once the last needs N − 1 rounds: far more than the elected arbiter and a one-shot command.
 */
const SEQ_RETRIES = 64;
/** Reads after an indeterminate write before its outcome is given up as unknown. */
const VERIFY_TRIES = 3;

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
  /**
   * Every stored token this store has read (`findToken`, a group's read or lost compare), with
   * its key's mod_revision: `knownToken` answers from it, and a group's commit compares the
   * revision (`ConfirmTokens`). Only stored tokens enter it (an unknown token is never kept),
   * so it is as large as the token table; an entry leaves when a read finds its key gone.
   */
  private readonly tokens = new Map<string, { readonly row: TokenRow; readonly rev: bigint }>();

  private constructor(
    opts: EtcdStoreOptions,
    readonly createdNow: boolean,
  ) {
    this.client = opts.client;
    this.keys = etcdKeys(opts.prefix);
    this.ownsClient = opts.ownsClient === true;
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
  private async readTokens(tokens: ConfirmTokens): Promise<void> {
    for (let i = 0; i < tokens.length; i += MAX_TXN_OPS) {
      const part = tokens.slice(i, i + MAX_TXN_OPS);
      this.noteTokens(
        await this.client.txn({ compare: [], success: part.map((h) => op.range(this.keys.token(h))) }),
        0,
        part,
      );
    }
  }

  /** Keeps the token rows a txn's ranges from `from` on returned (in `tokens`' order); true when one differs from the kept one. */
  private noteTokens(r: TxnResult, from: number, tokens: ConfirmTokens): boolean {
    let changed = false;
    tokens.forEach((h, i) => {
      const kv = rangeKv(r, from + i);
      const had = this.tokens.get(h);
      if (kv === undefined) {
        changed ||= had !== undefined;
        this.tokens.delete(h);
        return;
      }
      changed ||= had?.rev !== kv.modRevision;
      this.tokens.set(h, { row: JSON.parse(kv.value) as TokenRow, rev: kv.modRevision });
    });
    return changed;
  }

  /** `tokens`' keys compared with the revision each was last read at (an unknown one: absent). */
  private tokenCompares(tokens: ConfirmTokens): Compare[] {
    return tokens.map((h) => cmp.mod(this.keys.token(h), '==', this.tokens.get(h)?.rev ?? 0n));
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

  /** After an indeterminate write: did it apply? Its state value, or the value of its last events key (`last`), tells. */
  private async applied(
    value: string | null,
    last: EventKv | undefined,
  ): Promise<{ known: false } | { known: true; yes: boolean; stateRev: bigint; seqRev: bigint }> {
    for (let i = 0; i < VERIFY_TRIES; i++) {
      try {
        const r = await this.client.txn({
          compare: [],
          success: [
            op.range(this.keys.state),
            op.range(this.keys.eventSeq),
            ...(last === undefined ? [] : [op.range(last.key)]),
          ],
        });
        const s = rangeKv(r, 0);
        const seq = rangeKv(r, 1);
        const yes = last !== undefined ? rangeKv(r, 2)?.value === last.value : s?.value === value;
        return { known: true, yes, stateRev: s?.modRevision ?? 0n, seqRev: seq?.modRevision ?? 0n };
      } catch (err) {
        if (!isEtcdError(err)) throw err;
      }
    }
    return { known: false };
  }

  // -------------------------------------------------------------------------------------
  // EventLog

  /** Appends under a compare of the sequence (another appender moves it: renumber, try again). */
  async appendEvents(events: readonly EventInput[]): Promise<readonly EventRow[]> {
    if (events.length === 0) return [];
    if (events.length > MAX_EVENTS_PER_TXN) {
      const out: EventRow[] = [];
      for (let i = 0; i < events.length; i += MAX_EVENTS_PER_TXN)
        out.push(...(await this.appendEvents(events.slice(i, i + MAX_EVENTS_PER_TXN))));
      return out;
    }
    for (let attempt = 0; ; attempt++) {
      const { kv } = await this.client.get(this.keys.eventSeq);
      let id = seqOf(kv);
      const rows = events.map((e) => ({ ...e, id: ++id }));
      const eventPuts = eventKvs(this.keys, rows);
      const txn = {
        compare: [cmp.mod(this.keys.eventSeq, '==', kv?.modRevision ?? 0n)],
        success: [op.put(this.keys.eventSeq, String(id)), ...eventPuts.map((e) => op.put(e.key, e.value))],
      };
      try {
        if ((await this.client.txn(txn)).succeeded) return rows;
      } catch (err) {
        if (!isEtcdError(err, 'indeterminate')) throw err;
        const a = await this.applied(null, eventPuts.at(-1));
        if (!a.known) throw err;
        if (a.yes) return rows;
      }
      if (attempt >= SEQ_RETRIES)
        throw new EtcdError('unavailable', 'etcd: the event sequence kept moving under the append (too many writers)');
    }
  }

  /** The keys from the one that holds `after + 1` on: each holds one event or more, so `limit` keys hold `limit` events when there are. */
  async listEvents(after: number, limit: number): Promise<readonly EventRow[]> {
    const r = await this.client.range(this.keys.event(after + 1), { endOfPrefix: this.keys.eventDir, limit });
    const out: EventRow[] = [];
    for (const kv of r.kvs)
      for (const e of eventsOf(kv, this.keys)) if (e.id > after && out.length < limit) out.push(e);
    return out;
  }

  async tailAfter(n: number): Promise<number> {
    const r = await this.client.range(this.keys.eventDir, {
      prefix: true,
      sort: { target: 'key', order: 'descend' },
      limit: n,
    });
    const ids = r.kvs.flatMap((kv) =>
      eventsOf(kv, this.keys)
        .map((e) => e.id)
        .reverse(),
    );
    const nth = ids[n - 1];
    return nth === undefined ? 0 : nth - 1;
  }

  async sinceAfter(at: number): Promise<number> {
    let last = 0;
    for await (const page of pagesOf(this.client, this.keys.eventDir)) {
      for (const kv of page) {
        for (const e of eventsOf(kv, this.keys)) {
          if (e.at >= at) return e.id - 1;
          last = e.id;
        }
      }
    }
    return last;
  }

  /**
   * By age, then all but the newest `keep`; returns how many events went. Deletes only keys it
   * read (an event appended meanwhile stays). A key that keeps some of its events is written
   * again with those, under its newest kept id, if no other sweep changed it meanwhile.
   */
  async sweepEvents(olderThan: number, keep: number): Promise<number> {
    const held: Array<{ kv: KeyValue; events: EventRow[] }> = [];
    for await (const page of pagesOf(this.client, this.keys.eventDir))
      for (const kv of page) held.push({ kv, events: eventsOf(kv, this.keys) });
    const young = held.flatMap((h) => h.events.filter((e) => e.at >= olderThan)).map((e) => e.id);
    const keepFrom = young.length > keep ? (young[young.length - keep] ?? Infinity) : -Infinity;
    const stays = (e: EventRow): boolean => e.at >= olderThan && e.id >= keepFrom;
    const deletes: Array<{ key: string; events: number }> = [];
    let gone = 0;
    for (const h of held) {
      const kept = h.events.filter(stays);
      if (kept.length === h.events.length) continue;
      if (kept.length === 0) {
        deletes.push({ key: h.kv.key, events: h.events.length });
        continue;
      }
      const to = this.keys.event((kept[kept.length - 1] as EventRow).id);
      const r = await this.client.txn({
        compare: [cmp.mod(h.kv.key, '==', h.kv.modRevision)],
        success: [...(to === h.kv.key ? [] : [op.delete(h.kv.key)]), op.put(to, encodeEventKey(kept))],
      });
      if (r.succeeded) gone += h.events.length - kept.length;
    }
    for (let i = 0; i < deletes.length; i += MAX_TXN_OPS) {
      const part = deletes.slice(i, i + MAX_TXN_OPS);
      await this.client.txn({ compare: [], success: part.map((d) => op.delete(d.key)) });
      for (const d of part) gone += d.events;
    }
    return gone;
  }

  // -------------------------------------------------------------------------------------
  // TokenStore (a handful of rows: whole scans are fine)

  async insertToken(machine: string, scope: Scope, sha256: string, created: number): Promise<void> {
    await this.tokenWrite((rows) => {
      if (rows.some((r) => r.row.sha256 === sha256))
        throw new Error(`a token with this sha256 is stored already (UNIQUE tokens.sha256)`);
      return { revoke: [], insert: { machine, scope, sha256, created } };
    });
  }

  async findToken(sha256: string): Promise<TokenRow | undefined> {
    const { kv } = await this.client.get(this.keys.token(sha256));
    if (kv === undefined) {
      this.tokens.delete(sha256);
      return undefined;
    }
    const row = JSON.parse(kv.value) as TokenRow;
    this.tokens.set(sha256, { row, rev: kv.modRevision });
    return row;
  }

  knownToken(sha256: string): TokenRow | undefined {
    return this.tokens.get(sha256)?.row;
  }

  async replaceToken(machine: string, scope: Scope, sha256: string, created: number): Promise<number> {
    return this.tokenWrite((rows) => {
      if (rows.some((r) => r.row.sha256 === sha256))
        throw new Error(`a token with this sha256 is stored already (UNIQUE tokens.sha256)`);
      return {
        revoke: rows.filter((r) => r.row.machine === machine && r.row.scope === scope && r.row.revoked === null),
        at: created,
        insert: { machine, scope, sha256, created },
      };
    });
  }

  async revokeTokens(machine: string, at: number): Promise<number> {
    return this.tokenWrite((rows) => ({
      revoke: rows.filter((r) => r.row.machine === machine && r.row.revoked === null),
      at,
    }));
  }

  async revokeToken(machine: string, id: number, at: number): Promise<number> {
    return this.tokenWrite((rows) => ({
      revoke: rows.filter((r) => r.row.machine === machine && r.row.id === id && r.row.revoked === null),
      at,
    }));
  }

  async listTokens(): Promise<readonly TokenRow[]> {
    return (await this.tokenRows()).map((r) => r.row).sort((a, b) => a.id - b.id);
  }

  async hasActiveAdmin(): Promise<boolean> {
    return (await this.tokenRows()).some((r) => r.row.scope === 'admin' && r.row.revoked === null);
  }

  private async tokenRows(): Promise<Array<{ row: TokenRow; kv: KeyValue }>> {
    const out: Array<{ row: TokenRow; kv: KeyValue }> = [];
    for await (const page of pagesOf(this.client, this.keys.tokenDir))
      for (const kv of page) out.push({ row: JSON.parse(kv.value) as TokenRow, kv });
    return out;
  }

  /**
   * Read every token and the sequence, decide, write in one txn comparing what was read; a
   * lost compare reads and decides again. Returns how many were revoked.
   */
  private async tokenWrite(
    decide: (rows: Array<{ row: TokenRow; kv: KeyValue }>) => {
      revoke: Array<{ row: TokenRow; kv: KeyValue }>;
      at?: number;
      insert?: { machine: string; scope: Scope; sha256: string; created: number };
    },
  ): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const rows = await this.tokenRows();
      const { kv: seqKv } = await this.client.get(this.keys.tokenSeq);
      const d = decide(rows);
      if (d.revoke.length === 0 && d.insert === undefined) return 0;
      const compare: Compare[] = d.revoke.map((r) => cmp.mod(r.kv.key, '==', r.kv.modRevision));
      const success: TxnOp[] = d.revoke.map((r) =>
        op.put(r.kv.key, JSON.stringify({ ...r.row, revoked: d.at ?? null })),
      );
      let mine: string | null = null;
      if (d.insert !== undefined) {
        const id = seqOf(seqKv) + 1;
        const row: TokenRow = {
          id,
          machine: d.insert.machine,
          scope: d.insert.scope,
          sha256: d.insert.sha256,
          created: d.insert.created,
          revoked: null,
        };
        mine = JSON.stringify(row);
        compare.push(
          cmp.mod(this.keys.tokenSeq, '==', seqKv?.modRevision ?? 0n),
          cmp.absent(this.keys.token(row.sha256)),
        );
        success.push(op.put(this.keys.tokenSeq, String(id)), op.put(this.keys.token(row.sha256), mine));
      }
      try {
        if ((await this.client.txn({ compare, success })).succeeded) return d.revoke.length;
      } catch (err) {
        if (!isEtcdError(err, 'indeterminate')) throw err;
        // Read back the first key the txn would have written.
        const probe =
          d.insert !== undefined ? this.keys.token(d.insert.sha256) : (d.revoke[0] as { kv: KeyValue }).kv.key;
        const want = mine ?? JSON.stringify({ ...(d.revoke[0] as { row: TokenRow }).row, revoked: d.at ?? null });
        const back = await this.client.get(probe).catch(() => null);
        if (back === null) throw err;
        if (back.kv?.value === want) return d.revoke.length;
      }
      if (attempt >= SEQ_RETRIES)
        throw new EtcdError('unavailable', 'etcd: the tokens kept changing under the write (too many writers)');
    }
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
   * Every key under the prefix but the election's and the compaction's, read at one revision (a consistent copy
   * while the arbiters serve), written as one JSON document, owner-only, atomically.
   */
  async backup(to: string): Promise<void> {
    const kvs: Array<{ key: string; value: string }> = [];
    const at = { revision: undefined as bigint | undefined };
    for await (const page of pagesOf(this.client, `${this.keys.prefix}/`, at)) {
      for (const kv of page)
        if (!kv.key.startsWith(this.keys.electionDir) && kv.key !== this.keys.compaction)
          kvs.push({ key: kv.key.slice(this.keys.prefix.length), value: kv.value });
    }
    const revision = at.revision;
    writeAtomicSync(
      to,
      `${JSON.stringify({ format: BACKUP_FORMAT, prefix: this.keys.prefix, revision: String(revision ?? 0n), kvs })}\n`,
    );
  }

  /**
   * Writes a backup's keys under `prefix`, which must hold nothing yet; the state goes last, so
   * a restore cut short never looks like a store (an open then starts a new one, floor pending).
   */
  static async restore(client: EtcdClient, prefix: string, from: string): Promise<number> {
    const doc = JSON.parse(await readFile(from, 'utf8')) as {
      format?: string;
      kvs?: Array<{ key: string; value: string }>;
    };
    if (doc.format !== BACKUP_FORMAT || !Array.isArray(doc.kvs))
      throw new Error(`${from} is not an hq etcd backup (format ${BACKUP_FORMAT})`);
    return writeNewPrefix(client, prefix, doc.kvs);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) await this.client.close();
  }
}

const BACKUP_FORMAT = 'hq-etcd-backup/1';

/** A key under the prefix (`/state`, `/tokens/h/…`: the prefix left out) and its value. */
export interface PrefixKv {
  readonly key: string;
  readonly value: string;
}

/**
 * Writes `kvs` under `prefix`, which must hold nothing yet (else nothing is written); the state
 * goes last, so a write cut short never looks like a store (an open then starts a new one,
 * floor pending). Returns how many keys it wrote.
 */
export async function writeNewPrefix(client: EtcdClient, prefix: string, kvs: readonly PrefixKv[]): Promise<number> {
  const keys = etcdKeys(prefix);
  const there = await client.range(`${keys.prefix}/`, { prefix: true, countOnly: true });
  if (there.count > 0) throw new PrefixNotEmptyError(keys.prefix, there.count);
  const full = kvs.map((kv) => ({ key: `${keys.prefix}${kv.key}`, value: kv.value }));
  const rest = full.filter((kv) => kv.key !== keys.state);
  for (let i = 0; i < rest.length; i += MAX_TXN_OPS)
    await client.txn({ compare: [], success: rest.slice(i, i + MAX_TXN_OPS).map((kv) => op.put(kv.key, kv.value)) });
  const state = full.find((kv) => kv.key === keys.state);
  if (
    state !== undefined &&
    !(await client.txn({ compare: [cmp.absent(keys.state)], success: [op.put(keys.state, state.value)] })).succeeded
  ) {
    throw new Error(
      `etcd prefix ${keys.prefix}: another process wrote a state while this one wrote the prefix; delete the prefix and run again`,
    );
  }
  return full.length;
}

/** The target prefix of a restore or a migration already holds keys: nothing was written. */
export class PrefixNotEmptyError extends Error {
  constructor(
    readonly prefix: string,
    readonly count: number,
  ) {
    super(
      `etcd prefix ${prefix} is not empty (${count} keys): write into a new prefix, or delete this one first (etcdctl del --prefix ${prefix}/)`,
    );
    this.name = 'PrefixNotEmptyError';
  }
}

/**
 * Every key under `dir`, ascending, in pages of 1000, linearizable. All pages are read at the
 * revision of the first (a consistent copy) when `at` is given; `at.revision` says which.
 */
export async function* pagesOf(
  client: EtcdClient,
  dir: string,
  at?: { revision: bigint | undefined },
  opts: { readonly keysOnly?: boolean } = {},
): AsyncGenerator<readonly KeyValue[]> {
  let from = dir;
  for (;;) {
    const r = await client.range(from, {
      endOfPrefix: dir,
      limit: 1000,
      ...(at?.revision === undefined ? {} : { revision: at.revision }),
      ...(opts.keysOnly === true ? { keysOnly: true } : {}),
    });
    if (at !== undefined) at.revision ??= r.revision;
    if (r.kvs.length > 0) yield r.kvs;
    const last = r.kvs[r.kvs.length - 1];
    if (!r.more || last === undefined) return;
    from = `${last.key}\u0000`;
  }
}
