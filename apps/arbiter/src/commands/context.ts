/**
 * What every hq-arbiter command is handed, and what several of them do: read the config, open the
 * configured store for one shot, refuse a command line's extra words.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { MsClock } from '@hq/runtime/clock';
import { ARBITER_CONFIG, defaultConfigPaths } from '@hq/runtime/config-file';
import { flagString, usage, type Parsed } from '@hq/runtime/cli';
import { configPath, loadConfigLazily, type ArbiterConfig } from '../config.js';
import type { LeaseStore } from '../store/store.js';

/** Where a command writes: stdout for results, stderr for the one-line errors. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** One run of a command: its flags, the words after its name, where it writes, its clock. */
export interface Invocation {
  readonly p: Parsed;
  readonly words: readonly string[];
  readonly io: Io;
  readonly clock: MsClock;
}

/** The configs read from a file (not the built-in defaults). */
const FROM_FILE = new WeakSet<ArbiterConfig>();

export function fromFile(cfg: ArbiterConfig): boolean {
  return FROM_FILE.has(cfg);
}

export async function config(p: Parsed): Promise<ArbiterConfig> {
  const path = configPath(flagString(p, 'config'));
  const cfg = await loadConfigLazily(path);
  if (path !== null) FROM_FILE.add(cfg);
  return cfg;
}

/** `NAME takes no arguments (got "x")` for a command that takes no words. */
export function noWords(name: string, words: readonly string[]): void {
  if (words.length > 0) throw usage(`${name} takes no arguments (got "${words[0]}")`);
}

/**
 * A one-shot command run where no config file was found would open the built-in default
 * database (./var/hq.db under the current directory): never create one there, because it is
 * not the daemon's and a token issued into it is refused by the real arbiter.
 */
export function refuseUnnamedDatabase(cfg: ArbiterConfig): void {
  if (FROM_FILE.has(cfg) || cfg.store.kind !== 'sqlite') return;
  const db = join(cfg.dataDir, 'hq.db');
  if (existsSync(db)) return;
  const looked = defaultConfigPaths(ARBITER_CONFIG).join(', ');
  throw usage(
    `no config file found (--config, $HQ_ARBITER_CONFIG, ${looked}), and no database at ${db}: pass the daemon's --config (for example --config /etc/hq/arbiter.json); nothing was created`,
  );
}

/** Runs `use` on the configured store (SQLite's file, or etcd's prefix), opened for one shot: no election. */
export async function withStore<T>(cfg: ArbiterConfig, use: (store: LeaseStore) => Promise<T>): Promise<T> {
  refuseUnnamedDatabase(cfg);
  const { openStores } = await import('../server/runtime.js');
  const s = await openStores(cfg, false);
  try {
    return await use(s.store);
  } finally {
    // closes the store and what opened it (etcd's client)
    await s.close();
  }
}
