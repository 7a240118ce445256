/**
 * Each member's own view (maintenance status), read member by member for health pages and tests;
 * apart from the calls because it asks every member, not the cluster.
 */
import type { MemberStatus } from './client-types.js';
import type { GatewayTransport } from './transport.js';
import { big, type WireHeader } from './wire.js';

/** What `EtcdClient.status` answers: every member concurrently, each within the dial timeout. */
export function memberStatuses(transport: GatewayTransport): Promise<MemberStatus[]> {
  return Promise.all(
    transport.endpoints.map(async (endpoint): Promise<MemberStatus> => {
      const a = await transport.attempt(
        endpoint,
        { path: '/v3/maintenance/status', body: {}, write: false, local: true },
        transport.dialTimeoutMs,
      );
      if (!a.ok) return { endpoint, ok: false, error: a.verdict.error.message };
      const w = a.json as {
        header?: WireHeader;
        leader?: string;
        version?: string;
        raftTerm?: string;
        errors?: string[];
        dbSize?: string;
        dbSizeInUse?: string;
        dbSizeQuota?: string;
      };
      const leader = w.leader === undefined || w.leader === '0' ? null : w.leader;
      const quota = Number(w.dbSizeQuota ?? 0);
      return {
        endpoint,
        ok: true,
        memberId: w.header?.member_id ?? '',
        leader,
        version: w.version ?? '',
        raftTerm: big(w.raftTerm),
        errors: w.errors ?? [],
        revision: big(w.header?.revision),
        dbSizeBytes: Number(w.dbSize ?? 0),
        dbSizeInUseBytes: Number(w.dbSizeInUse ?? w.dbSize ?? 0),
        quotaBytes: quota > 0 ? quota : null,
      };
    }),
  );
}
