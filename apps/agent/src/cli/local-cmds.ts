/**
 * The local verbs of `hq`: heartbeat, seen, host set, primary, guard.
 */
import { isHost, hostProblem, leaseEvent } from '@hq/lease-core';
import { lightPaths } from '../config-file.js';
import { ensureDir } from '../files.js';
import { physicalPath, isInside } from '../guard-path.js';
import { statePaths, writeHost } from '../state.js';
import { CliError, flagBool, flagString, type Parsed } from './args.js';
import { agent, config, out, seenGeneration } from './context.js';
import { isFenceAnswer } from './local.js';

export async function heartbeat(p: Parsed): Promise<number> {
  const c = config(p);
  const r = await agent(c, 'POST', '/v1/heartbeat', c.requestTimeoutSeconds * 3 + c.probeTimeoutSeconds + 2);
  if (r.kind === 'down') {
    process.stderr.write(`hq: heartbeat: the agent is not answering on ${c.socketPath} (${r.problem})\n`);
    return 3;
  }
  if (r.status !== 200) {
    process.stderr.write(`hq: heartbeat: the agent answered HTTP ${r.status}\n`);
    return 3;
  }
  const b = r.body as { outcome?: string; holder?: string | null; generation?: number; problem?: string | null };
  out(flagBool(p, 'json'), b, `heartbeat: ${b.outcome ?? '?'} (holder ${b.holder ?? 'none'}, generation ${b.generation ?? '?'})${b.problem ? `: ${b.problem}` : ''}`);
  return b.outcome === 'unreachable' || b.outcome === 'invalid-answer' ? 3 : 0;
}

export async function seen(p: Parsed): Promise<number> {
  const c = config(p);
  const s = await seenGeneration(c);
  const isSeen = s.generation > 0;
  out(flagBool(p, 'json'), { seen: isSeen, generation: s.generation, source: s.source }, isSeen ? `seen: generation ${s.generation}` : 'never seen a generation');
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

interface PrimaryAnswer {
  readonly source: string;
  readonly known: boolean;
  readonly holder: string | null;
  readonly generation: number;
}

function asPrimary(source: string, v: unknown): PrimaryAnswer | null {
  if (typeof v !== 'object' || v === null) return null;
  const o = v as { [k: string]: unknown };
  const g = o['generation'];
  const h = o['holder'];
  if (typeof o['known'] !== 'boolean' || typeof g !== 'number' || !Number.isSafeInteger(g) || g < 0) return null;
  if (h !== null && !isHost(h)) return null;
  return { source, known: o['known'], holder: h, generation: g };
}

export async function primary(p: Parsed): Promise<number> {
  const c = config(p);
  const { joinUrl, requestJson } = await import('../http.js');
  const floor = await seenGeneration(c).catch(() => ({ generation: 0, source: 'none' as const }));
  const asks: Promise<PrimaryAnswer | null>[] = [];
  asks.push(agent(c, 'GET', '/v1/primary', 2).then((r) => (r.kind === 'answer' && r.status === 200 ? asPrimary(`local:${c.hostName}`, r.body) : null)));
  // Unauthenticated reads: no token is ever sent to a peer address.
  for (const [host, url] of c.peers) {
    asks.push(
      requestJson({ method: 'GET', url: joinUrl(url, '/v1/primary'), timeoutSeconds: c.requestTimeoutSeconds }).then((r) =>
        r.kind === 'answer' && r.status === 200 ? asPrimary(host, r.body) : null,
      ),
    );
  }
  const answers = (await Promise.all(asks)).filter((a): a is PrimaryAnswer => a !== null);
  const usable = answers.filter((a) => a.known && a.holder !== null && a.generation >= floor.generation);
  usable.sort((a, b) => b.generation - a.generation);
  const best = usable[0];
  const json = flagBool(p, 'json');
  if (best === undefined) {
    if (json) out(true, { known: false, holder: null, generation: null, seenGeneration: floor.generation, answers }, '');
    process.stderr.write(`hq: primary: no agent answered with a holder at generation ≥ ${floor.generation}\n`);
    return 3;
  }
  out(json, { known: true, holder: best.holder, generation: best.generation, source: best.source, seenGeneration: floor.generation, answers }, `${best.holder} (generation ${best.generation}, from ${best.source})`);
  return 0;
}

function logEvent(event: 'cli-override' | 'cli-refused' | 'allowed', host: string, data: { [k: string]: string | number | boolean | null }): void {
  const e = leaseEvent(event, host, data, 'hq.fence');
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), category: e.category, event: e.event, host: e.host, ...e.data })}\n`);
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
  const decide = (allowed: boolean, reason: string, extra: { [k: string]: string | number | boolean | null } = {}): number => {
    const data = { command, reason, ...extra };
    if (reason === 'override') logEvent('cli-override', c.hostName, data);
    else if (!allowed) logEvent('cli-refused', c.hostName, data);
    out(json, { allowed, ...data }, `${allowed ? 'allowed' : 'refused'}: ${command} (${reason})`);
    return allowed ? 0 : 4;
  };
  if (flagBool(p, 'override')) return decide(true, 'override');
  const f = await agent(c, 'GET', '/v1/fence?role=ledger-cli', 2);
  let fenceReason = 'agent-unreachable';
  let generation: number | null = null;
  if (f.kind === 'answer' && f.status === 200 && isFenceAnswer(f.body)) {
    if (f.body.run) return decide(true, 'fence', { generation: f.body.generation });
    fenceReason = f.body.reason;
    generation = f.body.generation;
  }
  let seenGen: number;
  try {
    seenGen = (await seenGeneration(c)).generation;
  } catch {
    seenGen = Number.MAX_SAFE_INTEGER; // an unreadable floor counts as seen (fail closed)
  }
  if (seenGen === 0) return decide(true, 'never-seen');
  if (writeRoot !== undefined && instanceRoot !== undefined && operationalRoot !== undefined) {
    const [pr, ir, or] = await Promise.all([physicalPath(writeRoot), physicalPath(instanceRoot), physicalPath(operationalRoot)]);
    const nonOperational = !isInside(ir, or) && !isInside(or, ir);
    if (nonOperational && isInside(pr, ir)) return decide(true, 'non-operational-instance', { writeRoot: pr, instanceRoot: ir });
    return decide(false, nonOperational ? 'outside-instance-root' : 'operational-instance', { writeRoot: pr, instanceRoot: ir, operationalRoot: or, fence: fenceReason, generation });
  }
  return decide(false, fenceReason, { generation });
}
