/**
 * The gRPC-JSON gateway's wire shapes (int64 as decimal strings, bytes as base64, zero values omitted) and
 * their codecs to and from the client's types: the one place that knows etcd's JSON spelling.
 */
import type {
  Compare,
  CompareOp,
  DeleteOptions,
  KeyValue,
  PutOptions,
  Ranged,
  RangeOptions,
  SortTarget,
  TxnOp,
  TxnResponse,
} from './client-types.js';

export interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
  lease?: string;
}
export interface WireHeader {
  cluster_id?: string;
  member_id?: string;
  revision?: string;
  raft_term?: string;
}
export interface WireRange {
  header?: WireHeader;
  kvs?: WireKv[];
  count?: string;
  more?: boolean;
}
export interface WireTxn {
  header?: WireHeader;
  succeeded?: boolean;
  responses?: Array<{
    response_put?: { prev_kv?: WireKv };
    response_range?: WireRange;
    response_delete_range?: { deleted?: string; prev_kvs?: WireKv[] };
  }>;
}

export const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
export const unb64 = (s: string | undefined): string =>
  s === undefined ? '' : Buffer.from(s, 'base64').toString('utf8');
export const big = (s: string | undefined): bigint => (s === undefined || s === '' ? 0n : BigInt(s));

/** The range end that covers every key with this prefix (etcd's GetPrefixRangeEnd), base64. */
export function prefixEnd(key: string): string {
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

export function kvOf(w: WireKv): KeyValue {
  return {
    key: unb64(w.key),
    value: unb64(w.value),
    createRevision: big(w.create_revision),
    modRevision: big(w.mod_revision),
    version: big(w.version),
    lease: big(w.lease),
  };
}

export function rangedOf(w: WireRange): Ranged {
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

export function rangeBody(key: string, o: RangeOptions = {}): Record<string, unknown> {
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

export function putBody(key: string, value: string, o: PutOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(key), value: b64(value) };
  if (o.lease !== undefined && o.lease !== 0n) body['lease'] = String(o.lease);
  if (o.prevKv === true) body['prev_kv'] = true;
  return body;
}

export function deleteBody(key: string, o: DeleteOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(key) };
  if (o.prefix === true) body['range_end'] = prefixEnd(key);
  else if (o.end !== undefined) body['range_end'] = b64(o.end);
  if (o.prevKv === true) body['prev_kv'] = true;
  return body;
}

export function compareBody(c: Compare): Record<string, unknown> {
  const body: Record<string, unknown> = { key: b64(c.key), target: c.target.toUpperCase(), result: COMPARE_OP[c.op] };
  if (c.target === 'value') body['value'] = b64(c.against);
  else body[COMPARE_FIELD[c.target]] = String(c.against);
  return body;
}

export function opBody(o: TxnOp): Record<string, unknown> {
  switch (o.type) {
    case 'put':
      return { request_put: putBody(o.key, o.value, o.options) };
    case 'range':
      return { request_range: rangeBody(o.key, o.options) };
    case 'delete':
      return { request_delete_range: deleteBody(o.key, o.options) };
  }
}

export function responsesOf(ops: readonly TxnOp[], wire: WireTxn['responses']): TxnResponse[] {
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

export const isWrite = (ops: readonly TxnOp[]): boolean => ops.some((o) => o.type !== 'range');

export interface WireWatch {
  header?: WireHeader;
  created?: boolean;
  canceled?: boolean;
  compact_revision?: string;
  cancel_reason?: string;
  events?: Array<{ type?: string; kv?: WireKv; prev_kv?: WireKv }>;
}
