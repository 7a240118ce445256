/**
 * `hq fence check` and `hq fence run`: the hot path. Only node built-ins and the light config
 * reader (`@hq/runtime/config-file`, through local.ts) are loaded (the supervisor, fence-run.js,
 * only by `fence run`); the agent (which validated the config at its start) decides the role. When the agent does not answer, the
 * full config is validated so a bad config or an unknown role still exits 2, and the answer is
 * "skip". bin/hq.cjs runs both through fence-main (bundled, or fence-entry.js), without the command table of main.ts.
 */
import type { FenceQueryResult, Registration } from '../fence-run.js';
import {
  CONFIG_FLAG,
  CliError,
  JSON_FLAG,
  flagBool,
  flagNumber,
  flagString,
  type CommandSpec,
  type Parsed,
} from './args.js';
import { AGENT_UNREACHABLE, isFenceDecision, type FenceSeen, type FenceUnanswered } from '@hq/protocol/fence';
import { agentProblem, callAgent, lightPaths } from './local.js';
import type { MsClock } from '@hq/runtime/clock';
import { writeCliLine } from './log-line.js';

/** `hq fence run`'s exit when the agent could not be asked (sysexits' EX_UNAVAILABLE): never 0, so cron and systemd see it. */
export const UNREACHABLE_EXIT = 69;

export const FENCE_CHECK_SPEC: CommandSpec = {
  name: 'fence check',
  summary:
    'Asks the local agent whether this host may run role R now. The answer comes from the agent’s memory; no network is used.',
  flags: [
    CONFIG_FLAG,
    {
      name: 'role',
      kind: 'string',
      value: 'R',
      help: 'The role to check, one of the configured roles. Required.',
      required: true,
    },
    JSON_FLAG,
  ],
  exits: `0 run, 1 skip — 1 also when it could not ask the agent (the line on stderr says why: this user not in the socket's group (EACCES), no socket (ENOENT), nothing listening (ECONNREFUSED), no answer in time); \`hq fence run\` uses ${UNREACHABLE_EXIT} for that. 2 unknown role, usage or config error.`,
};

export const FENCE_RUN_SPEC: CommandSpec = {
  name: 'fence run',
  summary:
    'Runs CMD only while this host may run role R: CMD is executed directly (no shell) in its own process group with HQ_GENERATION (also as ELANOUS_HQ_GENERATION, its old name), HQ_HOLDER and HQ_ROLE set; TERM, INT, HUP and QUIT are forwarded to it. The fence is re-checked periodically and before the validity ends; on loss CMD gets SIGTERM, then SIGKILL after the grace, both before the validity ends.',
  flags: [
    CONFIG_FLAG,
    {
      name: 'role',
      kind: 'string',
      value: 'R',
      help: 'The role CMD runs as, one of the configured roles. Required.',
      required: true,
    },
    {
      name: 'recheck',
      kind: 'number',
      value: 'S',
      help: 'Re-checks the fence every S seconds while CMD runs (and always before the validity ends). Default: 30.',
    },
    {
      name: 'grace',
      kind: 'number',
      value: 'G',
      help: 'Seconds between SIGTERM and SIGKILL when the lease is lost (shortened so both land before the validity ends). Default: 5.',
    },
    {
      name: 'skip-exit',
      kind: 'number',
      value: 'N',
      help: 'The exit code when CMD is not run because this host may not run R (another host is HQ, or none is). Default: 0.',
    },
    {
      name: 'unreachable-exit',
      kind: 'number',
      value: 'N',
      help: `The exit code when CMD is not run because the agent could not be asked (not running, this user not in its socket's group, no answer), so cron and systemd record a failure. Default: ${UNREACHABLE_EXIT} (EX_UNAVAILABLE).`,
    },
    {
      name: 'follow',
      kind: 'boolean',
      help: 'Runs CMD as a service that follows HQ: waits (the agent answers when its fence changes, no polling) until this host may run R, runs CMD as above, and after a loss waits again; CMD that ends by itself starts again per --restart. SIGTERM or SIGINT stop CMD and end the follower with 0. Default: off (run once or skip).',
    },
    {
      name: 'restart',
      kind: 'string',
      value: 'POLICY',
      help: 'With --follow: when CMD ends by itself, it starts again after a back-off (1 s doubling to 30 s, from 1 s again after a run of 60 s) per POLICY: on-failure when its code is not 0, always, or never (the follower then exits with its code). Default: on-failure.',
    },
    {
      name: 'verbose',
      kind: 'boolean',
      help: 'Writes every decision of the supervisor (allowed, skipped, stopped, signal-forwarded, lost, killed; with --follow also waiting, restarting) as one JSON line on stderr. Default: off, nothing on a normal run or skip (the agent logs each fence decision); a lost fence, an unreachable agent or a CMD that cannot start is one line on stderr either way.',
    },
  ],
  rest: { name: 'CMD…', help: 'The command and its arguments, executed directly without a shell.' },
  exits: `skip 0 (or --skip-exit), ${UNREACHABLE_EXIT} when the agent could not be asked (or --unreachable-exit), 75 when the supervisor stopped CMD, else CMD's own exit code (a signal n gives 128+n); 2 usage, unknown role or config error; 127 CMD not found. With --follow: 0 when stopped by SIGTERM or SIGINT, CMD's code when --restart does not start it again, 2 usage, unknown role or config error.`,
};

/** The COMMANDS entries of main.ts (fence-main.ts uses the same specs and functions). */
export const FENCE_CHECK_COMMAND = {
  spec: FENCE_CHECK_SPEC,
  load: async (): Promise<(p: Parsed) => Promise<number>> => fenceCheck,
};
export const FENCE_RUN_COMMAND = {
  spec: FENCE_RUN_SPEC,
  load: async (): Promise<(p: Parsed) => Promise<number>> => fenceRun,
};

function verboseLog(clock: MsClock): (event: string, data: { [k: string]: unknown }) => void {
  return (event, data) =>
    writeCliLine(
      clock,
      'hq.fence',
      event,
      data,
      event === 'lost' || event === 'killed' || event === 'spawn-failed' ? 'warn' : 'info',
    );
}

/**
 * What `hq fence run` says without --verbose: nothing for a run or a skip (a crontab line must
 * not mail both hosts every five minutes), one line for what an operator must hear of — the
 * fence lost under CMD, no agent to ask, CMD not startable. `killed` follows a `lost` whose line
 * already said SIGKILL comes after the grace, so it adds nothing.
 */
export function quietLine(event: string, data: { readonly [k: string]: unknown }): string | null {
  const p = 'hq fence run: ';
  if (event === 'lost') {
    const g = data['generation'] === undefined ? '' : `, generation ${String(data['generation'])}`;
    const grace =
      typeof data['graceSeconds'] === 'number' ? Math.round(data['graceSeconds'] * 10) / 10 : data['graceSeconds'];
    return `${p}lost the fence for role ${String(data['role'])} (${String(data['reason'])}${g}): stopping CMD with SIGTERM, SIGKILL after ${String(grace)} s\n`;
  }
  if (event === 'skipped' && data['reason'] === AGENT_UNREACHABLE)
    return `${p}could not ask the agent: ${String(data['problem'])}; CMD was not run (exit ${String(data['exit'] ?? UNREACHABLE_EXIT)})\n`;
  if (event === 'spawn-failed')
    return `${p}cannot start ${JSON.stringify(data['command'])}: ${String(data['problem'])}\n`;
  if (event === 'restarting')
    return `${p}CMD for role ${String(data['role'])} exited with ${String(data['code'])}: starting it again in ${String(data['inSeconds'])} s\n`;
  if (event === 'waiting' && data['reason'] === AGENT_UNREACHABLE) return `${p}waiting: ${String(data['problem'])}\n`;
  return null;
}

function quietLog(event: string, data: { [k: string]: unknown }): void {
  const line = quietLine(event, data);
  if (line !== null) process.stderr.write(line);
}

async function ask(
  socketPath: string,
  role: string,
  timeoutSeconds: number,
  configFile: string | null = null,
  path = `/v1/fence?role=${encodeURIComponent(role)}`,
): Promise<FenceQueryResult> {
  const r = await callAgent(socketPath, 'GET', path, timeoutSeconds);
  if (r.kind === 'unreachable')
    return { kind: 'unreachable', problem: agentProblem(socketPath, r.problem, configFile) };
  if (r.status === 400) {
    // Narrowed in place: the fence path loads no module for it.
    const b = r.body;
    return {
      kind: 'bad-role',
      message:
        typeof b === 'object' && b !== null && 'message' in b && typeof b.message === 'string'
          ? b.message
          : `unknown role "${role}"`,
    };
  }
  if (r.status !== 200 || !isFenceDecision(r.body))
    return { kind: 'unreachable', problem: `the agent answered HTTP ${r.status}` };
  return { kind: 'answer', fence: r.body };
}

/**
 * Registers the run with the agent (`POST /v1/runs`), so a step-down can end the child even if
 * this supervisor died; an agent without the route (404) predates acknowledgements.
 */
async function register(
  socketPath: string,
  role: string,
  generation: number,
  graceSeconds: number,
  timeoutSeconds: number,
): Promise<Registration> {
  const r = await callAgent(socketPath, 'POST', '/v1/runs', timeoutSeconds, {
    role,
    generation,
    graceSeconds,
    supervisorPid: process.pid,
  });
  if (r.kind === 'unreachable')
    return { kind: 'unreachable', problem: `the agent is not answering on ${socketPath} (${r.problem})` };
  if (r.status === 404) return { kind: 'unsupported' };
  const b = typeof r.body === 'object' && r.body !== null ? r.body : {};
  if (r.status === 409)
    return { kind: 'refused', reason: 'reason' in b && typeof b.reason === 'string' ? b.reason : 'refused' };
  if (r.status !== 200 || !('id' in b) || typeof b.id !== 'string')
    return { kind: 'unreachable', problem: `the agent answered HTTP ${r.status} to the run's registration` };
  const path = `/v1/runs/${b.id}`;
  return {
    kind: 'registered',
    run: {
      started: async (pgid) => void (await callAgent(socketPath, 'POST', path, timeoutSeconds, { pgid })),
      done: async () => void (await callAgent(socketPath, 'DELETE', path, timeoutSeconds)),
    },
  };
}

/** The agent is down: validate the config fully (exit 2 when bad) and the role against it. */
async function checkOffline(configPath: string | undefined, role: string): Promise<void> {
  const { loadConfig, loadConfigChecker } = await import('../config.js');
  await loadConfigChecker();
  const config = loadConfig(configPath);
  if (!config.roles.includes(role))
    throw new CliError(2, `unknown role "${role}": not one of ${config.roles.join(', ')}`);
}

export async function fenceCheck(p: Parsed): Promise<number> {
  const role = flagString(p, 'role') as string;
  const configPath = flagString(p, 'config');
  const json = flagBool(p, 'json');
  const paths = lightPaths(configPath);
  const r = await ask(paths.socketPath, role, paths.requestTimeoutSeconds, paths.file);
  if (r.kind === 'bad-role') throw new CliError(2, r.message);
  if (r.kind === 'unreachable') {
    await checkOffline(configPath, role);
    if (json) {
      const unanswered: FenceUnanswered = {
        run: false,
        reason: AGENT_UNREACHABLE,
        generation: null,
        holder: null,
        role,
        validForSeconds: null,
      };
      process.stdout.write(`${JSON.stringify(unanswered)}\n`);
    }
    process.stderr.write(`hq fence check: skip: could not ask the agent: ${r.problem}\n`);
    return 1;
  }
  const f = r.fence;
  if (json) process.stdout.write(`${JSON.stringify(f)}\n`);
  else {
    const valid =
      f.run && f.validForSeconds !== null ? `, valid for ${Math.max(0, f.validForSeconds).toFixed(1)} s` : '';
    process.stdout.write(
      `${f.run ? 'run' : 'skip'}: ${f.reason} (role ${f.role}, generation ${f.generation}, holder ${f.holder ?? 'none'}${valid})\n`,
    );
  }
  return f.run ? 0 : 1;
}

export async function fenceRun(p: Parsed): Promise<number> {
  const role = flagString(p, 'role') as string;
  const configPath = flagString(p, 'config');
  const recheck = flagNumber(p, 'recheck') ?? 30;
  const grace = flagNumber(p, 'grace') ?? 5;
  const skipExit = flagNumber(p, 'skip-exit') ?? 0;
  const follow = flagBool(p, 'follow');
  const restart = flagString(p, 'restart');
  const unreachableExit = flagNumber(p, 'unreachable-exit') ?? UNREACHABLE_EXIT;
  if (recheck <= 0) throw new CliError(2, '--recheck must be above 0');
  if (!follow && restart !== undefined) throw new CliError(2, '--restart needs --follow');
  if (follow && p.flags.has('skip-exit'))
    throw new CliError(2, '--skip-exit does not go with --follow: a follower waits instead of skipping');
  if (follow) return followRun(p, role, configPath, recheck, grace, restart ?? 'on-failure');
  if (!Number.isInteger(skipExit) || skipExit > 255)
    throw new CliError(2, '--skip-exit must be an integer from 0 to 255');
  if (!Number.isInteger(unreachableExit) || unreachableExit > 255)
    throw new CliError(2, '--unreachable-exit must be an integer from 0 to 255');
  const paths = lightPaths(configPath);
  const [{ superviseFence, CHECK_TIMEOUT_SECONDS }, { wallClockMs }] = await Promise.all([
    import('../fence-run.js'),
    import('@hq/runtime/clock'),
  ]);
  let first = true;
  const check = async (): Promise<FenceQueryResult> => {
    const timeout = first ? paths.requestTimeoutSeconds : CHECK_TIMEOUT_SECONDS;
    const wasFirst = first;
    first = false;
    const r = await ask(paths.socketPath, role, timeout, paths.file);
    if (r.kind === 'unreachable' && wasFirst) await checkOffline(configPath, role);
    return r;
  };
  const log = flagBool(p, 'verbose') ? verboseLog(wallClockMs) : quietLog;
  const registerRun = (generation: number): Promise<Registration> =>
    register(paths.socketPath, role, generation, grace, paths.requestTimeoutSeconds);
  const outcome = await superviseFence({
    role,
    recheckSeconds: recheck,
    graceSeconds: grace,
    skipExit,
    unreachableExit,
    argv: p.rest,
    check,
    register: registerRun,
    log,
  });
  if (outcome.kind === 'bad-role') throw new CliError(2, outcome.message);
  return outcome.code;
}

/** `hq fence run --follow`: the follower (fence-follow.ts) wired to the agent's socket and this process's signals. */
async function followRun(
  p: Parsed,
  role: string,
  configPath: string | undefined,
  recheck: number,
  grace: number,
  restart: string,
): Promise<number> {
  const [
    { followFence, RESTART_POLICIES },
    { superviseFence, CHECK_TIMEOUT_SECONDS },
    { fenceWaitPath },
    { monotonicClockMs, realTimers, wallClockMs },
  ] = await Promise.all([
    import('../fence-follow.js'),
    import('../fence-run.js'),
    import('@hq/protocol/fence'),
    import('@hq/runtime/clock'),
  ]);
  const policy = RESTART_POLICIES.find((x) => x === restart);
  if (policy === undefined)
    throw new CliError(2, `--restart must be one of ${RESTART_POLICIES.join(', ')} (got ${JSON.stringify(restart)})`);
  const paths = lightPaths(configPath);
  const log = flagBool(p, 'verbose') ? verboseLog(wallClockMs) : quietLog;
  let checkedOffline = false;
  const offline = async (r: FenceQueryResult): Promise<FenceQueryResult> => {
    // The agent is down at the start: a bad config or an unknown role is still exit 2.
    if (r.kind === 'unreachable' && !checkedOffline) {
      checkedOffline = true;
      await checkOffline(configPath, role);
    }
    return r;
  };
  const longPoll = (seen: FenceSeen | null, wait: number): Promise<FenceQueryResult> =>
    seen === null || wait <= 0
      ? ask(paths.socketPath, role, paths.requestTimeoutSeconds, paths.file)
      : ask(paths.socketPath, role, wait + paths.requestTimeoutSeconds, paths.file, fenceWaitPath(role, seen, wait));
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  // The agent's step-down nudge may reach a follower between two runs: never its default (death).
  const ignore = (): void => undefined;
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGUSR2', ignore);
  try {
    const outcome = await followFence({
      role,
      restart: policy,
      wait: async (seen, wait) => offline(await longPoll(seen, wait)),
      supervise: (signal) =>
        superviseFence({
          role,
          recheckSeconds: recheck,
          graceSeconds: grace,
          skipExit: 0,
          argv: p.rest,
          check: () => ask(paths.socketPath, role, CHECK_TIMEOUT_SECONDS, paths.file),
          register: (generation) => register(paths.socketPath, role, generation, grace, paths.requestTimeoutSeconds),
          // A long poll that fails (an agent restarting, or one without long polls) leaves the re-checks to their schedule.
          watch: async (d) => (await longPoll(d, recheck)).kind === 'answer',
          stop: signal,
          log,
        }),
      log,
      clock: { now: () => monotonicClockMs.now() / 1000 },
      timers: realTimers,
      stop: stop.signal,
    });
    if (outcome.kind === 'bad-role') throw new CliError(2, outcome.message);
    return outcome.code;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('SIGUSR2', ignore);
  }
}
