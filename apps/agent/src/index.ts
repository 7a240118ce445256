export * from './config.js';
export * from './clock.js';
export * from './files.js';
export * from './state.js';
export * from './tokens.js';
export * from './guard-path.js';
export { superviseFence, EXIT_LOST } from './fence-run.js';
export { Agent, VERSION } from './daemon/agent.js';
export { startDaemon } from './daemon/main.js';
