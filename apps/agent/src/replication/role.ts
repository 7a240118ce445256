/**
 * `hq standby role`: how this host runs its replication job, decided by lease-core's
 * `replicationRole` (the seeds' standby-role rules) from what the shell gathers: the arbiter's
 * record (or null when it cannot be read) and this host's seen generation.
 *
 * An unreadable lease (arbiter outage) is `fenced`, as in the seeds: the fence decides from the
 * agent's cache, so the holder keeps replicating on `quorum-standby` and every other host skips.
 */
import { replicationRole, type ReplicationRole, type RoleReason } from '@hq/lease-core';
import { isHost } from '@hq/protocol';

export interface RoleAnswer {
  readonly host: string;
  readonly defaultSource: readonly string[];
  readonly role: ReplicationRole;
  readonly reason: RoleReason;
  readonly holder: string | null;
  readonly generation: number | null;
  readonly seenGeneration: number;
}

/** `H[,alias…]` → the names, or the problem. */
export function parseDefaultSource(text: string): string[] | string {
  const names = text.split(',');
  if (names.length === 0 || names.some((n) => n === ''))
    return '--default-source must be H or H,ALIAS (no empty names)';
  const bad = names.find((n) => !isHost(n));
  if (bad !== undefined) return `--default-source: "${bad}" is not a host name`;
  return names;
}

/** A lease record as the arbiter sends it → the role input; anything else is unreadable. */
export function leaseOf(body: unknown): { holder: string | null; generation: number } | null {
  if (typeof body !== 'object' || body === null) return null;
  const o = body as { holder?: unknown; generation?: unknown };
  const g = o.generation;
  if (typeof g !== 'number' || !Number.isSafeInteger(g) || g < 0) return null;
  if (o.holder !== null && !isHost(o.holder)) return null;
  return { holder: o.holder as string | null, generation: g };
}

export function decideRole(input: {
  readonly host: string;
  readonly defaultSource: readonly string[];
  readonly lease: { readonly holder: string | null; readonly generation: number } | null;
  readonly seenGeneration: number;
}): RoleAnswer {
  const d = replicationRole(input);
  return {
    host: input.host,
    defaultSource: input.defaultSource,
    role: d.role,
    reason: d.reason,
    holder: input.lease?.holder ?? null,
    generation: input.lease?.generation ?? null,
    seenGeneration: input.seenGeneration,
  };
}
