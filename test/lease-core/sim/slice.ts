/**
 * Runs one slice of the seeded schedules inside a tap test and asserts that no schedule
 * violates S1, S2, S5, S6 or L1. `HQ_SIM_SCHEDULES` changes the total (default 10,000, split
 * over the four simulation-N test files); `HQ_SIM_SEED=<seed>` replays one schedule alone.
 */
import type { Test } from 'tap';
import type { FaultKind, Result } from './schedule.js';
import { l1Bound, runSchedule } from './schedule.js';
import { FAST } from './world.js';

export const SLICES = 4;

export function sliceSeeds(slice: number): number[] {
  const one = process.env['HQ_SIM_SEED'];
  if (one !== undefined && one !== '') return slice === 0 ? [Number(one)] : [];
  const total = Number(process.env['HQ_SIM_SCHEDULES'] ?? 10_000);
  const per = Math.ceil(total / SLICES);
  const seeds: number[] = [];
  for (let s = slice * per + 1; s <= Math.min(total, (slice + 1) * per); s++) seeds.push(s);
  return seeds;
}

export function runSlice(t: Test, slice: number): void {
  const seeds = sliceSeeds(slice);
  const started = Date.now();
  const failed: Result[] = [];
  const kinds = new Map<FaultKind, number>();
  const failovers: number[] = [];
  let promotions = 0;
  const unmeasured = new Map<string, number>();
  // Planned moves with the old holder alive: seconds until the new holder ran.
  const moved = { acknowledged: [] as number[], waited: [] as number[] };
  for (const seed of seeds) {
    const r = runSchedule(seed);
    if (r.violations.length > 0) failed.push(r);
    for (const f of r.faults) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
    if (r.failover !== null) failovers.push(r.failover);
    if (r.unmeasured !== null) unmeasured.set(r.unmeasured, (unmeasured.get(r.unmeasured) ?? 0) + 1);
    promotions += r.promotions;
    for (const m of r.moves)
      if (m.ranAt !== null) (m.acknowledged ? moved.acknowledged : moved.waited).push(m.ranAt - m.at);
  }
  for (const r of failed.slice(0, 5)) {
    t.comment(`seed ${r.seed} violates: ${JSON.stringify(r.violations.slice(0, 3))}`);
    t.comment(`  faults: ${JSON.stringify(r.faults)}`);
    t.comment(`  replay: HQ_SIM_SEED=${r.seed} npx tap test/lease-core/simulation-1.test.ts`);
  }
  t.equal(failed.length, 0, `no schedule of ${seeds.length} violates S1, S2, S5, S6 or L1`);
  t.equal(
    failovers.length + [...unmeasured.values()].reduce((a, b) => a + b, 0),
    seeds.length,
    'every schedule reached its end',
  );
  t.equal(unmeasured.size, 0, `L1 was measured in every schedule (${JSON.stringify([...unmeasured])})`);
  const pctOf = (xs: readonly number[], p: number): string => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length === 0 ? 'n/a' : (s[Math.min(s.length - 1, Math.floor(p * s.length))] as number).toFixed(2);
  };
  const pct = (p: number): string => pctOf(failovers, p);
  t.comment(
    `slice ${slice}: ${seeds.length} schedules in ${((Date.now() - started) / 1000).toFixed(1)}s; ` +
      `faults ${JSON.stringify(Object.fromEntries(kinds))}; promotions ${promotions}; ` +
      `L1 failover p50 ${pct(0.5)}s p99 ${pct(0.99)}s max ${pct(1)}s (bound ${l1Bound(FAST).toFixed(2)}s); ` +
      `planned moves: acknowledged ${moved.acknowledged.length} p50 ${pctOf(moved.acknowledged, 0.5)}s p99 ${pctOf(moved.acknowledged, 0.99)}s, ` +
      `unacknowledged ${moved.waited.length} p50 ${pctOf(moved.waited, 0.5)}s`,
  );
}
