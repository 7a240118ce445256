/**
 * The phase line at the top of the status page: the first of no holder, holder silent, a wait, a broken
 * relation, running that applies. Apart from the rows because its precedence order is the page's one rule.
 */
import type { LeaseRecord, TimingProblem } from '@hq/protocol';
import type { HostStatusT, PeerPathStatusT, StatusAnswerT } from '../../schemas/status.js';
import { fmtSeconds } from './format.js';

type Phase = StatusAnswerT['phase'];

/** 1. Nobody may run: no holder, or its lease released or expired. */
function noHolderPhase(record: LeaseRecord): Phase | null {
  const holder = record.holder;
  if (!(holder === null || record.released || record.expired || record.expiresAt === null)) return null;
  if (record.floorPending)
    return {
      name: 'no-holder',
      level: 'bad',
      text: 'no host may run: a new database waits until every candidate reports the generation it has seen',
    };
  if (holder === null)
    return {
      name: 'no-holder',
      level: 'bad',
      text: 'no host may run: nobody holds the lease; nothing runs until a candidate runs hq lease acquire',
    };
  if (record.released)
    return {
      name: 'no-holder',
      level: 'bad',
      text: `no host may run: ${holder} released the lease without a handover; nothing brings HQ back until a candidate runs hq lease acquire`,
    };
  return {
    name: 'no-holder',
    level: 'bad',
    text: `no host may run: ${holder}'s lease expired; nothing runs until a candidate acquires it`,
  };
}

/** 2. The holder does not report, or the arbiter and a standby cannot reach it. */
function holderSilentPhase(
  holder: string,
  record: LeaseRecord,
  hosts: readonly HostStatusT[],
  promoteAfterChecks: number,
): Phase | null {
  const row = hosts.find((h) => h.host === holder);
  const streak = record.dualUnreachableStreak;
  if (!(row?.heartbeatProblem ?? false) && streak <= 0) return null;
  let heard = 'unreachable (it still reports)';
  if (row?.heartbeatProblem === true) {
    // Never heard from, or its last request refused: the cell says which; else how long.
    const age = row.lastHeartbeatAgeSeconds;
    heard =
      age === null || row.heartbeatText.startsWith('refused')
        ? `silent (heartbeat: ${row.heartbeatText})`
        : `silent: no heartbeat for ${fmtSeconds(age)}`;
  }
  const checks =
    streak > 0
      ? `; unreachable in ${streak} of the ${promoteAfterChecks} checks that promote a standby`
      : '; its lease runs out unless it renews';
  return { name: 'holder-silent', level: 'bad', text: `${holder}, the holder, is ${heard}${checks}` };
}

/** 3. Granted, but not yet allowed to run: the record says which wait holds it, and why. */
function waitPhase(holder: string, record: LeaseRecord): Phase | null {
  const how = record.promotedFrom !== null ? `was promoted from ${record.promotedFrom}` : 'acquired the lease';
  const wait = record.wait ?? null;
  if (wait !== null)
    return { name: 'lock-delay', level: 'warn', text: `${holder} ${how} and may not run yet: ${wait.text}` };
  if (record.floorPending)
    return {
      name: 'lock-delay',
      level: 'warn',
      text: `${holder} holds the lease but may not run yet: a new database waits until every candidate reports its seen generation`,
    };
  if (record.notBefore !== null && record.notBefore > record.now) {
    return {
      name: 'lock-delay',
      level: 'warn',
      text: `${holder} ${how} and may not run before ${new Date(record.notBefore * 1000).toISOString()}`,
    };
  }
  return null;
}

/**
 * 4. The settings across the sides break failover; 4b. a standby could not confirm a candidate:
 * an arbiter outage would stop HQ instead of failing over.
 */
function brokenPhase(problems: readonly TimingProblem[], paths: readonly PeerPathStatusT[]): Phase | null {
  const first = problems[0];
  if (first !== undefined)
    return {
      name: 'timing-problem',
      level: 'bad',
      text: `timing problem: ${first.message}${problems.length > 1 ? ` (and ${problems.length - 1} more below)` : ''}`,
    };
  const broken = paths.filter((p) => !p.ok);
  const b0 = broken[0];
  if (b0 !== undefined)
    return {
      name: 'peer-path-broken',
      level: 'bad',
      text: `peer path broken: ${b0.text}${broken.length > 1 ? ` (and ${broken.length - 1} more below)` : ''}`,
    };
  return null;
}

/** 5. The holder runs, but a standby is gone: no failover to it until it is back; else healthy. */
function runningPhase(holder: string, record: LeaseRecord, hosts: readonly HostStatusT[]): Phase {
  const standbys = hosts.filter((h) => h.role === 'standby');
  const gone = standbys.filter((h) => h.heartbeatProblem).map((h) => h.host);
  const live = standbys.filter((h) => !h.heartbeatProblem).map((h) => h.host);
  const by = (names: readonly string[]): string => `${names.join(', ')} ${names.length === 1 ? 'stands' : 'stand'} by`;
  if (gone.length > 0) {
    const silent = `${gone.join(', ')} ${gone.length === 1 ? 'is' : 'are'} silent`;
    const rest =
      live.length === 0 ? `so there is no standby until ${gone.length === 1 ? 'it is' : 'they are'} back` : by(live);
    if (record.promotedFrom !== null && gone.includes(record.promotedFrom)) {
      return {
        name: 'failed-over',
        level: 'warn',
        text: `${holder} took over from ${record.promotedFrom} (generation ${record.generation}) and runs; ${silent}, ${rest}`,
      };
    }
    return {
      name: 'standby-down',
      level: 'warn',
      text: `${holder} holds the lease and runs; standby ${silent}, ${rest}`,
    };
  }
  return {
    name: 'healthy',
    level: 'ok',
    text: `${holder} holds the lease and runs${live.length > 0 ? `; ${by(live)}` : ''}`,
  };
}

/** What is going on, in one line and one colour (the top of the page): the first phase that applies. */
export function phaseOf(
  record: LeaseRecord,
  hosts: readonly HostStatusT[],
  promoteAfterChecks: number,
  problems: readonly TimingProblem[],
  paths: readonly PeerPathStatusT[] = [],
): Phase {
  const none = noHolderPhase(record);
  if (none !== null) return none;
  const holder = record.holder as string;
  return (
    holderSilentPhase(holder, record, hosts, promoteAfterChecks) ??
    waitPhase(holder, record) ??
    brokenPhase(problems, paths) ??
    runningPhase(holder, record, hosts)
  );
}
