/**
 * What the `hq standby` commands share: their context (output, environment, clock), the loaded
 * config with its replication block, the events they report to the local agent, and the checks
 * of their common flags.
 */
import { CliError, flagString, type Parsed } from './args.js';
import { reportEvent } from './report.js';
import { AGENT_CONFIG, findConfigFile } from '@hq/runtime/config-file';
import { loadAgentWithReplication, planIsEmpty, type Loaded, type ReplicationConfig } from '../replication/config.js';
import { isTier, type ReportedEvent, type Tier } from '@hq/protocol';

export interface StandbyContext {
  readonly stdout?: (s: string) => void;
  readonly stderr?: (s: string) => void;
  readonly env?: NodeJS.ProcessEnv;
  /** ms since the epoch (tests drive it). */
  readonly now?: () => number;
}

export type Io = Required<Pick<StandbyContext, 'stdout' | 'stderr'>> & StandbyContext;

export function io(ctx: StandbyContext): Io {
  return {
    ...ctx,
    stdout: ctx.stdout ?? ((s) => void process.stdout.write(s)),
    stderr: ctx.stderr ?? ((s) => void process.stderr.write(s)),
  };
}

export function line(ctx: Io, json: boolean, value: unknown, text: string): void {
  ctx.stdout(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
}

export function load(p: Parsed, ctx: StandbyContext): Loaded {
  return loadAgentWithReplication(flagString(p, 'config'), ctx.env ?? process.env);
}

/** The local agent's socket, for reporting events; null when no config can be loaded. */
export function socketOf(p: Parsed, ctx: StandbyContext): string | null {
  try {
    return load(p, ctx).agent.socketPath;
  } catch {
    return null;
  }
}

/** Reports an `hq.standby` event to the local agent's log (best effort: see `reportEvent`). */
export async function report(
  socket: string | null,
  event: ReportedEvent<'hq.standby'>,
  data: { [k: string]: string | number | boolean | null },
): Promise<void> {
  if (socket !== null) await reportEvent(socket, 'hq.standby', event, data);
}

export function needReplication(l: Loaded): ReplicationConfig {
  if (l.replication === null)
    throw new CliError(2, `the config ${l.agent.file ?? '(none found)'} has no replication block`);
  return l.replication;
}

export function tiersOf(text: string, flag: string): Tier[] {
  const list = text.split(',');
  if (list.some((t) => !isTier(t)) || new Set(list).size !== list.length)
    throw new CliError(2, `${flag} must be core, big and/or obs, comma-separated, without duplicates`);
  return list as Tier[];
}

/**
 * The poller key paths promotion turns off (`replication.pollersOff`); none when the config has
 * no replication block, or when `--standby` is given and no config file exists at all.
 */
export function pollersOffOf(p: Parsed, ctx: StandbyContext): readonly string[] {
  if (
    flagString(p, 'standby') !== undefined &&
    findConfigFile(flagString(p, 'config'), AGENT_CONFIG, ctx.env ?? process.env) === null
  )
    return [];
  return load(p, ctx).replication?.pollersOff ?? [];
}

/** Refuses a block whose plan lists nothing (there is no built-in plan). */
export function needPlan(cfg: ReplicationConfig): ReplicationConfig {
  if (planIsEmpty(cfg)) {
    throw new CliError(
      2,
      'replication.plan: lists nothing to protect; add plan.files, plan.dirs or plan.obs (deploy/replication/example-plan.json is an example)',
    );
  }
  return cfg;
}

export function standbyDirOf(p: Parsed, ctx: StandbyContext): string {
  const explicit = flagString(p, 'standby');
  if (explicit !== undefined) return explicit;
  return needReplication(load(p, ctx)).standbyDir;
}
