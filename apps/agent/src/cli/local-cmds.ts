/**
 * The local verbs of `hq`: heartbeat, seen, host set, primary, guard.
 */
import { leaseEvent } from '@hq/lease-core';
import { NEVER_FAIL_OPEN, fieldsOf, hostProblem, isAgentHeartbeatOutcome, stringField } from '@hq/protocol';
import { AGENT_UNREACHABLE, isFenceDecision, type GuardReason } from '@hq/protocol/fence';
import { resolveNetwork, type AgentConfig } from '../config.js';
import type { PrimaryAnswer } from '../primary.js';
import { wallClockMs } from '@hq/runtime/clock';
import { ensureDir } from '@hq/runtime/files';
import { physicalPath, isInside } from '../guard-path.js';
import { leaseOf } from '../replication/role.js';
import { statePaths, writeHost } from '../state.js';
import { readToken } from '../tokens.js';
import { CliError, flagBool, flagString, type Parsed } from './args.js';
import { agent, config, out, seenGeneration } from './context.js';
import { lightPaths } from './local.js';
import { reportEvent } from './report.js';
import { writeCliLine } from './log-line.js';

export async function heartbeat(p: Parsed): Promise<number> {
  const c = config(p);
  const r = await agent(c, 'POST', '/v1/heartbeat', c.requestTimeoutSeconds * 3 + c.probeTimeoutSeconds + 2);
  if (r.kind === 'unreachable') {
    process.stderr.write(`hq: heartbeat: the agent is not answering on ${c.socketPath} (${r.problem})\n`);
    return 3;
  }
  if (r.status !== 200) {
    process.stderr.write(`hq: heartbeat: the agent answered HTTP ${r.status}\n`);
    return 3;
  }
  const b = fieldsOf(r.body);
  const outcome = isAgentHeartbeatOutcome(b.outcome) ? b.outcome : null;
  const problem = stringField(b, 'problem');
  out(
    flagBool(p, 'json'),
    r.body,
    `heartbeat: ${outcome ?? '?'} (holder ${String(b.holder ?? 'none')}, generation ${String(b.generation ?? '?')})${problem ? `: ${problem}` : ''}`,
  );
  if (outcome === 'refused') return 1;
  return outcome === 'unreachable' || outcome === 'invalid-answer' ? 3 : 0;
}

export async function seen(p: Parsed): Promise<number> {
  const c = config(p);
  const s = await seenGeneration(c);
  const isSeen = s.generation > 0;
  out(
    flagBool(p, 'json'),
    { seen: isSeen, generation: s.generation, source: s.source },
    isSeen ? `seen: generation ${s.generation}` : 'never seen a generation',
  );
  return isSeen ? 0 : 3;
}

export async function hostSet(p: Parsed): Promise<number> {
  const name = p.positionals[0] as string;
  const problem = hostProblem(name);
  if (problem !== null) throw new CliError(2, `host set: "${name}" ${problem}`);
  const paths = lightPaths(flagString(p, 'config'));
  const dirProblem = await ensureDir(paths.stateDir, 0o700);
  if (dirProblem !== null) throw new CliError(2, `host set: ${dirProblem}`);
  await writeHost(statePaths(paths.stateDir).host, name);
  process.stdout.write(`host set to ${name} (${statePaths(paths.stateDir).host})\n`);
  return 0;
}

/**
 * `hq primary`: `resolvePrimary` in lease mode over the configured candidates, with the
 * floor at the highest generation this host has seen (the running agent's or `seen-generation`,
 * whichever is higher). `primary.js` (and undici with it) is loaded only by this command.
 */
export async function primary(p: Parsed): Promise<number> {
  const c = config(p);
  const { primaryOptionsFromConfig, resolvePrimary } = await import('../primary.js');
  const seen = await seenGeneration(c);
  const opts = await primaryOptionsFromConfig(c, 'lease').catch((err: unknown) => {
    // A corrupt or insecure seen-generation: guessing could lower the floor.
    throw new CliError(2, `primary: ${(err as Error).message}`);
  });
  const r = await resolvePrimary({ ...opts, seenGeneration: Math.max(seen.generation, opts.seenGeneration ?? 0) });
  if (r.mode !== 'lease') throw new Error('primary: resolvePrimary answered in static mode');
  const sourceOf = (host: string): string => (host === c.hostName ? `local:${host}` : host);
  const answers = parsedAnswers(r.answers, sourceOf);
  const json = flagBool(p, 'json');
  if (!r.known) {
    const fallback = { holder: r.holder, url: r.url };
    if (json) {
      const { mode, floor, reason } = r;
      const unknown = { known: false, holder: null, generation: null, seenGeneration: floor, answers };
      out(true, { ...unknown, mode, floor, reason, fallback, asked: r.answers }, '');
    }
    process.stderr.write(`hq: primary: no agent answered with a holder at generation ≥ ${r.floor} (${r.reason})\n`);
    return 3;
  }
  const joinPath = flagString(p, 'write-join');
  if (joinPath !== undefined) await writeJoinFile(c, joinPath, r, json);
  // The winner is the first usable answer at the winning generation (ties go to candidate order).
  const winner = r.answers.find((a) => a.status === 'usable' && a.generation === r.generation);
  const source = winner === undefined ? sourceOf(r.holder) : sourceOf(winner.host);
  const { holder, generation, mode, url, floor } = r;
  out(
    json,
    { known: true, holder, generation, source, seenGeneration: floor, answers, mode, url, floor, asked: r.answers },
    `${r.holder} (generation ${r.generation}, from ${source})`,
  );
  await reportEvent(c.socketPath, 'control', 'primary-resolved', {
    holder,
    generation,
    source,
    floor,
    asked: r.answers.length,
    usable: r.answers.filter((a) => a.status === 'usable').length,
  });
  return 0;
}

/**
 * `answers` of `hq primary --json`: it keeps its earlier shape (the answers that parsed, each with
 * source, known, holder and generation) and gains host, status and problem; `asked` lists every
 * candidate's outcome.
 */
function parsedAnswers(asked: readonly PrimaryAnswer[], sourceOf: (host: string) => string) {
  return asked
    .filter((a) => a.generation !== null)
    .map((a) => ({
      source: sourceOf(a.host),
      known: a.status !== 'unknown',
      holder: a.holder,
      generation: a.generation,
      host: a.host,
      status: a.status,
      ...(a.problem === undefined ? {} : { problem: a.problem }),
    }));
}

/** `--write-join FILE`: the join file of the primary found (exit 2 when it cannot be written). */
async function writeJoinFile(
  c: AgentConfig,
  path: string,
  r: { readonly holder: string; readonly generation: number; readonly url: string },
  json: boolean,
): Promise<void> {
  const { writeJoin } = await import('../join.js');
  const w = await writeJoin(c, path, { holder: r.holder, generation: r.generation, url: r.url });
  if (!w.ok) throw new CliError(2, `primary: --write-join: ${w.problem}`);
  if (!json) process.stderr.write(`hq: primary: join file ${w.path} written (${w.tokenScope} token)\n`);
}

function logEvent(
  event: 'cli-override' | 'cli-refused' | 'allowed',
  host: string,
  data: { [k: string]: string | number | boolean | null },
): void {
  const e = leaseEvent(event, host, data, 'hq.fence');
  writeCliLine(
    wallClockMs,
    e.category,
    e.event,
    { host: e.host, ...e.data },
    event === 'cli-refused' ? 'warn' : 'info',
  );
}

type GuardData = { [k: string]: string | number | boolean | null };
type GuardVerdict = { readonly allowed: boolean; readonly reason: GuardReason; readonly data: GuardData };

/**
 * The bootstrap path of `hq guard` ("never seen a generation"): allowed only when the arbiter
 * answered that no lease record exists yet (generation 0, no holder). An agent that is down, an
 * arbiter that cannot be reached or answers oddly, or any record with a generation is a refusal:
 * another host may hold the lease, and this host would not know (fail closed).
 */
async function arbiterHasNoLease(c: AgentConfig): Promise<
  | { readonly none: true }
  | {
      readonly none: false;
      readonly reason: Extract<GuardReason, `never-seen-${string}`>;
      readonly holder: string | null;
      readonly generation: number | null;
      readonly problem?: string;
    }
> {
  try {
    const n = await resolveNetwork(c);
    const { ArbiterEndpoints } = await import('@hq/runtime/http');
    const tok = await readToken(n.tokenFile);
    const r = await new ArbiterEndpoints(n.arbiterUrls ?? [n.arbiterUrl]).request({
      method: 'GET',
      path: '/v1/lease',
      token: tok.ok ? tok.token : null,
      timeoutSeconds: n.requestTimeoutSeconds,
    });
    if (r.kind !== 'answer')
      return {
        none: false,
        reason: 'never-seen-arbiter-unreachable',
        holder: null,
        generation: null,
        problem: r.problem,
      };
    if (r.status !== 200)
      return {
        none: false,
        reason: 'never-seen-arbiter-unreachable',
        holder: null,
        generation: null,
        problem: `HTTP ${r.status}`,
      };
    const lease = leaseOf(r.body);
    if (lease === null)
      return {
        none: false,
        reason: 'never-seen-arbiter-unreachable',
        holder: null,
        generation: null,
        problem: 'the answer is not a lease record',
      };
    if (lease.holder === null && lease.generation === 0) return { none: true };
    return { none: false, reason: 'never-seen-lease-exists', holder: lease.holder, generation: lease.generation };
  } catch (err) {
    return {
      none: false,
      reason: 'never-seen-arbiter-unreachable',
      holder: null,
      generation: null,
      problem: (err as Error).message,
    };
  }
}

/** What `hq guard` decides without `--override`. */
async function guardVerdict(
  c: AgentConfig,
  roots: { writeRoot?: string; instanceRoot?: string; operationalRoot?: string },
): Promise<GuardVerdict> {
  const f = await agent(c, 'GET', `/v1/fence?role=${NEVER_FAIL_OPEN}`, 2);
  let reason: GuardReason = AGENT_UNREACHABLE;
  let generation: number | null = null;
  let holder: string | null = null;
  if (f.kind === 'answer' && f.status === 200 && isFenceDecision(f.body)) {
    if (f.body.run)
      return { allowed: true, reason: 'fence', data: { generation: f.body.generation, holder: f.body.holder } };
    reason = f.body.reason;
    generation = f.body.generation;
    holder = f.body.holder;
  }
  let seenGen: number;
  try {
    seenGen = (await seenGeneration(c)).generation;
  } catch {
    seenGen = Number.MAX_SAFE_INTEGER; // an unreadable floor counts as seen (fail closed)
  }
  const extra: GuardData = {};
  if (seenGen === 0) {
    const a = await arbiterHasNoLease(c);
    if (a.none) return { allowed: true, reason: 'never-seen', data: { generation: 0, holder: null } };
    // The arbiter's word on holder and generation is fresher than the agent's cache.
    extra['fence'] = reason;
    reason = a.reason;
    if (a.generation !== null) generation = a.generation;
    if (a.holder !== null) holder = a.holder;
    if (a.problem !== undefined) extra['problem'] = a.problem;
  }
  const { writeRoot, instanceRoot, operationalRoot } = roots;
  if (writeRoot !== undefined && instanceRoot !== undefined && operationalRoot !== undefined) {
    const [pr, ir, or] = await Promise.all([
      physicalPath(writeRoot),
      physicalPath(instanceRoot),
      physicalPath(operationalRoot),
    ]);
    const nonOperational = !isInside(ir, or) && !isInside(or, ir);
    if (nonOperational && isInside(pr, ir))
      return { allowed: true, reason: 'non-operational-instance', data: { writeRoot: pr, instanceRoot: ir } };
    return {
      allowed: false,
      reason: nonOperational ? 'outside-instance-root' : 'operational-instance',
      data: { writeRoot: pr, instanceRoot: ir, operationalRoot: or, fence: reason, holder, generation, ...extra },
    };
  }
  return { allowed: false, reason, data: { holder, generation, ...extra } };
}

/** `(not-holder; holder node-b, generation 7)` for a refusal's line. */
function refusalDetail(v: GuardVerdict): string {
  const h = v.data['holder'];
  const g = v.data['generation'];
  const problem = v.data['problem'];
  return `${v.reason}; holder ${typeof h === 'string' ? h : 'unknown'}, generation ${typeof g === 'number' ? g : 'unknown'}${typeof problem === 'string' ? `; ${problem}` : ''}`;
}

export async function guard(p: Parsed): Promise<number> {
  const c = config(p);
  const command = flagString(p, 'command') as string;
  const writeRoot = flagString(p, 'write-root');
  const instanceRoot = flagString(p, 'instance-root');
  const operationalRoot = flagString(p, 'operational-root');
  if (writeRoot !== undefined && (instanceRoot === undefined || operationalRoot === undefined)) {
    throw new CliError(2, 'guard: --write-root needs --instance-root and --operational-root');
  }
  const json = flagBool(p, 'json');
  const v = await guardVerdict(c, {
    ...(writeRoot === undefined ? {} : { writeRoot }),
    ...(instanceRoot === undefined ? {} : { instanceRoot }),
    ...(operationalRoot === undefined ? {} : { operationalRoot }),
  });
  if (v.allowed) {
    out(json, { allowed: true, command, reason: v.reason, ...v.data }, `allowed: ${command} (${v.reason})`);
    return 0;
  }
  if (flagBool(p, 'override')) {
    // The audit line says what was overridden: the refusal's reason, holder and generation.
    const data = { command, reason: 'override', overridden: v.reason, ...v.data };
    logEvent('cli-override', c.hostName, data);
    out(json, { allowed: true, ...data }, `allowed: ${command} (override of ${refusalDetail(v)})`);
    return 0;
  }
  const data = { command, reason: v.reason, ...v.data };
  logEvent('cli-refused', c.hostName, data);
  out(json, { allowed: false, ...data }, `refused: ${command} (${refusalDetail(v)})`);
  return 4;
}
