/** Structured events: every decision says what happened as data, the shell logs it. */
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
  | 'generation-refused'
  | 'generation-accepted'
  | 'floor-complete'
  | 'start-wait-lifted'
  | 'imported'
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

export interface LeaseEvent {
  readonly category: Category;
  readonly event: EventName;
  readonly host: string | null;
  readonly data: { readonly [key: string]: string | number | boolean | null };
}

export function leaseEvent(
  event: EventName,
  host: string | null,
  data: LeaseEvent['data'] = {},
  category: Category = 'hq.lease',
): LeaseEvent {
  return { category, event, host, data };
}
