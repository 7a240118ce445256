/**
 * Finding the config file and reading the few paths the fence hot path needs, without TypeBox
 * (loading the validator costs more than the whole fence query). `hq fence check|run` ask the
 * running agent, which validated the same file at its start; when the agent does not answer
 * they fall back to the full validation of `config.ts`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** A configuration problem: one line naming the key. The CLIs print it and exit 2. */
export class ConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

export function expandHome(p: string): string {
  if (p === '~') return homedir();
  if (p.startsWith('~/')) return join(homedir(), p.slice(2));
  return p;
}

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

export interface LightPaths {
  readonly file: string | null;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly requestTimeoutSeconds: number;
}

/** The socket path and state dir from the config, checked only as far as it needs them. */
export function lightPaths(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): LightPaths {
  const file = findConfigFile(explicit, env);
  let raw: { [k: string]: unknown } = {};
  if (file !== null) {
    try {
      const v: unknown = JSON.parse(readFileSync(file, 'utf8'));
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) raw = v as { [k: string]: unknown };
      else throw new ConfigError('(top level)', 'the config must be a JSON object');
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError('(top level)', `config file ${file} is not valid JSON: ${(err as Error).message}`);
    }
  }
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
