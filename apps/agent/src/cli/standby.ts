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
import {
  CliError,
  errorLine,
  flagBool,
  flagString,
  helpText,
  parseArgs,
  type CommandSpec,
  type Parsed,
} from './args.js';
import { seenGeneration } from './context.js';
import { resolveNetwork } from '../config.js';
import { ArbiterEndpoints } from '@hq/runtime/http';
import { wallClockMs } from '@hq/runtime/clock';
import { readToken } from '../tokens.js';
import { ConfigError } from '@hq/runtime/config-file';
import { TIERS, type Tier } from '@hq/protocol';
import { promote, formatPromote, PromoteError } from '../replication/promote.js';
import { readLatest } from '@hq/runtime/generations';
import { decideRole, leaseOf, parseDefaultSource } from '../replication/role.js';
import { didYouMean } from '@hq/runtime/suggest';
import { STANDBY_SPECS } from './standby-specs.js';
import { formatVerification, verifyTier } from '../replication/verify.js';

export { STANDBY_SPECS };

import {
  io,
  line,
  load,
  needReplication,
  pollersOffOf,
  report,
  socketOf,
  standbyDirOf,
  tiersOf,
  type Io,
  type StandbyContext,
} from './standby-common.js';
import { standbySnapshot } from './standby-snapshot.js';

export type { StandbyContext } from './standby-common.js';
export { standbySnapshot };

/** `verify --s3`: reads the bucket's newest survival copy of each tier back. */
async function verifyBucket(p: Parsed, ctx: Io, json: boolean): Promise<number> {
  if (flagString(p, 'standby') !== undefined)
    throw new CliError(2, '--s3 checks the bucket of replication.survival.s3; it takes no --standby');
  const l = load(p, ctx);
  const cfg = needReplication(l);
  const target = cfg.survivalS3;
  if (target === null)
    throw new CliError(2, `the config ${l.agent.file ?? '(none found)'} has no replication.survival.s3 block`);
  const tierFlag = flagString(p, 'tier');
  const tiers = tierFlag === undefined ? [...TIERS] : tiersOf(tierFlag, '--tier');
  const { formatS3Verification, verifyS3 } = await import('../replication/survival-s3.js');
  const results = await verifyS3({
    target,
    tiers,
    secretPatterns: cfg.secretPatterns,
    timeoutSeconds: Math.max(30, l.agent.requestTimeoutSeconds),
    env: ctx.env ?? process.env,
  });
  // Without --tier, a tier that never had a survival copy is no failure; one tier at least must verify.
  const shown =
    tierFlag === undefined && results.some((r) => r.generation !== null)
      ? results.filter((r) => r.generation !== null || r.ok)
      : results;
  const ok = shown.every((r) => r.ok);
  line(
    ctx,
    json,
    {
      ok,
      bucket: target.bucket,
      prefix: target.prefix,
      tiers: shown,
      reasons: shown.filter((r) => !r.ok).map((r) => r.reason),
    },
    formatS3Verification(target, shown),
  );
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
      line(
        ctx,
        json,
        { ok: false, tiers: [], reasons: ['no tier has a latest generation'] },
        `hq-standby verify FAIL no tier has a latest generation in ${standbyDir}`,
      );
      return 1;
    }
  }
  const now = (ctx.now ?? wallClockMs.now)();
  const results = [];
  for (const t of tiers) results.push(await verifyTier(standbyDir, t, now));
  const ok = results.every((r) => r.ok);
  line(
    ctx,
    json,
    { ok, tiers: results.map(({ files: _f, ...r }) => r), reasons: results.filter((r) => !r.ok).map((r) => r.reason) },
    formatVerification(results),
  );
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
    await report(socketOf(p, ctx), 'promoted', {
      to: s.to,
      tiers: Object.entries(s.tiers)
        .map(([t, g]) => `${t}:${g}`)
        .join(','),
      files: s.files,
      bytes: s.bytes,
      dryRun: s.dryRun,
      seconds: s.seconds,
    });
    return 0;
  } catch (err) {
    if (err instanceof PromoteError) {
      if (json) ctx.stdout(`${JSON.stringify({ ok: false, refused: err.message })}\n`);
      ctx.stderr(`promotion refused: ${err.message}\n`);
      await report(socketOf(p, ctx), 'promote-refused', {
        to: flagString(p, 'to') ?? null,
        tiers: tiers.join(','),
        problem: err.message,
      });
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
    const r = await new ArbiterEndpoints(c.arbiterUrls ?? [c.arbiterUrl]).request({
      method: 'GET',
      path: '/v1/lease',
      token: tok.ok ? tok.token : null,
      timeoutSeconds: c.requestTimeoutSeconds,
    });
    if (r.kind === 'answer' && r.status === 200) lease = leaseOf(r.body);
  } catch {
    lease = null; // no arbiter URL: the lease cannot be read
  }
  const seen = await seenGeneration(l.agent);
  const answer = decideRole({ host: l.agent.hostName, defaultSource: ds, lease, seenGeneration: seen.generation });
  line(ctx, json, answer, answer.role);
  await report(l.agent.socketPath, 'role', {
    role: answer.role,
    reason: answer.reason,
    defaultSource: answer.defaultSource.join(','),
    holder: answer.holder,
    generation: answer.generation,
    seenGeneration: answer.seenGeneration,
  });
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
    const hint = didYouMean(
      sub,
      STANDBY_COMMANDS.map((c) => c.spec.name.slice('standby '.length)),
      (w) => `standby ${w}`,
    );
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
