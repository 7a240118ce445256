/**
 * The agent's configuration: one JSON file, validated strictly with TypeBox (schemas/source.ts; unknown keys
 * refused, no coercion; a key the arbiter owns is refused naming its owner), defaults filled in
 * one place, and the agent's own cadence relations checked with lease-core's `checkCadence`.
 * The lease timing (`ttlSeconds`, `safetyMarginSeconds`) and the candidates are the arbiter's:
 * the agent reads them from the arbiter's answers, never from this file (S6: one owner per
 * setting). Every problem is one line that names the key and the file.
 *
 * Lookup, shared by `hq` and `hq-agent`: `--config PATH`, else `$HQ_CONFIG`, else
 * `~/.hq/agent.json`, else `/etc/hq/agent.json`; none of them → every default.
 *
 * Network defaults that need the tailnet's domain (`arbiterUrl`, `peers`, health URLs) are
 * resolved lazily by `resolveNetwork`, so the fence hot path never runs `tailscale`.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Static } from 'typebox';
import type SchemaModule from 'typebox/schema';
// The schema as plain JSON, generated from its TypeBox definition (schemas/source.ts): the daemon
// does not load TypeBox's builder.
import { AgentConfigSchema } from './schemas/generated.js';
import { surelyValid } from '@hq/runtime/quick-check';
import { AGENT_CONFIG, ConfigError, expandHome, findConfigFile, namingFile } from '@hq/runtime/config-file';
import { loadConfigFile, loadConfigFileLazily, type ConfigKind } from '@hq/runtime/config-load';
import { magicDnsSuffix, PEER_PORT, tailnetHealthUrl } from '@hq/runtime/probe';
import { cronGapSeconds } from '@hq/runtime/schedule';
import { checkCadence, wrongDaemon } from '@hq/lease-core';
import { DEFAULT_ROLES, NEVER_FAIL_OPEN, hostProblem, isHost } from '@hq/protocol';
import { didYouMean } from '@hq/runtime/suggest';

export { AgentConfigSchema };

export type AgentConfigFile = Static<typeof AgentConfigSchema>;

/** Every default, with why. */
export const DEFAULTS = Object.freeze({
  arbiter: 'cloud-vm',
  /**
   * Every 10 minutes: how fresh this host's views and reports are. The holder renews more often
   * when the lease it holds needs it (three times per validity, S6), whatever this says.
   */
  heartbeatCron: '*/10 * * * *',
  /** A forced transfer or promotion reaches the agent within a minute. */
  refreshSeconds: 60,
  tailscaleBin: 'tailscale',
  /** Probe timeout: 5 s, or half the heartbeat interval when that is shorter. */
  probeTimeoutSeconds: 5,
  /** An answer later than this is discarded (S2.3 counts on it). */
  requestTimeoutSeconds: 5,
  /**
   * Off: a stopped holder keeps the lease (a restart takes it back at once; a machine that stays
   * down is promoted away behind the lock-delay). On: a clean stop hands it over — every stop,
   * a restart for an upgrade too, moves HQ to the standby.
   */
  handoverOnStop: false,
  listenHost: '0.0.0.0',
  listenPort: PEER_PORT,
  arbiterPort: 8470,
});

export interface AgentConfig {
  readonly file: string | null;
  readonly hostName: string;
  readonly arbiter: string;
  /** null until `resolveNetwork` (needs tailnetDomain when unset). The first of `arbiterUrls` when that is given. */
  readonly arbiterUrl: string | null;
  /** Every arbiter to try, in order (`arbiterUrls`); null: `arbiterUrl` alone. */
  readonly arbiterUrls: readonly string[] | null;
  /** This host and its configured peers: the candidates as far as this host knows them. */
  readonly candidates: readonly string[];
  /** True when `peers` was given; otherwise peers follow the arbiter's candidates (tailnetDomain). */
  readonly peersConfigured: boolean;
  /** The host file names another host than `hostName` (the config wins), else null. */
  readonly hostMismatch: { readonly file: string; readonly name: string } | null;
  readonly heartbeatCron: string;
  readonly heartbeatSeconds: number;
  readonly refreshSeconds: number;
  readonly failOpenRoles: readonly string[];
  readonly roles: readonly string[];
  readonly healthUrls: ReadonlyMap<string, string>;
  readonly tailnetDomain: string | null;
  readonly tailscaleBin: string;
  readonly probeTimeoutSeconds: number;
  readonly requestTimeoutSeconds: number;
  readonly listen: { readonly host: string; readonly port: number };
  readonly stateDir: string;
  readonly socketPath: string;
  readonly tokenFile: string;
  /** The other candidates' peer listeners (explicit `peers`, or derived from tailnetDomain). */
  readonly peers: ReadonlyMap<string, string>;
  readonly peerTokenFile: string;
  /** `queryTokenFile` resolved, or null when not configured (then `{stateDir}/query-token` is used if it exists). */
  readonly queryTokenFile: string | null;
  /** `advertiseUrl` as configured (checked: a bare origin), else null. */
  readonly advertiseUrl: string | null;
  /** The raw `replication` block (undefined when absent); the daemon validates it at start. */
  readonly replication: unknown;
  readonly handoverOnStop: boolean;
}

function keyOf(instancePath: string): string {
  const key = instancePath.replace(/^\//, '').split('/').join('.');
  return key === '' ? '(top level)' : key;
}

/**
 * TypeBox's checker (`typebox/schema`: what Value.Check and Value.Errors call, without the rest of
 * typebox/value), for a config the quick check cannot pass: it says what is wrong. Loaded by
 * config-checker.ts (imported by the CLI's commands, which load configs synchronously) or by
 * `loadConfigChecker()` (the daemon, only when its config needs it: a valid config is accepted
 * without loading TypeBox, about 5 MiB of an idle agent; docs/BENCH.md).
 */
let Schema: typeof SchemaModule | null = null;

/** Sets TypeBox's checker (config-checker.ts). */
export function useSchemaChecker(checker: typeof SchemaModule): void {
  Schema = checker;
}

/** Loads TypeBox's checker, once. */
export async function loadConfigChecker(): Promise<void> {
  Schema ??= (await import('typebox/schema')).default;
}

/** Validates the parsed JSON; the first problem is thrown as a ConfigError. */
export function validateConfigFile(input: unknown): AgentConfigFile {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new ConfigError('(top level)', 'the config must be a JSON object');
  }
  // A config the quick check is sure of is one TypeBox accepts (@hq/runtime/quick-check); any
  // other goes to TypeBox, which decides and names the problem.
  const sure = surelyValid(AgentConfigSchema, input);
  const checker = sure ? null : Schema;
  if (!sure && checker === null) {
    throw new Error(
      "validateConfigFile: TypeBox's checker is not loaded (import config-checker.js or await loadConfigChecker())",
    );
  }
  if (checker !== null && !checker.Check(AgentConfigSchema, input)) {
    const errors = checker.Errors(AgentConfigSchema, input)[1];
    const unknown = errors.find((e) => e.message === 'schema is false');
    const first = unknown ?? errors[0];
    if (first === undefined) throw new ConfigError('(top level)', 'the config is invalid');
    const key = keyOf(first.instancePath);
    const owned = unknown !== undefined && !key.includes('.') ? wrongDaemon(key, 'hq-agent') : null;
    const hint =
      unknown !== undefined && !key.includes('.') ? didYouMean(key, Object.keys(AgentConfigSchema.properties)) : '';
    // A host key says why its value is no host (a reserved name, the pattern), as every host check does.
    const host =
      unknown === undefined && (key === 'hostName' || key === 'arbiter')
        ? hostProblem((input as { [k: string]: unknown })[key])
        : null;
    const message = unknown !== undefined ? (owned ?? `is not a known key${hint}`) : (host ?? first.message);
    throw new ConfigError(key, `${key}: ${message}`);
  }
  const c = input as AgentConfigFile;
  for (const mapKey of ['healthUrls', 'peers'] as const) {
    const m = c[mapKey];
    if (m !== undefined) {
      for (const k of Object.keys(m)) {
        const problem = hostProblem(k);
        if (problem !== null) throw new ConfigError(`${mapKey}.${k}`, `${mapKey}.${k}: ${problem}`);
      }
    }
  }
  return c;
}

function hostMap(o: { [k: string]: string } | undefined): Map<string, string> {
  const m = new Map<string, string>();
  if (o !== undefined) for (const [k, v] of Object.entries(o)) m.set(k, v);
  return m;
}

function readHostFile(stateDir: string): string | null {
  try {
    const text = readFileSync(join(stateDir, 'host'), 'utf8').replace(/\r?\n$/, '');
    return text;
  } catch {
    return null;
  }
}

/** The agent's config for the one loader: its schema, TypeBox's checker, its own relations. */
export const AGENT_CONFIG_KIND: ConfigKind<AgentConfig> = {
  daemon: 'agent',
  schema: AgentConfigSchema,
  loadChecker: loadConfigChecker,
  check: (input, file) => namingFile(file, () => resolveConfig(validateConfigFile(input), file)),
};

/** Finds, reads, checks and fills defaults. Throws ConfigError. */
export function loadConfig(explicit?: string, env: NodeJS.ProcessEnv = process.env): AgentConfig {
  return loadConfigFile(AGENT_CONFIG_KIND, findConfigFile(explicit, AGENT_CONFIG, env));
}

/**
 * `loadConfig`, loading TypeBox's checker only when the config needs it (the daemon: a valid
 * config is accepted without it).
 */
export function loadConfigLazily(explicit?: string, env: NodeJS.ProcessEnv = process.env): Promise<AgentConfig> {
  return loadConfigFileLazily(AGENT_CONFIG_KIND, findConfigFile(explicit, AGENT_CONFIG, env));
}

/**
 * This host's name: hostName, else the host file, else the OS host name. The host file and
 * hostName both name this host; the config wins, and a difference is said (logged at start,
 * shown by hq doctor).
 */
function hostNameOf(
  configured: string | undefined,
  stateDir: string,
): { hostName: string; hostMismatch: { file: string; name: string } | null } {
  const fromFile = readHostFile(stateDir);
  if (configured !== undefined) {
    return {
      hostName: configured,
      hostMismatch:
        fromFile !== null && fromFile !== configured ? { file: join(stateDir, 'host'), name: fromFile } : null,
    };
  }
  if (fromFile !== null) {
    const problem = hostProblem(fromFile);
    if (problem !== null)
      throw new ConfigError(
        'hostName',
        `hostName: the host file ${join(stateDir, 'host')} holds "${fromFile}", which ${problem}`,
      );
    return { hostName: fromFile, hostMismatch: null };
  }
  const os = hostname().replace(/\.local$/, '');
  if (!isHost(os)) {
    throw new ConfigError(
      'hostName',
      `hostName: the OS host name "${os}" is not a valid host; set hostName or run "hq host set NAME"`,
    );
  }
  return { hostName: os, hostMismatch: null };
}

/** Fills defaults and checks the relationships (S6), in the order a refusal names them. Pure except for reading the host file. */
export function resolveConfig(c: AgentConfigFile, file: string | null): AgentConfig {
  const stateDir = resolve(expandHome(c.stateDir ?? '~/.hq'));
  const { hostName, hostMismatch } = hostNameOf(c.hostName, stateDir);
  const arbiter = c.arbiter ?? DEFAULTS.arbiter;
  if (hostName === arbiter)
    throw new ConfigError('hostName', `hostName: "${hostName}" is the arbiter's host, which is never a candidate`);
  const heartbeatCron = c.heartbeatCron ?? DEFAULTS.heartbeatCron;
  const cron = cronGapSeconds(heartbeatCron);
  if (!cron.ok) throw new ConfigError('heartbeatCron', `heartbeatCron: ${cron.message}`);
  const { failOpenRoles, roles } = checkedRoles(c);
  const { refreshSeconds, probeTimeoutSeconds, requestTimeoutSeconds } = checkedCadence(c, cron.seconds);
  const arbiterUrls = checkedUrls(c);
  const tailnetDomain = c.tailnetDomain ?? null;
  const peers = checkedPeers(c, hostName, arbiter);
  return {
    file,
    hostName,
    arbiter,
    arbiterUrl:
      arbiterUrls?.[0] ??
      c.arbiterUrl ??
      (tailnetDomain !== null ? `http://${arbiter}.${tailnetDomain}:${DEFAULTS.arbiterPort}` : null),
    arbiterUrls: arbiterUrls === null ? null : [...arbiterUrls],
    candidates: [hostName, ...peers.keys()],
    peersConfigured: c.peers !== undefined,
    hostMismatch,
    heartbeatCron,
    heartbeatSeconds: cron.seconds,
    refreshSeconds,
    failOpenRoles,
    roles,
    healthUrls: hostMap(c.healthUrls),
    tailnetDomain,
    tailscaleBin: c.tailscaleBin ?? DEFAULTS.tailscaleBin,
    probeTimeoutSeconds,
    requestTimeoutSeconds,
    listen: { host: c.listen?.host ?? DEFAULTS.listenHost, port: c.listen?.port ?? DEFAULTS.listenPort },
    stateDir,
    socketPath: resolve(expandHome(c.socketPath ?? join(stateDir, 'agent.sock'))),
    tokenFile: resolve(expandHome(c.tokenFile ?? join(stateDir, 'token'))),
    peers,
    peerTokenFile: resolve(expandHome(c.peerTokenFile ?? join(stateDir, 'peer-token'))),
    queryTokenFile: c.queryTokenFile === undefined ? null : resolve(expandHome(c.queryTokenFile)),
    advertiseUrl: c.advertiseUrl === undefined ? null : new URL(c.advertiseUrl).origin,
    replication: c.replication,
    handoverOnStop: c.handoverOnStop ?? DEFAULTS.handoverOnStop,
  };
}

/** The roles and the fail-open ones: never the ledger's, and only roles this host knows. */
function checkedRoles(c: AgentConfigFile): Pick<AgentConfig, 'failOpenRoles' | 'roles'> {
  const failOpenRoles = c.failOpenRoles ?? [];
  if (failOpenRoles.includes(NEVER_FAIL_OPEN)) {
    throw new ConfigError('failOpenRoles', `failOpenRoles: "${NEVER_FAIL_OPEN}" can never be fail-open`);
  }
  const roles = c.roles ?? DEFAULT_ROLES;
  const unknownFailOpen = failOpenRoles.find((r) => !roles.includes(r));
  if (unknownFailOpen !== undefined)
    throw new ConfigError('failOpenRoles', `failOpenRoles: "${unknownFailOpen}" is not one of roles`);
  return { failOpenRoles, roles };
}

/** The agent's cadence with its defaults, checked on the agent's own side of S6. */
function checkedCadence(
  c: AgentConfigFile,
  heartbeatSeconds: number,
): { refreshSeconds: number; probeTimeoutSeconds: number; requestTimeoutSeconds: number } {
  const refreshSeconds = c.refreshSeconds ?? DEFAULTS.refreshSeconds;
  const probeTimeoutSeconds = c.probeTimeoutSeconds ?? Math.min(DEFAULTS.probeTimeoutSeconds, heartbeatSeconds / 2);
  const requestTimeoutSeconds = c.requestTimeoutSeconds ?? DEFAULTS.requestTimeoutSeconds;
  // The pairs across the sides are the arbiter's to check (it gets this cadence with every
  // heartbeat and says loudly when a pair cannot work).
  const timing = checkCadence({ heartbeatSeconds, refreshSeconds, probeTimeoutSeconds, requestTimeoutSeconds });
  if (!timing.ok) throw new ConfigError(timing.key, timing.message);
  return { refreshSeconds, probeTimeoutSeconds, requestTimeoutSeconds };
}

/** arbiterUrl or arbiterUrls (not both, each a bare origin, none twice) and advertiseUrl; answers arbiterUrls or null. */
function checkedUrls(c: AgentConfigFile): readonly string[] | null {
  if (c.arbiterUrl !== undefined) {
    const problem = bareOriginProblem(c.arbiterUrl);
    if (problem !== null) throw new ConfigError('arbiterUrl', `arbiterUrl: "${c.arbiterUrl}" ${problem}`);
  }
  const arbiterUrls = c.arbiterUrls ?? null;
  if (arbiterUrls !== null) {
    if (c.arbiterUrl !== undefined)
      throw new ConfigError(
        'arbiterUrls',
        'arbiterUrls: give either arbiterUrl (one arbiter) or arbiterUrls (several, tried in order), not both',
      );
    for (const [i, u] of arbiterUrls.entries()) {
      const problem = bareOriginProblem(u);
      if (problem !== null) throw new ConfigError(`arbiterUrls[${i}]`, `arbiterUrls[${i}]: "${u}" ${problem}`);
      if (arbiterUrls.indexOf(u) !== i)
        throw new ConfigError(`arbiterUrls[${i}]`, `arbiterUrls[${i}]: "${u}" is named twice`);
    }
  }
  if (c.advertiseUrl !== undefined) {
    const problem = bareOriginProblem(c.advertiseUrl);
    if (problem !== null) throw new ConfigError('advertiseUrl', `advertiseUrl: "${c.advertiseUrl}" ${problem}`);
  }
  return arbiterUrls;
}

/** The peers by host: never this host, never the arbiter's. */
function checkedPeers(c: AgentConfigFile, hostName: string, arbiter: string): Map<string, string> {
  const peers = c.peers !== undefined ? hostMap(c.peers) : new Map<string, string>();
  if (peers.has(hostName))
    throw new ConfigError(`peers.${hostName}`, `peers.${hostName}: this host is not its own peer`);
  if (peers.has(arbiter))
    throw new ConfigError(
      `peers.${arbiter}`,
      `peers.${arbiter}: the arbiter's host is never a candidate, so never a peer`,
    );
  return peers;
}

/**
 * The arbiter URL must be a bare origin (`http(s)://host[:port]`): the member token is sent to
 * it, so credentials in the URL are refused, and so is a path (hq adds its own `/v1/…`).
 */
export function bareOriginProblem(value: string): string | null {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must be an http or https URL';
  if (u.username !== '' || u.password !== '') return 'must not carry credentials (the member token is the credential)';
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '')
    return `must be a bare origin without a path (use ${u.origin})`;
  return null;
}

const WILDCARD: ReadonlySet<string> = new Set(['0.0.0.0', '::', '[::]', '']);

/**
 * The URL other hosts reach this agent's peer listener at (the instance resource's endpoint, the
 * join file's URL when this host holds the lease), first that applies: `advertiseUrl`; this host
 * on the tailnet (`http://{host}.{tailnetDomain}:{port}`); `listen.host` when it is a specific
 * address; else null (listening on every address, with no name others are known to resolve).
 * `port` is the port actually bound (`listen.port` may be 0).
 */
export function advertisedUrl(config: AgentConfig, port: number = config.listen.port): string | null {
  if (config.advertiseUrl !== null) return config.advertiseUrl;
  if (config.tailnetDomain !== null) return `http://${config.hostName}.${config.tailnetDomain}:${port}`;
  const h = config.listen.host;
  if (WILDCARD.has(h)) return null;
  return `http://${h.includes(':') && !h.startsWith('[') ? `[${h}]` : h}:${port}`;
}

/**
 * Fills `arbiterUrl` and `peers` from `tailscale status --json` when the config left them to the
 * tailnet's domain. Throws ConfigError when `arbiterUrl` still has no value.
 */
export async function resolveNetwork(config: AgentConfig): Promise<AgentConfig & { readonly arbiterUrl: string }> {
  if (config.arbiterUrl !== null) return config as AgentConfig & { arbiterUrl: string };
  const dns = await magicDnsSuffix(config.tailscaleBin, config.probeTimeoutSeconds);
  if (!dns.ok) {
    throw new ConfigError(
      'arbiterUrl',
      'arbiterUrl: not set, and without tailnetDomain (or a working tailscale) it has no default',
    );
  }
  return {
    ...config,
    tailnetDomain: dns.suffix,
    arbiterUrl: `http://${config.arbiter}.${dns.suffix}:${DEFAULTS.arbiterPort}`,
  };
}

/**
 * The peers when `peers` is not configured: the other candidates the arbiter names, at their
 * tailnet addresses. Empty without a tailnet domain (then `peers` must be configured).
 */
export function peersFromCandidates(config: AgentConfig, candidates: readonly string[]): Map<string, string> {
  const peers = new Map<string, string>();
  if (config.peersConfigured || config.tailnetDomain === null) return new Map(config.peers);
  for (const h of candidates)
    if (h !== config.hostName && isHost(h)) peers.set(h, `http://${h}.${config.tailnetDomain}:${DEFAULTS.listenPort}`);
  return peers;
}

/** The health URL of a host (its `probe`), or null when it has none. */
export function healthUrlOf(config: AgentConfig, host: string): string | null {
  return (
    config.healthUrls.get(host) ??
    (config.tailnetDomain !== null ? tailnetHealthUrl(host, config.tailnetDomain, DEFAULTS.listenPort) : null)
  );
}

export { ConfigError };
