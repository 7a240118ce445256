/**
 * The client's vocabulary: what its KV, txn, lease, watch and status calls take and answer, and the
 * `cmp`/`op` builders for txns. Apart from the client so that stores and tests name them without the transport.
 */

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
