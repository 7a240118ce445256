/**
 * The arbiter's answers beside the lease: the check, primary, health, the etcd arbiters' view and the event
 * log (`GET /v1/events`). Times are Unix epoch seconds on the arbiter's clock.
 */
import { fieldsOf } from './answer.js';
import type { Host } from './host.js';

/** `POST /v1/check` (admin) → 200. */
export interface CheckAnswer {
  readonly promoted: boolean;
  readonly streak: number;
  readonly holder: Host | null;
  readonly generation: number;
  readonly ping: boolean;
  readonly health: boolean;
  readonly promotee: Host | null;
  /** Why no check ran (maintenance, no holder, …); absent when one did. */
  readonly skipped?: string;
}

/** `GET /v1/primary` on the arbiter and on every agent. */
export interface PrimaryAnswer {
  readonly known: boolean;
  readonly holder: Host | null;
  readonly generation: number;
}

/** `GET /v1/health` on the arbiter and on every agent's peer listener. */
export interface HealthAnswer<Role extends 'arbiter' | 'agent' = 'arbiter' | 'agent'> {
  readonly status: 'ok';
  readonly role: Role;
  readonly host: Host;
  readonly version: string;
  /** The arbiter's store (absent on an agent). */
  readonly store?: 'sqlite' | 'etcd';
  /** Store etcd only: the election and the members. */
  readonly arbiters?: ArbitersView;
}

/** Store etcd: which arbiter decides, and the etcd members as this arbiter last saw them. */
export interface ArbitersView {
  /** This arbiter is the elected one and decides. */
  readonly elected: boolean;
  /** The elected arbiter's URL (null: none known). */
  readonly leader: string | null;
  /** This arbiter's advertised URL. */
  readonly self: string;
  /** Seconds this arbiter's term stays valid by its own clock (0 when not elected). */
  readonly termSeconds: number;
  readonly etcd: {
    /** A majority of the members answered with a raft leader. */
    readonly healthy: boolean;
    readonly members: ReadonlyArray<{
      readonly endpoint: string;
      readonly ok: boolean;
      readonly leader?: string | null;
      readonly version?: string;
      readonly error?: string;
      readonly dbSizeBytes?: number;
    }>;
    /** How close etcd is to its space quota (absent until a member answered). */
    readonly space?: EtcdSpace;
    /** The elected arbiter's compaction of etcd's history. */
    readonly compaction?: { readonly intervalSeconds: number; readonly revision: number | null };
  };
}

/** How close etcd is to its space quota: the largest member's database file against the quota. */
export interface EtcdSpace {
  readonly dbSizeBytes: number;
  /** Of it, in use (the rest is freed by compaction and given back by a defragmentation). */
  readonly dbSizeInUseBytes: number;
  readonly quotaBytes: number;
  /** `members`: a member said its quota (etcd 3.6 on); `config`: `store.quotaBackendBytes`. */
  readonly quotaFrom: 'members' | 'config';
  /** dbSizeBytes / quotaBytes. */
  readonly usedRatio: number;
  /** A member raised NOSPACE: etcd refuses every write. */
  readonly alarm: boolean;
  readonly level: 'ok' | 'warn' | 'bad';
  /** One line with what to do, null at level ok. */
  readonly warning: string | null;
}

/** `GET /v1/events?after=&limit=&tail=&since=`: digits only (no coercion), ranges checked by the route. */
export interface EventsQuery {
  readonly after?: string;
  readonly limit?: string;
  /** The newest N events (1–1000), oldest first. */
  readonly tail?: string;
  /** Events at or after this arbiter time (epoch seconds, may be fractional). */
  readonly since?: string;
}

/** One row of the event log (`GET /v1/events`, and each `data:` line of `GET /v1/events/stream`). */
export interface EventRecord {
  readonly id: number;
  readonly at: number;
  readonly category: string;
  readonly event: string;
  readonly host: Host | null;
  readonly data: { readonly [key: string]: unknown };
}

/** `GET /v1/events` → 200. */
export interface EventsAnswer {
  readonly events: readonly EventRecord[];
}

export function isEventRecord(v: unknown): v is EventRecord {
  const e = fieldsOf(v);
  return (
    Number.isSafeInteger(e.id) &&
    typeof e.at === 'number' &&
    typeof e.category === 'string' &&
    typeof e.event === 'string' &&
    (e.host === null || typeof e.host === 'string') &&
    typeof e.data === 'object' &&
    e.data !== null
  );
}

/** The events of a `GET /v1/events` answer; a row that is not an event is left out. */
export function eventsOf(body: unknown): EventRecord[] {
  const events = fieldsOf(body).events;
  return Array.isArray(events) ? events.filter(isEventRecord) : [];
}
