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
import { Agent } from 'undici';
import { monotonicClockMs, realTimers, type MsClock, type Timers } from '@hq/runtime/clock';
import { etcdEndpoint } from './endpoint.js';
import { classifyAnswer, classifyTransport, EtcdError, type Verdict } from './errors.js';

export interface EtcdClientOptions {
  /** Client URLs of the members, `http://host:port`; the first answers first, the others on failure. */
  readonly endpoints: readonly string[];
  /**
   * Connect timeout for one member, ms (default 2000). Too small: a slow network reads as a dead
   * member; too large: a dead member that drops packets holds a call that long before the next.
   */
  readonly dialTimeoutMs?: number;
  /**
   * The whole call, every member tried, ms (default 5000). Too small: a write during an etcd
   * leader election is reported `indeterminate` although it would have applied; too large: a
   * decision waits that long before the store can answer 503.
   */
  readonly requestTimeoutMs?: number;
  /** Measures the call's deadline, ms (default: monotonic; tests drive it). */
  readonly clock?: MsClock;
  /** Ends an attempt or a stream's opening at its deadline (default: real timers). */
  readonly timers?: Timers;
  /**
   * For `https://` endpoints: the CA that signed the members' certificates (PEM; default: the
   * system's trust store) and this client's certificate and key (PEM) when the members ask for
   * one (`--client-cert-auth`). Certificates are verified, never skipped.
   */
  readonly tls?: EtcdTls;
}

export interface EtcdTls {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/** Gets per read txn: below etcd's default --max-txn-ops (128). */
const GET_BATCH = 100;

export const ETCD_CLIENT_DEFAULTS = Object.freeze({ dialTimeoutMs: 2000, requestTimeoutMs: 5000 });

export interface KeyValue {
  readonly key: string;
  readonly value: string;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
  readonly version: bigint;
  /** 0n: no lease */
  readonly lease: bigint;
}

export type SortTarget = 'key' | 'version' | 'create' | 'mod' | 'value';

export interface RangeOptions {
  /** Every key starting with `key`. */
  readonly prefix?: boolean;
  /** Range [key, end); `prefix` wins when both are given. */
  readonly end?: string;
  /** Range [key, the end of every key starting with this): from a key inside a prefix to its end. */
  readonly endOfPrefix?: string;
  readonly limit?: number;
  /** Read at this past revision (fails `compacted` when it is gone). */
  readonly revision?: bigint;
  /** A local read of the answering member, possibly stale: never for a decision (C1). */
  readonly serializable?: boolean;
  readonly sort?: { readonly target: SortTarget; readonly order: 'ascend' | 'descend' };
  readonly keysOnly?: boolean;
  readonly countOnly?: boolean;
  readonly minCreateRevision?: bigint;
  readonly maxCreateRevision?: bigint;
  readonly minModRevision?: bigint;
  readonly maxModRevision?: bigint;
}

export interface Ranged {
  readonly kvs: readonly KeyValue[];
  readonly count: number;
  readonly more: boolean;
}

/** `revision` is the store's revision when the call was served (the header's). */
export interface RangeResult extends Ranged {
  readonly revision: bigint;
}

export interface PutOptions {
  readonly lease?: bigint;
  readonly prevKv?: boolean;
}

export interface DeleteOptions {
  readonly prefix?: boolean;
  readonly end?: string;
  readonly prevKv?: boolean;
}

export type CompareOp = '==' | '!=' | '<' | '>';

export type Compare =
  | {
      readonly key: string;
      readonly target: 'mod' | 'create' | 'version' | 'lease';
      readonly op: CompareOp;
      readonly against: bigint;
    }
  | { readonly key: string; readonly target: 'value'; readonly op: CompareOp; readonly against: string };

/** Compares for a txn. `create(key, '==', 0n)` (or `absent(key)`) is "the key does not exist". */
export const cmp = Object.freeze({
  mod: (key: string, op: CompareOp, revision: bigint): Compare => ({ key, target: 'mod', op, against: revision }),
  create: (key: string, op: CompareOp, revision: bigint): Compare => ({ key, target: 'create', op, against: revision }),
  version: (key: string, op: CompareOp, version: bigint): Compare => ({ key, target: 'version', op, against: version }),
  lease: (key: string, op: CompareOp, lease: bigint): Compare => ({ key, target: 'lease', op, against: lease }),
  value: (key: string, op: CompareOp, value: string): Compare => ({ key, target: 'value', op, against: value }),
  absent: (key: string): Compare => ({ key, target: 'create', op: '==', against: 0n }),
});

export type TxnOp =
  | { readonly type: 'put'; readonly key: string; readonly value: string; readonly options?: PutOptions }
  | { readonly type: 'range'; readonly key: string; readonly options?: RangeOptions }
  | { readonly type: 'delete'; readonly key: string; readonly options?: DeleteOptions };

export const op = Object.freeze({
  put: (key: string, value: string, options?: PutOptions): TxnOp => ({
    type: 'put',
    key,
    value,
    ...(options === undefined ? {} : { options }),
  }),
  range: (key: string, options?: RangeOptions): TxnOp => ({
    type: 'range',
    key,
    ...(options === undefined ? {} : { options }),
  }),
  delete: (key: string, options?: DeleteOptions): TxnOp => ({
    type: 'delete',
    key,
    ...(options === undefined ? {} : { options }),
  }),
});

export type TxnResponse =
  | { readonly type: 'put'; readonly prevKv: KeyValue | undefined }
  | ({ readonly type: 'range' } & Ranged)
  | { readonly type: 'delete'; readonly deleted: number; readonly prevKvs: readonly KeyValue[] };

export interface Txn {
  readonly compare: readonly Compare[];
  readonly success: readonly TxnOp[];
  readonly failure?: readonly TxnOp[];
}

export interface TxnResult {
  readonly succeeded: boolean;
  /** For a txn that wrote: the revision of its write (every key it put has this mod_revision). */
  readonly revision: bigint;
  /** The branch's answers, one per op, in order. */
  readonly responses: readonly TxnResponse[];
}

export type KeepAlive = { readonly alive: true; readonly ttlSeconds: number } | { readonly alive: false };

export interface LeaseTtl {
  /** Seconds left by etcd's leader, -1 when the lease is gone. A minimum, not a maximum: an etcd leader change resets it. */
  readonly ttlSeconds: number;
  readonly grantedTtlSeconds: number;
  readonly keys: readonly string[];
}

export type WatchEvent = {
  readonly type: 'put' | 'delete';
  readonly kv: KeyValue;
  readonly prevKv: KeyValue | undefined;
};

export interface WatchBatch {
  readonly revision: bigint;
  readonly events: readonly WatchEvent[];
}

export interface WatchOptions {
  readonly prefix?: boolean;
  /** First revision to deliver: a read's header revision + 1 (after a compaction: re-read first). */
  readonly startRevision: bigint;
  readonly prevKv?: boolean;
  /** Ends the watch: the iterator returns. */
  readonly signal?: AbortSignal;
}

export type MemberStatus =
  | {
      readonly endpoint: string;
      readonly ok: true;
      readonly memberId: string;
      readonly leader: string | null;
      readonly version: string;
      readonly raftTerm: bigint;
      /** The member's alarms and other errors as it words them (`memberID:… alarm:NOSPACE`). */
      readonly errors: readonly string[];
      /** The store's revision as this member has applied it. */
      readonly revision: bigint;
      /** Bytes of the member's database file (what etcd compares with its quota), and of it in use. */
      readonly dbSizeBytes: number;
      readonly dbSizeInUseBytes: number;
      /** The member's `--quota-backend-bytes` when it says it (etcd 3.6 on); null before. */
      readonly quotaBytes: number | null;
    }
  | { readonly endpoint: string; readonly ok: false; readonly error: string };

// ---------------------------------------------------------------------------------------
// wire shapes of the gateway (int64 as decimal strings, bytes as base64, zero values omitted)

interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
  lease?: string;
}
interface WireHeader {
  cluster_id?: string;
  member_id?: string;
  revision?: string;
  raft_term?: string;
}
interface WireRange {
  header?: WireHeader;
  kvs?: WireKv[];
  count?: string;
  more?: boolean;
}
interface WireTxn {
  header?: WireHeader;
  succeeded?: boolean;
  responses?: Array<{
    response_put?: { prev_kv?: WireKv };
    response_range?: WireRange;
    response_delete_range?: { deleted?: string; prev_kvs?: WireKv[] };
  }>;
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined): string => (s === undefined ? '' : Buffer.from(s, 'base64').toString('utf8'));
const big = (s: string | undefined): bigint => (s === undefined || s === '' ? 0n : BigInt(s));

/** The range end that covers every key with this prefix (etcd's GetPrefixRangeEnd), base64. */
function prefixEnd(key: string): string {
  const bytes = Buffer.from(key, 'utf8');
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i]! < 0xff) {
      const end = Buffer.from(bytes.subarray(0, i + 1));
      end[i]!++;
      return end.toString('base64');
    }
  }
  return Buffer.from([0]).toString('base64'); // every key ≥ key
}

function kvOf(w: WireKv): KeyValue {
  return {
    key: unb64(w.key),
    value: unb64(w.value),
    createRevision: big(w.create_revision),
    modRevision: big(w.mod_revision),
    version: big(w.version),
    lease: big(w.lease),
  };
}

function rangedOf(w: WireRange): Ranged {
  const kvs = (w.kvs ?? []).map(kvOf);
  return { kvs, count: Number(w.count ?? kvs.length), more: w.more === true };
}

const SORT_TARGET: Record<SortTarget, string> = {
  key: 'KEY',
  version: 'VERSION',
  create: 'CREATE',
  mod: 'MOD',
  value: 'VALUE',
};
const COMPARE_OP: Record<CompareOp, string> = { '==': 'EQUAL', '!=': 'NOT_EQUAL', '<': 'LESS', '>': 'GREATER' };
const COMPARE_FIELD = { mod: 'mod_revision', create: 'create_revision', version: 'version', lease: 'lease' } as const;

function rangeBody(key: string, o: RangeOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(key) };
  if (o.prefix === true) body['range_end'] = prefixEnd(key);
  else if (o.end !== undefined) body['range_end'] = b64(o.end);
  else if (o.endOfPrefix !== undefined) body['range_end'] = prefixEnd(o.endOfPrefix);
  if (o.limit !== undefined) body['limit'] = String(o.limit);
  if (o.revision !== undefined) body['revision'] = String(o.revision);
  if (o.serializable === true) body['serializable'] = true;
  if (o.sort !== undefined) {
    body['sort_target'] = SORT_TARGET[o.sort.target];
    body['sort_order'] = o.sort.order === 'ascend' ? 'ASCEND' : 'DESCEND';
  }
  if (o.keysOnly === true) body['keys_only'] = true;
  if (o.countOnly === true) body['count_only'] = true;
  if (o.minCreateRevision !== undefined) body['min_create_revision'] = String(o.minCreateRevision);
  if (o.maxCreateRevision !== undefined) body['max_create_revision'] = String(o.maxCreateRevision);
  if (o.minModRevision !== undefined) body['min_mod_revision'] = String(o.minModRevision);
  if (o.maxModRevision !== undefined) body['max_mod_revision'] = String(o.maxModRevision);
  return body;
}

function putBody(key: string, value: string, o: PutOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(key), value: b64(value) };
  if (o.lease !== undefined && o.lease !== 0n) body['lease'] = String(o.lease);
  if (o.prevKv === true) body['prev_kv'] = true;
  return body;
}

function deleteBody(key: string, o: DeleteOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(key) };
  if (o.prefix === true) body['range_end'] = prefixEnd(key);
  else if (o.end !== undefined) body['range_end'] = b64(o.end);
  if (o.prevKv === true) body['prev_kv'] = true;
  return body;
}

function compareBody(c: Compare): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(c.key), target: c.target.toUpperCase(), result: COMPARE_OP[c.op] };
  if (c.target === 'value') body['value'] = b64(c.against);
  else body[COMPARE_FIELD[c.target]] = String(c.against);
  return body;
}

function opBody(o: TxnOp): Record<string, unknown> {
  switch (o.type) {
    case 'put':
      return { request_put: putBody(o.key, o.value, o.options) };
    case 'range':
      return { request_range: rangeBody(o.key, o.options) };
    case 'delete':
      return { request_delete_range: deleteBody(o.key, o.options) };
  }
}

function responsesOf(ops: readonly TxnOp[], wire: WireTxn['responses']): TxnResponse[] {
  // biome-ignore lint/suspicious/useIterableCallbackReturn: the switch covers every op type (TypeScript checks it)
  return ops.map((o, i): TxnResponse => {
    const r = wire?.[i] ?? {};
    switch (o.type) {
      case 'put':
        return {
          type: 'put',
          prevKv: r.response_put?.prev_kv === undefined ? undefined : kvOf(r.response_put.prev_kv),
        };
      case 'range':
        return { type: 'range', ...rangedOf(r.response_range ?? {}) };
      case 'delete':
        return {
          type: 'delete',
          deleted: Number(r.response_delete_range?.deleted ?? 0),
          prevKvs: (r.response_delete_range?.prev_kvs ?? []).map(kvOf),
        };
    }
  });
}

/** A function, so that TypeScript does not narrow `signal.aborted` across awaits. */
const aborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

const isWrite = (ops: readonly TxnOp[]): boolean => ops.some((o) => o.type !== 'range');

// ---------------------------------------------------------------------------------------

type Attempt = { ok: true; json: unknown } | { ok: false; verdict: Verdict };

interface Call {
  readonly path: string;
  readonly body: unknown;
  /** may apply a change (C2); reads and keep-alives are not writes */
  readonly write: boolean;
  /** a serializable read: no `hasleader` (a leaderless member may answer it) */
  readonly local?: boolean;
  /** a server-streaming RPC answered as `{result}` / `{error}` lines: the first line is the answer */
  readonly stream?: boolean;
}

function validate(o: EtcdClientOptions): { endpoints: string[]; dialTimeoutMs: number; requestTimeoutMs: number } {
  if (!Array.isArray(o.endpoints) || o.endpoints.length === 0)
    throw new TypeError('etcd endpoints must be a non-empty list of http:// or https:// URLs');
  if ((o.tls?.cert === undefined) !== (o.tls?.key === undefined))
    throw new TypeError('etcd tls: give the client certificate and its key together');
  const endpoints = o.endpoints.map((e) => {
    const u = etcdEndpoint(e, o.tls !== undefined);
    if ('problem' in u) throw new TypeError(`etcd endpoint ${u.problem}`);
    return u.origin;
  });
  const ms = (v: number | undefined, dflt: number, name: string): number => {
    const x = v ?? dflt;
    if (!Number.isInteger(x) || x <= 0) throw new TypeError(`etcd ${name} must be a positive integer (ms)`);
    return x;
  };
  return {
    endpoints,
    dialTimeoutMs: ms(o.dialTimeoutMs, ETCD_CLIENT_DEFAULTS.dialTimeoutMs, 'dialTimeoutMs'),
    requestTimeoutMs: ms(o.requestTimeoutMs, ETCD_CLIENT_DEFAULTS.requestTimeoutMs, 'requestTimeoutMs'),
  };
}

const HEADERS = Object.freeze({ 'content-type': 'application/json' });
/** A `get` waiting for its batch. */
interface Getter {
  readonly key: string;
  resolve(v: { kv: KeyValue | undefined; revision: bigint }): void;
  reject(err: unknown): void;
}

/** grpc-gateway forwards `Grpc-Metadata-*` headers as gRPC metadata; etcd then refuses at once when the member has no leader (C1). */
const LEADER_HEADERS = Object.freeze({ ...HEADERS, 'grpc-metadata-hasleader': 'true' });

export class EtcdClient {
  readonly endpoints: readonly string[];
  readonly dialTimeoutMs: number;
  readonly requestTimeoutMs: number;
  private readonly agent: Agent;
  private readonly clock: MsClock;
  private readonly timers: Timers;
  /** the endpoint tried first: the last one that answered */
  private current = 0;
  private clusterId: string | undefined;
  /** One-key reads asked for since the last batch went out (`get`): they go together, in one read txn. */
  private gets: Getter[] | null = null;

  constructor(options: EtcdClientOptions) {
    const o = validate(options);
    this.endpoints = Object.freeze(o.endpoints);
    this.dialTimeoutMs = o.dialTimeoutMs;
    this.requestTimeoutMs = o.requestTimeoutMs;
    this.clock = options.clock ?? monotonicClockMs;
    this.timers = options.timers ?? realTimers;
    const tls = options.tls;
    this.agent = new Agent({
      connect: {
        timeout: this.dialTimeoutMs,
        ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
        ...(tls?.cert === undefined ? {} : { cert: tls.cert, key: tls.key }),
      },
      keepAliveTimeout: 30_000,
    });
  }

  /** The member calls go to first (the last that answered). */
  get endpoint(): string {
    return this.endpoints[this.current]!;
  }

  async range(key: string, options: RangeOptions = {}): Promise<RangeResult> {
    const w = (await this.call({
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
    const w = (await this.call({ path: '/v3/kv/put', body: putBody(key, value, options), write: true })) as {
      header?: WireHeader;
      prev_kv?: WireKv;
    };
    return { revision: big(w.header?.revision), prevKv: w.prev_kv === undefined ? undefined : kvOf(w.prev_kv) };
  }

  async deleteRange(
    key: string,
    options: DeleteOptions = {},
  ): Promise<{ revision: bigint; deleted: number; prevKvs: readonly KeyValue[] }> {
    const w = (await this.call({ path: '/v3/kv/deleterange', body: deleteBody(key, options), write: true })) as {
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
    const w = (await this.call({ path: '/v3/kv/txn', body, write: isWrite(t.success) || isWrite(failure) })) as WireTxn;
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
    const w = (await this.call({ path: '/v3/lease/grant', body: { TTL: String(ttlSeconds) }, write: true })) as {
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
    const w = (await this.call({
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
      await this.call({ path: '/v3/lease/revoke', body: { ID: String(id) }, write: true });
      return true;
    } catch (err) {
      if (err instanceof EtcdError && err.kind === 'lease-not-found') return false;
      throw err;
    }
  }

  async leaseTimeToLive(id: bigint, options: { keys?: boolean } = {}): Promise<LeaseTtl> {
    const w = (await this.call({
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
    const create: Record<string, unknown> = { key: b64(key), start_revision: String(options.startRevision) };
    if (options.prefix === true) create['range_end'] = prefixEnd(key);
    if (options.prevKv === true) create['prev_kv'] = true;
    const stream = await this.openStream('/v3/watch', { create_request: create }, options.signal);
    if (stream === null) return;
    try {
      for await (const line of stream.lines) {
        const msg = JSON.parse(line) as { result?: WireWatch; error?: { grpc_code?: number; message?: string } };
        if (msg.error !== undefined)
          throw classifyAnswer(
            msg.error.grpc_code ?? 14,
            msg.error.message ?? 'watch failed',
            false,
            `${stream.endpoint}/v3/watch`,
          ).error;
        const r = msg.result ?? {};
        if (r.canceled === true) {
          const compact = big(r.compact_revision);
          if (compact > 0n)
            throw new EtcdError(
              'compacted',
              `etcd ${stream.endpoint}/v3/watch: revision ${options.startRevision} is compacted (compact revision ${compact}): re-read, then watch from the read's revision`,
              { compactRevision: compact },
            );
          throw new EtcdError(
            'unavailable',
            `etcd ${stream.endpoint}/v3/watch: canceled: ${r.cancel_reason ?? 'no reason given'}`,
          );
        }
        if (r.events === undefined || r.events.length === 0) continue; // created, or a progress notification
        yield {
          revision: big(r.header?.revision),
          events: r.events.map((e) => ({
            type: e.type === 'DELETE' ? 'delete' : 'put',
            kv: kvOf(e.kv ?? {}),
            prevKv: e.prev_kv === undefined ? undefined : kvOf(e.prev_kv),
          })),
        };
      }
    } catch (err) {
      if (options.signal?.aborted === true) return;
      if (err instanceof EtcdError) throw err;
      throw new EtcdError(
        'unavailable',
        `etcd ${stream.endpoint}/v3/watch: the stream broke (${(err as { code?: string }).code ?? String(err)})`,
        { cause: err },
      );
    } finally {
      stream.close();
    }
    if (options.signal?.aborted === true) return;
    throw new EtcdError('unavailable', `etcd ${stream.endpoint}/v3/watch: the member closed the stream`);
  }

  /**
   * Compacts etcd's history (every key of the cluster, not only ours) up to `revision`: reads
   * and watches at an older revision fail `compacted` from then on. Done already (another
   * compaction went as far or further) is not an error. Resending one is harmless, so an
   * unanswered one may be tried again.
   */
  async compact(revision: bigint): Promise<void> {
    try {
      await this.call({ path: '/v3/kv/compaction', body: { revision: String(revision) }, write: true });
    } catch (err) {
      if (err instanceof EtcdError && err.kind === 'compacted') return;
      throw err;
    }
  }

  /** Each member's own view (maintenance status), concurrently, each within the dial timeout: for health pages and tests. */
  async status(): Promise<MemberStatus[]> {
    return Promise.all(
      this.endpoints.map(async (endpoint): Promise<MemberStatus> => {
        const a = await this.attempt(
          endpoint,
          { path: '/v3/maintenance/status', body: {}, write: false, local: true },
          this.dialTimeoutMs,
        );
        if (!a.ok) return { endpoint, ok: false, error: a.verdict.error.message };
        const w = a.json as {
          header?: WireHeader;
          leader?: string;
          version?: string;
          raftTerm?: string;
          errors?: string[];
          dbSize?: string;
          dbSizeInUse?: string;
          dbSizeQuota?: string;
        };
        const leader = w.leader === undefined || w.leader === '0' ? null : w.leader;
        const quota = Number(w.dbSizeQuota ?? 0);
        return {
          endpoint,
          ok: true,
          memberId: w.header?.member_id ?? '',
          leader,
          version: w.version ?? '',
          raftTerm: big(w.raftTerm),
          errors: w.errors ?? [],
          revision: big(w.header?.revision),
          dbSizeBytes: Number(w.dbSize ?? 0),
          dbSizeInUseBytes: Number(w.dbSizeInUse ?? w.dbSize ?? 0),
          quotaBytes: quota > 0 ? quota : null,
        };
      }),
    );
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }

  // -------------------------------------------------------------------------------------

  /** One call, endpoints in turn from the last that answered, within one deadline (C2, C3). */
  private async call(c: Call): Promise<unknown> {
    const deadline = this.clock.now() + this.requestTimeoutMs;
    const n = this.endpoints.length;
    const seen: EtcdError[] = [];
    for (let i = 0; i < n; i++) {
      const left = deadline - this.clock.now();
      if (left <= 0) break;
      // a read leaves time for the members after this one; a write may be sent once only
      const budget = c.write ? left : left / (n - i);
      const a = await this.attempt(this.endpoint, c, budget);
      if (a.ok) return a.json;
      if (!a.verdict.retry) throw a.verdict.error;
      seen.push(a.verdict.error);
      this.current = (this.current + 1) % n;
    }
    const lines = seen.map((e) => e.message).join('; ');
    if (seen.some((e) => e.kind === 'no-quorum')) throw new EtcdError('no-quorum', `etcd has no quorum: ${lines}`);
    throw new EtcdError(
      'unavailable',
      `etcd is unavailable: ${lines === '' ? `no answer within ${this.requestTimeoutMs} ms` : lines}`,
    );
  }

  private async attempt(endpoint: string, c: Call, budgetMs: number): Promise<Attempt> {
    const where = `${endpoint}${c.path}`;
    const ac = new AbortController();
    let timedOut = false;
    const timer = this.timers.set(() => {
      timedOut = true;
      ac.abort();
    }, budgetMs);
    try {
      const res = await this.agent.request({
        origin: endpoint,
        path: c.path,
        method: 'POST',
        headers: c.local === true ? HEADERS : LEADER_HEADERS,
        body: JSON.stringify(c.body),
        signal: ac.signal,
        // our own timer above ends the attempt; these only back it up
        headersTimeout: Math.ceil(budgetMs) + 1000,
        bodyTimeout: Math.ceil(budgetMs) + 1000,
      });
      const text = await res.body.text();
      return this.answer(where, res.statusCode, c.stream === true ? (text.split('\n')[0] ?? '') : text, c.write);
    } catch (err) {
      return { ok: false, verdict: classifyTransport(err, c.write, where, timedOut) };
    } finally {
      this.timers.clear(timer);
    }
  }

  private answer(where: string, status: number, text: string, write: boolean): Attempt {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      if (status >= 400 && status < 500)
        return {
          ok: false,
          verdict: {
            error: new EtcdError(
              'bad-request',
              `etcd ${where}: answered ${status} without JSON (is this an etcd client URL?)`,
            ),
            retry: false,
          },
        };
      return {
        ok: false,
        verdict: classifyAnswer(14, `answered ${status} ${text.slice(0, 80).replace(/\s+/g, ' ')}`, write, where),
      };
    }
    const j = json as {
      code?: number;
      message?: string;
      error?: unknown;
      result?: { header?: WireHeader } & Record<string, unknown>;
    };
    if (status !== 200)
      return { ok: false, verdict: classifyAnswer(j.code ?? 14, j.message ?? `answered ${status}`, write, where) };
    // a stream's line: {"result": …} or {"error": {grpc_code, message}}
    if (typeof j.error === 'object' && j.error !== null) {
      const e = j.error as { grpc_code?: number; message?: string };
      return { ok: false, verdict: classifyAnswer(e.grpc_code ?? 14, e.message ?? 'error', write, where) };
    }
    const body = (j.result ?? json) as { header?: WireHeader };
    const cluster = body.header?.cluster_id;
    if (cluster !== undefined) {
      this.clusterId ??= cluster;
      if (cluster !== this.clusterId)
        return {
          ok: false,
          verdict: {
            error: new EtcdError(
              'bad-request',
              `etcd ${where}: belongs to cluster ${cluster}, not ${this.clusterId}: every endpoint must be a member of one cluster`,
            ),
            retry: false,
          },
        };
    }
    return { ok: true, json: body };
  }

  /** Opens a server stream on the first member that accepts it; null when aborted first. */
  private async openStream(
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<{ endpoint: string; lines: AsyncIterable<string>; close: () => void } | null> {
    const n = this.endpoints.length;
    const seen: EtcdError[] = [];
    for (let i = 0; i < n; i++) {
      if (aborted(signal)) return null;
      const endpoint = this.endpoint;
      const ac = new AbortController();
      const onAbort = (): void => ac.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      let timedOut = false;
      const timer = this.timers.set(() => {
        timedOut = true;
        ac.abort();
      }, this.requestTimeoutMs);
      try {
        const res = await this.agent.request({
          origin: endpoint,
          path,
          method: 'POST',
          headers: LEADER_HEADERS,
          body: JSON.stringify(body),
          signal: ac.signal,
          headersTimeout: this.requestTimeoutMs + 1000,
          bodyTimeout: 0,
        });
        this.timers.clear(timer);
        if (res.statusCode !== 200) {
          const a = this.answer(`${endpoint}${path}`, res.statusCode, await res.body.text(), false);
          throw a.ok
            ? new EtcdError('unavailable', `etcd ${endpoint}${path}: answered ${res.statusCode}`)
            : a.verdict.error;
        }
        const close = (): void => {
          signal?.removeEventListener('abort', onAbort);
          res.body.destroy();
        };
        return { endpoint, lines: splitLines(res.body), close };
      } catch (err) {
        this.timers.clear(timer);
        signal?.removeEventListener('abort', onAbort);
        if (aborted(signal)) return null;
        const e = err instanceof EtcdError ? err : classifyTransport(err, false, `${endpoint}${path}`, timedOut).error;
        if (e.kind !== 'unavailable' && e.kind !== 'no-quorum') throw e;
        seen.push(e);
        this.current = (this.current + 1) % n;
      }
    }
    const lines = seen.map((e) => e.message).join('; ');
    throw new EtcdError(
      seen.some((e) => e.kind === 'no-quorum') ? 'no-quorum' : 'unavailable',
      `etcd watch could not start: ${lines}`,
    );
  }
}

interface WireWatch {
  header?: WireHeader;
  created?: boolean;
  canceled?: boolean;
  compact_revision?: string;
  cancel_reason?: string;
  events?: Array<{ type?: string; kv?: WireKv; prev_kv?: WireKv }>;
}

async function* splitLines(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const utf8 = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : utf8.decode(chunk, { stream: true });
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line !== '') yield line;
    }
  }
  if (buf.trim() !== '') yield buf.trim();
}
