/**
 * The replication role (the seeds' standby-role rules): how a host should run its
 * standby copy job.
 *  - a lease exists → `fenced` (the copy runs under `hq fence run`, so only the holder copies);
 *  - the lease cannot be read (arbiter outage) → `fenced`: the job then runs where the fence says
 *    so, and during an outage the holder's fence answers `quorum-standby` from its cache, so
 *    replication keeps going from the holder and nowhere else (a host with no cached lease skips);
 *  - no lease yet, never a generation seen, this host is the default source → `direct`;
 *  - no lease, not the default source → `skip`;
 *  - no lease but a generation was seen before (a wiped arbiter?) → `skip`.
 */
export type ReplicationRole = 'direct' | 'fenced' | 'skip';

export type RoleReason =
  | 'lease-exists'
  | 'lease-unreadable'
  | 'no-lease-default-source'
  | 'no-lease-not-default'
  | 'no-lease-after-seen';

export interface RoleInput {
  readonly host: string;
  /** The default source and its aliases, e.g. `["node-b", "node-b-old"]`. */
  readonly defaultSource: readonly string[];
  /** The lease as the agent knows it; `null` when it could not be read. */
  readonly lease: { readonly holder: string | null; readonly generation: number } | null;
  readonly seenGeneration: number;
}

export function replicationRole(input: RoleInput): { readonly role: ReplicationRole; readonly reason: RoleReason } {
  if (input.lease === null) return { role: 'fenced', reason: 'lease-unreadable' };
  if (input.lease.holder !== null || input.lease.generation > 0) return { role: 'fenced', reason: 'lease-exists' };
  if (input.seenGeneration > 0) return { role: 'skip', reason: 'no-lease-after-seen' };
  if (input.defaultSource.includes(input.host)) return { role: 'direct', reason: 'no-lease-default-source' };
  return { role: 'skip', reason: 'no-lease-not-default' };
}
