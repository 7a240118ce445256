/**
 * `hq lease status`: the record, its validity and waits, the failover the arbiter states, the observers' views.
 * Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import { fieldsOf, runWindow, type LeaseRecord } from '@hq/protocol';
import { flagBool, type Parsed } from './args.js';
import { arbiter, failure, memberToken, reportFailure, networkForReading, out, type Resolved } from './context.js';
import { fmtAge, waitNote } from './lease-record.js';

/** Left-aligned columns, two spaces apart; the last column is not padded. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((x, i) => (i === cells.length - 1 ? x : x.padEnd(widths[i] ?? 0))).join('  ');
  return [line(header), ...rows.map(line)];
}

interface ArbiterTiming {
  failoverSeconds: number | null;
  lockDelaySeconds: number | null;
  /** The arbiter's own sentence (lease-core `describeFailover`): the CLI computes nothing itself (S6). */
  failover: string;
  /** The cross-side relations the agents' reports break, as the arbiter states them. */
  timingProblems: string[];
  /** The broken confirmation paths between candidates, as the arbiter states them. */
  peerPathProblems: string[];
}

/** The worst-case failover and the timing problems, from the arbiter's `GET /v1/status`. */
async function timingOf(c: Resolved, token: string | null): Promise<ArbiterTiming> {
  const r = await arbiter(c, 'GET', '/v1/status', undefined, token);
  const b = fieldsOf(r.kind === 'answer' && r.status === 200 ? r.body : null);
  const f = fieldsOf(b.failover);
  const problems = Array.isArray(b.timingProblems)
    ? b.timingProblems.map((p) => fieldsOf(p).message).filter((m): m is string => typeof m === 'string')
    : [];
  const paths = Array.isArray(b.peerPaths)
    ? b.peerPaths
        .map(fieldsOf)
        .filter((p) => p.ok === false && typeof p.text === 'string')
        .map((p) => p.text as string)
    : [];
  return {
    failoverSeconds: typeof f.seconds === 'number' ? f.seconds : null,
    lockDelaySeconds: typeof f.lockDelaySeconds === 'number' ? f.lockDelaySeconds : null,
    failover: typeof f.text === 'string' ? f.text : 'unknown (the arbiter does not serve /v1/status)',
    timingProblems: problems,
    peerPathProblems: paths,
  };
}

export async function leaseStatus(p: Parsed): Promise<number> {
  const c = await networkForReading(p);
  const token = await memberToken(c).catch(() => null);
  const r = await arbiter(c, 'GET', '/v1/lease', undefined, token);
  if (r.kind !== 'answer' || r.status !== 200) {
    const f = failure(r, 'lease status', c);
    reportFailure(f, p);
    return f.code;
  }
  const rec = r.body as LeaseRecord;
  const now = rec.now;
  // The validity counts from the end of a wait (lock-delay, start wait): what the holder may run for, never more than the TTL.
  const window = runWindow(rec);
  const validFor = window === null ? 0 : window.validSeconds;
  const lockDelay = rec.notBefore === null ? 0 : Math.max(0, rec.notBefore - now);
  const views = Object.entries(rec.views ?? {}).map(([observer, v]) => ({ observer, ...v, ageSeconds: now - v.at }));
  const fo = await timingOf(c, token);
  if (flagBool(p, 'json')) {
    out(
      true,
      {
        lease: rec,
        validForSeconds: validFor,
        lockDelayLeftSeconds: lockDelay,
        views,
        maintenance: rec.maintenance ?? false,
        ...fo,
      },
      '',
    );
    return 0;
  }
  let validity =
    rec.released === true
      ? 'released'
      : rec.expired
        ? 'expired'
        : rec.holder === null
          ? 'no lease'
          : `${fmtAge(validFor)} left`;
  if (rec.holder !== null && !rec.released && !rec.expired && rec.floorPending === true)
    validity = 'may run once every candidate has reported its seen generation';
  else if (window !== null && window.startsInSeconds > 0) {
    validity = `may run in ${fmtAge(window.startsInSeconds)} (at ${new Date(window.from * 1000).toISOString()}), then for ${fmtAge(validFor)} (until ${new Date(window.until * 1000).toISOString()})`;
  }
  const wait = rec.released === true || rec.expired ? null : waitNote(rec);
  const lines = [
    `holder       ${rec.holder ?? 'none'}`,
    `generation   ${rec.generation} (revision ${rec.revision}${rec.promotedFrom !== null ? `, promoted from ${rec.promotedFrom}` : ''})`,
    `validity     ${validity} (ttl ${rec.ttlSeconds} s)`,
    ...(wait === null ? [] : [`waiting      ${wait.left === null ? '' : `${fmtAge(wait.left)} left: `}${wait.text}`]),
    `maintenance  ${rec.maintenance === true ? 'on' : 'off'}`,
    `failover     ${fo.failover}`,
    ...fo.timingProblems.map((m, i) => `${i === 0 ? 'timing' : '      '}       PROBLEM: ${m}`),
    ...fo.peerPathProblems.map((m, i) => `${i === 0 ? 'peer path' : '         '}    PROBLEM: ${m}`),
    ...(rec.dualUnreachableStreak > 0 ? [`streak       ${rec.dualUnreachableStreak} dual-unreachable check(s)`] : []),
    '',
    ...(views.length === 0
      ? ['no observer views']
      : table(
          ['observer', 'target', 'reachable', 'ping', 'health', 'age'],
          views.map((v) => [
            v.observer,
            v.target,
            v.reachable ? 'yes' : 'no',
            v.ping ? 'ok' : 'no',
            v.health ? 'ok' : 'no',
            fmtAge(v.ageSeconds),
          ]),
        )),
  ];
  out(false, null, lines.join('\n'));
  return 0;
}
