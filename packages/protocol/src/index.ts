/**
 * @hq/protocol — the contract between hq's processes: what crosses a process
 * boundary, written once and imported by every side (arbiter, agent, CLI, replication,
 * lease-core), so a change of a reason, an outcome or a field is a compile error wherever it
 * matters. Plain types and constants only, no dependencies: the fence path loads it (or just
 * `@hq/protocol/fence`). The TypeBox schemas of these bodies are `@hq/protocol/schemas`.
 */
export * from './answer.js';
export * from './host.js';
export * from './roles.js';
export * from './fence.js';
export * from './errors.js';
export * from './lease.js';
export * from './agent.js';
export * from './registry.js';
export * from './replication.js';
export * from './version.js';
