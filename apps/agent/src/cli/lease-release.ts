/**
 * `hq lease release [--handover-to H [--wait S]]`: the local agent steps down first, then the arbiter releases
 * or hands over. Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import { fieldsOf, generationField, isHost } from '@hq/protocol';
import { sleepSafeClockMs, type MsClock } from '@hq/runtime/clock';
import { CliError, flagBool, flagNumber, flagString, type Parsed } from './args.js';
import { agent, arbiter, failure, memberToken, reportFailure, network, out, type Resolved } from './context.js';
import { pokeAgent } from './lease-acquire.js';
import { waitUntilRuns } from './lease-wait.js';

/** `clock` (epoch ms) measures `--wait`, as in `leaseAcquire`. */
export async function leaseRelease(p: Parsed, clock: MsClock = sleepSafeClockMs()): Promise<number> {
  const c = await network(p);
  const token = await memberToken(c);
  const { handoverTo, force, wait } = releaseFlags(p);
  const started = clock.now();
  // 1. Step down locally first: persisted, and every fenced child of this generation ended
  //    (the agent TERMs, KILLs after the grace, waits until they are gone) before it answers.
  const down = await stepDownLocally(c, handoverTo);
  // 2. Then release (or hand over) at the arbiter, at once.
  const body: { [k: string]: unknown } = { host: c.hostName };
  if (down.generation !== undefined) body['generation'] = down.generation;
  if (handoverTo !== undefined) body['handoverTo'] = handoverTo;
  // The holder ran this generation and its children are gone: the arbiter may skip its start wait.
  if (handoverTo !== undefined && down.ready?.childrenGone === true && down.ready.ran === true) body['ran'] = true;
  if (force) body['force'] = true;
  const r = await arbiter(c, 'POST', '/v1/lease/release', body, token);
  if (r.kind === 'answer' && r.status === 200) {
    if (down.agentUp) await pokeAgent(c);
    const json = flagBool(p, 'json');
    if (handoverTo === undefined || wait === 0) {
      out(json, r.body, handoverTo !== undefined ? `handed over to ${handoverTo}` : releasedLine(c.hostName));
      return 0;
    }
    return waitAfterHandover(c, clock, token, handoverTo, r.body, started, wait, json);
  }
  // 3. Refused: undo the local step-down (the lease is still ours). No answer: the outcome is
  //    unknown, and the agent undoes it by itself once the arbiter's record shows it never landed.
  if (down.agentUp && r.kind === 'answer' && r.status < 500) await agent(c, 'POST', '/v1/resume');
  const f = failure(r, 'lease release', c);
  if (flagBool(p, 'json') && r.kind === 'answer') out(true, r.body, '');
  reportFailure(f, p);
  return f.code;
}

/** The flags of `lease release`, checked together: --force and --wait only with --handover-to. */
function releaseFlags(p: Parsed): { handoverTo: string | undefined; force: boolean; wait: number } {
  const handoverTo = flagString(p, 'handover-to');
  if (handoverTo !== undefined && !isHost(handoverTo))
    throw new CliError(2, `--handover-to: "${handoverTo}" is not a host name`);
  const force = flagBool(p, 'force');
  if (force && handoverTo === undefined) throw new CliError(2, '--force applies only with --handover-to');
  const wait = flagNumber(p, 'wait') ?? 0;
  if (!(wait >= 0) || !Number.isFinite(wait))
    throw new CliError(2, `--wait must be a number of seconds ≥ 0 (got ${wait})`);
  if (wait > 0 && handoverTo === undefined) throw new CliError(2, '--wait applies only with --handover-to');
  return { handoverTo, force, wait };
}

/**
 * The local agent's step-down before a release: whether it answered, what it said (its children
 * gone, the generation it ran) and the generation it held. Throws (exit 1, nothing released)
 * when a running agent did not finish in time, or a handover's children cannot be proven gone.
 */
async function stepDownLocally(
  c: Resolved,
  handoverTo: string | undefined,
): Promise<{ agentUp: boolean; ready: ReturnType<typeof fieldsOf> | null; generation: number | undefined }> {
  // As long as the agent's step-down can take (its children's graces), said by the agent itself.
  const before = await agent(c, 'GET', '/v1/status');
  const bound = before.kind === 'answer' && before.status === 200 ? fieldsOf(before.body).stepDownSeconds : undefined;
  const waitSeconds =
    c.requestTimeoutSeconds +
    (typeof bound === 'number' && Number.isFinite(bound) ? bound + c.requestTimeoutSeconds : STEP_DOWN_MIN_SECONDS);
  const down = await agent(c, 'POST', '/v1/step-down', waitSeconds);
  const agentUp = down.kind === 'answer' && down.status === 200;
  const ready = agentUp ? fieldsOf(down.body) : null;
  let generation: number | undefined;
  if (agentUp) {
    const st = await agent(c, 'GET', '/v1/status');
    if (st.kind === 'answer' && st.status === 200) {
      const s = fieldsOf(st.body);
      if (s.holder === c.hostName && typeof s.generation === 'number' && s.generation > 0) generation = s.generation;
    }
  }
  // A handover has no lock-delay: it needs every child gone. An agent that is not running ends
  // none (its supervisors stop their children by their deadlines, as before); one that did not
  // finish in time, or cannot prove them gone, stops the handover.
  // A plain release is no different: the lease ends with it, so a child still running would
  // overlap the next holder.
  // Absent: no agent runs, or one of before the step-down (404): it knows no children to end.
  const absent =
    (down.kind === 'unreachable' && /^(ENOENT|ECONNREFUSED)$/.test(down.problem)) ||
    (down.kind === 'answer' && down.status === 404);
  if (!agentUp && !absent) {
    throw new CliError(
      1,
      `the agent did not finish its step-down within ${waitSeconds} s (${down.kind === 'unreachable' ? down.problem : `HTTP ${down.status}`}); nothing was ${handoverTo === undefined ? 'released' : 'handed over'}. The agent goes on ending this generation's children: run it again`,
    );
  }
  if (handoverTo !== undefined && ready?.childrenGone === false) {
    await agent(c, 'POST', '/v1/resume');
    throw new CliError(
      1,
      `a fenced child of generation ${String(ready.steppedDown)} could not be proven gone (see the agent's log); stop it, then hand over again, or release without --handover-to`,
    );
  }
  return { agentUp, ready, generation };
}

/** `--handover-to H --wait S` after the arbiter granted the handover: waits until H may run. */
async function waitAfterHandover(
  c: Resolved,
  clock: MsClock,
  token: string,
  handoverTo: string,
  answer: unknown,
  started: number,
  wait: number,
  json: boolean,
): Promise<number> {
  const granted = fieldsOf(answer).lease;
  const generation = generationField(granted, 'generation') ?? 0;
  if (!json)
    process.stdout.write(
      `handed over to ${handoverTo} at generation ${generation || '?'}; waiting up to ${wait} s until it may run\n`,
    );
  const w = await waitUntilRuns(c, clock, token, handoverTo, generation, started, wait, json, 'lease release');
  if (json) out(true, { ok: w.code === 0, lease: w.lease, ...w.result }, '');
  else (w.code === 0 ? process.stdout : process.stderr).write(`${w.code === 0 ? '' : 'hq lease release: '}${w.line}\n`);
  return w.code;
}

/**
 * A release without a handover leaves no host that may run, and nothing moves the lease by
 * itself afterwards (agents never acquire; a released lease is not promoted away): say so, and
 * what brings HQ back.
 */
export function releasedLine(host: string): string {
  return `released by ${host}: HQ is now empty — no host may run fenced jobs until one runs "hq lease acquire" (or, on the arbiter side, "hq failover --to HOST"); nothing brings HQ back by itself`;
}

/** The wait for the step-down of an agent that does not say `stepDownSeconds` (the default `--grace` of 5 s, twice, and slack). */
const STEP_DOWN_MIN_SECONDS = 15;
