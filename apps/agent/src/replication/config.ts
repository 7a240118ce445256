/**
 * The `replication` block of the agent config: what to protect, where generations
 * arrive, how long they are kept and when each tier runs. Validated strictly with TypeBox
 * (unknown keys refused, no coercion) and resolved into one `ReplicationConfig` with every
 * default filled in; every problem is one line that names the key (ConfigError, exit 2).
 *
 * The block lives in the agent's own JSON file under `replication`. Until the agent's schema
 * lists that key, `loadAgentWithReplication` takes the block out before handing the rest of the
 * file to the agent's validator, so both work on the same file.
 */
import { isAbsolute, join, resolve } from 'node:path';
import Type, { type Static } from 'typebox';
// typebox/schema: what Value.Check and Value.Errors call, without the rest of typebox/value
// (140 more modules for a daemon to load, docs/BENCH.md "Where the idle agent's memory goes").
import Schema from 'typebox/schema';
import { AGENT_CONFIG, ConfigError, expandHome, findConfigFile, namingFile } from '@hq/runtime/config-file';
import { loadConfigFile, type ConfigKind } from '@hq/runtime/config-load';
import { AGENT_CONFIG_KIND, resolveConfig, validateConfigFile, type AgentConfig } from '../config.js';
import '../config-checker.js';
import { DEFAULT_SECRET_PATTERNS, HOST_SCHEMA_PATTERN, isHost, relPathProblem, TIERS, type Tier } from '@hq/protocol';
import { cronGapSeconds } from '@hq/runtime/schedule';

const RelPath = Type.String({ minLength: 1, maxLength: 1024 });
const Regex = Type.String({ minLength: 1, maxLength: 512 });
const PerTier = <T extends ReturnType<typeof Type.Integer> | ReturnType<typeof Type.String>>(v: T) =>
  Type.Object(
    { core: Type.Optional(v), big: Type.Optional(v), obs: Type.Optional(v) },
    { additionalProperties: false },
  );

export const PlanItemSchema = Type.Object(
  {
    path: RelPath,
    /** May this item (and, for a directory, its files) go to survival copies? Secrets never do. */
    survival: Type.Optional(Type.Boolean()),
    /** Directories only: a regular expression the path below the directory must match. */
    match: Type.Optional(Regex),
  },
  { additionalProperties: false },
);

/**
 * An S3-compatible bucket for survival copies. No credential key: they come from the AWS
 * environment or profile only (a credential-looking key is refused by name before this schema).
 */
export const S3TargetSchema = Type.Object(
  {
    bucket: Type.String({ minLength: 3, maxLength: 255, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$' }),
    prefix: Type.Optional(Type.String({ maxLength: 512 })),
    region: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9-]+$' })),
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    forcePathStyle: Type.Optional(Type.Boolean()),
    sse: Type.Optional(Type.Union([Type.Literal('AES256'), Type.Literal('aws:kms')])),
    kmsKeyId: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    keep: Type.Optional(PerTier(Type.Integer({ minimum: 1, maximum: 10_000 }))),
  },
  { additionalProperties: false },
);

export const ReplicationConfigSchema = Type.Object(
  {
    stateDir: Type.String({ minLength: 1 }),
    standbyDir: Type.Optional(Type.String({ minLength: 1 })),
    outboxDir: Type.Optional(Type.String({ minLength: 1 })),
    smallBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    plan: Type.Optional(
      Type.Object(
        {
          files: Type.Optional(Type.Array(PlanItemSchema)),
          dirs: Type.Optional(Type.Array(PlanItemSchema)),
          obs: Type.Optional(Type.Array(PlanItemSchema)),
        },
        { additionalProperties: false },
      ),
    ),
    secretPatterns: Type.Optional(Type.Array(Regex)),
    hostLocalKeys: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }))),
    keep: Type.Optional(PerTier(Type.Integer({ minimum: 1, maximum: 10_000 }))),
    cron: Type.Optional(PerTier(Type.String({ minLength: 1 }))),
    pushTo: Type.Optional(Type.Array(Type.String({ pattern: HOST_SCHEMA_PATTERN }))),
    chunkBytes: Type.Optional(Type.Integer({ minimum: 4096, maximum: 256 * 1024 * 1024 })),
    keepLocal: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    pollersOff: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }))),
    survival: Type.Optional(Type.Object({ s3: Type.Optional(S3TargetSchema) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);

export type ReplicationConfigFile = Static<typeof ReplicationConfigSchema>;

export interface PlanItem {
  readonly path: string;
  readonly survival: boolean;
  readonly match: RegExp | null;
}

/**
 * No built-in plan: what to protect is the application's business, so a block without `plan`
 * protects nothing and `hq standby snapshot` refuses it (`replication.plan: lists nothing…`).
 * `deploy/replication/example-plan.json` ships the old system's plan as an example.
 */
export const DEFAULT_PLAN = Object.freeze({
  files: [] as readonly PlanItemFile[],
  dirs: [] as readonly PlanItemFile[],
  obs: [] as readonly PlanItemFile[],
});

type PlanItemFile = Static<typeof PlanItemSchema>;

/** Does the plan list anything at all? */
export function planIsEmpty(c: Pick<ReplicationConfig, 'files' | 'dirs' | 'obs'>): boolean {
  return c.files.length === 0 && c.dirs.length === 0 && c.obs.length === 0;
}

/** One segment of a `pollersOff` key path: a plain JSON key (never one that reaches a prototype). */
const KEY_SEGMENT = /^[A-Za-z0-9_$-]{1,64}$/;
const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'prototype', 'constructor']);

function pollerPaths(list: readonly string[], hostLocalKeys: readonly string[]): string[] {
  const seen = new Set<string>();
  return list.map((path, i) => {
    const k = `replication.pollersOff.${i}`;
    const parts = path.split('.');
    if (parts.some((s) => !KEY_SEGMENT.test(s) || FORBIDDEN_SEGMENTS.has(s))) {
      throw new ConfigError(
        k,
        `${k}: ${JSON.stringify(path)} is not a key path (dot-separated JSON keys of letters, digits, _ $ -, e.g. "telegram" or "bots.discord")`,
      );
    }
    if (hostLocalKeys.includes(parts[0] as string))
      throw new ConfigError(k, `${k}: ${JSON.stringify(path)} lies under the host-local key ${parts[0]}`);
    if (seen.has(path)) throw new ConfigError(k, `${k}: ${JSON.stringify(path)} is listed twice`);
    seen.add(path);
    return path;
  });
}

/** Every default, with why. */
export const REPLICATION_DEFAULTS = Object.freeze({
  /** Ledgers at or under 20 MiB go every 10 minutes (core); larger ones would make each core push heavy (big). */
  smallBytes: 20 * 1024 * 1024,
  /** 36 core generations = 6 hours at every 10 minutes; fewer narrows the window to find a good copy. */
  keep: Object.freeze({ core: 36, big: 8, obs: 8 }),
  /** core every 10 minutes; big and obs four times a day (the seeds' schedule). */
  cron: Object.freeze({ core: '*/10 * * * *', big: '15 */6 * * *', obs: '45 */6 * * *' }),
  /** The host-local keys of `config.json`: the `hq` block names this host and must never ride a copy. */
  hostLocalKeys: Object.freeze(['hq']) as readonly string[],
  /** 4 MiB per blob request: inside the peer listener's 10 s request timeout down to ~4 Mbit/s; smaller costs more round trips. */
  chunkBytes: 4 * 1024 * 1024,
  /** Local generations kept in the outbox: the previous one is all that reuse needs. */
  keepLocal: 2,
  /** Survival copies kept in a bucket, per tier: the arbiter's numbers, so either copy reaches as far back. */
  s3Keep: Object.freeze({ core: 36, big: 8, obs: 8 }),
});

/** A resolved `replication.survival.s3`. */
export interface S3Target {
  readonly bucket: string;
  /** Key prefix without leading or trailing slash; "" = the bucket's root. */
  readonly prefix: string;
  /** Absent: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1 (read when a copy is sent). */
  readonly region?: string;
  /** Absent: AWS S3 of the region. */
  readonly endpoint?: string;
  readonly forcePathStyle: boolean;
  readonly sse: 'AES256' | 'aws:kms';
  readonly kmsKeyId?: string;
  readonly keep: Readonly<Record<Tier, number>>;
}

export interface ReplicationConfig {
  readonly stateDir: string;
  readonly standbyDir: string;
  readonly outboxDir: string;
  readonly smallBytes: number;
  readonly files: readonly PlanItem[];
  readonly dirs: readonly PlanItem[];
  readonly obs: readonly PlanItem[];
  readonly secretPatterns: readonly RegExp[];
  readonly hostLocalKeys: readonly string[];
  readonly keep: Readonly<Record<Tier, number>>;
  readonly cron: Readonly<Record<Tier, string>>;
  /** Hosts to push to; null = every peer of the agent config. */
  readonly pushTo: readonly string[] | null;
  readonly chunkBytes: number;
  readonly keepLocal: number;
  /**
   * Key paths of the promoted `config.json` that promotion turns off (an object gets
   * `enabled: false`, a boolean becomes false, an absent key becomes `{enabled: false}`).
   * Default: none, promotion turns nothing off.
   */
  readonly pollersOff: readonly string[];
  /** The bucket that also takes survival copies; null = the arbiter only. */
  readonly survivalS3: S3Target | null;
}

function keyOf(instancePath: string): string {
  const key = instancePath.replace(/^\//, '').split('/').join('.');
  return key === '' ? 'replication' : `replication.${key}`;
}

function regex(source: string, key: string): RegExp {
  try {
    return new RegExp(source);
  } catch (err) {
    throw new ConfigError(key, `${key}: is not a regular expression (${(err as Error).message})`);
  }
}

function items(
  list: readonly { path: string; survival?: boolean; match?: string }[],
  key: string,
  dirs: boolean,
): PlanItem[] {
  const seen = new Set<string>();
  return list.map((it, i) => {
    const k = `${key}.${i}.path`;
    const problem = relPathProblem(it.path);
    if (problem !== null) throw new ConfigError(k, `${k}: ${problem}`);
    if (seen.has(it.path)) throw new ConfigError(k, `${k}: "${it.path}" is listed twice`);
    seen.add(it.path);
    if (!dirs && it.match !== undefined)
      throw new ConfigError(`${key}.${i}.match`, `${key}.${i}.match: only directories take match`);
    return {
      path: it.path,
      survival: it.survival === true,
      match: it.match === undefined ? null : regex(it.match, `${key}.${i}.match`),
    };
  });
}

/** Key names that hold a credential: these never belong in hq's files. */
const CREDENTIAL_KEY = /access.?key|secret|session.?token|credential|password|^token$/i;

/** A credential in `replication.survival.s3` is refused by name, before the schema says "unknown key". */
function refuseCredentials(input: { [k: string]: unknown }): void {
  const survival = input['survival'];
  const s3 =
    typeof survival === 'object' && survival !== null ? (survival as { [k: string]: unknown })['s3'] : undefined;
  if (typeof s3 !== 'object' || s3 === null || Array.isArray(s3)) return;
  for (const k of Object.keys(s3)) {
    if (CREDENTIAL_KEY.test(k)) {
      const key = `replication.survival.s3.${k}`;
      throw new ConfigError(
        key,
        `${key}: credentials never go in hq's config; give them as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile (AWS_PROFILE, ~/.aws/credentials)`,
      );
    }
  }
  const endpoint = (s3 as { [k: string]: unknown })['endpoint'];
  if (typeof endpoint === 'string' && /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(endpoint)) {
    throw new ConfigError(
      'replication.survival.s3.endpoint',
      "replication.survival.s3.endpoint: holds a user name or password; credentials never go in hq's config (use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile)",
    );
  }
}

function s3Target(c: Static<typeof S3TargetSchema>): S3Target {
  const k = 'replication.survival.s3';
  const prefix = (c.prefix ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix !== '') {
    const problem = relPathProblem(prefix);
    if (problem !== null) throw new ConfigError(`${k}.prefix`, `${k}.prefix: ${problem}`);
  }
  if (c.endpoint !== undefined) {
    let u: URL;
    try {
      u = new URL(c.endpoint);
    } catch {
      throw new ConfigError(
        `${k}.endpoint`,
        `${k}.endpoint: ${JSON.stringify(c.endpoint)} is not a URL (e.g. "https://s3.example.net" or "http://127.0.0.1:9000")`,
      );
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new ConfigError(`${k}.endpoint`, `${k}.endpoint: must be an http or https URL`);
    if (u.search !== '' || u.hash !== '')
      throw new ConfigError(`${k}.endpoint`, `${k}.endpoint: must have no query or fragment`);
  }
  const sse = c.sse ?? 'AES256';
  if (c.kmsKeyId !== undefined && sse !== 'aws:kms')
    throw new ConfigError(`${k}.kmsKeyId`, `${k}.kmsKeyId: only with sse "aws:kms"`);
  return {
    bucket: c.bucket,
    prefix,
    ...(c.region === undefined ? {} : { region: c.region }),
    ...(c.endpoint === undefined ? {} : { endpoint: c.endpoint }),
    // A bucket behind a custom endpoint (MinIO, Ceph, a loopback server) is usually reached by path.
    forcePathStyle: c.forcePathStyle ?? c.endpoint !== undefined,
    sse,
    ...(c.kmsKeyId === undefined ? {} : { kmsKeyId: c.kmsKeyId }),
    keep: { ...REPLICATION_DEFAULTS.s3Keep, ...(c.keep ?? {}) } as Record<Tier, number>,
  };
}

/** Validates the block; the first problem is thrown as a ConfigError naming `replication.<key>`. */
export function validateReplication(input: unknown): ReplicationConfigFile {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new ConfigError('replication', 'replication: must be a JSON object');
  refuseCredentials(input as { [k: string]: unknown });
  if (!Schema.Check(ReplicationConfigSchema, input)) {
    const errors = Schema.Errors(ReplicationConfigSchema, input)[1];
    const unknown = errors.find((e) => e.message === 'schema is false');
    const first = unknown ?? errors[0];
    const key = first === undefined ? 'replication' : keyOf(first.instancePath);
    throw new ConfigError(
      key,
      `${key}: ${unknown !== undefined ? 'is not a known key' : (first?.message ?? 'is invalid')}`,
    );
  }
  return input as ReplicationConfigFile;
}

/** Fills defaults; relative directories are taken from the agent's state directory. */
export function resolveReplication(c: ReplicationConfigFile, agentStateDir: string): ReplicationConfig {
  const dir = (p: string | undefined, fallback: string): string => {
    const v = expandHome(p ?? fallback);
    return isAbsolute(v) ? resolve(v) : resolve(agentStateDir, v);
  };
  const cron = { ...REPLICATION_DEFAULTS.cron, ...(c.cron ?? {}) } as Record<Tier, string>;
  for (const t of TIERS) {
    const r = cronGapSeconds(cron[t]);
    if (!r.ok) throw new ConfigError(`replication.cron.${t}`, `replication.cron.${t}: ${r.message}`);
  }
  for (const h of c.pushTo ?? [])
    if (!isHost(h)) throw new ConfigError('replication.pushTo', `replication.pushTo: "${h}" is not a host`);
  const plan = c.plan ?? DEFAULT_PLAN;
  const r: ReplicationConfig = {
    stateDir: dir(c.stateDir, c.stateDir),
    standbyDir: dir(c.standbyDir, 'standby'),
    outboxDir: dir(c.outboxDir, 'replication-out'),
    smallBytes: c.smallBytes ?? REPLICATION_DEFAULTS.smallBytes,
    files: items(plan.files ?? [], 'replication.plan.files', false),
    dirs: items(plan.dirs ?? [], 'replication.plan.dirs', true),
    obs: items(plan.obs ?? [], 'replication.plan.obs', false),
    secretPatterns: (c.secretPatterns ?? DEFAULT_SECRET_PATTERNS).map((s, i) =>
      regex(s, `replication.secretPatterns.${i}`),
    ),
    hostLocalKeys: c.hostLocalKeys ?? REPLICATION_DEFAULTS.hostLocalKeys,
    keep: { ...REPLICATION_DEFAULTS.keep, ...(c.keep ?? {}) } as Record<Tier, number>,
    cron,
    pushTo: c.pushTo ?? null,
    chunkBytes: c.chunkBytes ?? REPLICATION_DEFAULTS.chunkBytes,
    keepLocal: c.keepLocal ?? REPLICATION_DEFAULTS.keepLocal,
    pollersOff: pollerPaths(c.pollersOff ?? [], c.hostLocalKeys ?? REPLICATION_DEFAULTS.hostLocalKeys),
    survivalS3: c.survival?.s3 === undefined ? null : s3Target(c.survival.s3),
  };
  const inside = (a: string, b: string) => a === b || a.startsWith(`${b}/`);
  for (const [k, v] of [
    ['standbyDir', r.standbyDir],
    ['outboxDir', r.outboxDir],
  ] as const) {
    if (inside(v, r.stateDir) || inside(r.stateDir, v)) {
      throw new ConfigError(
        `replication.${k}`,
        `replication.${k}: ${v} must lie outside stateDir ${r.stateDir} (and not contain it)`,
      );
    }
  }
  if (inside(r.standbyDir, r.outboxDir) || inside(r.outboxDir, r.standbyDir)) {
    throw new ConfigError('replication.outboxDir', 'replication.outboxDir: must not overlap standbyDir');
  }
  return r;
}

export interface Loaded {
  readonly agent: AgentConfig;
  /** null when the file has no `replication` block. */
  readonly replication: ReplicationConfig | null;
}

/**
 * Reads the agent config file (same lookup as `hq`), takes the `replication` block out, validates
 * both parts. Throws ConfigError.
 */
export function loadAgentWithReplication(explicit?: string, env: NodeJS.ProcessEnv = process.env): Loaded {
  return loadConfigFile(WITH_REPLICATION, findConfigFile(explicit, AGENT_CONFIG, env));
}

/** The agent's config with its `replication` block checked too, for the one loader. */
const WITH_REPLICATION: ConfigKind<Loaded> = {
  daemon: 'agent',
  schema: AGENT_CONFIG_KIND.schema,
  loadChecker: AGENT_CONFIG_KIND.loadChecker,
  check: ({ replication, ...rest }, file) =>
    namingFile(file, () => {
      const agent = resolveConfig(validateConfigFile(rest), file);
      const block =
        replication === undefined ? null : resolveReplication(validateReplication(replication), agent.stateDir);
      return { agent, replication: block };
    }),
};

/** The tier folder of a standby or outbox root. */
export function tierDir(root: string, tier: Tier): string {
  return join(root, tier);
}
