/**
 * Seeded schedules: 1–3 faults with random kind, target, start and length, then healing, then
 * (L1) the holder's machine switched off for good. Planned moves with the old holder alive
 * (forced transfers, handovers) count as faults here, and two composite kinds aim at the
 * step-down acknowledgement: `crash-step-down` kills an agent in the middle of its
 * step-down (after persisting, or after its children are gone) around a transfer, and
 * `replay-ack` moves the lease back and forth and then delivers an old acknowledgement again;
 * `restart-move` restarts the arbiter (its database kept or lost) and moves the lease (a transfer
 * or a handover) during its start wait; `outage-restart` restarts a candidate's agent inside an
 * arbiter outage (the holder's, when it is the first candidate).
 * `runSchedule(seed)` is deterministic: a failing seed printed by the test replays exactly with
 * `HQ_SIM_SEED=<seed>`.
 */
import { checkTiming } from '../../../packages/lease-core/src/index.js';
import type { Host } from '../../../packages/protocol/src/index.js';
import { Rng } from './rng.js';
import type { Decisions, Fault, Move, SimConfig, Violation } from './world.js';
import { ARBITER, FAST, REAL, World } from './world.js';

export const FAULTS_FROM = 10;
export const FAULTS_UNTIL = 35;
export const HEALED_BY = 45;
export const KILL_AT = 60;
export const END_AT = 78;

export type FaultKind = Fault['kind'];

export const FAULT_KINDS: readonly FaultKind[] = [
  'cut',
  'cut-one-way',
  'delay',
  'crash-agent',
  'crash-arbiter',
  'wipe-arbiter',
  'pause-agent',
  'pause-arbiter',
  'sleep',
  'jump',
  'transfer',
  'handover',
  'crash-step-down',
  'replay-ack',
  'restart-move',
  'outage-restart',
];

/** Room a replay-ack composite needs before HEALED_BY: three moves apart, then the replay. */
const REPLAY_SPAN = 22;

export function makeFaults(rng: Rng, cfg: SimConfig, kinds: readonly FaultKind[] = FAULT_KINDS): Fault[] {
  const hosts = [ARBITER, ...cfg.candidates];
  const n = rng.int(1, 3);
  const faults: Fault[] = [];
  for (let i = 0; i < n; i++) {
    const kind = rng.pick(kinds);
    const start = rng.between(FAULTS_FROM, FAULTS_UNTIL);
    const candidate = rng.pick(cfg.candidates);
    const pair = (): [string, string] => {
      const a = rng.pick(hosts);
      const rest = hosts.filter((h) => h !== a);
      return [a, rng.pick(rest)];
    };
    let f: Fault;
    switch (kind) {
      case 'cut':
      case 'cut-one-way': {
        const [a, b] = pair();
        f = { kind, start, length: rng.between(1, 15), a, b, amount: 0 };
        break;
      }
      case 'delay': {
        const [a, b] = pair();
        f = {
          kind,
          start,
          length: rng.between(2, 10),
          a,
          b,
          amount: rng.between(0.5, cfg.requestTimeoutSeconds * 0.95),
        };
        break;
      }
      case 'crash-agent':
        f = { kind, start, length: rng.between(0.3, 10), a: candidate, b: candidate, amount: 0 };
        break;
      case 'pause-agent':
        f = {
          kind,
          start,
          length: rng.between(cfg.ttlSeconds + 0.5, 2 * cfg.ttlSeconds + 3),
          a: candidate,
          b: candidate,
          amount: 0,
        };
        break;
      case 'crash-arbiter':
      case 'wipe-arbiter':
        f = { kind, start, length: rng.between(0.3, 8), a: ARBITER, b: ARBITER, amount: 0 };
        break;
      case 'pause-arbiter':
        f = { kind, start, length: rng.between(1, 2 * cfg.ttlSeconds), a: ARBITER, b: ARBITER, amount: 0 };
        break;
      case 'sleep':
        f = { kind, start, length: rng.between(2, 10), a: candidate, b: candidate, amount: 0 };
        break;
      case 'jump': {
        const h = rng.pick(hosts);
        const size = rng.between(3, 60) * (rng.next() < 0.5 ? -1 : 1);
        f = { kind, start, length: 0.01, a: h, b: h, amount: size };
        break;
      }
      case 'transfer':
      case 'handover':
        f = { kind, start, length: 0.01, a: candidate, b: candidate, amount: 0, force: rng.next() < 0.3 };
        break;
      case 'crash-step-down': {
        // Armed on one candidate, then the lease is moved away from it: if it holds, it steps down.
        const phase = rng.pick(['persisted', 'children-gone'] as const);
        const to = rng.pick(cfg.candidates.filter((c) => c !== candidate));
        const down = rng.between(0.3, 8);
        f = { kind, start, length: down, a: candidate, b: candidate, amount: 0, phase };
        faults.push({
          kind: 'transfer',
          start: Math.min(start + rng.between(0.2, 2), HEALED_BY - down - 0.1),
          length: 0.01,
          a: to,
          b: to,
          amount: 0,
          force: rng.next() < 0.3,
        });
        break;
      }
      case 'restart-move': {
        // The arbiter restarts (database kept, or lost), and a planned move follows within its start wait.
        const down = rng.between(0.3, 3);
        const s0 = Math.min(start, HEALED_BY - down - 8);
        faults.push({
          kind: rng.next() < 0.75 ? 'crash-arbiter' : 'wipe-arbiter',
          start: s0,
          length: down,
          a: ARBITER,
          b: ARBITER,
          amount: 0,
        });
        const move = rng.next() < 0.5 ? 'transfer' : 'handover';
        f = {
          kind: move,
          start: s0 + down + rng.between(0.2, cfg.ttlSeconds),
          length: 0.01,
          a: candidate,
          b: candidate,
          amount: 0,
          force: rng.next() < 0.3,
        };
        break;
      }
      case 'outage-restart': {
        // A long arbiter outage with a candidate's agent killed and restarted inside it.
        const outage = rng.between(2 * cfg.ttlSeconds, 4 * cfg.ttlSeconds);
        const s0 = Math.min(start, HEALED_BY - outage);
        faults.push({ kind: 'crash-arbiter', start: s0, length: outage, a: ARBITER, b: ARBITER, amount: 0 });
        const who = rng.next() < 0.7 ? (cfg.candidates[0] as Host) : candidate;
        f = {
          kind: 'crash-agent',
          start: s0 + rng.between(0.5, outage / 2),
          length: rng.between(0.3, 3),
          a: who,
          b: who,
          amount: 0,
        };
        break;
      }
      case 'replay-ack': {
        // mbp-style A → B → A → B, then one of the displaced host's old acknowledgements again.
        // The first candidate holds after the operator's acquire, so the lease leaves it first.
        const s0 = Math.min(start, HEALED_BY - REPLAY_SPAN);
        const back = cfg.candidates[0] as Host;
        const to = rng.pick(cfg.candidates.filter((c) => c !== back));
        let at = s0;
        for (const target of [to, back, to]) {
          faults.push({
            kind: 'transfer',
            start: at,
            length: 0.01,
            a: target,
            b: target,
            amount: 0,
            force: rng.next() < 0.3,
          });
          at += rng.between(4, 10);
        }
        const last = faults[faults.length - 1] as Fault;
        f = { kind, start: last.start + rng.between(0, 1.5), length: 0.01, a: back, b: back, amount: 0 };
        break;
      }
    }
    // every fault is over by HEALED_BY
    faults.push({ ...f, length: Math.min(f.length, HEALED_BY - f.start) });
  }
  // A wall jump *during* a sleep of the same host is outside the model: both clocks are wrong
  // at once (monotonic stopped, wall moved back), and nothing short of a clock that counts
  // sleep (CLOCK_BOOTTIME, mach_continuous_time) can measure that gap. Such jumps are dropped.
  // A jump soon after waking is in the model: the agent's first tick after the wake sees the
  // validity over (wall time moved on) and drops it for good (lease-core `settle`). A backward
  // jump shortly *before* a sleep is the same limit: a validity sent before the jump runs on the
  // monotonic clock alone until the sleep stops it too, so jumps within one TTL before a sleep go.
  return faults.filter(
    (f) =>
      f.kind !== 'jump' ||
      !faults.some(
        (s) =>
          s.kind === 'sleep' &&
          s.a === f.a &&
          f.start >= s.start - (f.amount < 0 ? cfg.ttlSeconds : 0.2) &&
          f.start <= s.start + s.length + 0.2,
      ),
  );
}

export interface Result {
  readonly seed: number;
  readonly faults: readonly Fault[];
  readonly violations: readonly Violation[];
  /** Seconds from the holder's death to the other candidate's first run (L1), or null. */
  readonly failover: number | null;
  /** Why L1 could not be measured, when it could not. */
  readonly unmeasured: string | null;
  readonly promotions: number;
  readonly runs: number;
  /** Transfers and handovers made with the old holder's agent up. */
  readonly moves: readonly Move[];
}

export interface RunOptions {
  readonly decisions?: Decisions;
  readonly cfg?: SimConfig;
  readonly kinds?: readonly FaultKind[];
  /** Stop at the first violation (mutant search). */
  readonly stopEarly?: boolean;
  /** Skip the L1 phase (mutant search: only safety matters). */
  readonly skipL1?: boolean;
}

/** L1 bound: promoteAfterChecks × check interval + lock-delay + one heartbeat. */
export function l1Bound(cfg: SimConfig): number {
  const lockDelay = cfg.ttlSeconds + cfg.safetyMarginSeconds;
  return (cfg.promoteAfterChecks * cfg.checkSeconds + lockDelay + cfg.heartbeatSeconds) * (1 + 2 * cfg.drift);
}

/** Every fourth schedule runs three candidates (L2 then needs every standby's confirmation). */
export function configFor(seed: number): SimConfig {
  return seed % 4 === 0 ? { ...FAST, candidates: ['mbp', 'node-b', 'node-c'] } : FAST;
}

export function runSchedule(seed: number, opts: RunOptions = {}): Result {
  const cfg = opts.cfg ?? configFor(seed);
  const rng = new Rng(seed ^ 0x9e3779b9);
  const faults = makeFaults(rng, cfg, opts.kinds);
  const w = new World(seed, cfg, opts.decisions ?? REAL, faults);
  const timing = checkTiming({
    ttlSeconds: cfg.ttlSeconds,
    heartbeatSeconds: cfg.heartbeatSeconds,
    checkSeconds: cfg.checkSeconds,
    viewFreshSeconds: cfg.viewFreshSeconds,
    probeTimeoutSeconds: 0.5,
    refreshSeconds: cfg.refreshSeconds,
    requestTimeoutSeconds: cfg.requestTimeoutSeconds,
    safetyMarginSeconds: cfg.safetyMarginSeconds,
    promoteAfterChecks: cfg.promoteAfterChecks,
  });
  if (!timing.ok) w.violate('S6', `the simulated settings fail the timing rule: ${timing.message}`);
  const done = (failover: number | null, unmeasured: string | null): Result => ({
    seed,
    faults,
    violations: w.violations,
    failover,
    unmeasured,
    promotions: w.promotions,
    runs: w.runs.length,
    moves: w.moves,
  });
  const until = (t: number): boolean => {
    while (w.t < t) {
      w.step();
      if (opts.stopEarly && w.violations.length > 0) return false;
    }
    return true;
  };
  if (!until(HEALED_BY)) return done(null, 'stopped');
  // After healing: if no one holds a live lease, the operator acquires again (a wipe, say).
  if (!until(HEALED_BY + cfg.ttlSeconds + 2 * cfg.requestTimeoutSeconds)) return done(null, 'stopped');
  if (w.runningHost() === null) w.wantOperator();
  if (!until(KILL_AT)) return done(null, 'stopped');
  if (opts.skipL1) return done(null, 'skipped');
  const holder = w.runningHost();
  if (holder === null) return done(null, 'no host runs after healing');
  const deathAt = w.t;
  w.kill(holder.host);
  let failover: number | null = null;
  while (w.t < END_AT) {
    w.step();
    const r = w.runningHost();
    if (r !== null && r.host !== holder.host) {
      failover = w.t - deathAt;
      break;
    }
  }
  if (failover === null) w.violate('L1', `no standby ran within ${END_AT - deathAt}s of ${holder.host}'s death`);
  else if (failover > l1Bound(cfg))
    w.violate('L1', `failover took ${failover.toFixed(2)}s > bound ${l1Bound(cfg).toFixed(2)}s`);
  return done(failover, null);
}
