/**
 * How events sit in etcd's keys (keys.ts: `{prefix}/events/e/{id:16}`). One key holds the
 * events a txn wrote, up to EVENTS_PER_KEY of them, under the id of its newest: a group of
 * 18 renewals is one put, not 18 (every key is a put through raft, a B-tree write and an index
 * entry in etcd — per heartbeat, etcd's CPU and the txn's latency followed the number of keys,
 * docs/BENCH.md). Key order is still id order, and the events with ids above N are exactly those
 * in the keys from `event(N + 1)` on.
 *
 * A key's value is one event as a JSON object (its id is the key's: how every event was
 * written before, and how a lone event still is), or a JSON array of events that carry their
 * ids, ascending, the last one the key's. A sweep may leave an array with gaps.
 */
import type { EventInput, EventRow } from '../store.js';
import type { EtcdKeys } from './keys.js';
import type { KeyValue } from './client.js';

/** At most this many events per key (a full key of renewals: about 14 KiB). */
export const EVENTS_PER_KEY = 64;

type StoredEvent = Omit<EventRow, 'id'>;

/** An event's stored fields, in their order (nothing else a caller's object may carry). */
const fields = (e: EventInput): StoredEvent => ({
  at: e.at,
  category: e.category,
  event: e.event,
  host: e.host,
  data: e.data,
});

export const encodeEvent = (e: EventInput): string => JSON.stringify(fields(e));

const encodeWithId = (e: EventRow): string => JSON.stringify({ id: e.id, ...fields(e) });

/** The value of one key holding `rows` (ascending ids, at least one). */
export function encodeEventKey(rows: readonly EventRow[]): string {
  return rows.length === 1 ? encodeEvent(rows[0] as EventRow) : `[${rows.map(encodeWithId).join(',')}]`;
}

/** `rows` (ascending ids) as the keys and values to put: at most EVENTS_PER_KEY per key, each under its newest id. */
export interface EventKv {
  readonly key: string;
  readonly value: string;
}

export function eventKvs(keys: EtcdKeys, rows: readonly EventRow[]): EventKv[] {
  const out: EventKv[] = [];
  for (let i = 0; i < rows.length; i += EVENTS_PER_KEY) {
    const part = rows.slice(i, i + EVENTS_PER_KEY);
    out.push({ key: keys.event((part[part.length - 1] as EventRow).id), value: encodeEventKey(part) });
  }
  return out;
}

/**
 * At most this many events per txn (16 keys): its request stays below etcd's 1.5 MiB for events
 * of up to 1.5 KiB each (a renewal's is about 200 bytes). A group with more is written in parts.
 */
export const MAX_EVENTS_PER_TXN = 16 * EVENTS_PER_KEY;

/** The events one key holds, ascending. */
export function eventsOf(kv: KeyValue, keys: EtcdKeys): EventRow[] {
  const v = JSON.parse(kv.value) as StoredEvent | EventRow[];
  return Array.isArray(v) ? v.map((e) => ({ id: e.id, ...fields(e) })) : [{ id: keys.eventId(kv.key), ...fields(v) }];
}
