export * from './arbiter-shell.js';
export * from './config.js';
export { manualClock, steadyClock, type Clock, type ManualClock } from '@hq/runtime/clock';
export * from './server/runtime.js';
export * from './store/sqlite/lease.js';
export * from './store/store.js';
