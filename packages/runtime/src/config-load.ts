/**
 * The one way a daemon's config file becomes its config, for `hq-agent`, `hq-arbiter` and `hq`:
 * read the file and parse it (one line naming the file, with the line and column of bad JSON),
 * then the daemon's check — its TypeBox schema, then its own relations — which throws one
 * ConfigError line naming the key. TypeBox's checker is loaded only for a file the quick check
 * cannot pass, so a valid config never loads it. Kept apart from config-file.ts: the fence path
 * reads its few paths through that module alone.
 */
import { readConfigObject, type ConfigLookup } from './config-file.js';
import { surelyValid } from './quick-check.js';

export interface ConfigKind<C> {
  /** Whose file it is (named when this user cannot read it). */
  readonly daemon: ConfigLookup['daemon'];
  /** The config's schema as plain JSON, which the quick check reads. */
  readonly schema: unknown;
  /** Loads TypeBox's checker, once: `check` needs it for a file the quick check cannot pass. */
  readonly loadChecker: () => Promise<void>;
  /** The schema, then the daemon's relations; the config with its defaults, else a ConfigError naming the file. */
  readonly check: (input: { [k: string]: unknown }, file: string | null) => C;
}

/** The config in `file` (every default for null); TypeBox's checker must be loaded already. */
export function loadConfigFile<C>(kind: ConfigKind<C>, file: string | null): C {
  return kind.check(readConfigObject(file, kind.daemon), file);
}

/** `loadConfigFile`, loading TypeBox's checker only when the file needs it. */
export async function loadConfigFileLazily<C>(kind: ConfigKind<C>, file: string | null): Promise<C> {
  const input = readConfigObject(file, kind.daemon);
  if (!surelyValid(kind.schema, input)) await kind.loadChecker();
  return kind.check(input, file);
}
