/**
 * Finding and reading a daemon's JSON config file, and the one error every config problem is: a
 * `ConfigError` carries the key it is about and one line that names the key and the file. The
 * CLIs print the line and exit 2. Reading stops at the JSON: validation is each daemon's own
 * (TypeBox, loaded only where needed). Only node built-ins are loaded, so `hq fence check` reads
 * its socket path through this module and nothing heavier.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** A configuration problem: one line naming the key. The CLIs print it and exit 2. */
/** Marks a ConfigError of any copy of this module (a bundle holds its own copy beside the ES modules). */
const CONFIG_ERROR = Symbol.for('@hq/runtime/config-file.ConfigError');

export class ConfigError extends Error {
  readonly [CONFIG_ERROR] = true;
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }

  /**
   * `instanceof ConfigError` holds for a ConfigError made by another copy of this module too:
   * `hq fence run|check` run from one bundled file that loads the config module's ES copy when
   * it must check a config in full, and a bad config must still be exit 2 there.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as { [CONFIG_ERROR]?: unknown })[CONFIG_ERROR] === true;
  }
}

/** Where a daemon's file is looked for: `--config`, `$envVar`, `~/.hq/{name}`, `/etc/hq/{name}`. */
export interface ConfigLookup {
  readonly envVar: string;
  readonly name: string;
}

export const AGENT_CONFIG: ConfigLookup = { envVar: 'HQ_CONFIG', name: 'agent.json' };
export const ARBITER_CONFIG: ConfigLookup = { envVar: 'HQ_ARBITER_CONFIG', name: 'arbiter.json' };

/** The places looked at when neither `--config` nor the variable names a file. */
export function defaultConfigPaths(lookup: ConfigLookup): string[] {
  return [join(homedir(), '.hq', lookup.name), join('/etc/hq', lookup.name)];
}

/** The config file to use, or null when none exists (every default); a named file must exist. */
export function findConfigFile(explicit: string | undefined, lookup: ConfigLookup, env: NodeJS.ProcessEnv = process.env): string | null {
  if (explicit !== undefined) {
    if (!existsSync(explicit)) throw new ConfigError('--config', `config file ${explicit} does not exist`);
    return resolve(explicit);
  }
  const fromEnv = env[lookup.envVar];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!existsSync(fromEnv)) throw new ConfigError(lookup.envVar, `config file ${fromEnv} (from $${lookup.envVar}) does not exist`);
    return resolve(fromEnv);
  }
  for (const candidate of defaultConfigPaths(lookup)) {
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

export type ConfigFileRead =
  | { readonly ok: true; readonly value: unknown }
  /** `code`: the errno code (`ENOENT`, `EACCES`); `message`: the whole error line. */
  | { readonly ok: false; readonly problem: 'unreadable'; readonly code: string; readonly message: string }
  | { readonly ok: false; readonly problem: 'not-json'; readonly message: string };

/** Reads and parses `file`; never throws. */
export function readConfigFile(file: string): ConfigFileRead {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { ok: false, problem: 'unreadable', code: e.code ?? 'error', message: e.message };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, problem: 'not-json', message: (err as Error).message };
  }
}

/** The file's content as a JSON object, `{}` without a file (every default); else a ConfigError naming it. */
export function readConfigObject(file: string | null): { [k: string]: unknown } {
  if (file === null) return {};
  const r = readConfigFile(file);
  if (!r.ok) {
    if (r.problem === 'unreadable') throw new ConfigError('--config', `cannot read config file ${file}: ${r.message}`);
    throw new ConfigError('(top level)', `config file ${file} is not valid JSON: ${r.message}`);
  }
  if (typeof r.value !== 'object' || r.value === null || Array.isArray(r.value)) throw new ConfigError('(top level)', `${file}: the config must be a JSON object`);
  return r.value as { [k: string]: unknown };
}

/** Runs the validation of `file`'s content; a problem it finds is said with the file's name. */
export function namingFile<T>(file: string | null, validate: () => T): T {
  try {
    return validate();
  } catch (err) {
    if (err instanceof ConfigError && file !== null && !err.message.includes(file)) throw new ConfigError(err.key, `${file}: ${err.message}`);
    throw err;
  }
}

/** `~` and `~/…` in a configured path are the user's home. */
export function expandHome(p: string): string {
  if (p === '~') return homedir();
  if (p.startsWith('~/')) return join(homedir(), p.slice(2));
  return p;
}
