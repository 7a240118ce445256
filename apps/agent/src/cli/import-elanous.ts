/**
 * `hq import elanous`: a candidate of elanous HQ becomes an hq agent. Reads the old host file,
 * seen-generation marker, local cache, the `hq` block of the old config and the crontab; writes
 * the agent's config (its own keys only), the host file, the seen generation and a local.json
 * whose start guard waits the old TTL; prints what belongs to the arbiter and the crontab's
 * replacements. Every old file is parsed before anything is written: a malformed one is refused
 * with one line (exit 1) and nothing changes; existing hq state is never replaced without --force,
 * and the seen generation never goes down even then.
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Persisted } from '@hq/lease-core';
import { DEFAULT_ROLES, ROLE_SCHEMA_PATTERN } from '@hq/protocol';
import { AGENT_CONFIG, expandHome } from '@hq/runtime/config-file';
import { runFile } from '@hq/runtime/exec';
import { ensureDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { resolveConfig, validateConfigFile } from '../config.js';
import '../config-checker.js';
import { loadSeen, statePaths, writeHost, writePersisted, writeSeen } from '../state.js';
import { CliError, flagBool, flagString, type Parsed } from './args.js';
import {
  AGENT_KEYS,
  ARBITER_KEYS,
  SHARED_KEYS,
  crontabReplacements,
  parseOldConfig,
  parseOldHost,
  parseOldLocal,
  parseOldSeen,
  type CronLine,
  type Read,
} from './elanous-files.js';

export {
  crontabReplacements,
  parseOldConfig,
  parseOldHost,
  parseOldLocal,
  parseOldSeen,
  type CronLine,
  type OldConfig,
  type OldLocal,
  type Read,
} from './elanous-files.js';

/**
 * The old system's replication plan (its `~/.elanous` layout), the same as
 * deploy/replication/example-plan.json's (a test keeps the two equal).
 */
export const ELANOUS_PLAN = Object.freeze({
  files: [
    { path: 'release/features.sqlite', survival: true },
    { path: 'schedules.db', survival: true },
    { path: 'tasks/tasks.db' },
    { path: 'directives/directives.db', survival: true },
    { path: 'scheduler/scheduler.db' },
    { path: 'task-cards/index.db' },
    { path: 'knowledge.db' },
    { path: 'memory/knowledge.db' },
    { path: 'config.json' },
  ],
  dirs: [
    { path: 'decisions', survival: true },
    { path: 'budget' },
    { path: 'seat-loop' },
    { path: 'seat-requests' },
    { path: 'test-diet' },
    { path: 'consult-requests' },
    { path: 'outputs' },
    { path: 'hq-drill' },
    { path: 'conatus', match: '\\.(db|sqlite|sqlite3)$' },
    { path: 'release', survival: true, match: '^[^/]+/(checklist|manifest)\\.json$' },
  ],
  obs: [{ path: 'logs/logs.db' }, { path: 'memory/surface_events.db' }],
});

/** What elanous's promotion always turned off. */
export const ELANOUS_POLLERS = Object.freeze(['telegram', 'discord']);
/** The old system's roles beyond hq's defaults (hq's defaults list them too; an old config may not). */
const ELANOUS_ROLES = ['seat-loop', 'conatus'];

async function readOld(
  path: string,
): Promise<{ kind: 'missing' } | { kind: 'text'; text: string } | { kind: 'refused'; problem: string }> {
  try {
    const st = await stat(path);
    if (!st.isFile()) return { kind: 'refused', problem: `${path} is not a regular file` };
    if (st.size > 1 << 20) return { kind: 'refused', problem: `${path} is larger than 1 MiB` };
    return { kind: 'text', text: await readFile(path, 'utf8') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'refused', problem: `cannot read ${path} (${code ?? (err as Error).message})` };
  }
}

/** Reads one old file with its parser; a problem is a refusal naming the file. */
async function oldFile<T>(path: string, parse: (text: string) => Read<T>): Promise<T | null> {
  const r = await readOld(path);
  if (r.kind === 'missing') return null;
  if (r.kind === 'refused') throw new CliError(1, `${r.problem}; nothing changed`);
  const v = parse(r.text);
  if (!v.ok) throw new CliError(1, `${path} ${v.problem}; nothing changed`);
  return v.value;
}

/** The crontab's text: `--crontab FILE`, else `crontab -l` (none installed: empty). */
async function crontabText(file: string | undefined): Promise<{ text: string; source: string }> {
  if (file !== undefined) {
    const r = await readOld(file);
    if (r.kind === 'refused') throw new CliError(1, `${r.problem}; nothing changed`);
    if (r.kind === 'missing') throw new CliError(2, `--crontab ${file} does not exist`);
    return { text: r.text, source: file };
  }
  const r = await runFile('crontab', ['-l'], { timeoutMs: 5000 });
  return {
    text: r.ok ? r.stdout : '',
    source: r.ok ? 'crontab -l' : `crontab -l (${r.code === 'ENOENT' ? 'no crontab program' : 'no crontab'})`,
  };
}

const show = (p: string): string => {
  const home = homedir();
  return p === home || p.startsWith(`${home}/`) ? `~${p.slice(home.length)}` : p;
};

/** The old files (config.json, the host file, the seen generation, local.json), each parsed; at least one must be there, and the host names must agree. */
async function readOldFiles(home: string, hqDir: string, oldDir: string) {
  const cfg = await oldFile(join(oldDir, 'config.json'), parseOldConfig);
  const hq = cfg?.hq ?? {};
  const seenFile =
    typeof hq['seenGenerationFile'] === 'string'
      ? resolve(home, (hq['seenGenerationFile'] as string).replace(/^~(?=$|\/)/, home))
      : join(hqDir, 'seen-generation');
  const host = await oldFile(join(hqDir, 'host'), parseOldHost);
  const seen = await oldFile(seenFile, parseOldSeen);
  const local = await oldFile(join(oldDir, 'hq', 'local.json'), parseOldLocal);
  if (cfg === null && host === null && seen === null && local === null) {
    throw new CliError(
      1,
      `no elanous HQ files under ${show(home)} (.elanous-hq/host, .elanous-hq/seen-generation, .elanous/hq/local.json, .elanous/config.json); nothing changed`,
    );
  }
  const hostName = typeof hq['hostName'] === 'string' ? (hq['hostName'] as string) : null;
  if (host !== null && hostName !== null && host !== hostName) {
    throw new CliError(
      1,
      `the host file names ${host} but hq.hostName in config.json names ${hostName}: make them agree; nothing changed`,
    );
  }
  return { cfg, hq, host, seen, local, hostName };
}

/** The agent's config from the old hq block: its own keys, the roles (defaults, elanous's, the crontab's) and replication of the old state folder. */
function agentConfigOf(
  hq: { readonly [k: string]: unknown },
  lines: ReturnType<typeof crontabReplacements>,
  oldDir: string,
): { [k: string]: unknown } {
  const roles = [...DEFAULT_ROLES];
  for (const r of [...ELANOUS_ROLES, ...lines.flatMap((l) => (l.role === undefined ? [] : [l.role]))]) {
    if (!roles.includes(r) && new RegExp(ROLE_SCHEMA_PATTERN).test(r)) roles.push(r);
  }
  const agent: { [k: string]: unknown } = {};
  for (const k of AGENT_KEYS) if (hq[k] !== undefined) agent[k] = hq[k];
  agent['roles'] = roles;
  // Absolute: the agent may run as another user, whose ~ is elsewhere.
  agent['replication'] = { stateDir: oldDir, plan: ELANOUS_PLAN, pollersOff: [...ELANOUS_POLLERS] };
  return agent;
}

export async function importElanous(p: Parsed): Promise<number> {
  const json = flagBool(p, 'json');
  const dryRun = flagBool(p, 'dry-run');
  const home = resolve(expandHome(flagString(p, 'old-home') ?? '~'));
  const hqDir = join(home, '.elanous-hq');
  const oldDir = join(home, '.elanous');
  // 1. Every old file, parsed before anything is written.
  const { cfg, hq, host, seen, local, hostName } = await readOldFiles(home, hqDir, oldDir);
  const cron = await crontabText(flagString(p, 'crontab'));
  const lines = crontabReplacements(cron.text);
  // 2. The agent's config: its own keys only.
  const agent = agentConfigOf(hq, lines, oldDir);
  const target = configTarget(p);
  const stateDir = resolve(expandHome('~/.hq'));
  const name = host ?? hostName;
  checkAgentConfig(agent, name, target);
  // 3. The state: the seen generation never goes down; local.json's start guard waits the old TTL.
  const paths = statePaths(stateDir);
  const priorSeen = await priorSeenGeneration(paths, target, flagBool(p, 'force'));
  const generation = Math.max(seen ?? 0, local?.generation ?? 0, priorSeen);
  const ttl = local?.ttlSeconds ?? (typeof hq['ttlSeconds'] === 'number' ? (hq['ttlSeconds'] as number) : 0);
  const forArbiter: { [k: string]: unknown } = {};
  for (const k of [...ARBITER_KEYS, ...SHARED_KEYS]) if (hq[k] !== undefined) forArbiter[k] = hq[k];
  const report = {
    ok: true,
    dryRun,
    from: show(home),
    host: name,
    seenGeneration: { carried: generation, seenFile: seen, localJson: local?.generation ?? null, hq: priorSeen },
    startGuardSeconds: ttl,
    config: { path: target, keys: Object.keys(agent) },
    state: { host: name === null ? null : paths.host, seen: paths.seen, local: paths.local },
    arbiter: forArbiter,
    notCarried: [...(hq['seenGenerationFile'] === undefined ? [] : ['seenGenerationFile']), ...(cfg?.unknown ?? [])],
    crontab: { source: cron.source, lines },
  };
  // 4. Written only now, every check passed.
  if (!dryRun) await writeImport(stateDir, paths, target, agent, name, generation, ttl);
  if (json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(describe(report, agent));
  return 0;
}

/** The agent config file to write: --config, else $HQ_CONFIG, else ~/.hq/agent.json. */
function configTarget(p: Parsed): string {
  const fromEnv = process.env[AGENT_CONFIG.envVar];
  return resolve(
    expandHome(
      flagString(p, 'config') ??
        (fromEnv === undefined || fromEnv === '' ? join('~', '.hq', AGENT_CONFIG.name) : fromEnv),
    ),
  );
}

/** The config made of the old hq block is one the agent would start with (exit 1 otherwise). */
function checkAgentConfig(agent: { [k: string]: unknown }, name: string | null, target: string): void {
  try {
    const valid = validateConfigFile(agent);
    resolveConfig(name === null ? valid : { ...valid, hostName: name }, target);
  } catch (err) {
    throw new CliError(
      1,
      `the old hq block does not make a valid agent config: ${(err as Error).message}; nothing changed`,
    );
  }
}

/**
 * The seen generation hq already holds here (0 when none), after refusing existing hq state
 * without --force and a seen-generation file that cannot be read.
 */
async function priorSeenGeneration(
  paths: ReturnType<typeof statePaths>,
  target: string,
  force: boolean,
): Promise<number> {
  const existing = [target, paths.seen, paths.local, paths.host].filter((f) => existsSync(f));
  if (existing.length > 0 && !force) {
    throw new CliError(
      1,
      `hq is already set up here (${existing.map(show).join(', ')}): --force replaces it (the seen generation never goes down); nothing changed`,
    );
  }
  const prior = existsSync(paths.seen) ? await loadSeen(paths.seen) : null;
  if (prior !== null && prior.kind === 'refused')
    throw new CliError(1, `${paths.seen} ${prior.problem}: fix or remove it; nothing changed`);
  return prior !== null && prior.kind === 'ok' ? prior.value : 0;
}

/** The agent's state (seen generation, local.json with its start guard, host) and its config file. */
async function writeImport(
  stateDir: string,
  paths: ReturnType<typeof statePaths>,
  target: string,
  agent: { [k: string]: unknown },
  name: string | null,
  generation: number,
  ttl: number,
): Promise<void> {
  const persisted: Persisted = {
    holder: null,
    generation,
    confirmedAt: null,
    ttlSeconds: ttl,
    safetyMarginSeconds: 0,
    gaveConfirmation: null,
    lockDelayPending: true,
    steppedDown: 0,
    lost: 0,
  };
  const dirProblem = await ensureDir(stateDir, 0o700);
  if (dirProblem !== null) throw new CliError(1, `${dirProblem}; nothing changed`);
  await writeSeen(paths.seen, generation);
  await writePersisted(paths.local, persisted);
  if (name !== null) await writeHost(paths.host, name);
  await mkdirPrivate(dirname(target));
  await writeAtomic(target, `${JSON.stringify(agent, null, 2)}\n`);
}

type Report = {
  dryRun: boolean;
  from: string;
  host: string | null;
  seenGeneration: { carried: number; seenFile: number | null; localJson: number | null; hq: number };
  startGuardSeconds: number;
  config: { path: string; keys: string[] };
  state: { host: string | null; seen: string; local: string };
  arbiter: { [k: string]: unknown };
  notCarried: string[];
  crontab: { source: string; lines: CronLine[] };
};

function describe(r: Report, agent: { [k: string]: unknown }): string {
  const w = r.dryRun ? 'would write' : 'wrote';
  const out = [`hq import elanous from ${r.from}${r.dryRun ? ' (dry run: nothing written)' : ''}`];
  out.push(
    `  host: ${r.host ?? 'none (hq uses hostName, else the OS host name)'}${r.state.host === null ? '' : ` → ${w} ${show(r.state.host)}`}`,
  );
  const s = r.seenGeneration;
  out.push(
    `  seen generation: ${s.carried} (seen-generation ${s.seenFile ?? 'none'}, local.json ${s.localJson ?? 'none'}) → ${w} ${show(r.state.seen)}`,
  );
  out.push(
    `  local.json → ${w} ${show(r.state.local)}: the agent's first start runs nothing for ${r.startGuardSeconds > 0 ? `${r.startGuardSeconds} s (the old TTL)` : 'one TTL of the first record it reads'}`,
  );
  out.push(
    `  agent config → ${w} ${show(r.config.path)}: ${r.config.keys.join(', ')} (roles: ${(agent['roles'] as string[]).join(', ')}; replication.pollersOff: ${ELANOUS_POLLERS.join(', ')})`,
  );
  if (Object.keys(r.arbiter).length > 0)
    out.push(
      `  for the arbiter's config (arbiter.json on ${(agent['arbiter'] as string | undefined) ?? 'cloud-vm'}): ${JSON.stringify(r.arbiter)}`,
    );
  for (const k of r.notCarried)
    out.push(
      `  not carried: hq.${k}${k === 'seenGenerationFile' ? ` (its generation is carried into ${show(r.state.seen)})` : ' (hq has no such key)'}`,
    );
  const lines = r.crontab.lines;
  out.push(
    `  crontab (${r.crontab.source}): ${lines.length === 0 ? 'no elanous hq lines' : `${lines.length} elanous hq line(s); replace them now:`}`,
  );
  for (const l of lines) {
    out.push(`    ${l.line}`);
    out.push(
      l.action === 'replace'
        ? `      → ${l.replacement}`
        : `      → ${l.action === 'remove' ? 'remove' : 'by hand'}: ${l.why}`,
    );
  }
  const dir = show(dirname(r.state.seen));
  out.push(
    `  next: the member token into ${dir}/token and the peer token into ${dir}/peer-token (mode 0600), then start hq-agent`,
  );
  return `${out.join('\n')}\n`;
}
