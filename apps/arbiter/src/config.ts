/**
 * hq-arbiter configuration: one JSON file, checked once at start by `checkConfig` — shape
 * (TypeBox, unknown keys refused; a key the agent owns is refused naming its owner), host names,
 * URLs, and the arbiter's own timing relations (lease-core `checkLeaseTiming`). The agents'
 * cadence is not the arbiter's to configure: it arrives with their heartbeats and the arbiter
 * checks the pairs across the sides on every report (./timing.ts). An invalid file stops the
 * daemon with one line naming the key.
 */
import { resolve } from 'node:path';
import type { Compile as CompileFn } from 'typebox/compile';
import { ARBITER_CONFIG, ConfigError, findConfigFile } from '@hq/runtime/config-file';
import { loadConfigFile, loadConfigFileLazily, type ConfigKind } from '@hq/runtime/config-load';
import { cronGapSeconds } from '@hq/runtime/schedule';
import { checkLeaseTiming, wrongDaemon, type LeaseTiming } from '@hq/lease-core';
import { didYouMean } from '@hq/runtime/suggest';
import { HOST_PATTERN, RESERVED_NAMES, hostProblem, isHost } from '@hq/protocol';
import { surelyValid } from '@hq/runtime/quick-check';
import { ConfigSchema } from './schemas/generated.js';
import { bandsFromConfig } from './registry/decide.js';
import { DEFAULTS, type ArbiterConfig, type ConfigFile, type ConfigResult } from './config-defaults.js';
import { httpUrlProblem, storeOf } from './config-store.js';

export {
  type ArbiterConfig,
  type ConfigFile,
  type ConfigResult,
  DEFAULTS,
  ELECTION_MARGIN_SECONDS,
  ETCD_DEFAULTS,
  type EtcdTlsFiles,
  type StoreConfig,
} from './config-defaults.js';
export { etcdStoreOf } from './config-store.js';

export { ConfigSchema };

/**
 * TypeBox's compiled checker of the config schema (`typebox/compile`), for a config the quick
 * check (@hq/runtime/quick-check) cannot pass: it decides and says what is wrong. Set by
 * config-checker.ts (tools and tests that validate synchronously) or by `loadConfigChecker()`
 * (the CLI, only when its file needs it: a valid config is accepted without loading TypeBox,
 * whose 680-odd modules were the largest part of an idle arbiter's memory; docs/BENCH.md).
 */
let compiled: ReturnType<typeof CompileFn> | null = null;

/** Compiles the config schema with TypeBox's `Compile` (config-checker.ts), once. */
export function useConfigCompiler(compile: typeof CompileFn): void {
  compiled ??= compile(ConfigSchema);
}

/** Loads TypeBox's compiler and compiles the config schema, once. */
export async function loadConfigChecker(): Promise<void> {
  if (compiled === null) useConfigCompiler((await import('typebox/compile')).Compile);
}

interface SchemaError {
  readonly keyword: string;
  readonly instancePath: string;
  readonly params: { readonly additionalProperties?: readonly string[] } & Record<string, unknown>;
  readonly message: string;
}

function keyOf(path: string): string {
  const parts = path
    .split('/')
    .filter((p) => p !== '')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.length === 0
    ? '(root)'
    : parts
        .map((p) => (/^\d+$/.test(p) ? `[${p}]` : p))
        .join('.')
        .replace(/\.\[/g, '[');
}

function problem(key: string, message: string): ConfigError {
  return new ConfigError(key, message);
}

/**
 * The file against the schema: a config the quick check is sure of is one TypeBox accepts; any
 * other goes to TypeBox, which decides and names the problem.
 */
function refuseBadShape(input: object): void {
  const sure = surelyValid(ConfigSchema, input);
  const checker = sure ? null : compiled;
  if (!sure && checker === null) {
    throw new Error(
      "checkConfig: TypeBox's checker is not loaded (import config-checker.js or await loadConfigChecker())",
    );
  }
  if (checker !== null && !checker.Check(input)) {
    const errors = [...checker.Errors(input)] as unknown as SchemaError[];
    const extra = errors.find((e) => e.keyword === 'additionalProperties');
    if (extra !== undefined) {
      const name = extra.params.additionalProperties?.[0] ?? '?';
      const key = extra.instancePath === '' ? name : `${keyOf(extra.instancePath)}.${name}`;
      const owned = extra.instancePath === '' ? wrongDaemon(name, 'hq-arbiter') : null;
      const known = extra.instancePath === '' ? Object.keys(ConfigSchema.properties) : [];
      throw problem(key, owned ?? `is not a known key${didYouMean(name, known)}`);
    }
    const first = errors.find((e) => e.keyword !== 'boolean') ?? errors[0];
    if (first === undefined) throw problem('(root)', 'does not match the schema');
    const key = keyOf(first.instancePath);
    if (first.keyword === 'pattern' && /arbiter|candidates|standby/.test(key)) {
      throw problem(
        key,
        `must be a host name matching ${HOST_PATTERN.source} (not ${RESERVED_NAMES.map((n) => `"${n}"`).join(' or ')})`,
      );
    }
    if (first.keyword === 'pattern' && key === 'tailnetDomain') {
      const v = (input as { tailnetDomain?: unknown }).tailnetDomain;
      const lower =
        typeof v === 'string' && v !== v.toLowerCase()
          ? ` — write it in lower case ("${v.toLowerCase()}"), as tailscale status --json prints MagicDNSSuffix`
          : '';
      throw problem(
        key,
        `must be a DNS domain of lower-case letters, digits, dots and dashes, like example-tailnet.ts.net${lower}`,
      );
    }
    throw problem(key, first.message);
  }
}

/** The arbiter, the candidates (none twice, never the arbiter) and the preferred standby among them. */
function hostsOf(file: ConfigFile): { arbiter: string; candidates: readonly string[]; standby: string | null } {
  const arbiter = file.arbiter ?? DEFAULTS.arbiter;
  const candidates = file.candidates ?? DEFAULTS.candidates;
  if (new Set(candidates).size !== candidates.length) throw problem('candidates', 'must not name a host twice');
  if (candidates.includes(arbiter)) throw problem('candidates', `must not include the arbiter "${arbiter}"`);
  const standby = file.standby ?? null;
  if (standby !== null && !candidates.includes(standby))
    throw problem('standby', `"${standby}" is not one of the candidates`);
  return { arbiter, candidates, standby };
}

/** `healthUrls` (keyed by host) and `hooks.urls`: every one an http(s) URL. */
function urlsOf(file: ConfigFile): { healthUrls: Map<string, string>; hookUrls: readonly string[] } {
  const healthUrls = new Map<string, string>();
  for (const [host, url] of Object.entries(file.healthUrls ?? {})) {
    const hp = hostProblem(host);
    if (hp !== null || !isHost(host)) throw problem(`healthUrls.${host}`, `the key ${hp ?? 'is not a host'}`);
    const up = httpUrlProblem(url);
    if (up !== null) throw problem(`healthUrls.${host}`, up);
    healthUrls.set(host, url);
  }
  const hookUrls = file.hooks?.urls ?? [];
  for (const [i, url] of hookUrls.entries()) {
    const up = httpUrlProblem(url);
    if (up !== null) throw problem(`hooks.urls[${i}]`, up);
  }
  return { healthUrls, hookUrls };
}

/** The lease timing with its defaults; the check interval is the gap of `checkCron`. */
function fileTimingOf(file: ConfigFile): LeaseTiming & { checkCron: string } {
  const checkCron = file.checkCron ?? DEFAULTS.checkCron;
  const gap = cronGapSeconds(checkCron);
  if (!gap.ok) throw problem('checkCron', gap.message);
  const checkSeconds = gap.seconds;
  return {
    checkCron,
    checkSeconds,
    ttlSeconds: file.ttlSeconds ?? DEFAULTS.ttlSeconds,
    viewFreshSeconds: file.viewFreshSeconds ?? DEFAULTS.viewFreshSeconds,
    promoteAfterChecks: file.promoteAfterChecks ?? DEFAULTS.promoteAfterChecks,
    safetyMarginSeconds: file.safetyMarginSeconds ?? DEFAULTS.safetyMarginSeconds,
    probeTimeoutSeconds: file.probeTimeoutSeconds ?? Math.min(DEFAULTS.probeTimeoutSeconds, checkSeconds / 2),
  };
}

/**
 * Checks a parsed config file (shape, names, URLs, S6) and resolves every default; the first
 * problem is thrown as a ConfigError whose message is the key's problem.
 */
export function checkConfig(input: unknown, cwd: string = process.cwd()): ArbiterConfig {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw problem('(root)', 'the configuration must be a JSON object');
  }
  refuseBadShape(input);
  const file = input as ConfigFile;
  const { arbiter, candidates, standby } = hostsOf(file);
  const { healthUrls, hookUrls } = urlsOf(file);
  const t = fileTimingOf(file);

  const bands = bandsFromConfig(file.portBands);
  if (!bands.ok) throw problem(bands.key.startsWith('portBands') ? bands.key : `portBands.${bands.key}`, bands.message);

  const port = file.listen?.port ?? DEFAULTS.listen.port;
  const store = storeOf(file, arbiter, port, file.tailnetDomain ?? null, cwd);
  if ('key' in store) throw problem(store.key, store.message);

  const timing = checkLeaseTiming(t);
  if (!timing.ok) throw problem(timing.key, timing.message);
  return {
    arbiter,
    candidates: [...candidates],
    standby,
    ttlSeconds: t.ttlSeconds,
    viewFreshSeconds: t.viewFreshSeconds,
    promoteAfterChecks: t.promoteAfterChecks,
    safetyMarginSeconds: t.safetyMarginSeconds,
    checkCron: t.checkCron,
    healthUrls,
    tailnetDomain: file.tailnetDomain ?? null,
    tailscaleBin: file.tailscaleBin ?? DEFAULTS.tailscaleBin,
    probeTimeoutSeconds: t.probeTimeoutSeconds,
    listen: { host: file.listen?.host ?? DEFAULTS.listen.host, port },
    dataDir: resolve(cwd, file.dataDir ?? DEFAULTS.dataDir),
    store,
    auth: { openReads: file.auth?.openReads ?? DEFAULTS.auth.openReads },
    hooks: { urls: [...hookUrls], command: file.hooks?.command ? [...file.hooks.command] : null },
    events: {
      maxAgeDays: file.events?.maxAgeDays ?? DEFAULTS.events.maxAgeDays,
      maxCount: file.events?.maxCount ?? DEFAULTS.events.maxCount,
    },
    portBands: bands.bands,
    checkSeconds: t.checkSeconds,
  };
}

/** `checkConfig` with its problem as a value instead of thrown. */
export function validateConfig(input: unknown, cwd: string = process.cwd()): ConfigResult {
  try {
    return { ok: true, config: checkConfig(input, cwd) };
  } catch (err) {
    if (err instanceof ConfigError) return { ok: false, key: err.key, message: err.message };
    throw err;
  }
}

/**
 * The config file: `--config`, `$HQ_ARBITER_CONFIG`, `~/.hq/arbiter.json`, `/etc/hq/arbiter.json`,
 * else none (the built-in defaults); a named file must exist. `exists` stands in for the file
 * system in tests.
 */
export function configPath(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  exists?: (p: string) => boolean,
): string | null {
  return findConfigFile(
    flag,
    ARBITER_CONFIG,
    env,
    exists === undefined ? undefined : (p) => (exists(p) ? null : 'ENOENT'),
  );
}

export { ConfigError };

/** The arbiter's line for a config problem: `invalid config PATH: key problem`, on one line. */
function invalidConfig(key: string, problem: string, path: string | null): ConfigError {
  const text = problem.startsWith(key) ? problem : `${key} ${problem}`;
  return new ConfigError(key, `invalid config${path === null ? '' : ` ${path}`}: ${text}`.replace(/\s*\n\s*/g, ' '));
}

/** The arbiter's config for the one loader: its schema, TypeBox's checker, its own relations. */
export const ARBITER_CONFIG_KIND: ConfigKind<ArbiterConfig> = {
  daemon: 'arbiter',
  schema: ConfigSchema,
  loadChecker: loadConfigChecker,
  check: (input, file) => {
    try {
      return checkConfig(input);
    } catch (err) {
      throw err instanceof ConfigError ? invalidConfig(err.key, err.message, file) : err;
    }
  },
};

/**
 * Reads and checks the file at `path` (or the built-in defaults for null). Throws ConfigError.
 * TypeBox's checker must be loaded for a file the quick check cannot pass (config-checker.js).
 */
export function loadConfig(path: string | null): ArbiterConfig {
  return loadConfigFile(ARBITER_CONFIG_KIND, path);
}

/** `loadConfig`, loading TypeBox's checker only when the file needs it (the CLI). */
export function loadConfigLazily(path: string | null): Promise<ArbiterConfig> {
  return loadConfigFileLazily(ARBITER_CONFIG_KIND, path);
}
