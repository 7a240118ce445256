/**
 * The lease record, the observers' views and the events as SQLite rows and back: the one place that knows the
 * columns. Apart from the store, which only moves rows in and out of its transactions.
 */
import type { Displaced, LeaseState, Observer } from '@hq/lease-core';
import type { EventRow } from '../store.js';

export interface LeaseRow {
  holder: string | null;
  generation: number;
  revision: number;
  acquired_at: number | null;
  renewed_at: number | null;
  ttl_seconds: number;
  safety_margin_seconds: number;
  expires_at: number | null;
  released: number;
  not_before: number | null;
  floor_pending: number;
  dual_unreachable_streak: number;
  last_check_at: number | null;
  promoted_from: string | null;
  maintenance: number;
  maintenance_reason: string | null;
  /** JSON of lease-core `Displaced`, or null (migration 4). */
  displaced: string | null;
  floor: number;
}

export interface ObserverRow {
  observer: string;
  view_target: string | null;
  view_reachable: number | null;
  view_ping: number | null;
  view_health: number | null;
  view_at: number | null;
  conf_holder: string | null;
  conf_generation: number | null;
  conf_at: number | null;
  last_heartbeat_at: number | null;
  heartbeat_seconds: number | null;
  refresh_seconds: number | null;
  request_timeout_seconds: number | null;
}

export interface EventDbRow {
  id: number;
  at: number;
  category: string;
  event: string;
  host: string | null;
  data: string;
}

export function leaseFromRow(r: LeaseRow): LeaseState {
  return {
    holder: r.holder,
    generation: r.generation,
    revision: r.revision,
    acquiredAt: r.acquired_at,
    renewedAt: r.renewed_at,
    ttlSeconds: r.ttl_seconds,
    safetyMarginSeconds: r.safety_margin_seconds,
    expiresAt: r.expires_at,
    released: r.released === 1,
    notBefore: r.not_before,
    floorPending: r.floor_pending === 1,
    dualUnreachableStreak: r.dual_unreachable_streak,
    lastCheckAt: r.last_check_at,
    promotedFrom: r.promoted_from,
    maintenance: r.maintenance === 1,
    maintenanceReason: r.maintenance_reason,
    displaced: displacedFromColumn(r.displaced),
  };
}

/**
 * The `displaced` column back: a value that does not read as one is taken as none, which is the
 * cautious reading (without it no acknowledgement can end a lock-delay early).
 */
export function displacedFromColumn(text: string | null): Displaced | null {
  if (text === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  const d = v as { [k: string]: unknown } | null;
  const num = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
  const numOrNull = (x: unknown): x is number | null => x === null || num(x);
  if (
    d === null ||
    typeof d !== 'object' ||
    typeof d['host'] !== 'string' ||
    !num(d['generation']) ||
    !num(d['revision'])
  )
    return null;
  if (!numOrNull(d['floor']) || !numOrNull(d['acknowledgedAt']) || !numOrNull(d['savedSeconds'])) return null;
  return {
    host: d['host'],
    generation: d['generation'],
    revision: d['revision'],
    floor: d['floor'],
    acknowledgedAt: d['acknowledgedAt'],
    savedSeconds: d['savedSeconds'],
  };
}

export function leaseParams(l: LeaseState, floor: number): Record<string, string | number | null> {
  return {
    holder: l.holder,
    generation: l.generation,
    revision: l.revision,
    acquired_at: l.acquiredAt,
    renewed_at: l.renewedAt,
    ttl_seconds: l.ttlSeconds,
    safety_margin_seconds: l.safetyMarginSeconds,
    expires_at: l.expiresAt,
    released: l.released ? 1 : 0,
    not_before: l.notBefore,
    floor_pending: l.floorPending ? 1 : 0,
    dual_unreachable_streak: l.dualUnreachableStreak,
    last_check_at: l.lastCheckAt,
    promoted_from: l.promotedFrom,
    maintenance: l.maintenance ? 1 : 0,
    maintenance_reason: l.maintenanceReason,
    displaced: l.displaced === undefined || l.displaced === null ? null : JSON.stringify(l.displaced),
    floor,
  };
}

export function observerFromRow(r: ObserverRow): Observer {
  return {
    view:
      r.view_target === null
        ? null
        : {
            target: r.view_target,
            reachable: r.view_reachable === 1,
            ping: r.view_ping === 1,
            health: r.view_health === 1,
            at: r.view_at ?? 0,
          },
    confirmation:
      r.conf_holder === null ? null : { holder: r.conf_holder, generation: r.conf_generation ?? 0, at: r.conf_at ?? 0 },
    lastHeartbeatAt: r.last_heartbeat_at,
    heartbeatSeconds: r.heartbeat_seconds,
    refreshSeconds: r.refresh_seconds,
    requestTimeoutSeconds: r.request_timeout_seconds,
  };
}

export function observerParams(name: string, o: Observer): ObserverRow {
  return {
    observer: name,
    view_target: o.view?.target ?? null,
    view_reachable: o.view === null ? null : o.view.reachable ? 1 : 0,
    view_ping: o.view === null ? null : o.view.ping ? 1 : 0,
    view_health: o.view === null ? null : o.view.health ? 1 : 0,
    view_at: o.view?.at ?? null,
    conf_holder: o.confirmation?.holder ?? null,
    conf_generation: o.confirmation?.generation ?? null,
    conf_at: o.confirmation?.at ?? null,
    last_heartbeat_at: o.lastHeartbeatAt,
    heartbeat_seconds: o.heartbeatSeconds,
    refresh_seconds: o.refreshSeconds ?? null,
    request_timeout_seconds: o.requestTimeoutSeconds ?? null,
  };
}

export function eventFromRow(r: EventDbRow): EventRow {
  return {
    id: r.id,
    at: r.at,
    category: r.category,
    event: r.event,
    host: r.host,
    data: JSON.parse(r.data) as EventRow['data'],
  };
}
