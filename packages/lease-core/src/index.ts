/**
 * @hq/lease-core — every decision hq makes, as pure functions. No I/O, no clock, no logger:
 * the daemons read, call one of these with `now`, write once, then log what it returned.
 */
export * from './events.js';
export * from './record.js';
export * from './timing.js';
export * from './keys.js';
export * from './cron.js';
// The state and rules every arbiter decision shares; its write and grant helpers stay internal.
export {
  type ArbiterSettings,
  type ArbiterState,
  type Boot,
  type Context,
  type Step,
  type Verdict,
  isCandidate,
  lockDelayUntil,
  newBoot,
  noteReport,
  renewHold,
  reportDue,
  startWaitUntil,
} from './arbiter.js';
export * from './arbiter/restart.js';
export * from './arbiter/acquire.js';
export * from './arbiter/renew.js';
export * from './arbiter/heartbeat.js';
export { SILENCE_FACTOR, SILENCE_SLACK_SECONDS, type Silence, targetSilence, release } from './arbiter/release.js';
export * from './arbiter/transfer.js';
export * from './arbiter/maintenance.js';
export * from './arbiter/step-down.js';
export * from './arbiter/import.js';
export * from './arbiter/check.js';
export * from './wait.js';
export * from './generation-bound.js';
export * from './agent.js';
export * from './agent/confirm.js';
export * from './agent/step-down.js';
export * from './fence.js';
export * from './heartbeat.js';
export * from './role.js';
export * from './guard.js';
