/**
 * The arbiter verbs of `hq`, one file per command group: lease-status.ts, lease-acquire.ts (acquire, renew),
 * lease-release.ts, lease-admin.ts (maintenance, accept-generation, failover), events.ts; lease-record.ts and
 * lease-wait.ts are what they share. This module re-exports them for callers that name it.
 */
export { leaseAcquire, leaseRenew } from './lease-acquire.js';
export { failover, leaseAcceptGeneration, maintenance } from './lease-admin.js';
export { agentRefuses, waitNote } from './lease-record.js';
export { leaseRelease, releasedLine } from './lease-release.js';
export { leaseStatus } from './lease-status.js';
export { eventFilter, events, eventsStart, parseSince, readableData } from './events.js';
