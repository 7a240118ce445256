/**
 * The arbiter verbs of `hq`: lease status|acquire|renew|release, events, maintenance, failover.
 * Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import {
  eventsOf,
  fieldsOf,
  generationField,
  isHost,
  runWindow,
  type EventRecord,
  type LeaseRecord,
} from '@hq/protocol';
import { parseRecord } from '@hq/lease-core';
import { sleepSafeClockMs, type MsClock } from '@hq/runtime/clock';
import { CliError, flagBool, flagNumber, flagString, type Parsed } from './args.js';
import type { FollowResult } from './events-follow.js';
import {
  adminToken,
  agent,
  arbiter,
  failure,
  memberToken,
  reportFailure,
  network,
  networkForReading,
  out,
  seenGeneration,
  sleep,
  type Resolved,
} from './context.js';

function fmtAge(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (Math.abs(s) < 120) return `${s.toFixed(1)} s`;
  if (Math.abs(s) < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/**
 * Which wait holds the record's holder and why, in the arbiter's own words (the record's `wait`),
 * with how long it has left (null: it ends on reports, not at a time); null when nothing holds
 * it. An arbiter of hq 0.1 does not say which wait: its record's own fields give how long.
 * Every command that waits for a holder prints this, and `hq lease status` shows it.
 */
export function waitNote(lease: unknown): { readonly left: number | null; readonly text: string } | null {
  const r = fieldsOf(lease);
  const now = typeof r.now === 'number' ? r.now : null;
  const w = fieldsOf(r.wait);
  if (typeof w.text === 'string') {
    const until = typeof w.until === 'number' ? w.until : null;
    if (until === null || now === null) return { left: null, text: w.text };
    return until > now ? { left: until - now, text: w.text } : null;
  }
  if ('wait' in r) return null;
  if (r.floorPending === true)
    return {
      left: null,
      text: 'the floor is pending: it may run once every candidate has reported its seen generation to the arbiter',
    };
  const notBefore = typeof r.notBefore === 'number' ? r.notBefore : null;
  if (notBefore === null || now === null || notBefore <= now) return null;
  return {
    left: notBefore - now,
    text: `until ${new Date(notBefore * 1000).toISOString()}: the old holder's lock-delay, or the arbiter's start wait after it started`,
  };
}

/** When a just-granted holder may first run, from the record the grant answered. */
function runsWhen(lease: unknown): string {
  const w = waitNote(lease);
  if (w === null) return 'it may run now';
  return w.left === null ? `it may not run yet: ${w.text}` : `it may run in ${fmtAge(w.left)}: ${w.text}`;
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((x, i) => (i === cells.length - 1 ? x : x.padEnd(widths[i] ?? 0))).join('  ');
  return [line(header), ...rows.map(line)];
}

interface ArbiterTiming {
  failoverSeconds: number | null;
  lockDelaySeconds: number | null;
  /** The arbiter's own sentence (lease-core `describeFailover`): the CLI computes nothing itself (S6). */
  failover: string;
  /** The cross-side relations the agents' reports break, as the arbiter states them. */
  timingProblems: string[];
  /** The broken confirmation paths between candidates, as the arbiter states them. */
  peerPathProblems: string[];
}

/** The worst-case failover and the timing problems, from the arbiter's `GET /v1/status`. */
async function timingOf(c: Resolved, token: string | null): Promise<ArbiterTiming> {
  const r = await arbiter(c, 'GET', '/v1/status', undefined, token);
  const b = fieldsOf(r.kind === 'answer' && r.status === 200 ? r.body : null);
  const f = fieldsOf(b.failover);
  const problems = Array.isArray(b.timingProblems)
    ? b.timingProblems.map((p) => fieldsOf(p).message).filter((m): m is string => typeof m === 'string')
    : [];
  const paths = Array.isArray(b.peerPaths)
    ? b.peerPaths
        .map(fieldsOf)
        .filter((p) => p.ok === false && typeof p.text === 'string')
        .map((p) => p.text as string)
    : [];
  return {
    failoverSeconds: typeof f.seconds === 'number' ? f.seconds : null,
    lockDelaySeconds: typeof f.lockDelaySeconds === 'number' ? f.lockDelaySeconds : null,
    failover: typeof f.text === 'string' ? f.text : 'unknown (the arbiter does not serve /v1/status)',
    timingProblems: problems,
    peerPathProblems: paths,
  };
}

export async function leaseStatus(p: Parsed): Promise<number> {
  const c = await networkForReading(p);
  const token = await memberToken(c).catch(() => null);
  const r = await arbiter(c, 'GET', '/v1/lease', undefined, token);
  if (r.kind !== 'answer' || r.status !== 200) {
    const f = failure(r, 'lease status', c);
    reportFailure(f, p);
    return f.code;
  }
  const rec = r.body as LeaseRecord;
  const now = rec.now;
  // The validity counts from the end of a wait (lock-delay, start wait): what the holder may run for, never more than the TTL.
  const window = runWindow(rec);
  const validFor = window === null ? 0 : window.validSeconds;
  const lockDelay = rec.notBefore === null ? 0 : Math.max(0, rec.notBefore - now);
  const views = Object.entries(rec.views ?? {}).map(([observer, v]) => ({ observer, ...v, ageSeconds: now - v.at }));
  const fo = await timingOf(c, token);
  if (flagBool(p, 'json')) {
    out(
      true,
      {
        lease: rec,
        validForSeconds: validFor,
        lockDelayLeftSeconds: lockDelay,
        views,
        maintenance: rec.maintenance ?? false,
        ...fo,
      },
      '',
    );
    return 0;
  }
  let validity =
    rec.released === true
      ? 'released'
      : rec.expired
        ? 'expired'
        : rec.holder === null
          ? 'no lease'
          : `${fmtAge(validFor)} left`;
  if (rec.holder !== null && !rec.released && !rec.expired && rec.floorPending === true)
    validity = 'may run once every candidate has reported its seen generation';
  else if (window !== null && window.startsInSeconds > 0) {
    validity = `may run in ${fmtAge(window.startsInSeconds)} (at ${new Date(window.from * 1000).toISOString()}), then for ${fmtAge(validFor)} (until ${new Date(window.until * 1000).toISOString()})`;
  }
  const wait = rec.released === true || rec.expired ? null : waitNote(rec);
  const lines = [
    `holder       ${rec.holder ?? 'none'}`,
    `generation   ${rec.generation} (revision ${rec.revision}${rec.promotedFrom !== null ? `, promoted from ${rec.promotedFrom}` : ''})`,
    `validity     ${validity} (ttl ${rec.ttlSeconds} s)`,
    ...(wait === null ? [] : [`waiting      ${wait.left === null ? '' : `${fmtAge(wait.left)} left: `}${wait.text}`]),
    `maintenance  ${rec.maintenance === true ? 'on' : 'off'}`,
    `failover     ${fo.failover}`,
    ...fo.timingProblems.map((m, i) => `${i === 0 ? 'timing' : '      '}       PROBLEM: ${m}`),
    ...fo.peerPathProblems.map((m, i) => `${i === 0 ? 'peer path' : '         '}    PROBLEM: ${m}`),
    ...(rec.dualUnreachableStreak > 0 ? [`streak       ${rec.dualUnreachableStreak} dual-unreachable check(s)`] : []),
    '',
    ...(views.length === 0
      ? ['no observer views']
      : table(
          ['observer', 'target', 'reachable', 'ping', 'health', 'age'],
          views.map((v) => [
            v.observer,
            v.target,
            v.reachable ? 'yes' : 'no',
            v.ping ? 'ok' : 'no',
            v.health ? 'ok' : 'no',
            fmtAge(v.ageSeconds),
          ]),
        )),
  ];
  out(false, null, lines.join('\n'));
  return 0;
}

/**
 * Null when an agent takes `rec` as its record (the checks it applies, the generation ceiling
 * among them), else why not: an answer that promises a run is never printed for a record that
 * no agent will run on.
 */
export function agentRefuses(rec: unknown): string | null {
  const p = parseRecord(rec);
  return p.ok ? null : p.problem;
}

async function pokeAgent(c: Resolved): Promise<void> {
  await agent(c, 'POST', '/v1/heartbeat', c.requestTimeoutSeconds + 1);
}

/** `clock` (epoch ms) measures `--wait`: sleep-safe, so the wait ends early rather than late. */
export async function leaseAcquire(p: Parsed, clock: MsClock = sleepSafeClockMs()): Promise<number> {
  const c = await network(p);
  const token = await memberToken(c);
  const wait = flagNumber(p, 'wait') ?? 0;
  const deadline = clock.now() + wait * 1000;
  const json = flagBool(p, 'json');
  for (;;) {
    const seen = await seenGeneration(c);
    const r = await arbiter(
      c,
      'POST',
      '/v1/lease/acquire',
      { host: c.hostName, seenGeneration: seen.generation, requestTimeoutSeconds: c.requestTimeoutSeconds },
      token,
    );
    if (r.kind === 'answer' && r.status === 200) {
      const lease = fieldsOf(r.body).lease;
      const refused = agentRefuses(lease);
      if (refused !== null)
        throw new CliError(1, `the arbiter granted a record no agent runs on (${refused}); see hq doctor`);
      await pokeAgent(c);
      out(
        json,
        r.body,
        `acquired: ${c.hostName} holds generation ${String(fieldsOf(lease).generation ?? '?')}; ${runsWhen(lease)}`,
      );
      return 0;
    }
    const retryable = r.kind === 'unreachable' || r.status === 409 || r.status >= 500;
    if (!retryable || clock.now() + 1000 > deadline) {
      const f = failure(r, 'lease acquire', c);
      if (json && r.kind === 'answer') out(true, r.body, '');
      reportFailure(f, p);
      return f.code;
    }
    await sleep(1000);
  }
}

export async function leaseRenew(p: Parsed): Promise<number> {
  const c = await network(p);
  const token = await memberToken(c);
  const seen = await seenGeneration(c);
  const r = await arbiter(c, 'POST', '/v1/lease/renew', { host: c.hostName, generation: seen.generation }, token);
  if (r.kind === 'answer' && r.status === 200) {
    await pokeAgent(c);
    out(flagBool(p, 'json'), r.body, `renewed: ${c.hostName} at generation ${seen.generation}`);
    return 0;
  }
  const f = failure(r, 'lease renew', c);
  if (flagBool(p, 'json') && r.kind === 'answer') out(true, r.body, '');
  reportFailure(f, p);
  return f.code;
}

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

/**
 * `--tail N` / `--since T` → the first page's query (null: from `--after`). At most one of
 * `--after`, `--tail`, `--since`; T is epoch seconds or an ISO 8601 time.
 */
/** How many of the newest events `hq events --follow` prints before it follows. */
const FOLLOW_TAIL = 20;

/** `--event a,b` → the set of names, or null for every event. */
export function eventFilter(text: string | undefined): ReadonlySet<string> | null {
  if (text === undefined) return null;
  const names = text
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  if (names.length === 0 || names.some((n) => !/^[a-z][a-z0-9-]*$/.test(n)))
    throw new CliError(
      2,
      `--event must be event names separated by commas, like promoted,released (got ${JSON.stringify(text)})`,
    );
  return new Set(names);
}

/** An event's data with its arbiter times (notBefore, was, …At) as ISO times, as the status page shows them. */
export function readableData(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return data ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) {
    const isTime = k === 'notBefore' || k === 'was' || k.endsWith('At');
    out[k] = isTime && typeof v === 'number' && Number.isFinite(v) && v > 0 ? new Date(v * 1000).toISOString() : v;
  }
  return out;
}

export function eventsStart(p: Parsed): string | null {
  const tail = flagNumber(p, 'tail');
  const since = flagString(p, 'since');
  const given = [p.flags.has('after'), tail !== undefined, since !== undefined].filter(Boolean).length;
  if (given > 1) throw new CliError(2, 'give at most one of --after, --tail and --since');
  if (tail !== undefined) {
    if (!Number.isSafeInteger(tail) || tail < 1 || tail > 1000)
      throw new CliError(2, `--tail must be an integer from 1 to 1000 (got ${tail})`);
    return `tail=${tail}`;
  }
  if (since === undefined) return null;
  const at = parseSince(since);
  if (at === null)
    throw new CliError(
      2,
      `--since must be epoch seconds (1764600000) or an ISO time (2026-12-01T10:00:00Z), got ${JSON.stringify(since)}`,
    );
  return `since=${at}&limit=1000`;
}

/** Epoch seconds ("1764600000", "1764600000.5") or an ISO time with a date → epoch seconds; else null. */
export function parseSince(text: string): number | null {
  if (/^[0-9]{1,12}(\.[0-9]{1,9})?$/.test(text)) return Number(text);
  if (
    !/^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?$/.test(
      text,
    )
  )
    return null;
  const ms = Date.parse(text);
  if (!Number.isFinite(ms) || ms < 0) return null;
  return ms / 1000;
}

export async function events(p: Parsed): Promise<number> {
  const c = await networkForReading(p);
  const token = await memberToken(c).catch(() => null);
  const follow = flagBool(p, 'follow');
  const json = flagBool(p, 'json');
  // Following needs no history dump: the newest few give the context, as the status page does.
  const start = eventsStart(p) ?? (follow && !p.flags.has('after') ? `tail=${FOLLOW_TAIL}` : null);
  let after = flagNumber(p, 'after') ?? 0;
  const only = eventFilter(flagString(p, 'event'));
  // The first page may be the tail or a time; every later page continues after the last id.
  let query = start ?? `after=${after}&limit=1000`;
  let stop = false;
  if (follow) {
    process.once('SIGINT', () => (stop = true));
    process.once('SIGTERM', () => (stop = true));
  }
  let first = true;
  let triedStream = false;
  const all: EventRecord[] = [];
  const print = eventPrinter(json, only);
  while (!stop) {
    const r = await arbiter(c, 'GET', `/v1/events?${query}`, undefined, token);
    if (r.kind !== 'answer' || r.status !== 200) {
      const f = failure(r, 'events', c);
      if (!follow || first) {
        reportFailure(f, p);
        return f.code === 1 ? 1 : 3;
      }
      process.stderr.write(`hq ${f.line}; retrying\n`);
      await sleep(1000);
      continue;
    }
    first = false;
    const rows = eventsOf(r.body);
    const wasTail = query.startsWith('tail=');
    for (const e of rows) {
      after = Math.max(after, e.id);
      if (json && !follow) {
        if (only === null || only.has(e.event)) all.push(e);
      } else print(e);
    }
    // --since with nothing after T: follow from the newest event on (never from id 1).
    if (start !== null && rows.length === 0 && !wasTail) after = Math.max(after, await newestId(c, token));
    query = `after=${after}&limit=1000`;
    if (rows.length === 1000 && !wasTail) continue;
    if (!follow) {
      if (json) out(true, { events: all }, '');
      return 0;
    }
    if (!triedStream) {
      // The backlog is printed: follow the arbiter's SSE stream; poll only when it has none.
      triedStream = true;
      const streamed = await followStream(c, token, after, print);
      if (!streamed.unsupported) return streamed.failed === null ? 0 : 3;
      after = Math.max(after, streamed.lastId);
      continue;
    }
    await sleep(1000);
  }
  return 0;
}

/** One event on stdout, as text or a JSON line; events `only` leaves out are not printed. */
function eventPrinter(json: boolean, only: ReadonlySet<string> | null): (e: EventRecord) => void {
  return (e) => {
    if (only !== null && !only.has(e.event)) return;
    if (json) process.stdout.write(`${JSON.stringify(e)}\n`);
    else
      process.stdout.write(
        `${e.id} ${new Date(e.at * 1000).toISOString()} ${e.category} ${e.event} ${e.host ?? '-'} ${JSON.stringify(readableData(e.data))}\n`,
      );
  };
}

/** The id of the arbiter's newest event, 0 when it has none or does not answer. */
async function newestId(c: Resolved, token: string | null): Promise<number> {
  const last = await arbiter(c, 'GET', '/v1/events?tail=1', undefined, token);
  return (last.kind === 'answer' && last.status === 200 ? eventsOf(last.body)[0]?.id : undefined) ?? 0;
}

/** `--follow` after the backlog: the arbiter's event stream until SIGINT/SIGTERM. */
async function followStream(
  c: Resolved,
  token: string | null,
  after: number,
  print: (e: EventRecord) => void,
): Promise<FollowResult> {
  const { followEvents } = await import('./events-follow.js');
  const ac = new AbortController();
  const abort = (): void => ac.abort();
  process.once('SIGINT', abort);
  process.once('SIGTERM', abort);
  return followEvents({
    url: c.arbiterUrl,
    token,
    after,
    signal: ac.signal,
    onEvent: print,
    onProblem: (line) => process.stderr.write(`hq: ${line}; retrying\n`),
  });
}

export async function maintenance(p: Parsed): Promise<number> {
  const c = await network(p);
  const token = await adminToken(c, p);
  const enabled = p.positionals[0] === 'on';
  const reason = flagString(p, 'reason');
  const body: { [k: string]: unknown } = { enabled };
  if (reason !== undefined) body['reason'] = reason;
  const r = await arbiter(c, 'PUT', '/v1/maintenance', body, token);
  if (r.kind === 'answer' && r.status === 200) {
    out(flagBool(p, 'json'), r.body, `maintenance ${enabled ? 'on' : 'off'}`);
    return 0;
  }
  const f = failure(r, 'maintenance', c);
  reportFailure(f, p);
  return f.code;
}

export async function leaseAcceptGeneration(p: Parsed): Promise<number> {
  const text = p.positionals[0] as string;
  const generation = /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(generation))
    throw new CliError(2, `G must be a generation, a whole number ≥ 1 (got ${JSON.stringify(text)})`);
  const c = await network(p);
  const token = await adminToken(c, p);
  const r = await arbiter(c, 'POST', '/v1/lease/accept-generation', { generation }, token);
  if (r.kind === 'answer' && r.status === 200) {
    const b = fieldsOf(r.body);
    out(
      flagBool(p, 'json'),
      r.body,
      b.floor === b.was
        ? `nothing to accept: the floor is ${String(b.floor ?? '?')} already`
        : `accepted: the floor is ${String(b.floor ?? '?')} (was ${String(b.was ?? '?')}); reports up to it are taken`,
    );
    return 0;
  }
  const f = failure(r, 'lease accept', c);
  if (flagBool(p, 'json') && r.kind === 'answer') out(true, r.body, '');
  reportFailure(f, p);
  return f.code;
}

/** `clock` (epoch ms) measures `--wait`, as in `leaseAcquire`. */
export async function failover(p: Parsed, clock: MsClock = sleepSafeClockMs()): Promise<number> {
  const c = await network(p);
  const to = flagString(p, 'to') as string;
  if (!isHost(to)) throw new CliError(2, `--to: "${to}" is not a host name`);
  const wait = flagNumber(p, 'wait') ?? 0;
  if (!(wait >= 0) || !Number.isFinite(wait))
    throw new CliError(2, `--wait must be a number of seconds ≥ 0 (got ${wait})`);
  const token = await adminToken(c, p);
  const json = flagBool(p, 'json');
  const started = clock.now();
  const r = await arbiter(c, 'POST', '/v1/lease/transfer', flagBool(p, 'force') ? { to, force: true } : { to }, token);
  if (r.kind !== 'answer' || r.status !== 200) {
    const f = failure(r, 'failover', c);
    if (json && r.kind === 'answer') out(true, r.body, '');
    reportFailure(f, p);
    return f.code;
  }
  const granted = fieldsOf(r.body).lease;
  const refused = agentRefuses(granted);
  if (refused !== null)
    throw new CliError(
      1,
      `the arbiter answered a record no agent runs on (${refused}); ${to} will not run; see hq doctor`,
    );
  const generation = generationField(granted, 'generation') ?? 0;
  if (wait === 0) {
    out(json, r.body, `transferred to ${to} at generation ${generation || '?'}`);
    return 0;
  }
  if (!json)
    process.stdout.write(
      `transferred to ${to} at generation ${generation || '?'}; waiting up to ${wait} s until it may run\n`,
    );
  const w = await waitUntilRuns(c, clock, token, to, generation, started, wait, json, 'failover');
  if (json) out(true, { ok: w.code === 0, lease: w.lease, ...w.result }, '');
  else (w.code === 0 ? process.stdout : process.stderr).write(`${w.code === 0 ? '' : 'hq failover: '}${w.line}\n`);
  return w.code;
}

interface Waited {
  readonly code: number;
  readonly line: string;
  readonly lease: LeaseRecord | null;
  readonly result: {
    readonly to: string;
    readonly generation: number;
    readonly mayRun: boolean;
    readonly acknowledged: boolean;
    readonly savedSeconds: number | null;
    readonly waitedSeconds: number;
  };
}

/**
 * `hq failover --wait` and `hq lease release --handover-to H --wait`: reads the record until `to`
 * may run at `generation` (no wait of the record holds it any more), printing which wait holds it,
 * until when and why, whenever that changes. 0 when it may run, 1 when the wait ran out or the lease moved on, 3 when the arbiter
 * stopped answering.
 */
async function waitUntilRuns(
  c: Resolved,
  clock: MsClock,
  token: string | null,
  to: string,
  generation: number,
  started: number,
  wait: number,
  json: boolean,
  command: string,
): Promise<Waited> {
  const deadline = started + wait * 1000;
  const waited = (): number => Math.round((clock.now() - started) / 100) / 10;
  let said = '';
  let last: LeaseRecord | null = null;
  const result = (mayRun: boolean, rec: LeaseRecord | null): Waited['result'] => {
    const d = rec?.displaced ?? null;
    const acknowledged = d !== null && d.acknowledgedAt !== null;
    return {
      to,
      generation,
      mayRun,
      acknowledged,
      savedSeconds: acknowledged ? d.savedSeconds : null,
      waitedSeconds: waited(),
    };
  };
  for (;;) {
    const r = await arbiter(c, 'GET', '/v1/lease', undefined, token);
    if (r.kind === 'answer' && r.status === 200) {
      const rec = r.body as LeaseRecord;
      last = rec;
      const read = readingOf(rec, to, generation, command, waited());
      if (read.done) return { code: read.code, line: read.line, lease: rec, result: result(read.code === 0, rec) };
      if (!json && read.text !== said) {
        said = read.text;
        process.stdout.write(`${read.line}\n`);
      }
    } else if (clock.now() + 1000 > deadline) {
      const f = failure(r, `${command} --wait`, c);
      return {
        code: f.code,
        line: f.line.replace(`${command} --wait: `, ''),
        lease: last,
        result: result(false, last),
      };
    }
    if (clock.now() >= deadline) {
      const still = last === null ? null : waitNote(last);
      return {
        code: 1,
        line: `${to} may not run yet after ${waited()} s${still === null ? '' : `: ${still.text}`}`,
        lease: last,
        result: result(false, last),
      };
    }
    await sleep(Math.min(WAIT_POLL_MS, Math.max(0, deadline - clock.now())));
  }
}

/**
 * One reading of the record during `--wait`: the wait is over (the lease moved on or `to`'s agent
 * refuses the record: 1; `to` may run: 0), or which wait holds `to`, until when and why.
 */
function readingOf(
  rec: LeaseRecord,
  to: string,
  generation: number,
  command: string,
  waited: number,
): { done: true; code: number; line: string } | { done: false; text: string; line: string } {
  if (rec.holder !== to || rec.generation !== generation)
    return {
      done: true,
      code: 1,
      line: `the lease moved on: ${rec.holder ?? 'nobody'} holds generation ${rec.generation} (${waited} s)`,
    };
  // An arbiter of hq 0.1 sends no displaced.
  const d = rec.displaced ?? null;
  const wait = waitNote(rec);
  const refused = agentRefuses(rec);
  if (refused !== null)
    return { done: true, code: 1, line: `${to} will not run: its agent refuses the record (${refused}) (${waited} s)` };
  if (wait === null) {
    // A handover carries no lock-delay of the old holder: it stepped down before it asked.
    const how =
      d !== null && d.acknowledgedAt !== null
        ? `${d.host} acknowledged its step-down from generation ${d.generation} (${(d.savedSeconds ?? 0).toFixed(1)} s of lock-delay saved)`
        : command === 'lease release'
          ? `${d?.host ?? 'the old holder'} stepped down before it handed over: no lock-delay to wait for`
          : d !== null
            ? `the lock-delay ran out (${d.host} did not acknowledge its step-down)`
            : 'no lock-delay to wait for';
    return { done: true, code: 0, line: `${to} may run at generation ${generation} after ${waited} s: ${how}` };
  }
  return {
    done: false,
    text: wait.text,
    line: `waiting: ${wait.left === null ? '' : `${fmtAge(wait.left)} left: `}${wait.text}`,
  };
}

/** How often `failover --wait` reads the record. */
const WAIT_POLL_MS = 250;
