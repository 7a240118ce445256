/**
 * Reading a daemon's JSON config file, and the one error every config problem is: a
 * `ConfigError` carries the key it is about and one line that names the key and the file. The
 * CLIs print the line and exit 2. Reading stops at the JSON: validation is each daemon's own
 * (TypeBox, loaded only where needed), and so is the wording of its lines.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

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

/** `~` and `~/…` in a configured path are the user's home. */
export function expandHome(p: string): string {
  if (p === '~') return homedir();
  if (p.startsWith('~/')) return join(homedir(), p.slice(2));
  return p;
}
