/**
 * Seeded fault schedules and their execution on a NetnsCluster: each schedule is settle →
 * 1–3 faults (random kind, target, start and length inside a window) → heal → recovery →
 * check. The same seed gives the same schedules (the timing of the real processes differs).
 */
import {
  DAEMONS,
  ETCD_DAEMONS,
  ETCD_LINKS,
  ETCD_MEMBERS,
  FAST_ETCD_STORE,
  HOSTS,
  LINKS,
  LINK_ENDS,
  NetnsCluster,
  hr,
  sleep,
  type Daemon,
  type Host,
  type Link,
  type Node,
  type StoreKind,
} from './cluster.js';
import { check, type Report } from './checker.js';

/** mulberry32: small, fast, good enough to pick faults. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export type Fault =
  | { kind: 'cut-link'; link: Link; start: number; length: number }
  | { kind: 'one-way'; link: Link; from: Node; start: number; length: number }
  | { kind: 'delay-loss'; link: Link; start: number; length: number }
  | { kind: 'kill'; daemon: Daemon; start: number; length: number }
  | { kind: 'stop'; host: Host; start: number; length: number }
  | { kind: 'clock-jump'; daemon: Daemon; offset: number; start: number; length: number }
  | { kind: 'sleep'; host: Host; start: number; length: number }
  // store etcd only: kill -9 / SIGSTOP of whichever arbiter is elected when the fault starts, kill -9 of an etcd member
  | { kind: 'kill-elected'; start: number; length: number }
  | { kind: 'stop-elected'; start: number; length: number }
  | { kind: 'etcd-kill'; member: number; start: number; length: number };

export type FaultKind = Fault['kind'];
export const FAULT_KINDS: readonly FaultKind[] = [
  'cut-link',
  'one-way',
  'delay-loss',
  'kill',
  'stop',
  'clock-jump',
  'sleep',
];
/** The faults only a store etcd cluster has (partitions between the arbiters and etcd are link faults on `arb-etcd`). */
export const ETCD_FAULT_KINDS: readonly FaultKind[] = ['kill-elected', 'stop-elected', 'etcd-kill'];
export const ALL_FAULT_KINDS: readonly FaultKind[] = [...FAULT_KINDS, ...ETCD_FAULT_KINDS];

export interface Schedule {
  readonly index: number;
  readonly seed: number;
  readonly faults: readonly Fault[];
}

/** Past the TTL (6 s) of the fast settings: a stop or a sleep shorter than that proves little. */
const PAST_TTL = 7;
/** Past the arbiters' election TTL: a stopped elected arbiter loses its term (and must not act on waking). */
const PAST_ELECTION_TTL = FAST_ETCD_STORE.electionTtlSeconds + 1;

export function describe(f: Fault): string {
  const when = `@${f.start.toFixed(1)}+${f.length.toFixed(1)}s`;
  switch (f.kind) {
    case 'cut-link':
    case 'delay-loss':
      return `${f.kind}(${f.link})${when}`;
    case 'one-way':
      return `one-way(${f.link} from ${f.from})${when}`;
    case 'kill':
      return `kill(${f.daemon})${when}`;
    case 'stop':
    case 'sleep':
      return `${f.kind}(${f.host})${when}`;
    case 'clock-jump':
      return `clock-jump(${f.daemon} ${f.offset >= 0 ? '+' : ''}${f.offset}s)${when}`;
    case 'kill-elected':
    case 'stop-elected':
      return `${f.kind}${when}`;
    case 'etcd-kill':
      return `etcd-kill(${f.member})${when}`;
  }
}

/**
 * Schedule `index` of a run with `seed`: 1–3 faults inside a window of `window` seconds, of the
 * kinds in `opts.kinds` (default: all of the store's; clock jumps only where libfaketime is
 * installed). The same seed with another kinds filter gives other schedules. Store etcd (its
 * links, daemons and kinds): the first fault is always one of etcd's — kill -9 or SIGSTOP of
 * the elected arbiter, kill -9 of an etcd member, or a fault of the `arb-etcd` link — and the
 * others are drawn from every kind.
 */
export function makeSchedule(
  seed: number,
  index: number,
  window: number,
  opts: { clockJumps: boolean; kinds?: readonly FaultKind[]; store?: StoreKind },
): Schedule {
  const s = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  const r = rng(s);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const etcd = opts.store === 'etcd';
  const kinds = (opts.kinds ?? (etcd ? ALL_FAULT_KINDS : FAULT_KINDS))
    .filter((k) => k !== 'clock-jump' || opts.clockJumps)
    .filter((k) => etcd || !ETCD_FAULT_KINDS.includes(k));
  if (kinds.length === 0) throw new Error('no fault kind left to pick from');
  const links = etcd ? ETCD_LINKS : LINKS;
  const daemons = etcd ? ETCD_DAEMONS : DAEMONS;
  const LINK_KINDS: readonly FaultKind[] = ['cut-link', 'one-way', 'delay-loss'];
  // store etcd: the first fault from etcd's own (the link kinds then on arb-etcd)
  const firstKinds = etcd ? kinds.filter((k) => ETCD_FAULT_KINDS.includes(k) || LINK_KINDS.includes(k)) : [];
  const n = 1 + Math.floor(r() * 3);
  const faults: Fault[] = [];
  const usedLinks = new Set<Link>();
  const usedProcs = new Set<string>();
  for (let tries = 0; faults.length < n && tries < 50; tries++) {
    const etcdFirst = faults.length === 0 && firstKinds.length > 0;
    const kind = pick(etcdFirst ? firstKinds : kinds);
    const start = Math.round(r() * (window * 0.6) * 10) / 10;
    const long = kind === 'stop' || kind === 'sleep';
    const length =
      Math.round(
        (long
          ? PAST_TTL + r() * 6
          : kind === 'stop-elected'
            ? PAST_ELECTION_TTL + r() * 5
            : 1 + r() * (window - start - 1)) * 10,
      ) / 10;
    if (kind === 'kill-elected' || kind === 'stop-elected') {
      if (usedProcs.has('elected')) continue;
      usedProcs.add('elected');
      faults.push({ kind, start, length });
    } else if (kind === 'etcd-kill') {
      const member = Math.floor(r() * ETCD_MEMBERS.length);
      if (usedProcs.has(`etcd-${member}`)) continue;
      usedProcs.add(`etcd-${member}`);
      faults.push({ kind, member, start, length });
    } else if (kind === 'cut-link' || kind === 'one-way' || kind === 'delay-loss') {
      const link = etcdFirst ? 'arb-etcd' : pick(links);
      if (usedLinks.has(link)) continue;
      usedLinks.add(link);
      if (kind === 'one-way') faults.push({ kind, link, from: pick(LINK_ENDS[link]).node, start, length });
      else faults.push({ kind, link, start, length });
    } else if (kind === 'kill' || kind === 'clock-jump') {
      const daemon = pick(daemons);
      if (usedProcs.has(daemon)) continue;
      usedProcs.add(daemon);
      if (kind === 'kill') faults.push({ kind, daemon, start, length });
      else faults.push({ kind, daemon, offset: (r() < 0.5 ? -1 : 1) * (10 + Math.floor(r() * 50)), start, length });
    } else {
      const host = pick(HOSTS);
      if (usedProcs.has(host)) continue;
      usedProcs.add(host);
      faults.push({ kind, host, start, length });
    }
  }
  faults.sort((a, b) => a.start - b.start);
  return { index, seed: s, faults };
}

export interface ScheduleResult {
  readonly schedule: Schedule;
  readonly report: Report;
  /** Seconds from the heal until a host may run again (null: none did in time). */
  readonly recovery: number | null;
  readonly seconds: number;
  readonly dir: string | null;
  readonly errors: readonly string[];
  /** Seconds spent in each phase. */
  readonly phases: { readonly [k: string]: number };
}

/** Runs one schedule on a fresh cluster and checks its history. */
export async function runSchedule(
  schedule: Schedule,
  opts: { window: number; keepFailed?: boolean; keepAll?: boolean; tag?: string; store?: StoreKind; root?: string },
): Promise<ScheduleResult> {
  const began = hr();
  const errors: string[] = [];
  let c: NetnsCluster;
  try {
    c = await NetnsCluster.create(opts.tag, opts.store ?? 'sqlite', opts.root);
  } catch (err) {
    // No cluster, no history: the schedule is UNKNOWN (and fails the run).
    return {
      schedule,
      report: check(''),
      recovery: null,
      seconds: hr() - began,
      dir: null,
      errors: [`cluster: ${(err as Error).message.slice(0, 300)}`],
      phases: {},
    };
  }
  let report: Report | null = null;
  let recovery: number | null = null;
  let keep = false;
  const phases: { [k: string]: number } = {};
  let mark = hr();
  const phase = (name: string): void => {
    phases[name] = Math.round((hr() - mark) * 10) / 10;
    mark = hr();
  };
  try {
    await c.start();
    phase('start');
    await c.acquire('mbp');
    phase('acquire');
    c.startSampler();
    c.startWorkers();
    await c.waitFor(async () => c.lastFence.get('mbp')?.run === true, 30_000, 'mbp may run');
    await sleep(1500);
    await c.renewAsHolder();
    phase('settle');
    for (const f of schedule.faults) c.record({ src: 'harness', kind: 'fault', fault: f, t: hr() });

    const t0 = hr();
    const at = async (s: number): Promise<void> => {
      const wait = (t0 + s - hr()) * 1000;
      if (wait > 0) await sleep(wait);
    };
    const run = async (what: string, fn: () => void | Promise<void>): Promise<void> => {
      try {
        await fn();
        c.record({ src: 'harness', kind: 'action', what, t: hr() });
      } catch (err) {
        errors.push(`${what}: ${(err as Error).message}`);
      }
    };
    await Promise.all(
      schedule.faults.map(async (f) => {
        await at(f.start);
        const end = f.start + f.length;
        switch (f.kind) {
          case 'cut-link':
            await run(`cut ${f.link}`, () => c.linkDown(f.link, true));
            await at(end);
            await run(`uncut ${f.link}`, () => c.linkDown(f.link, false));
            break;
          case 'one-way':
            await run(`one-way ${f.link} from ${f.from}`, () => c.oneWay(f.link, f.from, true));
            await at(end);
            await run(`two-way ${f.link}`, () => c.oneWay(f.link, f.from, false));
            break;
          case 'delay-loss': {
            const r = rng(schedule.seed ^ 0x5bd1e995);
            while (hr() < t0 + end) {
              await c.flaky(f.link, r() < 0.35 ? 'drop' : 'slow');
              await sleep(100 + r() * 300);
            }
            await run(`clear ${f.link}`, () => c.flaky(f.link, 'off'));
            break;
          }
          case 'kill':
            // S4's sharpest case: an acknowledged renewal right before the kill -9.
            if (f.daemon === 'arbiter' || f.daemon === 'arbiter-1') await c.renewAsHolder();
            await run(`kill -9 ${f.daemon}`, () => c.killDaemon(f.daemon));
            await at(end);
            await run(`restart ${f.daemon}`, () => c.restartDaemon(f.daemon));
            break;
          case 'stop':
            await run(`SIGSTOP ${f.host}`, () => c.stopDaemon(f.host, true));
            await at(end);
            await run(`SIGCONT ${f.host}`, () => c.stopDaemon(f.host, false));
            break;
          case 'clock-jump':
            await run(`clock ${f.daemon} ${f.offset}s`, () => c.clockOffset(f.daemon, f.offset));
            await at(end);
            await run(`clock ${f.daemon} back`, () => c.clockOffset(f.daemon, 0));
            break;
          case 'sleep':
            await run(`sleep ${f.host}`, () => c.sleepHost(f.host, true));
            await at(end);
            await run(`wake ${f.host}`, () => c.sleepHost(f.host, false));
            break;
          case 'kill-elected':
          case 'stop-elected': {
            const d = await c.elected();
            if (d === null) {
              // another fault left nobody elected: nothing to kill or stop (recorded, not an error)
              c.record({ src: 'harness', kind: 'action', what: `${f.kind}: nobody elected`, t: hr() });
              break;
            }
            if (f.kind === 'kill-elected') {
              // S4's sharpest case: an acknowledged renewal right before the kill -9.
              await c.renewAsHolder();
              await run(`kill -9 ${d} (elected)`, () => c.killDaemon(d));
              await at(end);
              await run(`restart ${d}`, () => c.restartDaemon(d));
            } else {
              await run(`SIGSTOP ${d} (elected)`, () => c.stopDaemon(d, true));
              await at(end);
              await run(`SIGCONT ${d}`, () => c.stopDaemon(d, false));
            }
            break;
          }
          case 'etcd-kill':
            await run(`kill -9 etcd ${f.member}`, () => c.killEtcdMember(f.member));
            await at(end);
            await run(`restart etcd ${f.member}`, () => c.startEtcdMember(f.member));
            break;
        }
      }),
    );
    await at(opts.window);
    phase('faults');

    // Heal: everything back, every daemon alive, then wait for a host to run again.
    await c.healAll();
    if (c.store === 'etcd') for (const i of ETCD_MEMBERS.keys()) if (!c.etcdRunning(i)) c.startEtcdMember(i);
    for (const d of c.daemonNames)
      if (c.daemonPid(d) === null) await run(`restart ${d} at heal`, () => c.restartDaemon(d));
    c.record({ src: 'harness', kind: 'healed', t: hr() });
    const healed = hr();
    try {
      await c.waitFor(
        async () => HOSTS.some((h) => c.lastFence.get(h)?.run === true && c.lastFence.get(h)!.t > healed),
        45_000,
        'a host may run after the heal',
      );
      recovery = hr() - healed;
    } catch {
      recovery = null;
    }
    phase('recovery');
    await sleep(1500);
    await c.renewAsHolder();
    await c.stopSampler();
    await c.stopWorkers();
    c.recordResource();
    await c.readLease();
    await c.recordEvents();
    c.finish();
    phase('stop');
    report = check(c.readHistory());
  } catch (err) {
    errors.push(`harness: ${(err as Error).message}`);
  } finally {
    await c.stopSampler().catch(() => undefined);
    // A schedule the harness could not finish has no end record: its history checks UNKNOWN.
    if (report === null) report = check(c.readHistory());
    keep = opts.keepAll === true || (opts.keepFailed === true && (report === null || report.verdict !== 'OK'));
    await c.destroy(keep);
    phase('destroy');
  }
  return {
    schedule,
    report: report ?? check(''),
    recovery,
    seconds: hr() - began,
    dir: keep ? c.dir : null,
    errors,
    phases,
  };
}
