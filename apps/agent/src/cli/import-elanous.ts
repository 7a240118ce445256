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
import { isGeneration, type Persisted } from '@hq/lease-core';
import { DEFAULT_ROLES, GENERATION_CEILING, hostProblem, ROLE_SCHEMA_PATTERN } from '@hq/protocol';
import { AGENT_CONFIG, expandHome, parseJsonObject } from '@hq/runtime/config-file';
import { runFile } from '@hq/runtime/exec';
import { ensureDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { resolveConfig, validateConfigFile } from '../config.js';
import '../config-checker.js';
import { loadSeen, statePaths, writeHost, writePersisted, writeSeen } from '../state.js';
import { CliError, flagBool, flagString, type Parsed } from './args.js';

export type Read<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

/** The old host file: a host name, with no line end or one plain newline. */
export function parseOldHost(text: string): Read<string> {
  if (text.includes('\r')) return { ok: false, problem: 'has a CR LF (Windows) line end: write the name with a plain newline or none' };
  const name = text.endsWith('\n') ? text.slice(0, -1) : text;
  const problem = hostProblem(name);
  return problem === null ? { ok: true, value: name } : { ok: false, problem: `holds ${JSON.stringify(name)}, which ${problem}` };
}

/** The old seen-generation marker: an integer ≥ 0, optionally followed by one newline. */
export function parseOldSeen(text: string): Read<number> {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (text.includes('\r')) return { ok: false, problem: 'has a CR LF (Windows) line end: write the number with a plain newline or none' };
  if (!/^-?\d{1,16}$/.test(body)) return { ok: false, problem: `holds ${JSON.stringify(body)}, not a generation (an integer ≥ 0)` };
  const n = Number(body);
  if (!isGeneration(n) || n > GENERATION_CEILING) return { ok: false, problem: `holds ${body}: a generation is an integer from 0 to ${GENERATION_CEILING}` };
  return { ok: true, value: n };
}

export interface OldLocal {
  readonly holder: string | null;
  readonly generation: number;
  readonly ttlSeconds: number | null;
}

/** The old local cache `{holder, generation, confirmedAt, ttlSeconds}` (other fields ignored). */
export function parseOldLocal(text: string): Read<OldLocal> {
  const j = parseJsonObject(text);
  if (!j.ok) return j;
  const o = j.value;
  const holder = o['holder'] ?? null;
  if (holder !== null && hostProblem(holder) !== null) return { ok: false, problem: `holder ${JSON.stringify(holder)} ${hostProblem(holder)}` };
  const g = o['generation'];
  if (!isGeneration(g) || g > GENERATION_CEILING) return { ok: false, problem: `generation must be an integer from 0 to ${GENERATION_CEILING} (got ${JSON.stringify(g) ?? 'nothing'})` };
  const c = o['confirmedAt'] ?? null;
  if (c !== null && !(typeof c === 'number' && Number.isFinite(c)) && typeof c !== 'string') return { ok: false, problem: `confirmedAt must be a time or null (got ${JSON.stringify(c)})` };
  const ttl = o['ttlSeconds'] ?? null;
  if (ttl !== null && !(typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0)) return { ok: false, problem: `ttlSeconds must be a number ≥ 0 (got ${JSON.stringify(ttl)})` };
  return { ok: true, value: { holder: holder as string | null, generation: g, ttlSeconds: ttl as number | null } };
}

/** The keys of the old `hq` block, and where each goes in hq. */
const AGENT_KEYS = ['arbiter', 'failOpenRoles', 'healthUrls', 'hostName', 'tailscaleBin', 'probeTimeoutSeconds'] as const;
const ARBITER_KEYS = ['standby', 'ttlSeconds'] as const;
/** Read by both daemons in hq: written to the agent's config, and the arbiter's needs them too. */
const SHARED_KEYS: readonly string[] = ['arbiter', 'healthUrls', 'tailscaleBin', 'probeTimeoutSeconds'];

export interface OldConfig {
  /** The `hq` block (absent: empty). */
  readonly hq: { readonly [k: string]: unknown };
  /** Keys of the block hq has no place for. */
  readonly unknown: readonly string[];
}

/** The old `~/.elanous/config.json`: only its `hq` block is read; its types are checked here. */
export function parseOldConfig(text: string): Read<OldConfig> {
  const j = parseJsonObject(text);
  if (!j.ok) return j;
  const block = j.value['hq'];
  if (block === undefined) return { ok: true, value: { hq: {}, unknown: [] } };
  if (typeof block !== 'object' || block === null || Array.isArray(block)) return { ok: false, problem: 'hq must be a JSON object' };
  const hq = block as { [k: string]: unknown };
  const str = (k: string) => hq[k] === undefined || typeof hq[k] === 'string';
  for (const k of ['arbiter', 'standby', 'hostName', 'tailscaleBin', 'seenGenerationFile']) if (!str(k)) return { ok: false, problem: `hq.${k} must be a string` };
  for (const k of ['arbiter', 'standby', 'hostName']) {
    if (hq[k] !== undefined && hostProblem(hq[k]) !== null) return { ok: false, problem: `hq.${k} ${JSON.stringify(hq[k])} ${hostProblem(hq[k])}` };
  }
  for (const k of ['ttlSeconds', 'probeTimeoutSeconds']) {
    const v = hq[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) return { ok: false, problem: `hq.${k} must be a positive number (got ${JSON.stringify(v)})` };
  }
  const roles = hq['failOpenRoles'];
  if (roles !== undefined && !(Array.isArray(roles) && roles.every((r) => typeof r === 'string'))) return { ok: false, problem: 'hq.failOpenRoles must be a list of role names' };
  const urls = hq['healthUrls'];
  if (urls !== undefined && (typeof urls !== 'object' || urls === null || Array.isArray(urls) || !Object.values(urls).every((u) => typeof u === 'string'))) {
    return { ok: false, problem: 'hq.healthUrls must map host names to URLs' };
  }
  const known = new Set<string>([...AGENT_KEYS, ...ARBITER_KEYS, 'seenGenerationFile']);
  return { ok: true, value: { hq, unknown: Object.keys(hq).filter((k) => !known.has(k)) } };
}

export interface CronLine {
  readonly line: string;
  /** remove: the daemons do its work; replace: a fenced job; review: rewrite it by hand. */
  readonly action: 'remove' | 'replace' | 'review';
  /** What replaces it: null when the line goes (the daemons do its work). */
  readonly replacement: string | null;
  readonly why: string;
  /** The fence role of a fenced job. */
  readonly role?: string;
}

const ELANOUS_HQ = /(^|\s)((?:\S*\/)?elanous)\s+hq(\s+|$)/;

/**
 * The crontab's lines that run `elanous hq …`, each with its hq replacement: the heartbeat and
 * the arbiter check go (hq-agent and hq-arbiter do them), a fenced job becomes
 * `hq fence run --role R -- CMD`, anything else is named for a look by hand.
 */
export function crontabReplacements(crontab: string): CronLine[] {
  const out: CronLine[] = [];
  for (const raw of crontab.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (line.trim().startsWith('#')) continue;
    const m = ELANOUS_HQ.exec(line);
    if (m === null) continue;
    const before = line.slice(0, m.index + m[1]!.length);
    const after = line.slice(m.index + m[0].length);
    // Each word with where it starts: CMD is kept exactly as written (quotes, spacing).
    const tokens = [...after.matchAll(/\S+/g)].map((x) => ({ word: x[0], at: x.index }));
    const words = tokens.map((x) => x.word);
    const verb = words[0] ?? '';
    if (verb === 'heartbeat') out.push({ line, action: 'remove', replacement: null, why: 'hq-agent heartbeats by itself (heartbeatCron)' });
    else if (verb === 'arbiter-check' || verb === 'check') out.push({ line, action: 'remove', replacement: null, why: 'hq-arbiter checks by itself (checkCron)' });
    else if (verb === 'fence') {
      let role: string | null = null;
      let i = 1;
      const flags: string[] = [];
      for (; i < words.length; i++) {
        const w = words[i]!;
        if (w === '--') {
          i++;
          break;
        }
        if (w === '--role') role = words[++i] ?? null;
        else if (w.startsWith('--role=')) role = w.slice('--role='.length);
        else if (w === '--verbose' || w === '-v') flags.push('--verbose');
        else if (w.startsWith('-')) flags.push(w);
        else break;
      }
      const cmd = i < tokens.length ? after.slice(tokens[i]!.at).trimEnd() : '';
      if (role === null || cmd === '') out.push({ line, action: 'review', replacement: null, why: 'a fence line without --role or a command: rewrite it by hand as hq fence run --role R -- CMD' });
      else {
        const extra = flags.length === 0 ? '' : ` ${flags.join(' ')}`;
        out.push({ line, action: 'replace', replacement: `${before}hq fence run --role ${role}${extra} -- ${cmd}`, why: 'a fenced job', role });
      }
    } else {
      const map: { [k: string]: string } = { status: 'hq lease status', acquire: 'hq lease acquire', release: 'hq lease release', seen: 'hq seen', guard: 'hq guard (--hq-override is --override)' };
      out.push({ line, action: 'review', replacement: null, why: `no direct replacement for "elanous hq ${verb}"${map[verb] === undefined ? '' : `: see ${map[verb]}`}; rewrite it by hand` });
    }
  }
  return out;
}

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

async function readOld(path: string): Promise<{ kind: 'missing' } | { kind: 'text'; text: string } | { kind: 'refused'; problem: string }> {
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
  return { text: r.ok ? r.stdout : '', source: r.ok ? 'crontab -l' : `crontab -l (${r.code === 'ENOENT' ? 'no crontab program' : 'no crontab'})` };
}

const show = (p: string): string => {
  const home = homedir();
  return p === home || p.startsWith(`${home}/`) ? `~${p.slice(home.length)}` : p;
};

/** The old files (config.json, the host file, the seen generation, local.json), each parsed; at least one must be there, and the host names must agree. */
async function readOldFiles(home: string, hqDir: string, oldDir: string) {
  const cfg = await oldFile(join(oldDir, 'config.json'), parseOldConfig);
  const hq = cfg?.hq ?? {};
  const seenFile = typeof hq['seenGenerationFile'] === 'string' ? resolve(home, (hq['seenGenerationFile'] as string).replace(/^~(?=$|\/)/, home)) : join(hqDir, 'seen-generation');
  const host = await oldFile(join(hqDir, 'host'), parseOldHost);
  const seen = await oldFile(seenFile, parseOldSeen);
  const local = await oldFile(join(oldDir, 'hq', 'local.json'), parseOldLocal);
  if (cfg === null && host === null && seen === null && local === null) {
    throw new CliError(1, `no elanous HQ files under ${show(home)} (.elanous-hq/host, .elanous-hq/seen-generation, .elanous/hq/local.json, .elanous/config.json); nothing changed`);
  }
  const hostName = typeof hq['hostName'] === 'string' ? (hq['hostName'] as string) : null;
  if (host !== null && hostName !== null && host !== hostName) {
    throw new CliError(1, `the host file names ${host} but hq.hostName in config.json names ${hostName}: make them agree; nothing changed`);
  }
  return { cfg, hq, host, seen, local, hostName };
}

/** The agent's config from the old hq block: its own keys, the roles (defaults, elanous's, the crontab's) and replication of the old state folder. */
function agentConfigOf(hq: { readonly [k: string]: unknown }, lines: ReturnType<typeof crontabReplacements>, oldDir: string): { [k: string]: unknown } {
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
  const force = flagBool(p, 'force');
  const home = resolve(expandHome(flagString(p, 'old-home') ?? '~'));
  const hqDir = join(home, '.elanous-hq');
  const oldDir = join(home, '.elanous');
  // 1. Every old file, parsed before anything is written.
  const { cfg, hq, host, seen, local, hostName } = await readOldFiles(home, hqDir, oldDir);
  const cron = await crontabText(flagString(p, 'crontab'));
  const lines = crontabReplacements(cron.text);
  // 2. The agent's config: its own keys only.
  const agent = agentConfigOf(hq, lines, oldDir);
  const fromEnv = process.env[AGENT_CONFIG.envVar];
  const target = resolve(expandHome(flagString(p, 'config') ?? (fromEnv === undefined || fromEnv === '' ? join('~', '.hq', AGENT_CONFIG.name) : fromEnv)));
  const stateDir = resolve(expandHome('~/.hq'));
  const name = host ?? hostName;
  try {
    const valid = validateConfigFile(agent);
    resolveConfig(name === null ? valid : { ...valid, hostName: name }, target);
  } catch (err) {
    throw new CliError(1, `the old hq block does not make a valid agent config: ${(err as Error).message}; nothing changed`);
  }
  // 3. The state: the seen generation never goes down; local.json's start guard waits the old TTL.
  const paths = statePaths(stateDir);
  const existing = [target, paths.seen, paths.local, paths.host].filter((f) => existsSync(f));
  if (existing.length > 0 && !force) {
    throw new CliError(1, `hq is already set up here (${existing.map(show).join(', ')}): --force replaces it (the seen generation never goes down); nothing changed`);
  }
  const prior = existsSync(paths.seen) ? await loadSeen(paths.seen) : null;
  if (prior !== null && prior.kind === 'refused') throw new CliError(1, `${paths.seen} ${prior.problem}: fix or remove it; nothing changed`);
  const priorSeen = prior !== null && prior.kind === 'ok' ? prior.value : 0;
  const generation = Math.max(seen ?? 0, local?.generation ?? 0, priorSeen);
  const ttl = local?.ttlSeconds ?? (typeof hq['ttlSeconds'] === 'number' ? (hq['ttlSeconds'] as number) : 0);
  const persisted: Persisted = { holder: null, generation, confirmedAt: null, ttlSeconds: ttl, safetyMarginSeconds: 0, gaveConfirmation: null, lockDelayPending: true, steppedDown: 0, lost: 0 };
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
  if (!dryRun) {
    const dirProblem = await ensureDir(stateDir, 0o700);
    if (dirProblem !== null) throw new CliError(1, `${dirProblem}; nothing changed`);
    await writeSeen(paths.seen, generation);
    await writePersisted(paths.local, persisted);
    if (name !== null) await writeHost(paths.host, name);
    await mkdirPrivate(dirname(target));
    await writeAtomic(target, `${JSON.stringify(agent, null, 2)}\n`);
  }
  if (json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(describe(report, agent));
  return 0;
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
  out.push(`  host: ${r.host ?? 'none (hq uses hostName, else the OS host name)'}${r.state.host === null ? '' : ` → ${w} ${show(r.state.host)}`}`);
  const s = r.seenGeneration;
  out.push(`  seen generation: ${s.carried} (seen-generation ${s.seenFile ?? 'none'}, local.json ${s.localJson ?? 'none'}) → ${w} ${show(r.state.seen)}`);
  out.push(`  local.json → ${w} ${show(r.state.local)}: the agent's first start runs nothing for ${r.startGuardSeconds > 0 ? `${r.startGuardSeconds} s (the old TTL)` : 'one TTL of the first record it reads'}`);
  out.push(`  agent config → ${w} ${show(r.config.path)}: ${r.config.keys.join(', ')} (roles: ${(agent['roles'] as string[]).join(', ')}; replication.pollersOff: ${ELANOUS_POLLERS.join(', ')})`);
  if (Object.keys(r.arbiter).length > 0) out.push(`  for the arbiter's config (arbiter.json on ${(agent['arbiter'] as string | undefined) ?? 'cloud-vm'}): ${JSON.stringify(r.arbiter)}`);
  for (const k of r.notCarried) out.push(`  not carried: hq.${k}${k === 'seenGenerationFile' ? ` (its generation is carried into ${show(r.state.seen)})` : ' (hq has no such key)'}`);
  const lines = r.crontab.lines;
  out.push(`  crontab (${r.crontab.source}): ${lines.length === 0 ? 'no elanous hq lines' : `${lines.length} elanous hq line(s); replace them now:`}`);
  for (const l of lines) {
    out.push(`    ${l.line}`);
    out.push(l.action === 'replace' ? `      → ${l.replacement}` : `      → ${l.action === 'remove' ? 'remove' : 'by hand'}: ${l.why}`);
  }
  const dir = show(dirname(r.state.seen));
  out.push(`  next: the member token into ${dir}/token and the peer token into ${dir}/peer-token (mode 0600), then start hq-agent`);
  return `${out.join('\n')}\n`;
}
