/** Structured events (SPEC §7): every decision says what happened as data, the shell logs it. */
export type Category = 'hq.lease' | 'hq.fence' | 'hq.standby' | 'control';

export type EventName =
  | 'acquired'
  | 'renewed'
  | 'released'
  | 'acquire-refused'
  | 'renew-refused'
  | 'release-refused'
  | 'standby'
  | 'quorum-standby'
  | 'arbiter-unreachable'
  | 'no-lease'
  | 'generation-adopted'
  | 'generation-raised'
  | 'floor-complete'
  | 'start-wait-lifted'
  | 'expired-seen'
  | 'promoted'
  | 'arbiter-check'
  | 'maintenance'
  | 'confirmation-given'
  | 'confirmation-refused'
  | 'step-down'
  | 'stepped-down'
  | 'step-down-refused'
  | 'step-down-undone'
  | 'stale-generation'
  | 'allowed'
  | 'skipped'
  | 'cli-override'
  | 'cli-refused';

/**
 * The events a CLI command reports to its local agent (`POST /v1/events` on the agent's socket),
 * so they land in the agent's log beside its own: the sender side of standby replication
 * (`hq standby snapshot|promote|role`) and primary resolution (`hq primary`). A closed list per
 * category: the agent refuses any other pair, so a log reader can rely on these names.
 */
export const REPORTED_EVENTS = Object.freeze({
  'hq.standby': Object.freeze(['generation', 'failed', 'config-host-local-stripped', 'promoted', 'promote-refused', 'role'] as const),
  control: Object.freeze(['primary-resolved'] as const),
});

export type ReportedCategory = keyof typeof REPORTED_EVENTS;
export type ReportedEvent<C extends ReportedCategory = ReportedCategory> = (typeof REPORTED_EVENTS)[C][number];

/** A reported event's data: at most this many flat scalar fields (strings at most 256 characters). */
export const REPORTED_DATA_LIMITS = Object.freeze({ maxFields: 24, maxString: 256 });

export interface LeaseEvent {
  readonly category: Category;
  readonly event: EventName;
  readonly host: string | null;
  readonly data: { readonly [key: string]: string | number | boolean | null };
}

export function leaseEvent(event: EventName, host: string | null, data: LeaseEvent['data'] = {}, category: Category = 'hq.lease'): LeaseEvent {
  return { category, event, host, data };
}
