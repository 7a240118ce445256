/**
 * The load column from the registry: each agent registers its machine with
 * `loadAvg, cpuCount, freeMem, totalMem` every 30 s; the page shows the newest live one.
 */
import type { HostLoad } from './model.js';
import { andThen, type Awaitable } from '../../awaitable.js';

/**
 * A host's load for the page. `ready()`, when present, is awaited before each answer: it reads
 * the rows the lookups then answer from (the registry may be a network store).
 */
export interface LoadLookup {
  (host: string): HostLoad | null;
  readonly ready?: () => Awaitable<void>;
}

/** What `registryLoad` needs of a registry row (a machine resource). */
export interface MachineRow {
  readonly kind: string;
  readonly machine: string;
  readonly attrs: ReadonlyMap<string, unknown>;
  /** Arbiter time of the last register/heartbeat, milliseconds. */
  readonly renewedAt: number;
}

/** One render asks for every host: the registry is read once per this many milliseconds. */
const MEMO_MS = 100;

/**
 * A `load` option from the registry: the newest live `machine` resource of the host, its
 * `loadAvg, cpuCount, freeMem, totalMem` attributes, aged by its last renewal. `list` is called
 * once per page render or /v1/status answer (memoised for 100 ms of `nowMs`).
 */
export function registryLoad(list: () => Awaitable<readonly MachineRow[]>, nowMs: () => number): LoadLookup {
  let cache: { at: number; rows: readonly MachineRow[] } | null = null;
  const stale = (t: number): boolean => cache === null || t - cache.at > MEMO_MS || t < cache.at;
  const ready = (): Awaitable<void> => {
    const t = nowMs();
    if (!stale(t)) return;
    return andThen(list(), (rows) => {
      cache = { at: t, rows };
    });
  };
  const lookup = (host: string): HostLoad | null => {
    if (stale(nowMs())) {
      const r = ready();
      // a list that answers later: this lookup has what the last ready() read
      if (r instanceof Promise) r.catch(() => undefined);
    }
    let best: MachineRow | null = null;
    for (const r of cache?.rows ?? [])
      if (r.kind === 'machine' && r.machine === host && (best === null || r.renewedAt > best.renewedAt)) best = r;
    if (best === null) return null;
    const num = (k: string): number | undefined => {
      const v = best?.attrs.get(k);
      return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
    };
    const la = best.attrs.get('loadAvg');
    return {
      loadAvg: Array.isArray(la)
        ? la.filter((x): x is number => typeof x === 'number' && Number.isFinite(x))
        : undefined,
      cpuCount: num('cpuCount'),
      freeMem: num('freeMem'),
      totalMem: num('totalMem'),
      observedAt: best.renewedAt / 1000,
    };
  };
  return Object.assign(lookup, { ready });
}
