/**
 * Finding the agent's config file, reading it as a JSON object, and the few paths the fence hot
 * path needs, without TypeBox (loading the validator costs more than the whole fence query).
 * `hq fence check|run` ask the running agent, which validated the same file at its start; when
 * the agent does not answer they fall back to the full validation of `config.ts`. Every problem
 * is a ConfigError whose line names the file.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, expandHome, readConfigFile } from '@hq/runtime/config-file';

export { ConfigError, expandHome };

/** The config file to use, or null when none exists (every default). */
export function findConfigFile(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): string | null {
  if (explicit !== undefined) {
    if (!existsSync(explicit)) throw new ConfigError('--config', `config file ${explicit} does not exist`);
    return resolve(explicit);
  }
  const fromEnv = env['HQ_CONFIG'];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!existsSync(fromEnv)) throw new ConfigError('HQ_CONFIG', `config file ${fromEnv} (from $HQ_CONFIG) does not exist`);
    return resolve(fromEnv);
  }
  for (const candidate of [join(homedir(), '.hq', 'agent.json'), '/etc/hq/agent.json']) {
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/** The file's content as a JSON object; `{}` without a file (every default). */
export function readAgentConfigFile(file: string | null): { [k: string]: unknown } {
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

export interface LightPaths {
  readonly file: string | null;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly requestTimeoutSeconds: number;
}

/** The socket path and state dir from the config, checked only as far as it needs them. */
export function lightPaths(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): LightPaths {
  const file = findConfigFile(explicit, env);
  const raw = readAgentConfigFile(file);
  const str = (k: string): string | undefined => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '') throw new ConfigError(k, `${k}: must be a non-empty string`);
    return v;
  };
  const stateDir = resolve(expandHome(str('stateDir') ?? '~/.hq'));
  const socket = str('socketPath');
  const rt = raw['requestTimeoutSeconds'];
  return {
    file,
    stateDir,
    socketPath: resolve(expandHome(socket ?? join(stateDir, 'agent.sock'))),
    requestTimeoutSeconds: typeof rt === 'number' && rt > 0 ? rt : 5,
  };
}
