/**
 * @hq/lease-core — every decision hq makes, as pure functions. No I/O, no clock, no logger:
 * the daemons read, call one of these with `now`, write once, then log what it returned.
 */
export * from './events.js';
export * from './record.js';
export * from './timing.js';
export * from './keys.js';
export * from './cron.js';
export * from './arbiter.js';
export * from './wait.js';
export * from './generation-bound.js';
export * from './agent.js';
export * from './heartbeat.js';
export * from './role.js';
export * from './guard.js';
export * from './version.js';
export * from './suggest.js';
