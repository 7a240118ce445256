/**
 * Standby replication (SPEC §6). The agent wires two things:
 *  - `replicationPeerRoutes` on its peer listener, with a `StandbyReceiver` and a peer-token check;
 *  - `standbyCommand` (or `STANDBY_COMMANDS`) in the `hq` command table as `hq standby …`.
 */
export { replicationPeerRoutes, type ReplicationPeerRoutesOptions } from './routes.js';
export { standbyPeerOptions } from './wire.js';
export { StandbyReceiver, type ReceiverOptions, type ReceiverLog } from './receiver.js';
export { standbyCommand, standbySnapshot, standbyVerify, standbyPromote, standbyRole, STANDBY_COMMANDS, STANDBY_SPECS, type StandbyContext } from './cli.js';
export {
  ReplicationConfigSchema,
  REPLICATION_DEFAULTS,
  DEFAULT_PLAN,
  planIsEmpty,
  validateReplication,
  resolveReplication,
  loadAgentWithReplication,
  type ReplicationConfig,
  type ReplicationConfigFile,
} from './config.js';
export { buildSnapshot, survivalSubset, stripHostLocal, SnapshotError, type SnapshotResult } from './snapshot.js';
export { planTier, type Plan, type Planned } from './plan.js';
export { pushGeneration, type PushResult } from './push.js';
export { pushSurvival, type SurvivalResult } from './survival.js';
export { verifyTier, checkGenerationDir, formatVerification, type TierVerification } from './verify.js';
export { promote, formatPromote, PromoteError, type PromoteSummary } from './promote.js';
export { decideRole, parseDefaultSource } from './role.js';
export * from './manifest.js';
