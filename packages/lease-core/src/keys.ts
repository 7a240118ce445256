/**
 * Which daemon owns each configuration key (S6: every setting has one owner). A key in the
 * wrong daemon's file is refused like an unknown key, with one line that names its owner, so a
 * copied config cannot silently carry one side's assumption about the other's value.
 */

export type Daemon = 'hq-arbiter' | 'hq-agent';

/** Keys only the arbiter reads: the lease timing and everything about promotion and storage. */
export const ARBITER_ONLY_KEYS: readonly string[] = Object.freeze([
  'candidates',
  'standby',
  'ttlSeconds',
  'viewFreshSeconds',
  'promoteAfterChecks',
  'safetyMarginSeconds',
  'checkCron',
  'dataDir',
  'store',
  'auth',
  'hooks',
  'portBands',
  'events',
]);

/** Keys only an agent (and the `hq` CLI, which reads the agent's file) reads: its cadence and its host. */
export const AGENT_ONLY_KEYS: readonly string[] = Object.freeze([
  'hostName',
  'arbiterUrl',
  'arbiterUrls',
  'handoverOnStop',
  'heartbeatCron',
  'refreshSeconds',
  'requestTimeoutSeconds',
  'failOpenRoles',
  'roles',
  'stateDir',
  'socketPath',
  'tokenFile',
  'peers',
  'peerTokenFile',
  'queryTokenFile',
  'advertiseUrl',
  'replication',
]);

/** Why the other side does not need the key: how it learns the value instead. */
const HOW_LEARNED: Readonly<Record<Daemon, string>> = Object.freeze({
  'hq-arbiter': 'agents read the lease timing from the record and the candidates from the arbiter',
  'hq-agent': "the arbiter learns each agent's cadence from its heartbeats",
});

/**
 * The one line for a key that belongs to the other daemon, or null when `key` is not the
 * other daemon's either (then it is simply unknown).
 */
export function wrongDaemon(key: string, reader: Daemon): string | null {
  const owner: Daemon | null = ARBITER_ONLY_KEYS.includes(key)
    ? 'hq-arbiter'
    : AGENT_ONLY_KEYS.includes(key)
      ? 'hq-agent'
      : null;
  if (owner === null || owner === reader) return null;
  return `is a key of ${owner}'s config, not of ${reader}'s: each setting has one owner (${HOW_LEARNED[owner]}); remove it here`;
}
