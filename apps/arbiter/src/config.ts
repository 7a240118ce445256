/**
 * hq-arbiter configuration: one JSON file, validated once at start by `validateConfig` — shape
 * (TypeBox, unknown keys refused; a key the agent owns is refused naming its owner), host names,
 * URLs, and the arbiter's own timing relations (lease-core `checkLeaseTiming`). The agents'
 * cadence is not the arbiter's to configure: it arrives with their heartbeats and the arbiter
 * checks the pairs across the sides on every report (./timing.ts). An invalid file stops the
 * daemon with one line naming the key.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import Type, { type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { cronGapSeconds } from '@hq/runtime';
import { checkLeaseTiming, wrongDaemon } from '@hq/lease-core';
import { didYouMean } from '@hq/lease-core/suggest';
import { HOST_PATTERN, HOST_SCHEMA_PATTERN, RESERVED_NAMES, hostProblem, isHost } from '@hq/protocol';
import { PortBandsConfig } from './registry/schemas.js';
import { bandsFromConfig, type Bands } from './registry/decide.js';

const HostName = Type.String({ pattern: HOST_SCHEMA_PATTERN });
const Seconds = Type.Number({ exclusiveMinimum: 0, maximum: 31_536_000 });

export const ConfigSchema = Type.Object(
  {
    arbiter: Type.Optional(HostName),
    candidates: Type.Optional(Type.Array(HostName, { minItems: 1, maxItems: 32 })),
    standby: Type.Optional(HostName),
    ttlSeconds: Type.Optional(Seconds),
    viewFreshSeconds: Type.Optional(Seconds),
    promoteAfterChecks: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    safetyMarginSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 31_536_000 })),
    checkCron: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    healthUrls: Type.Optional(Type.Record(Type.String(), Type.String({ minLength: 1, maxLength: 2048 }))),
    tailnetDomain: Type.Optional(Type.String({ pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$' })),
    tailscaleBin: Type.Optional(Type.String({ maxLength: 4096 })),
    probeTimeoutSeconds: Type.Optional(Seconds),
    listen: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
        },
        { additionalProperties: false },
      ),
    ),
    dataDir: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    auth: Type.Optional(Type.Object({ openReads: Type.Optional(Type.Boolean()) }, { additionalProperties: false })),
    /** SPEC §8 port bands (see registry/README.md). */
    portBands: Type.Optional(PortBandsConfig),
    /** The event log's bounded history (swept hourly and at start). */
    events: Type.Optional(
      Type.Object(
        {
          maxAgeDays: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 36_500 })),
          maxCount: Type.Optional(Type.Integer({ minimum: 100, maximum: 10_000_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    hooks: Type.Optional(
      Type.Object(
        {
          urls: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: 32 })),
          command: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { minItems: 1, maxItems: 64 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export type ConfigFile = Static<typeof ConfigSchema>;

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
  readonly auth: { readonly openReads: boolean };
  readonly hooks: { readonly urls: readonly string[]; readonly command: readonly string[] | null };
  /** The event log keeps rows younger than maxAgeDays and at most the newest maxCount. */
  readonly events: { readonly maxAgeDays: number; readonly maxCount: number };
  /** SPEC §8 port bands, defaults filled in (registry/decide.ts). */
  readonly portBands: Bands;
  /** Derived: the largest gap of `checkCron`, seconds. */
  readonly checkSeconds: number;
}

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

const compiled = Compile(ConfigSchema);

interface SchemaError {
  readonly keyword: string;
  readonly instancePath: string;
  readonly params: { readonly additionalProperties?: readonly string[] } & Record<string, unknown>;
  readonly message: string;
}

function keyOf(path: string): string {
  const parts = path.split('/').filter((p) => p !== '').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.length === 0 ? '(root)' : parts.map((p) => (/^\d+$/.test(p) ? `[${p}]` : p)).join('.').replace(/\.\[/g, '[');
}

function fail(key: string, message: string): ConfigResult {
  return { ok: false, key, message };
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

/** Validates a parsed config file (shape, names, URLs, S6) and resolves every default. */
export function validateConfig(input: unknown, cwd: string = process.cwd()): ConfigResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return fail('(root)', 'the configuration must be a JSON object');
  }
  if (!compiled.Check(input)) {
    const errors = [...compiled.Errors(input)] as unknown as SchemaError[];
    const extra = errors.find((e) => e.keyword === 'additionalProperties');
    if (extra !== undefined) {
      const name = extra.params.additionalProperties?.[0] ?? '?';
      const key = extra.instancePath === '' ? name : `${keyOf(extra.instancePath)}.${name}`;
      const owned = extra.instancePath === '' ? wrongDaemon(name, 'hq-arbiter') : null;
      const known = extra.instancePath === '' ? Object.keys(ConfigSchema.properties) : [];
      return fail(key, owned ?? `is not a known key${didYouMean(name, known)}`);
    }
    const first = errors.find((e) => e.keyword !== 'boolean') ?? errors[0];
    if (first === undefined) return fail('(root)', 'does not match the schema');
    const key = keyOf(first.instancePath);
    if (first.keyword === 'pattern' && /arbiter|candidates|standby/.test(key)) {
      return fail(key, `must be a host name matching ${HOST_PATTERN.source} (not ${RESERVED_NAMES.map((n) => `"${n}"`).join(' or ')})`);
    }
    return fail(key, first.message);
  }
  const file = input as ConfigFile;

  const arbiter = file.arbiter ?? DEFAULTS.arbiter;
  const candidates = file.candidates ?? DEFAULTS.candidates;
  if (new Set(candidates).size !== candidates.length) return fail('candidates', 'must not name a host twice');
  if (candidates.includes(arbiter)) return fail('candidates', `must not include the arbiter "${arbiter}"`);
  const standby = file.standby ?? null;
  if (standby !== null && !candidates.includes(standby)) return fail('standby', `"${standby}" is not one of the candidates`);

  const healthUrls = new Map<string, string>();
  for (const [host, url] of Object.entries(file.healthUrls ?? {})) {
    const hp = hostProblem(host);
    if (hp !== null || !isHost(host)) return fail(`healthUrls.${host}`, `the key ${hp ?? 'is not a host'}`);
    const up = httpUrlProblem(url);
    if (up !== null) return fail(`healthUrls.${host}`, up);
    healthUrls.set(host, url);
  }
  const urls = file.hooks?.urls ?? [];
  for (const [i, url] of urls.entries()) {
    const up = httpUrlProblem(url);
    if (up !== null) return fail(`hooks.urls[${i}]`, up);
  }

  const checkCron = file.checkCron ?? DEFAULTS.checkCron;
  const gap = cronGapSeconds(checkCron);
  if (!gap.ok) return fail('checkCron', gap.message);
  const checkSeconds = gap.seconds;

  const ttlSeconds = file.ttlSeconds ?? DEFAULTS.ttlSeconds;
  const viewFreshSeconds = file.viewFreshSeconds ?? DEFAULTS.viewFreshSeconds;
  const promoteAfterChecks = file.promoteAfterChecks ?? DEFAULTS.promoteAfterChecks;
  const safetyMarginSeconds = file.safetyMarginSeconds ?? DEFAULTS.safetyMarginSeconds;
  const probeTimeoutSeconds = file.probeTimeoutSeconds ?? Math.min(DEFAULTS.probeTimeoutSeconds, checkSeconds / 2);

  const bands = bandsFromConfig(file.portBands);
  if (!bands.ok) return fail(bands.key.startsWith('portBands') ? bands.key : `portBands.${bands.key}`, bands.message);

  const timing = checkLeaseTiming({ ttlSeconds, checkSeconds, viewFreshSeconds, probeTimeoutSeconds, safetyMarginSeconds, promoteAfterChecks });
  if (!timing.ok) return fail(timing.key, timing.message);
  return {
    ok: true,
    config: {
      arbiter,
      candidates: [...candidates],
      standby,
      ttlSeconds,
      viewFreshSeconds,
      promoteAfterChecks,
      safetyMarginSeconds,
      checkCron,
      healthUrls,
      tailnetDomain: file.tailnetDomain ?? null,
      tailscaleBin: file.tailscaleBin ?? DEFAULTS.tailscaleBin,
      probeTimeoutSeconds,
      listen: { host: file.listen?.host ?? DEFAULTS.listen.host, port: file.listen?.port ?? DEFAULTS.listen.port },
      dataDir: resolve(cwd, file.dataDir ?? DEFAULTS.dataDir),
      auth: { openReads: file.auth?.openReads ?? DEFAULTS.auth.openReads },
      hooks: { urls: [...urls], command: file.hooks?.command ? [...file.hooks.command] : null },
      events: { maxAgeDays: file.events?.maxAgeDays ?? DEFAULTS.events.maxAgeDays, maxCount: file.events?.maxCount ?? DEFAULTS.events.maxCount },
      portBands: bands.bands,
      checkSeconds,
    },
  };
}

/** Where the config comes from: `--config`, `$HQ_ARBITER_CONFIG`, `~/.hq/arbiter.json`, `/etc/hq/arbiter.json`, else none. */
export function configPath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env, exists: (p: string) => boolean): string | null {
  if (flag !== undefined) return flag;
  const fromEnv = env['HQ_ARBITER_CONFIG'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  for (const p of [join(homedir(), '.hq', 'arbiter.json'), '/etc/hq/arbiter.json']) {
    if (exists(p)) return p;
  }
  return null;
}

export class ConfigError extends Error {
  constructor(
    readonly key: string,
    readonly problem: string,
    readonly path: string | null,
  ) {
    const text = problem.startsWith(key) ? problem : `${key} ${problem}`;
    super(`invalid config${path === null ? '' : ` ${path}`}: ${text}`.replace(/\s*\n\s*/g, ' '));
    this.name = 'ConfigError';
  }
}

/** Reads and validates the file at `path` (or the built-in defaults for null). Throws ConfigError. */
export function loadConfig(path: string | null, cwd: string = process.cwd()): ArbiterConfig {
  let input: unknown = {};
  if (path !== null) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError('(file)', `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, path);
    }
    try {
      input = JSON.parse(text);
    } catch (err) {
      throw new ConfigError('(file)', `is not valid JSON (${(err as Error).message})`, path);
    }
  }
  const result = validateConfig(input, cwd);
  if (!result.ok) throw new ConfigError(result.key, result.message, path);
  return result.config;
}
