/**
 * The event log under `{prefix}/events`: append under the sequence's compare, list, tail, sweep. Apart from the
 * record's writes, which append their events in the state's own txn.
 */
import type { EventInput, EventRow } from '../store.js';
import type { EtcdClient, KeyValue } from './client.js';
import { cmp, op } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { encodeEventKey, eventKvs, eventsOf, MAX_EVENTS_PER_TXN } from './event-keys.js';
import { MAX_TXN_OPS, type EtcdKeys } from './keys.js';
import { pagesOf } from './prefix.js';
import { appliedWrite, SEQ_RETRIES, seqOf } from './state-key.js';

export class EtcdEventLog {
  constructor(
    private readonly client: EtcdClient,
    private readonly keys: EtcdKeys,
  ) {}

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
        const a = await appliedWrite(this.client, this.keys, null, eventPuts.at(-1));
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
}
