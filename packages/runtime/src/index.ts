export * from './schedule.js';
export * from './cron-gap.js';
