/**
 * hq-arbiter configuration: one JSON file, checked once at start by `checkConfig` — shape
 * (TypeBox, unknown keys refused; a key the agent owns is refused naming its owner), host names,
 * URLs, and the arbiter's own timing relations (lease-core `checkLeaseTiming`). The agents'
 * cadence is not the arbiter's to configure: it arrives with their heartbeats and the arbiter
 * checks the pairs across the sides on every report (./timing.ts). An invalid file stops the
 * daemon with one line naming the key.
 */
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Static } from 'typebox';
import type { Compile as CompileFn } from 'typebox/compile';
import { ARBITER_CONFIG, ConfigError, findConfigFile } from '@hq/runtime/config-file';
import { loadConfigFile, loadConfigFileLazily, type ConfigKind } from '@hq/runtime/config-load';
import { cronGapSeconds } from '@hq/runtime/schedule';
import { checkLeaseTiming, wrongDaemon, type LeaseTiming } from '@hq/lease-core';
import { didYouMean } from '@hq/runtime/suggest';
import { HOST_PATTERN, RESERVED_NAMES, hostProblem, isHost } from '@hq/protocol';
import { surelyValid } from '@hq/runtime/quick-check';
import { ConfigSchema } from './schemas/generated.js';
import type * as S from './schemas/source.js';
import { etcdEndpoint } from './store/etcd/endpoint.js';
import { ETCD_DEFAULT_QUOTA_BYTES } from './store/etcd/space.js';
import { bandsFromConfig, type Bands } from './registry/decide.js';

export type ConfigFile = Static<typeof S.ConfigSchema>;

/** The resolved configuration every part of the daemon reads. */
export interface ArbiterConfig {
  readonly arbiter: string;
  readonly candidates: readonly string[];
  readonly standby: string | null;
  readonly ttlSeconds: number;
  readonly viewFreshSeconds: number;
  readonly promoteAfterChecks: number;
  readonly safetyMarginSeconds: number;
  readonly checkCron: string;
  readonly healthUrls: ReadonlyMap<string, string>;
  readonly tailnetDomain: string | null;
  readonly tailscaleBin: string;
  readonly probeTimeoutSeconds: number;
  readonly listen: { readonly host: string; readonly port: number };
  readonly dataDir: string;
  readonly store: StoreConfig;
  readonly auth: { readonly openReads: boolean };
  readonly hooks: { readonly urls: readonly string[]; readonly command: readonly string[] | null };
  /** The event log keeps rows younger than maxAgeDays and at most the newest maxCount. */
  readonly events: { readonly maxAgeDays: number; readonly maxCount: number };
  /** The registry's port bands, defaults filled in (registry/decide.ts). */
  readonly portBands: Bands;
  /** Derived: the largest gap of `checkCron`, seconds. */
  readonly checkSeconds: number;
}

/** Where the arbiter keeps its state. */
export type StoreConfig =
  | { readonly kind: 'sqlite' }
  | {
      readonly kind: 'etcd';
      /** Client URLs of the etcd members, http://host:port. */
      readonly endpoints: readonly string[];
      /** Every key of this installation starts with it (several installations may share a cluster). */
      readonly prefix: string;
      readonly dialTimeoutMs: number;
      readonly requestTimeoutMs: number;
      /** The etcd lease TTL of the arbiters' election. */
      readonly electionTtlSeconds: number;
      /** This arbiter's URL as the other arbiters reach it (they forward mutations to the elected one). */
      readonly advertiseUrl: string;
      /** The elected arbiter compacts etcd's history this often, keeping one interval of it; 0: never (etcd's own auto-compaction does). */
      readonly compactionIntervalSeconds: number;
      /** The members' `--quota-backend-bytes`, for the space warning when they do not say theirs. */
      readonly quotaBackendBytes: number;
      /** `https://` members: the CA (else the system's) and the client certificate and key, as absolute paths; read at start. */
      readonly tls: EtcdTlsFiles | null;
    };

export interface EtcdTlsFiles {
  readonly caFile: string | null;
  readonly certFile: string | null;
  readonly keyFile: string | null;
}

/** How long before etcd would end a term the arbiter stops deciding (store/etcd/election.ts E2). */
export const ELECTION_MARGIN_SECONDS = 2;

/** The etcd store's defaults (`store: {kind: "etcd", …}`). */
export const ETCD_DEFAULTS = Object.freeze({
  /** Keys under it; another installation on the same cluster takes another prefix. */
  prefix: '/hq',
  /** Connect timeout to one member. Too small: a slow network reads as a dead member; too large: a dead member holds each call that long before the next is tried. */
  dialTimeoutSeconds: 2,
  /** One etcd call, every member tried. Too small: writes during an etcd leader election fail as indeterminate; too large: a request waits that long before its 503. */
  requestTimeoutSeconds: 5,
  /** The election lease. Too small: a slow etcd ends terms for nothing; too large: a killed elected arbiter is replaced only that late (plus the S2.3 start wait). */
  electionTtlSeconds: 10,
  /**
   * The elected arbiter compacts etcd's history to the revision it noted one interval earlier
   * (kube-apiserver's default, 5 minutes); 0 turns it off for a cluster whose own
   * `--auto-compaction-*` does it. Too small: a watch slower than one interval finds its revision
   * compacted and reads again, and a backup (read at one revision) longer than one interval
   * fails; too large: more history kept — at one heartbeat a second, 5 minutes of it is a few
   * MB, nothing next to the quota.
   */
  compactionIntervalSeconds: 300,
  /**
   * etcd's `--quota-backend-bytes` (its default, 2 GiB): the warning's yardstick when the
   * members do not report their own (before etcd 3.6). Set it to the members' value.
   */
  quotaBackendBytes: ETCD_DEFAULT_QUOTA_BYTES,
});

/**
 * The defaults. Each line says what goes wrong when the value is too small or too large.
 */
export const DEFAULTS = Object.freeze({
  /** This arbiter's own host name: the observer name of its views; never a candidate. */
  arbiter: 'cloud-vm',
  /** Promotion priority: the first eligible standby in this order is promoted (after `standby`, when set). */
  candidates: Object.freeze(['mbp', 'node-b']) as readonly string[],
  /** Lease TTL. Too small: holders lose the lease on a slow network; too large: slow failover. */
  ttlSeconds: 1500,
  /** A view older than this is no evidence. Must cover each agent's heartbeat interval (checked on every report), else that agent is never promoted. */
  viewFreshSeconds: 1500,
  /** Consecutive dual-unreachable checks before promotion. 1 promotes on a single lost probe. */
  promoteAfterChecks: 2,
  /**
   * Clock-rate allowance shaved off every validity and added to every lock-delay. Must be ≥ 1 %
   * of ttlSeconds (S6) and < ttlSeconds / 2; 30 s is 2 % of the default TTL.
   */
  safetyMarginSeconds: 30,
  /** The arbiter's check schedule (node-cron; 6 fields = seconds); any valid expression. */
  checkCron: '*/10 * * * *',
  /** `""` disables `tailscale ping` (health alone decides). */
  tailscaleBin: 'tailscale',
  /** Probe timeout: 5 s, or half the check interval when that is shorter (a check ends before the next). */
  probeTimeoutSeconds: 5,
  listen: Object.freeze({ host: '127.0.0.1', port: 8470 }),
  /** Holds hq.db and admin.token; relative paths are resolved against the working directory. */
  dataDir: './var',
  /** SQLite in dataDir: one arbiter. `{kind: "etcd", endpoints: [...]}` for several (ETCD_DEFAULTS). */
  store: Object.freeze({ kind: 'sqlite' as const }),
  auth: Object.freeze({ openReads: true }),
  /**
   * The event log's history, swept hourly and at start: rows older than maxAgeDays go, then all
   * but the newest maxCount. A few hundred events a day at the default schedules, so 90 days
   * stay well under 100 000 rows (tens of MB). Too small: the history of an incident is gone
   * before anyone reads it; too large: the database (and every backup) grows for nothing.
   */
  events: Object.freeze({ maxAgeDays: 90, maxCount: 100_000 }),
});

export type ConfigResult =
  | { readonly ok: true; readonly config: ArbiterConfig }
  | { readonly ok: false; readonly key: string; readonly message: string };

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

function httpUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `"${value}" must be an http or https URL`;
  return null;
}

const ETCD_ONLY = [
  'endpoints',
  'prefix',
  'dialTimeoutSeconds',
  'requestTimeoutSeconds',
  'electionTtlSeconds',
  'advertiseUrl',
  'compactionIntervalSeconds',
  'quotaBackendBytes',
  'tls',
] as const;

/** `store.tls`: files that exist and are readable, a key only its owner can read, cert and key together. */
function tlsOf(
  t: NonNullable<NonNullable<ConfigFile['store']>['tls']>,
  cwd: string,
): EtcdTlsFiles | { key: string; message: string } {
  if (t.caFile === undefined && t.certFile === undefined && t.keyFile === undefined)
    return {
      key: 'store.tls',
      message:
        "names no file: give caFile (the CA of the members' certificates) and, for client-certificate auth, certFile and keyFile",
    };
  if ((t.certFile === undefined) !== (t.keyFile === undefined))
    return {
      key: t.certFile === undefined ? 'store.tls.certFile' : 'store.tls.keyFile',
      message: 'certFile and keyFile go together (the client certificate and its key)',
    };
  const out: { caFile: string | null; certFile: string | null; keyFile: string | null } = {
    caFile: null,
    certFile: null,
    keyFile: null,
  };
  for (const name of ['caFile', 'certFile', 'keyFile'] as const) {
    const v = t[name];
    if (v === undefined) continue;
    const path = resolve(cwd, v);
    let mode: number;
    try {
      const st = statSync(path);
      if (!st.isFile()) return { key: `store.tls.${name}`, message: `${path} is not a file` };
      mode = st.mode;
      accessSync(path, fsConstants.R_OK);
    } catch (err) {
      return {
        key: `store.tls.${name}`,
        message: `${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      };
    }
    if (name === 'keyFile' && (mode & 0o077) !== 0)
      return {
        key: 'store.tls.keyFile',
        message: `${path} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
      };
    out[name] = path;
  }
  return out;
}

/** A config problem: the key and its one line. */
type Problem = { key: string; message: string };
type StoreFile = NonNullable<ConfigFile['store']>;

/** `store.endpoints`: each a client URL (https with tls), none twice. */
function endpointsOf(s: StoreFile, tls: boolean): string[] | Problem {
  if (s.endpoints === undefined)
    return {
      key: 'store.endpoints',
      message: 'is required for kind "etcd": the client URLs of the members, e.g. ["http://etcd-1:2379"]',
    };
  const endpoints: string[] = [];
  for (const [i, e] of s.endpoints.entries()) {
    const u = etcdEndpoint(e, tls);
    if ('problem' in u) return { key: `store.endpoints[${i}]`, message: u.problem };
    if (endpoints.includes(u.origin)) return { key: `store.endpoints[${i}]`, message: `"${e}" is named twice` };
    endpoints.push(u.origin);
  }
  return endpoints;
}

/** The call timeouts and the election's term, each long enough for the one before it. */
function etcdTimingOf(s: StoreFile): { dial: number; request: number; electionTtlSeconds: number } | Problem {
  const dial = s.dialTimeoutSeconds ?? ETCD_DEFAULTS.dialTimeoutSeconds;
  const request = s.requestTimeoutSeconds ?? ETCD_DEFAULTS.requestTimeoutSeconds;
  if (request < dial)
    return {
      key: 'store.requestTimeoutSeconds',
      message: `must be at least store.dialTimeoutSeconds (${dial}): a call tries a member for at most the whole call`,
    };
  const electionTtlSeconds = s.electionTtlSeconds ?? ETCD_DEFAULTS.electionTtlSeconds;
  if (electionTtlSeconds <= request + ELECTION_MARGIN_SECONDS) {
    return {
      key: 'store.electionTtlSeconds',
      message: `must exceed store.requestTimeoutSeconds + ${ELECTION_MARGIN_SECONDS} (${request + ELECTION_MARGIN_SECONDS} s): a term must outlive one keep-alive call and the election's margin`,
    };
  }
  return { dial, request, electionTtlSeconds };
}

/** `store.advertiseUrl`, by default this arbiter on the tailnet at its port: a bare origin. */
function advertiseOf(s: StoreFile, arbiter: string, port: number, tailnetDomain: string | null): string | Problem {
  const advertise =
    s.advertiseUrl ?? `http://${tailnetDomain === null ? arbiter : `${arbiter}.${tailnetDomain}`}:${port}`;
  const up = httpUrlProblem(advertise);
  if (up !== null) return { key: 'store.advertiseUrl', message: up };
  const origin = new URL(advertise);
  if ((origin.pathname !== '/' && origin.pathname !== '') || origin.search !== '' || origin.username !== '')
    return {
      key: 'store.advertiseUrl',
      message: `"${advertise}" must be a bare origin (no path, query or credentials)`,
    };
  return origin.origin;
}

const PREFIX = /^\/[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/** `store`: its kind and, for etcd, the members, the prefix and the timings (one line naming the key). */
function storeOf(
  file: ConfigFile,
  arbiter: string,
  port: number,
  tailnetDomain: string | null,
  cwd: string = process.cwd(),
): StoreConfig | Problem {
  const s = file.store;
  if (s === undefined || s.kind === 'sqlite') {
    const extra = s === undefined ? undefined : ETCD_ONLY.find((k) => s[k] !== undefined);
    if (extra !== undefined)
      return {
        key: `store.${extra}`,
        message: 'applies to kind "etcd" only (kind "sqlite" keeps everything in dataDir)',
      };
    return DEFAULTS.store;
  }
  let tls: EtcdTlsFiles | null = null;
  if (s.tls !== undefined) {
    const t = tlsOf(s.tls, cwd);
    if ('key' in t) return t;
    tls = t;
  }
  const endpoints = endpointsOf(s, tls !== null);
  if (!Array.isArray(endpoints)) return endpoints;
  const prefix = s.prefix ?? ETCD_DEFAULTS.prefix;
  if (!PREFIX.test(prefix))
    return {
      key: 'store.prefix',
      message:
        'must look like /hq or /site/hq: a leading slash, segments of letters, digits, ".", "_" or "-", no trailing slash',
    };
  const timing = etcdTimingOf(s);
  if ('key' in timing) return timing;
  const advertiseUrl = advertiseOf(s, arbiter, port, tailnetDomain);
  if (typeof advertiseUrl !== 'string') return advertiseUrl;
  return {
    kind: 'etcd',
    endpoints,
    prefix,
    dialTimeoutMs: Math.round(timing.dial * 1000),
    requestTimeoutMs: Math.round(timing.request * 1000),
    electionTtlSeconds: timing.electionTtlSeconds,
    advertiseUrl,
    compactionIntervalSeconds: s.compactionIntervalSeconds ?? ETCD_DEFAULTS.compactionIntervalSeconds,
    quotaBackendBytes: s.quotaBackendBytes ?? ETCD_DEFAULTS.quotaBackendBytes,
    tls,
  };
}

/**
 * An etcd store named on a command line (`hq-arbiter migrate --to etcd:URL,… --prefix P`),
 * checked by the same rules as the `store` key, the timings at their defaults.
 */
export function etcdStoreOf(
  endpoints: readonly string[],
  prefix: string | undefined,
): Extract<StoreConfig, { kind: 'etcd' }> | { key: string; message: string } {
  const s = storeOf(
    { store: { kind: 'etcd', endpoints: [...endpoints], ...(prefix === undefined ? {} : { prefix }) } } as ConfigFile,
    'arbiter',
    DEFAULTS.listen.port,
    null,
  );
  if ('key' in s) return s;
  return s as Extract<StoreConfig, { kind: 'etcd' }>;
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
