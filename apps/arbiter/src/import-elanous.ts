/**
 * `hq-arbiter import elanous --lease FILE`: the old system's lease record (`~/.elanous-hq/lease.json`
 * on cloud-vm) taken over by a new installation. The decision is lease-core's `importOld`: the
 * floor goes to the old generation (the first hq generation is above every old one), and a live
 * old holder keeps HQ at the next generation behind a lock-delay that outlasts the old validity.
 * A malformed file is refused with one line and nothing is opened or written.
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  emptyLease,
  importOld,
  isGeneration,
  newBoot,
  type ArbiterState,
  type ImportAnswer,
  type OldLease,
} from '@hq/lease-core';
import { GENERATION_CEILING, hostProblem } from '@hq/protocol';
import { parseJsonObject } from '@hq/runtime/config-file';
import type { ArbiterConfig } from './config.js';
import { settingsOf } from './arbiter-shell.js';
import { DATABASE_FILE } from './store/sqlite/database.js';
import { CasError, type LeaseStore } from './store/store.js';

/** The old record is a few hundred bytes; anything much larger is not one. */
const MAX_BYTES = 1 << 20;

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

/** Epoch seconds from a number of seconds or an ISO 8601 time; null when absent. */
function timeOf(v: unknown, key: string): Parsed<number | null> {
  if (v === undefined || v === null) return { ok: true, value: null };
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return { ok: true, value: v };
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(v) && Number.isFinite(Date.parse(v)))
    return { ok: true, value: Date.parse(v) / 1000 };
  return { ok: false, problem: `${key} must be epoch seconds or an ISO time (got ${JSON.stringify(v)})` };
}

/**
 * The old record: `generation` (an integer ≥ 0), `holder` (a host, or null/absent for none),
 * `expiresAt` (else `renewedAt` + `ttlSeconds`), `ttlSeconds`, `released`; other fields (views,
 * streaks) are the old arbiter's and ignored. `defaultTtl` stands in for a missing `ttlSeconds`.
 */
export function parseOldLease(text: string, defaultTtl: number): Parsed<OldLease> {
  const j = parseJsonObject(text);
  if (!j.ok) return j;
  const o = j.value;
  const g = o['generation'];
  if (!isGeneration(g) || g > GENERATION_CEILING)
    return {
      ok: false,
      problem: `generation must be an integer from 0 to ${GENERATION_CEILING} (got ${JSON.stringify(g) ?? 'nothing'})`,
    };
  const h = o['holder'] ?? null;
  if (h !== null) {
    const problem = hostProblem(h);
    if (problem !== null) return { ok: false, problem: `holder ${JSON.stringify(h)} ${problem}` };
  }
  const ttl = o['ttlSeconds'] ?? defaultTtl;
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0)
    return { ok: false, problem: `ttlSeconds must be a positive number (got ${JSON.stringify(ttl)})` };
  const released = o['released'] ?? false;
  if (typeof released !== 'boolean')
    return { ok: false, problem: `released must be true or false (got ${JSON.stringify(released)})` };
  const expires = timeOf(o['expiresAt'], 'expiresAt');
  if (!expires.ok) return expires;
  const renewed = timeOf(o['renewedAt'], 'renewedAt');
  if (!renewed.ok) return renewed;
  const expiresAt = expires.value ?? (renewed.value === null ? null : renewed.value + ttl);
  return { ok: true, value: { holder: h as string | null, generation: g, expiresAt, ttlSeconds: ttl, released } };
}

/** Reads and parses FILE; a problem names the file. */
export async function readOldLease(file: string, defaultTtl: number): Promise<Parsed<OldLease>> {
  try {
    const st = await stat(file);
    if (!st.isFile()) return { ok: false, problem: `${file} is not a regular file` };
    if (st.size > MAX_BYTES)
      return { ok: false, problem: `${file} is larger than ${MAX_BYTES} bytes: not a lease record` };
    const r = parseOldLease(await readFile(file, 'utf8'), defaultTtl);
    return r.ok ? r : { ok: false, problem: `${file}: ${r.problem}` };
  } catch (err) {
    return {
      ok: false,
      problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    };
  }
}

export interface ImportResult {
  readonly old: OldLease;
  readonly answer: ImportAnswer;
  readonly dryRun: boolean;
}

/**
 * Decides the import on the store's state and, unless `dryRun`, writes it in one transaction
 * (a lost compare-and-swap decides again). A refusal writes nothing.
 */
export async function importElanous(
  store: LeaseStore,
  cfg: ArbiterConfig,
  old: OldLease,
  now: number,
  dryRun: boolean,
): Promise<ImportResult> {
  const ctx = contextOf(cfg, now);
  if (dryRun) return dryImport(await store.read(), cfg, old, now);
  for (let left = 3; ; left--) {
    try {
      const c = await store.transact((state) => {
        const s = importOld(state, ctx, old);
        const events = s.events.map((e) => ({
          at: now,
          category: e.category,
          event: e.event,
          host: e.host,
          data: e.data,
        }));
        return { next: s.next, events, result: s.answer };
      });
      return { old, answer: c.result, dryRun };
    } catch (err) {
      if (!(err instanceof CasError) || left === 0) throw err;
    }
  }
}

function contextOf(cfg: ArbiterConfig, now: number) {
  return { now, settings: settingsOf(cfg), boot: newBoot(now) };
}

/** What the import would do on `state`. */
export function dryImport(state: ArbiterState, cfg: ArbiterConfig, old: OldLease, now: number): ImportResult {
  return { old, answer: importOld(state, contextOf(cfg, now), old).answer, dryRun: true };
}

/**
 * A dry run on a SQLite installation not created yet: the state a new database starts with,
 * without creating the file (a dry run writes nothing).
 */
export function notCreatedYet(cfg: ArbiterConfig): ArbiterState | null {
  if (cfg.store.kind !== 'sqlite' || existsSync(join(cfg.dataDir, DATABASE_FILE))) return null;
  return { lease: { ...emptyLease(cfg.ttlSeconds), floorPending: true }, observers: new Map(), floor: 0 };
}

/** The sentence for an import (or a dry run of one). */
export function describeImport(r: ImportResult): string {
  const a = r.answer;
  const was = `elanous lease (holder ${r.old.holder ?? 'none'}, generation ${r.old.generation})`;
  if (!a.ok) {
    return a.reason === 'already-granted'
      ? `this installation has already granted generation ${a.generation} (holder ${a.holder ?? 'none'}): the import is for a new installation; nothing changed`
      : `the old holder ${a.holder} is not one of the candidates: add it to candidates, or let the old lease expire first; nothing changed`;
  }
  const verb = r.dryRun ? 'would import' : 'imported';
  const then =
    a.granted === null
      ? `no live old holder: run "hq lease acquire" on the host that should be HQ (it gets generation ${a.floor + 1} or more)`
      : `${a.granted.holder} keeps HQ at generation ${a.granted.generation}, which may run from ${new Date(a.granted.notBefore * 1000).toISOString()} (after the old lease's validity)`;
  return `${verb} ${was}: floor ${a.floor}; ${then}${r.dryRun ? '; nothing written' : ''}`;
}
