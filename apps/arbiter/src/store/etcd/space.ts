/**
 * How close etcd is to its space quota, from the members' maintenance status. etcd compares
 * each member's database *file* size with that member's `--quota-backend-bytes`; past it, the
 * member raises the NOSPACE alarm and the whole cluster refuses every write (every hq mutation is
 * then a 503, and no failover can happen) until the history is compacted, every member is
 * defragmented and the alarm is disarmed. Compaction alone frees pages inside the file but never
 * shrinks it, so the file size is what is compared here too.
 */
import type { EtcdSpace } from '@hq/protocol';
import type { MemberStatus } from './client.js';

export type { EtcdSpace };

/**
 * Warn at 80 % of the quota. The database grows slowly once compaction runs (bounded by one
 * interval of history), so 80 % leaves days for a defragmentation or a larger quota; a higher
 * mark would leave too little room for a burst (an outage's events, a restore), a lower one
 * would warn on an installation that is merely large.
 */
export const SPACE_WARN_RATIO = 0.8;

/** etcd's own default `--quota-backend-bytes` (2 GiB). */
export const ETCD_DEFAULT_QUOTA_BYTES = 2 * 1024 ** 3;

export function bytesText(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(n % 1024 ** 3 === 0 ? 0 : 1)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(n % 1024 ** 2 === 0 ? 0 : 1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(0)} KiB`;
  return `${n} B`;
}

/** The space of the members that answered (null when none did); `configuredQuotaBytes` when no member says its own. */
export function etcdSpace(members: readonly MemberStatus[], configuredQuotaBytes: number): EtcdSpace | null {
  const up = members.filter((m): m is Extract<MemberStatus, { ok: true }> => m.ok);
  if (up.length === 0) return null;
  const biggest = up.reduce((a, b) => (b.dbSizeBytes > a.dbSizeBytes ? b : a));
  const said = up.map((m) => m.quotaBytes).filter((q): q is number => q !== null);
  const quotaBytes = said.length > 0 ? Math.min(...said) : configuredQuotaBytes;
  const usedRatio = biggest.dbSizeBytes / quotaBytes;
  const alarm = up.some((m) => m.errors.some((e) => e.includes('NOSPACE')));
  const level = alarm ? 'bad' : usedRatio >= SPACE_WARN_RATIO ? 'warn' : 'ok';
  const size = `${bytesText(biggest.dbSizeBytes)} of its ${bytesText(quotaBytes)} quota (${Math.round(usedRatio * 100)} %, ${bytesText(biggest.dbSizeInUseBytes)} in use)`;
  const warning = alarm
    ? `etcd raised the NOSPACE alarm (database ${size}): it refuses every write; on each member run etcdctl defrag, then etcdctl alarm disarm (deploy/README.md, "etcd's space")`
    : level === 'warn'
      ? `etcd's database is ${size} on ${biggest.endpoint}: past the quota etcd refuses every write; run etcdctl defrag on each member, or raise --quota-backend-bytes (and store.quotaBackendBytes)`
      : null;
  return {
    dbSizeBytes: biggest.dbSizeBytes,
    dbSizeInUseBytes: biggest.dbSizeInUseBytes,
    quotaBytes,
    quotaFrom: said.length > 0 ? 'members' : 'config',
    usedRatio,
    alarm,
    level,
    warning,
  };
}
