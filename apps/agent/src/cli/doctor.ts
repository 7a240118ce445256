/**
 * `hq doctor` — checks this host's side of hq, one line each, ✔ or ✖ with the fix:
 *   config        the file is valid, timing rule (S6) included; prints the worst-case failover
 *   arbiter-url   the arbiter's URL is known (arbiterUrl, tailnetDomain, or tailscale)
 *   state-dir     {stateDir} is a real directory of this user, mode 0700; its files 0600
 *   token         the member token file exists, holds a token, mode 0600, this user's
 *   peer-token    the peer token likewise (when the host has peers)
 *   arbiter       GET /v1/health answers as an arbiter; GET /v1/lease accepts the token
 *   etcd-space    store etcd: the arbiter's reading of etcd's database size against its space
 *                 quota (fails from 80 % of it, and on the NOSPACE alarm: etcd then refuses writes)
 *   clock         the offset between the arbiter's `now` and this host's clock (midpoint of
 *                 the request) is within --max-offset (hq's safety does not rest on it — agents
 *                 only use differences of arbiter times — but a large offset means time sync is
 *                 broken here or there, and with it the 1 % rate-drift assumption of S6)
 *   generation    the arbiter refused no reported generation since it started (else the report,
 *                 and how an admin accepts it when it is real)
 *   peers         every peer's GET /v1/health answers 200
 *   tailscale     `tailscale status --json` runs and says Running (skipped when tailscaleBin is "")
 *   socket        the agent answers GET /v1/status on its socket
 *   unit          the systemd unit (Linux) or the launchd plist (macOS) is installed
 * A check that needs an earlier one (everything needs the config) is skipped, shown as "–".
 * Exit 0 when nothing failed, 1 otherwise, 2 for usage errors. `--json` prints
 * `{ok, checks: [{name, status, detail, fix}]}`.
 * Its spec is in doctor-spec.ts, which `hq --help` reads without loading the checks.
 */
import { homedir } from 'node:os';
import { loadConfig, type AgentConfig } from '../config.js';
import '../config-checker.js';
import { ConfigError } from '@hq/runtime/config-file';
import { wallClockMs } from '@hq/runtime/clock';
import { DOCTOR_SPEC } from './doctor-spec.js';
import { errorLine, flagBool, flagNumber, flagString, parseArgs, helpText, CliError, type Parsed } from './args.js';
import { fail, pass, secs, skip, type Check, type DoctorCheck, type DoctorRun, type Status } from './doctor-checks.js';
import { checkArbiter, checkArbiterUrl, checkPeers, checkTiming, checkVersions } from './doctor-arbiter.js';
import {
  checkHostname,
  checkSocket,
  checkStateDir,
  checkTailscale,
  checkTokens,
  checkUnit,
  defaultUnitPaths,
} from './doctor-host.js';

export type { DoctorCheck, Status } from './doctor-checks.js';
export { DOCTOR_SPEC } from './doctor-spec.js';
export { etcdSpaceCheck } from './doctor-arbiter.js';
export { defaultUnitPaths } from './doctor-host.js';

/** Everything the checks touch outside the config, so tests can point it elsewhere. */
export interface DoctorContext {
  /** Wall clock, Unix seconds. */
  readonly now?: () => number;
  readonly platform?: NodeJS.Platform;
  readonly home?: string;
  /** Where unit files are looked for (default: the platform's system and user locations). */
  readonly unitPaths?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
}

const DEFAULT_MAX_OFFSET = 2;

/** The checks after the config's, in the order they are shown. */
const CHECKS: readonly Check[] = [
  checkHostname,
  checkArbiterUrl,
  async (r) => [await checkStateDir(r.c)],
  checkTokens,
  checkArbiter,
  checkTiming,
  checkPeers,
  checkVersions,
  checkTailscale,
  checkSocket,
  async (r) => [await checkUnit(r.unitPaths ?? defaultUnitPaths(r.platform, r.home), r.platform, r.agentRuns)],
];

/** The checks skipped when the config is not valid (the unit's is still run). */
const NEEDS_CONFIG = [
  'hostname',
  'arbiter-url',
  'state-dir',
  'token',
  'peer-token',
  'arbiter',
  'clock',
  'timing',
  'peers',
  'tailscale',
  'socket',
];

/** Runs every check. Never throws. */
export async function runChecks(
  configFlag: string | undefined,
  opts: { maxOffsetSeconds?: number } = {},
  ctx: DoctorContext = {},
): Promise<DoctorCheck[]> {
  const platform = ctx.platform ?? process.platform;
  const home = ctx.home ?? homedir();
  // The config, with the agent's own cadence relations (resolveConfig runs checkCadence).
  let c: AgentConfig;
  try {
    c = loadConfig(configFlag, ctx.env ?? process.env);
  } catch (err) {
    const key = err instanceof ConfigError ? err.key : null;
    return [
      fail(
        'config',
        (err as { message?: string }).message ?? String(err),
        key === null || key === '--config' || key === 'HQ_CONFIG'
          ? 'pass --config PATH (or set $HQ_CONFIG) to a readable agent.json'
          : `fix "${key}" in the agent config (see deploy/config/ for examples)`,
      ),
      ...NEEDS_CONFIG.map((n) => skip(n, 'needs a valid config')),
      await checkUnit(ctx.unitPaths ?? defaultUnitPaths(platform, home), platform),
    ];
  }
  const out: DoctorCheck[] = [
    pass(
      'config',
      `${c.file ?? 'no file, every default'} is valid for host ${c.hostName} (heartbeat every ${secs(c.heartbeatSeconds)}, refresh ${secs(c.refreshSeconds)}, request timeout ${secs(c.requestTimeoutSeconds)})`,
    ),
  ];
  const run: DoctorRun = {
    c,
    now: ctx.now ?? (() => wallClockMs.now() / 1000),
    platform,
    home,
    unitPaths: ctx.unitPaths,
    maxOffset: opts.maxOffsetSeconds ?? DEFAULT_MAX_OFFSET,
    url: null,
    net: c,
    behind: [],
    agentRuns: false,
  };
  for (const check of CHECKS) out.push(...(await check(run)));
  return out;
}

const MARK: Readonly<Record<Status, string>> = { pass: '✔', fail: '✖', skip: '–' };

export function formatChecks(checks: readonly DoctorCheck[]): string {
  const w = Math.max(...checks.map((c) => c.name.length));
  return `${checks.map((c) => `${MARK[c.status]} ${c.name.padEnd(w)}  ${c.detail}${c.status === 'fail' ? ` — fix: ${c.fix}` : ''}`).join('\n')}\n`;
}

/** The command as the table calls it. */
export async function doctor(p: Parsed, ctx: DoctorContext = {}): Promise<number> {
  const checks = await runChecks(flagString(p, 'config'), { maxOffsetSeconds: flagNumber(p, 'max-offset') }, ctx);
  const ok = checks.every((c) => c.status !== 'fail');
  const write = ctx.stdout ?? ((s: string) => void process.stdout.write(s));
  if (flagBool(p, 'json')) write(`${JSON.stringify({ ok, checks })}\n`);
  else write(formatChecks(checks));
  return ok ? 0 : 1;
}

/** `hq doctor …` from raw arguments (for tests and a direct entry point). */
export async function doctorCommand(argv: readonly string[], ctx: DoctorContext = {}): Promise<number> {
  const err = ctx.stderr ?? ((s: string) => void process.stderr.write(s));
  let p: Parsed;
  try {
    p = parseArgs(DOCTOR_SPEC, argv);
  } catch (e) {
    if (e instanceof CliError) {
      err(errorLine(DOCTOR_SPEC.name, e.message));
      return e.exitCode;
    }
    throw e;
  }
  if (p.help) {
    (ctx.stdout ?? ((s: string) => void process.stdout.write(s)))(helpText(DOCTOR_SPEC));
    return 0;
  }
  return doctor(p, ctx);
}
