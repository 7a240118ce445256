/**
 * The agent's cache in `stateDir`: `local.json` (lease-core `persisted(state)`),
 * `seen-generation` (the number and a newline) and `host`. A file that is missing is a fresh
 * install; a file that is corrupt or insecure is refused and the agent fails closed (the start
 * guard of S2.2 applies, as if a confirmation had been given).
 */
import { join } from 'node:path';
import { isGeneration, parseGeneration, type Persisted } from '@hq/lease-core';
import { isHost } from '@hq/protocol';
import { readSecure, writeAtomic } from '@hq/runtime/files';

export interface StatePaths {
  readonly local: string;
  readonly seen: string;
  readonly host: string;
}

export function statePaths(stateDir: string): StatePaths {
  return { local: join(stateDir, 'local.json'), seen: join(stateDir, 'seen-generation'), host: join(stateDir, 'host') };
}

export type Loaded<T> =
  | { readonly kind: 'ok'; readonly value: T }
  | { readonly kind: 'missing' }
  | { readonly kind: 'refused'; readonly problem: string };

function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** Checks every field of `local.json`; anything else is corrupt. */
export function parsePersisted(text: string): Persisted | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'is not valid JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'is not a JSON object';
  const o = v as { [k: string]: unknown };
  const known = new Set([
    'holder',
    'generation',
    'confirmedAt',
    'ttlSeconds',
    'safetyMarginSeconds',
    'gaveConfirmation',
    'lockDelayPending',
    'steppedDown',
    'lost',
    'released',
    'floorPending',
  ]);
  for (const k of Object.keys(o)) if (!known.has(k)) return `has an unknown field ${JSON.stringify(k)}`;
  const holder = o['holder'];
  if (holder !== null && !isHost(holder)) return 'holder must be a host or null';
  const generation = o['generation'];
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 0)
    return 'generation must be an integer ≥ 0';
  const confirmedAt = o['confirmedAt'];
  if (confirmedAt !== null && !isNum(confirmedAt)) return 'confirmedAt must be a number or null';
  const ttl = o['ttlSeconds'];
  if (!isNum(ttl) || ttl < 0) return 'ttlSeconds must be a number ≥ 0';
  // Absent in files written before the record carried the margin: the TTL alone then.
  const margin = o['safetyMarginSeconds'] ?? 0;
  if (!isNum(margin) || margin < 0) return 'safetyMarginSeconds must be a number ≥ 0';
  const gave = o['gaveConfirmation'];
  let gaveConfirmation: Persisted['gaveConfirmation'] = null;
  if (gave !== null) {
    if (typeof gave !== 'object' || gave === undefined || Array.isArray(gave))
      return 'gaveConfirmation must be an object or null';
    const g = gave as { [k: string]: unknown };
    const gh = g['holder'];
    const gg = g['generation'];
    const ga = g['at'];
    if (!isHost(gh) || typeof gg !== 'number' || !Number.isSafeInteger(gg) || gg < 0 || !isNum(ga)) {
      return 'gaveConfirmation must be {holder, generation, at}';
    }
    gaveConfirmation = { holder: gh, generation: gg, at: ga };
  }
  const lockDelayPending = o['lockDelayPending'];
  if (typeof lockDelayPending !== 'boolean') return 'lockDelayPending must be a boolean';
  // Absent in files written before the step-down marks were kept (lease-core A7): none then.
  const steppedDown = o['steppedDown'] ?? 0;
  if (!isGeneration(steppedDown)) return 'steppedDown must be an integer ≥ 0';
  const lost = o['lost'] ?? 0;
  if (!isGeneration(lost)) return 'lost must be an integer ≥ 0';
  // Absent in files written before they were kept: the record is then not known again at start.
  const released = o['released'];
  if (released !== undefined && typeof released !== 'boolean') return 'released must be a boolean';
  const floorPending = o['floorPending'];
  if (floorPending !== undefined && typeof floorPending !== 'boolean') return 'floorPending must be a boolean';
  const flags = {
    ...(released === undefined ? {} : { released }),
    ...(floorPending === undefined ? {} : { floorPending }),
  };
  return {
    holder,
    generation,
    confirmedAt,
    ttlSeconds: ttl,
    safetyMarginSeconds: margin,
    gaveConfirmation,
    lockDelayPending,
    steppedDown,
    lost,
    ...flags,
  };
}

export async function loadPersisted(path: string): Promise<Loaded<Persisted>> {
  const r = await readSecure(path);
  if (r.kind !== 'ok') return r;
  const p = parsePersisted(r.text);
  return typeof p === 'string' ? { kind: 'refused', problem: p } : { kind: 'ok', value: p };
}

export async function loadSeen(path: string): Promise<Loaded<number>> {
  const r = await readSecure(path);
  if (r.kind !== 'ok') return r;
  const g = parseGeneration(r.text);
  return g === null ? { kind: 'refused', problem: 'is not a generation' } : { kind: 'ok', value: g };
}

export function writePersisted(path: string, p: Persisted): Promise<void> {
  return writeAtomic(path, `${JSON.stringify(p)}\n`);
}

export function writeSeen(path: string, generation: number): Promise<void> {
  return writeAtomic(path, `${generation}\n`);
}

export function writeHost(path: string, host: string): Promise<void> {
  return writeAtomic(path, `${host}\n`);
}
