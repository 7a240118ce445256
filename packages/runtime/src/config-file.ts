/**
 * Finding and reading a daemon's JSON config file, and the one error every config problem is: a
 * `ConfigError` carries the key it is about and one line that names the key and the file. The
 * CLIs print the line and exit 2. Reading stops at the JSON: validation is each daemon's own
 * (TypeBox, loaded only where needed). Only node built-ins are loaded, so `hq fence check` reads
 * its socket path through this module and nothing heavier.
 */
import { readFileSync, statSync } from 'node:fs';
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
    return (
      typeof value === 'object' && value !== null && (value as { [CONFIG_ERROR]?: unknown })[CONFIG_ERROR] === true
    );
  }
}

/** Where a daemon's file is looked for: `--config`, `$envVar`, `~/.hq/{name}`, `/etc/hq/{name}`. */
export interface ConfigLookup {
  readonly envVar: string;
  readonly name: string;
  /** Whose file it is, for the line saying this user cannot read it. */
  readonly daemon: 'agent' | 'arbiter';
}

export const AGENT_CONFIG: ConfigLookup = { envVar: 'HQ_CONFIG', name: 'agent.json', daemon: 'agent' };
export const ARBITER_CONFIG: ConfigLookup = { envVar: 'HQ_ARBITER_CONFIG', name: 'arbiter.json', daemon: 'arbiter' };

/** The places looked at when neither `--config` nor the variable names a file. */
export function defaultConfigPaths(lookup: ConfigLookup): string[] {
  return [join(homedir(), '.hq', lookup.name), join('/etc/hq', lookup.name)];
}

/** Why `path` cannot be used as a file: null when it exists, else the errno code (ENOENT, EACCES, …). */
function statProblem(path: string): string | null {
  try {
    statSync(path);
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

/** One line for a config path this user cannot see: a permission is not a missing file. */
function unusable(path: string, code: string, from: string, daemon: ConfigLookup['daemon'] = 'agent'): string {
  if (code === 'EACCES')
    return `config file ${path}${from} cannot be read by this user (EACCES: the file or a directory above it denies it); run as the ${daemon}'s user, or join its group (sudo usermod -aG hq $USER, then log in again)`;
  if (code === 'ENOENT') return `config file ${path}${from} does not exist`;
  return `config file ${path}${from} cannot be used (${code})`;
}

/**
 * The config file to use, or null when none exists (every default); a named file must exist
 * (`problemOf`: why a path cannot be used, null when it can; tests pass their own). A
 * default location this user may not look into is an error, not "no file": silently falling back
 * to every default would ask another socket and another arbiter.
 */
export function findConfigFile(
  explicit: string | undefined,
  lookup: ConfigLookup,
  env: NodeJS.ProcessEnv = process.env,
  problemOf: (path: string) => string | null = statProblem,
): string | null {
  if (explicit !== undefined) {
    const code = problemOf(explicit);
    if (code !== null) throw new ConfigError('--config', unusable(explicit, code, '', lookup.daemon));
    return resolve(explicit);
  }
  const fromEnv = env[lookup.envVar];
  if (fromEnv !== undefined && fromEnv !== '') {
    const code = problemOf(fromEnv);
    if (code !== null)
      throw new ConfigError(lookup.envVar, unusable(fromEnv, code, ` (from $${lookup.envVar})`, lookup.daemon));
    return resolve(fromEnv);
  }
  for (const candidate of defaultConfigPaths(lookup)) {
    const code = problemOf(candidate);
    if (code === null) return candidate;
    if (code !== 'ENOENT' && code !== 'ENOTDIR')
      throw new ConfigError('--config', unusable(candidate, code, '', lookup.daemon));
  }
  return null;
}

export type ConfigFileRead =
  | { readonly ok: true; readonly value: unknown }
  /** `code`: the errno code (`ENOENT`, `EACCES`); `message`: the whole error line. */
  | { readonly ok: false; readonly problem: 'unreadable'; readonly code: string; readonly message: string }
  | { readonly ok: false; readonly problem: 'not-json'; readonly message: string };

/** JSON.parse's "at position N" as the line and column an editor shows (1-based). */
export function atLineColumn(text: string, message: string): string {
  const m = /at position (\d+)/.exec(message);
  if (m === null) return message;
  const before = text.slice(0, Number(m[1]));
  const line = before.split('\n').length;
  const column = before.length - before.lastIndexOf('\n');
  return `${message.replace(/ in JSON at position \d+.*$|at position \d+.*$/, '').trimEnd()} at line ${line}, column ${column}`;
}

/**
 * `text` as a JSON object, or one line saying what is wrong with it: cut short (an error at its very
 * end: a write that never finished), not JSON (with the line and column), or not an object.
 */
export function parseJsonObject(
  text: string,
): { readonly ok: true; readonly value: { [k: string]: unknown } } | { readonly ok: false; readonly problem: string } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    const message = (err as Error).message;
    const m = /end of (JSON )?input|Unterminated|position (\d+)/i.exec(message);
    const truncated = m !== null && (m[2] === undefined || Number(m[2]) >= text.trimEnd().length);
    return {
      ok: false,
      problem: truncated ? 'is not complete JSON (truncated?)' : `is not valid JSON: ${atLineColumn(text, message)}`,
    };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, problem: 'is not a JSON object' };
  return { ok: true, value: v as { [k: string]: unknown } };
}

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
    return { ok: false, problem: 'not-json', message: atLineColumn(text, (err as Error).message) };
  }
}

/** The file's content as a JSON object, `{}` without a file (every default); else a ConfigError naming it. */
export function readConfigObject(
  file: string | null,
  daemon: ConfigLookup['daemon'] = 'agent',
): { [k: string]: unknown } {
  if (file === null) return {};
  const r = readConfigFile(file);
  if (!r.ok) {
    if (r.problem === 'unreadable')
      throw new ConfigError(
        '--config',
        r.code === 'EACCES' ? unusable(file, 'EACCES', '', daemon) : `cannot read config file ${file}: ${r.message}`,
      );
    throw new ConfigError('(top level)', `config file ${file} is not valid JSON: ${r.message}`);
  }
  if (typeof r.value !== 'object' || r.value === null || Array.isArray(r.value))
    throw new ConfigError('(top level)', `${file}: the config must be a JSON object`);
  return r.value as { [k: string]: unknown };
}

/** Runs the validation of `file`'s content; a problem it finds is said with the file's name. */
export function namingFile<T>(file: string | null, validate: () => T): T {
  try {
    return validate();
  } catch (err) {
    if (err instanceof ConfigError && file !== null && !err.message.includes(file))
      throw new ConfigError(err.key, `${file}: ${err.message}`);
    throw err;
  }
}

/** `~` and `~/…` in a configured path are the user's home. */
export function expandHome(p: string): string {
  if (p === '~') return homedir();
  if (p.startsWith('~/')) return join(homedir(), p.slice(2));
  return p;
}
