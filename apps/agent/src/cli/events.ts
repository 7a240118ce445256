/**
 * `hq events`: the arbiter's event log, a page, a tail or from a time, then `--follow` on its stream.
 * Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import { eventsOf, type EventRecord } from '@hq/protocol';
import { CliError, flagBool, flagNumber, flagString, type Parsed } from './args.js';
import {
  arbiter,
  failure,
  memberToken,
  reportFailure,
  networkForReading,
  out,
  sleep,
  type Resolved,
} from './context.js';
import type { FollowResult } from './events-follow.js';

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

/**
 * `--tail N` / `--since T` → the first page's query (null: from `--after`). At most one of
 * `--after`, `--tail`, `--since`; T is epoch seconds or an ISO 8601 time.
 */
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
