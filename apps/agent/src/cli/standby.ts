/**
 * `hq standby snapshot|verify|promote|role`: the sending and operating side of
 * replication, over the library in replication/ (the daemon loads only its receiving side).
 *
 * Wiring: `standbyCommand(argv, ctx)` takes the words after `standby` (e.g.
 * `['snapshot', '--tier', 'core']`) and returns the exit code; or use `STANDBY_COMMANDS`
 * (specs + runners taking a `Parsed`) for the `hq` command table.
 *
 * Exit codes: snapshot 0 built (and pushed to every standby), 1 refused or failed, 2 usage or
 * config, 3 a standby unreachable; verify 0 ok, 1 failed; promote 0 promoted (or planned), 1
 * refused; role always 0 with the answer on stdout (2 usage).
 */
import { join } from 'node:path';
import { parseGeneration } from '@hq/lease-core';
import { CliError, errorLine, flagBool, flagString, helpText, parseArgs, type CommandSpec, type Parsed } from './args.js';
import { seenGeneration } from './context.js';
import { callAgent } from './local.js';
import { reportEvent } from './report.js';
import { resolveNetwork, type AgentConfig } from '../config.js';
import { ArbiterEndpoints } from '@hq/runtime/http';
import { wallClockMs } from '@hq/runtime/clock';
import { readToken } from '../tokens.js';
import { AGENT_CONFIG, ConfigError, findConfigFile } from '@hq/runtime/config-file';
import { loadAgentWithReplication, planIsEmpty, type Loaded, type ReplicationConfig } from '../replication/config.js';
import { fieldsOf, isTier, TIERS, type ReportedEvent, type Tier } from '@hq/protocol';
import { planTier } from '../replication/plan.js';
import { promote, formatPromote, PromoteError } from '../replication/promote.js';
import { pushGeneration, type PushResult } from '../replication/push.js';
import { pushSurvival, type SurvivalResult } from '../replication/survival.js';
import type { S3SurvivalResult } from '../replication/survival-s3.js';
import { readLatest } from '@hq/runtime/generations';
import { decideRole, leaseOf, parseDefaultSource } from '../replication/role.js';
import { buildSnapshot, SnapshotError, type SnapshotResult } from '../replication/snapshot.js';
import { didYouMean } from '@hq/lease-core/suggest';
import { STANDBY_SPECS } from './standby-specs.js';
import { formatVerification, verifyTier } from '../replication/verify.js';

export { STANDBY_SPECS };

export interface StandbyContext {
  readonly stdout?: (s: string) => void;
  readonly stderr?: (s: string) => void;
  readonly env?: NodeJS.ProcessEnv;
  /** ms since the epoch (tests drive it). */
  readonly now?: () => number;
}

type Io = Required<Pick<StandbyContext, 'stdout' | 'stderr'>> & StandbyContext;

function io(ctx: StandbyContext): Io {
  return {
    ...ctx,
    stdout: ctx.stdout ?? ((s) => void process.stdout.write(s)),
    stderr: ctx.stderr ?? ((s) => void process.stderr.write(s)),
  };
}

function line(ctx: Io, json: boolean, value: unknown, text: string): void {
  ctx.stdout(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
}

function load(p: Parsed, ctx: StandbyContext): Loaded {
  return loadAgentWithReplication(flagString(p, 'config'), ctx.env ?? process.env);
}

/** The local agent's socket, for reporting events; null when no config can be loaded. */
function socketOf(p: Parsed, ctx: StandbyContext): string | null {
  try {
    return load(p, ctx).agent.socketPath;
  } catch {
    return null;
  }
}

/** Reports an `hq.standby` event to the local agent's log (best effort: see `reportEvent`). */
async function report(socket: string | null, event: ReportedEvent<'hq.standby'>, data: { [k: string]: string | number | boolean | null }): Promise<void> {
  if (socket !== null) await reportEvent(socket, 'hq.standby', event, data);
}

function needReplication(l: Loaded): ReplicationConfig {
  if (l.replication === null) throw new CliError(2, `the config ${l.agent.file ?? '(none found)'} has no replication block`);
  return l.replication;
}

function tiersOf(text: string, flag: string): Tier[] {
  const list = text.split(',');
  if (list.some((t) => !isTier(t)) || new Set(list).size !== list.length) throw new CliError(2, `${flag} must be core, big and/or obs, comma-separated, without duplicates`);
  return list as Tier[];
}

/**
 * The poller key paths promotion turns off (`replication.pollersOff`); none when the config has
 * no replication block, or when `--standby` is given and no config file exists at all.
 */
function pollersOffOf(p: Parsed, ctx: StandbyContext): readonly string[] {
  if (flagString(p, 'standby') !== undefined && findConfigFile(flagString(p, 'config'), AGENT_CONFIG, ctx.env ?? process.env) === null) return [];
  return load(p, ctx).replication?.pollersOff ?? [];
}

/** Refuses a block whose plan lists nothing (there is no built-in plan). */
function needPlan(cfg: ReplicationConfig): ReplicationConfig {
  if (planIsEmpty(cfg)) {
    throw new CliError(2, 'replication.plan: lists nothing to protect; add plan.files, plan.dirs or plan.obs (deploy/replication/example-plan.json is an example)');
  }
  return cfg;
}

function standbyDirOf(p: Parsed, ctx: StandbyContext): string {
  const explicit = flagString(p, 'standby');
  if (explicit !== undefined) return explicit;
  return needReplication(load(p, ctx)).standbyDir;
}

/** The lease this snapshot runs under: `hq fence run`'s environment, else the local agent. */
async function leaseForSnapshot(agent: AgentConfig, env: NodeJS.ProcessEnv): Promise<{ generation: number; holder: string | null }> {
  const g = parseGeneration(env['HQ_GENERATION']);
  const h = env['HQ_HOLDER'];
  if (g !== null && g > 0) {
    if (h !== undefined && h !== agent.hostName) throw new CliError(1, `HQ_HOLDER is ${h}, not this host (${agent.hostName}); only the holder snapshots`);
    return { generation: g, holder: agent.hostName };
  }
  const r = await callAgent(agent.socketPath, 'GET', '/v1/status', agent.requestTimeoutSeconds);
  if (r.kind === 'answer' && r.status === 200) {
    const b = fieldsOf(r.body);
    const holder = typeof b.holder === 'string' ? b.holder : null;
    const generation = typeof b.generation === 'number' ? b.generation : 0;
    if (holder !== null && holder !== agent.hostName) throw new CliError(1, `${holder} holds the lease, not this host (${agent.hostName}); only the holder snapshots`);
    if (holder === null && generation > 0) throw new CliError(1, 'no holder is known but a generation was seen; refusing to snapshot blind');
    return { generation: holder === null ? 0 : generation, holder };
  }
  const seen = await seenGeneration(agent);
  if (seen.generation > 0) throw new CliError(1, 'the agent is not running and a generation was seen; run the snapshot under "hq fence run --role cron"');
  return { generation: 0, holder: null };
}

export async function standbySnapshot(p: Parsed, context: StandbyContext = {}): Promise<number> {
  const ctx = io(context);
  const json = flagBool(p, 'json');
  const tier = flagString(p, 'tier') ?? '';
  if (!isTier(tier)) throw new CliError(2, `--tier must be one of ${TIERS.join(', ')} (got ${JSON.stringify(tier)})`);
  const l = load(p, ctx);
  const cfg = needPlan(needReplication(l));
  if (flagBool(p, 'dry-run')) {
    const plan = await planTier(cfg, tier);
    const bytes = plan.items.reduce((n, i) => n + i.bytes, 0);
    const survival = plan.items.filter((i) => i.survival).length;
    line(
      ctx,
      json,
      { tier, dryRun: true, items: plan.items.length, survival, bytes, plan: plan.items.map(({ abs: _abs, ...rest }) => rest), skipped: plan.skipped },
      `standby ${tier} plan: ${plan.items.length} files (${survival} survival) · ${(bytes / 1e6).toFixed(1)} MB · ${plan.skipped.length} skipped`,
    );
    return 0;
  }
  try {
    return await snapshotAndPush(p, ctx, l, cfg, tier, json);
  } catch (err) {
    // A snapshot that did not happen (refused, failed, nothing to push to) is a `failed` event.
    if (!(err instanceof CliError) || err.exitCode === 1) await report(l.agent.socketPath, 'failed', { tier, problem: (err as Error).message });
    throw err;
  }
}

async function snapshotAndPush(p: Parsed, ctx: Io, l: Loaded, cfg: ReplicationConfig, tier: Tier, json: boolean): Promise<number> {
  const now = ctx.now ?? wallClockMs.now;
  const started = now();
  const lease = await leaseForSnapshot(l.agent, ctx.env ?? process.env);
  let snap: SnapshotResult;
  try {
    snap = await buildSnapshot({ cfg, tier, host: l.agent.hostName, lease, ...(ctx.now === undefined ? {} : { now: ctx.now }) });
  } catch (err) {
    if (err instanceof SnapshotError) throw new CliError(1, `standby ${tier} FAILED: ${err.message}`);
    throw err;
  }
  if (snap.hostLocalStripped.length > 0) {
    await report(l.agent.socketPath, 'config-host-local-stripped', { tier, generation: snap.manifest.generation, keys: snap.hostLocalStripped.join(',') });
  }
  const pushed = flagBool(p, 'no-push') ? [] : await pushToStandbys(l, cfg, tier, snap);
  // Before the first lease (generation 0) the arbiter has nothing to fence survival copies with,
  // and no host is yet the one whose copies count: the bucket waits for the lease too.
  const skipped = flagBool(p, 'survival') && snap.manifest.leaseGeneration === 0;
  const copies: SurvivalCopies = flagBool(p, 'survival') && !skipped ? await survivalCopies(ctx, l, cfg, snap) : { survival: null, survivalS3: null, skipped };
  const seconds = Math.round((now() - started) / 100) / 10;
  const m = snap.manifest;
  const { survival, survivalS3 } = copies;
  const summary = {
    generation: m.generation,
    tier,
    files: m.entries.length,
    reused: snap.reused,
    bytes: snap.bytes,
    leaseGeneration: m.leaseGeneration,
    holder: m.holder,
    survival: snap.survival.length,
    survivalCopy: survival,
    survivalS3,
    pushed: pushed.map(({ host, result }) =>
      result.ok
        ? { host, ok: true, sentBytes: result.sentBytes, sentBlobs: result.sentBlobs }
        : { host, ok: false, kind: result.kind, error: result.error, message: result.message, sentBytes: result.sentBytes },
    ),
    seconds,
  };
  line(ctx, json, summary, `standby ${tier} ${m.generation}: ${m.entries.length} files (${snap.reused} reused) · ${(snap.bytes / 1e6).toFixed(1)} MB · push ${pushText(pushed)} · survival ${survivalText(copies)} · ${seconds}s`);
  const code = snapshotExitCode(pushed, copies);
  await report(l.agent.socketPath, 'generation', {
    tier,
    generation: m.generation,
    files: m.entries.length,
    reused: snap.reused,
    bytes: snap.bytes,
    leaseGeneration: m.leaseGeneration,
    holder: m.holder,
    pushedTo: pushed.filter((x) => x.result.ok).map((x) => x.host).join(','),
    pushFailed: pushed.filter((x) => !x.result.ok).map((x) => x.host).join(','),
    survival: copies.skipped ? 'skipped' : survival === null ? 'off' : survival.ok ? 'ok' : 'failed',
    survivalS3: copies.skipped ? 'skipped' : survivalS3 === null ? 'off' : survivalS3.ok ? 'ok' : 'failed',
    seconds,
    exitCode: code,
  });
  return code;
}

type Pushed = { host: string; result: PushResult }[];

/** The generation pushed to each standby (replication.pushTo, else every peer), one after the other. */
async function pushToStandbys(l: Loaded, cfg: ReplicationConfig, tier: Tier, snap: SnapshotResult): Promise<Pushed> {
  const pushed: Pushed = [];
  let peers = l.agent.peers;
  if (peers.size === 0) peers = await resolveNetwork(l.agent).then((c) => c.peers, () => peers);
  const targets = cfg.pushTo ?? [...peers.keys()];
  if (targets.length === 0) throw new CliError(1, `standby ${tier} ${snap.manifest.generation}: built, but no standby to push to (replication.pushTo, peers)`);
  const token = await readToken(l.agent.peerTokenFile);
  if (!token.ok) throw new CliError(2, `${token.problem} (the peer token, peerTokenFile)`);
  for (const host of targets) {
    const url = peers.get(host);
    if (url === undefined) {
      pushed.push({ host, result: { ok: false, kind: 'unreachable', error: null, message: `no peer URL for ${host}`, status: null, sentBytes: 0 } });
      continue;
    }
    const result = await pushGeneration({ dir: snap.dir, baseUrl: url, token: token.token, timeoutSeconds: Math.max(30, l.agent.requestTimeoutSeconds), chunkBytes: cfg.chunkBytes });
    pushed.push({ host, result });
  }
  return pushed;
}

interface SurvivalCopies {
  readonly survival: SurvivalResult | null;
  readonly survivalS3: S3SurvivalResult | null;
  /** Asked for, but skipped: no lease yet. */
  readonly skipped: boolean;
}

/** The survival subset copied to the arbiter, and to the bucket when one is configured. */
async function survivalCopies(ctx: Io, l: Loaded, cfg: ReplicationConfig, snap: SnapshotResult): Promise<SurvivalCopies> {
  const subset = new Set(snap.survival);
  const entries = snap.manifest.entries.filter((e) => subset.has(e.path));
  let survival: SurvivalResult;
  try {
    const c = await resolveNetwork(l.agent);
    const tok = await readToken(c.tokenFile);
    survival = tok.ok
      ? await pushSurvival({ dir: snap.dir, manifest: snap.manifest, entries, arbiterUrl: c.arbiterUrl, token: tok.token, timeoutSeconds: Math.max(30, c.requestTimeoutSeconds) })
      : { ok: false, status: null, error: null, message: `${tok.problem} (the member token, tokenFile)` };
  } catch (err) {
    survival = { ok: false, status: null, error: null, message: (err as Error).message };
  }
  // The bucket whatever the arbiter answered: it is there for when the arbiter's machine is lost.
  if (cfg.survivalS3 === null) return { survival, survivalS3: null, skipped: false };
  const { pushSurvivalS3 } = await import('../replication/survival-s3.js');
  const survivalS3 = await pushSurvivalS3({
    dir: snap.dir,
    manifest: snap.manifest,
    entries,
    target: cfg.survivalS3,
    secretPatterns: cfg.secretPatterns,
    timeoutSeconds: Math.max(30, l.agent.requestTimeoutSeconds),
    env: ctx.env ?? process.env,
  });
  return { survival, survivalS3, skipped: false };
}

function pushText(pushed: Pushed): string {
  if (pushed.length === 0) return '-';
  return pushed.map(({ host, result }) => (result.ok ? `${host} ok (${result.sentBlobs} blobs, ${(result.sentBytes / 1e6).toFixed(2)} MB)` : `${host} ${result.kind}: ${result.message}`)).join(', ');
}

function survivalText({ survival, survivalS3, skipped }: SurvivalCopies): string {
  const s3Text =
    survivalS3 === null
      ? ''
      : survivalS3.ok
        ? `, s3 ok (${survivalS3.files} files${survivalS3.pruned.length === 0 ? '' : `, ${survivalS3.pruned.length} pruned`})`
        : `, s3 failed: ${survivalS3.message}`;
  if (skipped) return 'skipped (no lease yet)';
  if (survival === null) return '-';
  return `${survival.ok ? `arbiter ok (${survival.files} files)` : `arbiter failed: ${survival.message}`}${s3Text}`;
}

/** 1 when a standby or a survival copy refused, 3 when one was unreachable, else 0. */
function snapshotExitCode(pushed: Pushed, { survival, survivalS3 }: SurvivalCopies): number {
  if (pushed.some((x) => !x.result.ok && x.result.kind === 'refused')) return 1;
  if ((survival !== null && !survival.ok && survival.status !== null) || (survivalS3 !== null && !survivalS3.ok && survivalS3.kind === 'refused')) return 1;
  if (pushed.some((x) => !x.result.ok) || [survival, survivalS3].some((s) => s !== null && !s.ok)) return 3;
  return 0;
}

/** `verify --s3`: reads the bucket's newest survival copy of each tier back. */
async function verifyBucket(p: Parsed, ctx: Io, json: boolean): Promise<number> {
  if (flagString(p, 'standby') !== undefined) throw new CliError(2, '--s3 checks the bucket of replication.survival.s3; it takes no --standby');
  const l = load(p, ctx);
  const cfg = needReplication(l);
  const target = cfg.survivalS3;
  if (target === null) throw new CliError(2, `the config ${l.agent.file ?? '(none found)'} has no replication.survival.s3 block`);
  const tierFlag = flagString(p, 'tier');
  const tiers = tierFlag === undefined ? [...TIERS] : tiersOf(tierFlag, '--tier');
  const { formatS3Verification, verifyS3 } = await import('../replication/survival-s3.js');
  const results = await verifyS3({ target, tiers, secretPatterns: cfg.secretPatterns, timeoutSeconds: Math.max(30, l.agent.requestTimeoutSeconds), env: ctx.env ?? process.env });
  // Without --tier, a tier that never had a survival copy is no failure; one tier at least must verify.
  const shown = tierFlag === undefined && results.some((r) => r.generation !== null) ? results.filter((r) => r.generation !== null || r.ok) : results;
  const ok = shown.every((r) => r.ok);
  line(ctx, json, { ok, bucket: target.bucket, prefix: target.prefix, tiers: shown, reasons: shown.filter((r) => !r.ok).map((r) => r.reason) }, formatS3Verification(target, shown));
  return ok ? 0 : 1;
}

export async function standbyVerify(p: Parsed, context: StandbyContext = {}): Promise<number> {
  const ctx = io(context);
  const json = flagBool(p, 'json');
  if (flagBool(p, 's3')) return verifyBucket(p, ctx, json);
  const standbyDir = standbyDirOf(p, ctx);
  const tierFlag = flagString(p, 'tier');
  let tiers: Tier[];
  if (tierFlag !== undefined) tiers = tiersOf(tierFlag, '--tier');
  else {
    tiers = [];
    for (const t of TIERS) if ((await readLatest(join(standbyDir, t, 'latest'))) !== null) tiers.push(t);
    if (tiers.length === 0) {
      line(ctx, json, { ok: false, tiers: [], reasons: ['no tier has a latest generation'] }, `hq-standby verify FAIL no tier has a latest generation in ${standbyDir}`);
      return 1;
    }
  }
  const now = (ctx.now ?? wallClockMs.now)();
  const results = [];
  for (const t of tiers) results.push(await verifyTier(standbyDir, t, now));
  const ok = results.every((r) => r.ok);
  line(ctx, json, { ok, tiers: results.map(({ files: _f, ...r }) => r), reasons: results.filter((r) => !r.ok).map((r) => r.reason) }, formatVerification(results));
  return ok ? 0 : 1;
}

export async function standbyPromote(p: Parsed, context: StandbyContext = {}): Promise<number> {
  const ctx = io(context);
  const json = flagBool(p, 'json');
  const standbyDir = standbyDirOf(p, ctx);
  const tiers = tiersOf(flagString(p, 'tiers') ?? 'core,big', '--tiers');
  const hqConfig = flagString(p, 'hq-config');
  const pollersOff = pollersOffOf(p, ctx);
  try {
    const s = await promote({
      standbyDir,
      to: flagString(p, 'to') as string,
      tiers,
      pollersOff,
      ...(hqConfig === undefined ? {} : { hqConfig }),
      dryRun: flagBool(p, 'dry-run'),
      ...(ctx.now === undefined ? {} : { now: ctx.now }),
    });
    line(ctx, json, s, formatPromote(s));
    if (!json && s.pollersOff.length === 0) {
      ctx.stderr(
        pollersOff.length === 0
          ? 'note: replication.pollersOff is empty: promotion turned no poller off in config.json; turn them off yourself before starting the services\n'
          : 'note: no config.json was promoted: promotion turned no poller off\n',
      );
    }
    await report(socketOf(p, ctx), 'promoted', { to: s.to, tiers: Object.entries(s.tiers).map(([t, g]) => `${t}:${g}`).join(','), files: s.files, bytes: s.bytes, dryRun: s.dryRun, seconds: s.seconds });
    return 0;
  } catch (err) {
    if (err instanceof PromoteError) {
      if (json) ctx.stdout(`${JSON.stringify({ ok: false, refused: err.message })}\n`);
      ctx.stderr(`promotion refused: ${err.message}\n`);
      await report(socketOf(p, ctx), 'promote-refused', { to: flagString(p, 'to') ?? null, tiers: tiers.join(','), problem: err.message });
      return 1;
    }
    throw err;
  }
}

export async function standbyRole(p: Parsed, context: StandbyContext = {}): Promise<number> {
  const ctx = io(context);
  const json = flagBool(p, 'json');
  const ds = parseDefaultSource(flagString(p, 'default-source') ?? '');
  if (typeof ds === 'string') throw new CliError(2, ds);
  const l = load(p, ctx);
  let lease: { holder: string | null; generation: number } | null = null;
  try {
    const c = await resolveNetwork(l.agent);
    const tok = await readToken(c.tokenFile);
    const r = await new ArbiterEndpoints(c.arbiterUrls ?? [c.arbiterUrl]).request({ method: 'GET', path: '/v1/lease', token: tok.ok ? tok.token : null, timeoutSeconds: c.requestTimeoutSeconds });
    if (r.kind === 'answer' && r.status === 200) lease = leaseOf(r.body);
  } catch {
    lease = null; // no arbiter URL: the lease cannot be read
  }
  const seen = await seenGeneration(l.agent);
  const answer = decideRole({ host: l.agent.hostName, defaultSource: ds, lease, seenGeneration: seen.generation });
  line(ctx, json, answer, answer.role);
  await report(l.agent.socketPath, 'role', { role: answer.role, reason: answer.reason, defaultSource: answer.defaultSource.join(','), holder: answer.holder, generation: answer.generation, seenGeneration: answer.seenGeneration });
  return 0;
}

type Runner = (p: Parsed, ctx?: StandbyContext) => Promise<number>;

/** Specs and runners, for the `hq` command table. */
export const STANDBY_COMMANDS: readonly { readonly spec: CommandSpec; readonly run: Runner }[] = [
  { spec: STANDBY_SPECS.snapshot, run: standbySnapshot },
  { spec: STANDBY_SPECS.verify, run: standbyVerify },
  { spec: STANDBY_SPECS.promote, run: standbyPromote },
  { spec: STANDBY_SPECS.role, run: standbyRole },
];

/** `hq standby …`: argv after `standby`. Returns the exit code; never throws for a user error. */
export async function standbyCommand(argv: readonly string[], context: StandbyContext = {}): Promise<number> {
  const ctx = io(context);
  const sub = argv[0];
  const cmd = STANDBY_COMMANDS.find((c) => c.spec.name === `standby ${sub ?? ''}`);
  if (cmd === undefined) {
    const names = STANDBY_COMMANDS.map((c) => c.spec.name.split(' ')[1]).join('|');
    if (sub === undefined || sub === '--help' || sub === '-h') {
      ctx.stdout(`Usage: hq standby ${names} [options]\n`);
      return sub === undefined ? 2 : 0;
    }
    const hint = didYouMean(sub, STANDBY_COMMANDS.map((c) => c.spec.name.slice('standby '.length)), (w) => `standby ${w}`);
    ctx.stderr(`hq: unknown command "standby ${sub}"${hint || ` (one of: ${names})`}\n`);
    return 2;
  }
  try {
    const parsed = parseArgs(cmd.spec, argv.slice(1));
    if (parsed.help) {
      ctx.stdout(helpText(cmd.spec));
      return 0;
    }
    return await cmd.run(parsed, ctx);
  } catch (err) {
    if (err instanceof CliError) {
      ctx.stderr(errorLine(cmd.spec.name, err.message));
      return err.exitCode;
    }
    if (err instanceof ConfigError) {
      ctx.stderr(errorLine(cmd.spec.name, err.message));
      return 2;
    }
    ctx.stderr(errorLine(cmd.spec.name, (err as { message?: string }).message ?? String(err)));
    return 1;
  }
}
