/**
 * `hq standby snapshot --tier T`: builds the tier's generation under the lease this host holds,
 * pushes it to every standby, copies its survival subset to the arbiter (and the bucket), prints
 * one summary line and reports the `generation` event. Exit 0 built and pushed everywhere, 1 a
 * refusal or failure, 2 usage or config, 3 a standby or copy unreachable.
 */
import { parseGeneration } from '@hq/lease-core';
import { CliError, flagBool, flagString, type Parsed } from './args.js';
import { seenGeneration } from './context.js';
import { callAgent } from './local.js';
import { resolveNetwork, type AgentConfig } from '../config.js';
import { wallClockMs } from '@hq/runtime/clock';
import { readToken } from '../tokens.js';
import type { Loaded, ReplicationConfig } from '../replication/config.js';
import { fieldsOf, isTier, TIERS, type Tier } from '@hq/protocol';
import { planTier } from '../replication/plan.js';
import { pushGeneration, type PushResult } from '../replication/push.js';
import { pushSurvival, type SurvivalResult } from '../replication/survival.js';
import type { S3SurvivalResult } from '../replication/survival-s3.js';
import { buildSnapshot, SnapshotError, type SnapshotResult } from '../replication/snapshot.js';
import { io, line, load, needPlan, needReplication, report, type Io, type StandbyContext } from './standby-common.js';

/** The lease this snapshot runs under: `hq fence run`'s environment, else the local agent. */
async function leaseForSnapshot(
  agent: AgentConfig,
  env: NodeJS.ProcessEnv,
): Promise<{ generation: number; holder: string | null }> {
  const g = parseGeneration(env['HQ_GENERATION']);
  const h = env['HQ_HOLDER'];
  if (g !== null && g > 0) {
    if (h !== undefined && h !== agent.hostName)
      throw new CliError(1, `HQ_HOLDER is ${h}, not this host (${agent.hostName}); only the holder snapshots`);
    return { generation: g, holder: agent.hostName };
  }
  const r = await callAgent(agent.socketPath, 'GET', '/v1/status', agent.requestTimeoutSeconds);
  if (r.kind === 'answer' && r.status === 200) {
    const b = fieldsOf(r.body);
    const holder = typeof b.holder === 'string' ? b.holder : null;
    const generation = typeof b.generation === 'number' ? b.generation : 0;
    if (holder !== null && holder !== agent.hostName)
      throw new CliError(1, `${holder} holds the lease, not this host (${agent.hostName}); only the holder snapshots`);
    if (holder === null && generation > 0)
      throw new CliError(1, 'no holder is known but a generation was seen; refusing to snapshot blind');
    return { generation: holder === null ? 0 : generation, holder };
  }
  const seen = await seenGeneration(agent);
  if (seen.generation > 0)
    throw new CliError(
      1,
      'the agent is not running and a generation was seen; run the snapshot under "hq fence run --role cron"',
    );
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
      {
        tier,
        dryRun: true,
        items: plan.items.length,
        survival,
        bytes,
        plan: plan.items.map(({ abs: _abs, ...rest }) => rest),
        skipped: plan.skipped,
      },
      `standby ${tier} plan: ${plan.items.length} files (${survival} survival) · ${(bytes / 1e6).toFixed(1)} MB · ${plan.skipped.length} skipped`,
    );
    return 0;
  }
  try {
    return await snapshotAndPush(p, ctx, l, cfg, tier, json);
  } catch (err) {
    // A snapshot that did not happen (refused, failed, nothing to push to) is a `failed` event.
    if (!(err instanceof CliError) || err.exitCode === 1)
      await report(l.agent.socketPath, 'failed', { tier, problem: (err as Error).message });
    throw err;
  }
}

async function snapshotAndPush(
  p: Parsed,
  ctx: Io,
  l: Loaded,
  cfg: ReplicationConfig,
  tier: Tier,
  json: boolean,
): Promise<number> {
  const now = ctx.now ?? wallClockMs.now;
  const started = now();
  const snap = await takeSnapshot(ctx, l, cfg, tier);
  const pushed = flagBool(p, 'no-push') ? [] : await pushToStandbys(l, cfg, tier, snap);
  // Before the first lease (generation 0) the arbiter has nothing to fence survival copies with,
  // and no host is yet the one whose copies count: the bucket waits for the lease too.
  const skipped = flagBool(p, 'survival') && snap.manifest.leaseGeneration === 0;
  const copies: SurvivalCopies =
    flagBool(p, 'survival') && !skipped
      ? await survivalCopies(ctx, l, cfg, snap)
      : { survival: null, survivalS3: null, skipped };
  const seconds = Math.round((now() - started) / 100) / 10;
  const m = snap.manifest;
  line(
    ctx,
    json,
    snapshotSummary(tier, snap, pushed, copies, seconds),
    `standby ${tier} ${m.generation}: ${m.entries.length} files (${snap.reused} reused) · ${(snap.bytes / 1e6).toFixed(1)} MB · push ${pushText(pushed)} · survival ${survivalText(copies)} · ${seconds}s`,
  );
  const code = snapshotExitCode(pushed, copies);
  await report(l.agent.socketPath, 'generation', generationEvent(tier, snap, pushed, copies, seconds, code));
  return code;
}

/** Step 1: the generation, built under the lease this host holds; a host-local key stripped is reported. */
async function takeSnapshot(ctx: Io, l: Loaded, cfg: ReplicationConfig, tier: Tier): Promise<SnapshotResult> {
  const lease = await leaseForSnapshot(l.agent, ctx.env ?? process.env);
  let snap: SnapshotResult;
  try {
    snap = await buildSnapshot({
      cfg,
      tier,
      host: l.agent.hostName,
      lease,
      ...(ctx.now === undefined ? {} : { now: ctx.now }),
    });
  } catch (err) {
    if (err instanceof SnapshotError) throw new CliError(1, `standby ${tier} FAILED: ${err.message}`);
    throw err;
  }
  if (snap.hostLocalStripped.length > 0) {
    await report(l.agent.socketPath, 'config-host-local-stripped', {
      tier,
      generation: snap.manifest.generation,
      keys: snap.hostLocalStripped.join(','),
    });
  }
  return snap;
}

/** The `--json` answer of a snapshot: the generation, each push and the survival copies. */
function snapshotSummary(tier: Tier, snap: SnapshotResult, pushed: Pushed, copies: SurvivalCopies, seconds: number) {
  const m = snap.manifest;
  return {
    generation: m.generation,
    tier,
    files: m.entries.length,
    reused: snap.reused,
    bytes: snap.bytes,
    leaseGeneration: m.leaseGeneration,
    holder: m.holder,
    survival: snap.survival.length,
    survivalCopy: copies.survival,
    survivalS3: copies.survivalS3,
    pushed: pushed.map(({ host, result }) =>
      result.ok
        ? { host, ok: true, sentBytes: result.sentBytes, sentBlobs: result.sentBlobs }
        : {
            host,
            ok: false,
            kind: result.kind,
            error: result.error,
            message: result.message,
            sentBytes: result.sentBytes,
          },
    ),
    seconds,
  };
}

/** The `generation` event the agent logs for a snapshot (flat fields: hosts comma-separated). */
function generationEvent(
  tier: Tier,
  snap: SnapshotResult,
  pushed: Pushed,
  copies: SurvivalCopies,
  seconds: number,
  exitCode: number,
) {
  const m = snap.manifest;
  const { survival, survivalS3 } = copies;
  const hosts = (ok: boolean): string =>
    pushed
      .filter((x) => x.result.ok === ok)
      .map((x) => x.host)
      .join(',');
  return {
    tier,
    generation: m.generation,
    files: m.entries.length,
    reused: snap.reused,
    bytes: snap.bytes,
    leaseGeneration: m.leaseGeneration,
    holder: m.holder,
    pushedTo: hosts(true),
    pushFailed: hosts(false),
    survival: copies.skipped ? 'skipped' : survival === null ? 'off' : survival.ok ? 'ok' : 'failed',
    survivalS3: copies.skipped ? 'skipped' : survivalS3 === null ? 'off' : survivalS3.ok ? 'ok' : 'failed',
    seconds,
    exitCode,
  };
}

type Pushed = { host: string; result: PushResult }[];

/** The generation pushed to each standby (replication.pushTo, else every peer), one after the other. */
async function pushToStandbys(l: Loaded, cfg: ReplicationConfig, tier: Tier, snap: SnapshotResult): Promise<Pushed> {
  const pushed: Pushed = [];
  let peers = l.agent.peers;
  if (peers.size === 0)
    peers = await resolveNetwork(l.agent).then(
      (c) => c.peers,
      () => peers,
    );
  const targets = cfg.pushTo ?? [...peers.keys()];
  if (targets.length === 0)
    throw new CliError(
      1,
      `standby ${tier} ${snap.manifest.generation}: built, but no standby to push to (replication.pushTo, peers)`,
    );
  const token = await readToken(l.agent.peerTokenFile);
  if (!token.ok) throw new CliError(2, `${token.problem} (the peer token, peerTokenFile)`);
  for (const host of targets) {
    const url = peers.get(host);
    if (url === undefined) {
      pushed.push({
        host,
        result: {
          ok: false,
          kind: 'unreachable',
          error: null,
          message: `no peer URL for ${host}`,
          status: null,
          sentBytes: 0,
        },
      });
      continue;
    }
    const result = await pushGeneration({
      dir: snap.dir,
      baseUrl: url,
      token: token.token,
      timeoutSeconds: Math.max(30, l.agent.requestTimeoutSeconds),
      chunkBytes: cfg.chunkBytes,
    });
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
async function survivalCopies(
  ctx: Io,
  l: Loaded,
  cfg: ReplicationConfig,
  snap: SnapshotResult,
): Promise<SurvivalCopies> {
  const subset = new Set(snap.survival);
  const entries = snap.manifest.entries.filter((e) => subset.has(e.path));
  let survival: SurvivalResult;
  try {
    const c = await resolveNetwork(l.agent);
    const tok = await readToken(c.tokenFile);
    survival = tok.ok
      ? await pushSurvival({
          dir: snap.dir,
          manifest: snap.manifest,
          entries,
          arbiterUrl: c.arbiterUrl,
          token: tok.token,
          timeoutSeconds: Math.max(30, c.requestTimeoutSeconds),
        })
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
  return pushed
    .map(({ host, result }) =>
      result.ok
        ? `${host} ok (${result.sentBlobs} blobs, ${(result.sentBytes / 1e6).toFixed(2)} MB)`
        : `${host} ${result.kind}: ${result.message}`,
    )
    .join(', ');
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
  if (
    (survival !== null && !survival.ok && survival.status !== null) ||
    (survivalS3 !== null && !survivalS3.ok && survivalS3.kind === 'refused')
  )
    return 1;
  if (pushed.some((x) => !x.result.ok) || [survival, survivalS3].some((s) => s !== null && !s.ok)) return 3;
  return 0;
}
