/**
 * @hq/protocol/schemas — the TypeBox schemas of the contract, for the routes that validate and
 * serialize its bodies (Fastify with `@fastify/type-provider-typebox`) and the readers that check
 * a file or an answer. Each schema is checked at compile time against the type of the package
 * root that it describes (`Same`), and built from the root's constants (hosts, outcomes,
 * reasons, tiers). A subpath of its own: loading it loads TypeBox, which the fence path must not.
 */
export * from './common.js';
export * from './lease.js';
export * from './agent.js';
export * from './registry.js';
export * from './replication.js';
