/**
 * A small typed etcd v3 client over etcd's gRPC-JSON gateway (`POST /v3/…`, the HTTP face
 * every etcd ≥ 3.4 serves on its client URLs), spoken with undici. Why this and not the `etcd3`
 * package: README "Dependencies and why".
 *
 * What it guarantees:
 *  C1  Reads are linearizable unless the caller asks for `serializable: true` by name; a
 *      linearizable read or a write goes through raft, so it never answers from a member cut off
 *      from the majority: every call carries `hasleader` metadata, and a member without a leader
 *      refuses at once ("no leader") instead of hanging until its own timeout.
 *  C2  A write is sent at most once. When a member refused before anything was proposed
 *      (connection refused, "no leader", "too many requests") the call moves on to the next
 *      endpoint; when the request may have reached raft and no answer came, the call fails as
 *      `indeterminate` and the caller must re-read before it writes again (errors.ts).
 *  C3  Every call ends within `requestTimeoutMs`, whatever the members do (stopped, partitioned,
 *      leaderless): the caller gets one typed `EtcdError` with one line naming each member's answer.
 *  C4  All endpoints belong to one cluster: an answer with another cluster_id than the first is
 *      refused (`bad-request`) — a CAS checked against a different cluster would fence nothing.
 *  C5  int64 values (revisions, versions, lease IDs) are `bigint`; keys and values are UTF-8
 *      strings, base64 on the wire only.
 *
 * TLS: `https://` endpoints, verified against `tls.ca` (or the system's CAs), with a client
 * certificate when given. Not here: authentication (etcd users; an `auth` answer is classified), nested txns.
 */
import { monotonicClockMs, realTimers } from '@hq/runtime/clock';
import type {
  DeleteOptions,
  KeepAlive,
  KeyValue,
  LeaseTtl,
  MemberStatus,
  PutOptions,
  RangeOptions,
  RangeResult,
  Txn,
  TxnResult,
  WatchBatch,
  WatchOptions,
} from './client-types.js';
import { op } from './client-types.js';
import { type EtcdClientOptions, validate } from './client-options.js';
import { EtcdError } from './errors.js';
import { memberStatuses } from './member-status.js';
import { GatewayTransport } from './transport.js';
import { watchStream } from './watch.js';
import {
  big,
  compareBody,
  deleteBody,
  isWrite,
  kvOf,
  opBody,
  putBody,
  rangeBody,
  rangedOf,
  responsesOf,
  type WireHeader,
  type WireKv,
  type WireRange,
  type WireTxn,
  unb64,
} from './wire.js';

export * from './client-types.js';

export { ETCD_CLIENT_DEFAULTS, type EtcdClientOptions, type EtcdTls } from './client-options.js';

/** Gets per read txn: below etcd's default --max-txn-ops (128). */
const GET_BATCH = 100;

/** A `get` waiting for its batch. */
interface Getter {
  readonly key: string;
  resolve(v: { kv: KeyValue | undefined; revision: bigint }): void;
  reject(err: unknown): void;
}

export class EtcdClient {
  readonly endpoints: readonly string[];
  readonly dialTimeoutMs: number;
  readonly requestTimeoutMs: number;
  private readonly transport: GatewayTransport;
  /** One-key reads asked for since the last batch went out (`get`): they go together, in one read txn. */
  private gets: Getter[] | null = null;

  constructor(options: EtcdClientOptions) {
    const o = validate(options);
    this.endpoints = Object.freeze(o.endpoints);
    this.dialTimeoutMs = o.dialTimeoutMs;
    this.requestTimeoutMs = o.requestTimeoutMs;
    this.transport = new GatewayTransport({
      endpoints: this.endpoints,
      dialTimeoutMs: this.dialTimeoutMs,
      requestTimeoutMs: this.requestTimeoutMs,
      clock: options.clock ?? monotonicClockMs,
      timers: options.timers ?? realTimers,
      tls: options.tls,
    });
  }

  /** The member calls go to first (the last that answered). */
  get endpoint(): string {
    return this.transport.endpoint;
  }

  async range(key: string, options: RangeOptions = {}): Promise<RangeResult> {
    const w = (await this.transport.call({
      path: '/v3/kv/range',
      body: rangeBody(key, options),
      write: false,
      local: options.serializable === true,
    })) as WireRange;
    return { revision: big(w.header?.revision), ...rangedOf(w) };
  }

  /**
   * One key, linearizable; undefined when absent. The gets asked for in one turn of the event
   * loop go out together as one read-only txn (one round trip, one ReadIndex): still
   * linearizable, because a batch is sent only after every get in it was asked for, so it sees
   * every write acknowledged before any of them — and a get asked for while a batch is on its
   * way waits for the next one, never joining a read that began before it.
   */
  get(key: string): Promise<{ kv: KeyValue | undefined; revision: bigint }> {
    return new Promise((resolve, reject) => {
      if (this.gets === null) {
        this.gets = [];
        setImmediate(() => this.flushGets());
      }
      this.gets.push({ key, resolve, reject });
    });
  }

  private flushGets(): void {
    const all = this.gets ?? [];
    this.gets = null;
    // One range per distinct key (under load every lease read of a turn asks for the same state
    // key); the getters of a key share its answer.
    const byKey = new Map<string, Getter[]>();
    for (const g of all) {
      const same = byKey.get(g.key);
      if (same === undefined) byKey.set(g.key, [g]);
      else same.push(g);
    }
    const keys = [...byKey.keys()];
    for (let i = 0; i < keys.length; i += GET_BATCH) {
      const part = keys.slice(i, i + GET_BATCH);
      const done =
        part.length === 1
          ? this.range(part[0]!).then((r) => [{ kv: r.kvs[0], revision: r.revision }])
          : this.txn({ compare: [], success: part.map((k) => op.range(k)) }).then((r) =>
              r.responses.map((x) => ({ kv: x.type === 'range' ? x.kvs[0] : undefined, revision: r.revision })),
            );
      done.then(
        (answers) => {
          for (const [j, k] of part.entries()) for (const g of byKey.get(k)!) g.resolve(answers[j]!);
        },
        (err: unknown) => {
          for (const k of part) for (const g of byKey.get(k)!) g.reject(err);
        },
      );
    }
  }

  async put(
    key: string,
    value: string,
    options: PutOptions = {},
  ): Promise<{ revision: bigint; prevKv: KeyValue | undefined }> {
    const w = (await this.transport.call({ path: '/v3/kv/put', body: putBody(key, value, options), write: true })) as {
      header?: WireHeader;
      prev_kv?: WireKv;
    };
    return { revision: big(w.header?.revision), prevKv: w.prev_kv === undefined ? undefined : kvOf(w.prev_kv) };
  }

  async deleteRange(
    key: string,
    options: DeleteOptions = {},
  ): Promise<{ revision: bigint; deleted: number; prevKvs: readonly KeyValue[] }> {
    const w = (await this.transport.call({
      path: '/v3/kv/deleterange',
      body: deleteBody(key, options),
      write: true,
    })) as {
      header?: WireHeader;
      deleted?: string;
      prev_kvs?: WireKv[];
    };
    return {
      revision: big(w.header?.revision),
      deleted: Number(w.deleted ?? 0),
      prevKvs: (w.prev_kvs ?? []).map(kvOf),
    };
  }

  /** If every compare holds, the success ops, else the failure ops — one atomic step. A txn with only ranges is a read. */
  async txn(t: Txn): Promise<TxnResult> {
    const failure = t.failure ?? [];
    const body = { compare: t.compare.map(compareBody), success: t.success.map(opBody), failure: failure.map(opBody) };
    const w = (await this.transport.call({
      path: '/v3/kv/txn',
      body,
      write: isWrite(t.success) || isWrite(failure),
    })) as WireTxn;
    const succeeded = w.succeeded === true;
    return {
      succeeded,
      revision: big(w.header?.revision),
      responses: responsesOf(succeeded ? t.success : failure, w.responses),
    };
  }

  /** A new lease; etcd may raise a TTL below its minimum (1.5 × its election timeout). */
  async leaseGrant(ttlSeconds: number): Promise<{ id: bigint; ttlSeconds: number }> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0)
      throw new TypeError('lease ttlSeconds must be a positive integer');
    const w = (await this.transport.call({
      path: '/v3/lease/grant',
      body: { TTL: String(ttlSeconds) },
      write: true,
    })) as {
      ID?: string;
      TTL?: string;
      error?: string;
    };
    if (w.error !== undefined && w.error !== '') throw new EtcdError('unavailable', `etcd lease grant: ${w.error}`);
    return { id: big(w.ID), ttlSeconds: Number(w.TTL ?? 0) };
  }

  /**
   * One keep-alive. etcd renews the lease in its leader's memory (no raft write), so it is safe
   * to resend; `alive: false` when the lease is gone. The TTL it answers restarts at the
   * leader's *receive* time: the caller counts validity from its own send time.
   */
  async leaseKeepAlive(id: bigint): Promise<KeepAlive> {
    const w = (await this.transport.call({
      path: '/v3/lease/keepalive',
      body: { ID: String(id) },
      write: false,
      stream: true,
    })) as { TTL?: string };
    const ttl = Number(w.TTL ?? 0);
    return ttl > 0 ? { alive: true, ttlSeconds: ttl } : { alive: false };
  }

  /** Revokes the lease and deletes its keys; false when it was already gone. */
  async leaseRevoke(id: bigint): Promise<boolean> {
    try {
      await this.transport.call({ path: '/v3/lease/revoke', body: { ID: String(id) }, write: true });
      return true;
    } catch (err) {
      if (err instanceof EtcdError && err.kind === 'lease-not-found') return false;
      throw err;
    }
  }

  async leaseTimeToLive(id: bigint, options: { keys?: boolean } = {}): Promise<LeaseTtl> {
    const w = (await this.transport.call({
      path: '/v3/lease/timetolive',
      body: { ID: String(id), keys: options.keys === true },
      write: false,
    })) as { TTL?: string; grantedTTL?: string; keys?: string[] };
    return {
      ttlSeconds: Number(w.TTL ?? -1),
      grantedTtlSeconds: Number(w.grantedTTL ?? 0),
      keys: (w.keys ?? []).map(unb64),
    };
  }

  /**
   * Events on `key` (or the prefix) from `startRevision` on, in batches. Ends (returns) when the
   * signal aborts; throws an `EtcdError` when the stream breaks — `compacted` (with
   * `compactRevision`) when `startRevision` is gone, `unavailable`/`no-quorum` when the member
   * went away or lost its leader. Either way the caller re-reads and watches again from the
   * read's header revision + 1: nothing between the read and the new watch is missed.
   */
  async *watch(key: string, options: WatchOptions): AsyncGenerator<WatchBatch, void, undefined> {
    yield* watchStream(this.transport, key, options);
  }

  /**
   * Compacts etcd's history (every key of the cluster, not only ours) up to `revision`: reads
   * and watches at an older revision fail `compacted` from then on. Done already (another
   * compaction went as far or further) is not an error. Resending one is harmless, so an
   * unanswered one may be tried again.
   */
  async compact(revision: bigint): Promise<void> {
    try {
      await this.transport.call({ path: '/v3/kv/compaction', body: { revision: String(revision) }, write: true });
    } catch (err) {
      if (err instanceof EtcdError && err.kind === 'compacted') return;
      throw err;
    }
  }

  /** Each member's own view (maintenance status), concurrently, each within the dial timeout: for health pages and tests. */
  async status(): Promise<MemberStatus[]> {
    return memberStatuses(this.transport);
  }

  async close(): Promise<void> {
    await this.transport.close();
  }
}
