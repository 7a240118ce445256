/**
 * The client side of `GET /v1/events/stream` (Server-Sent Events) for `hq events --follow`, over
 * the HTTP client's `openStream`: reads frames as they arrive, hands each event row to `onEvent`,
 * and on a dropped connection reconnects after `retryMs` from the last id it saw (so no event is
 * lost or printed twice). A stream that stays silent longer than `idleMs` (the arbiter sends a
 * keep-alive comment every 15 s) counts as dropped. Ends when `signal` aborts; resolves with the
 * last id seen. An arbiter without the stream (404) makes it return `{ unsupported: true }`, and
 * `hq events` polls instead.
 */
import { fieldsOf } from '@hq/protocol/answer';
import { isEventRecord, type EventRecord } from '@hq/protocol';
import { pause, realTimers, type Timers } from '@hq/runtime/clock';
import { joinUrl, openStream, type StreamAnswer } from '@hq/runtime/http';

/** One event of the stream: the protocol's event row. */
export type StreamEvent = EventRecord;

export interface FollowOptions {
  readonly url: string;
  readonly token: string | null;
  /** Start after this id. */
  readonly after: number;
  readonly onEvent: (e: StreamEvent) => void;
  /** Told about each failed attempt (one line), before the retry. */
  readonly onProblem?: (line: string) => void;
  readonly signal: AbortSignal;
  /** Default 1000 ms. */
  readonly retryMs?: number;
  /** Default 45000 ms (three keep-alives). */
  readonly idleMs?: number;
  /** Fail (instead of retrying) when the very first attempt cannot connect. Default false. */
  readonly failFast?: boolean;
  /** The idle and retry timers. Default: the process's own. */
  readonly timers?: Timers;
}

export type FollowResult =
  | { readonly lastId: number; readonly unsupported: false; readonly failed: string | null }
  | { readonly lastId: number; readonly unsupported: true; readonly failed: null };

/** Parses complete SSE frames out of `buffer`; returns the rest. */
export function parseFrames(
  buffer: string,
  each: (frame: { id: string | null; event: string | null; data: string }) => void,
): string {
  const text = buffer.replace(/\r\n?/g, '\n');
  let start = 0;
  for (;;) {
    const end = text.indexOf('\n\n', start);
    if (end === -1) break;
    const block = text.slice(start, end);
    start = end + 2;
    let id: string | null = null;
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0) each({ id, event, data: data.join('\n') });
  }
  return text.slice(start);
}

/** How one connection to the stream ended: `unsupported` (404), `refused` (no use retrying), or `dropped`. */
type Attempt =
  | { readonly kind: 'unsupported' }
  | { readonly kind: 'refused'; readonly problem: string }
  | { readonly kind: 'dropped'; readonly problem: string | null; readonly connected: boolean };

export async function followEvents(o: FollowOptions): Promise<FollowResult> {
  const retryMs = o.retryMs ?? 1000;
  const timers = o.timers ?? realTimers;
  let lastId = o.after;
  let attempts = 0;
  while (!o.signal.aborted) {
    attempts++;
    const a = await attempt(o, lastId, timers, (row) => {
      lastId = row.id;
      o.onEvent(row);
    });
    if (a.kind === 'unsupported') return { lastId, unsupported: true, failed: null };
    if (a.kind === 'refused') return { lastId, unsupported: false, failed: a.problem };
    if (o.signal.aborted) break;
    if (!a.connected && attempts === 1 && o.failFast === true) return { lastId, unsupported: false, failed: a.problem };
    if (a.problem !== null) o.onProblem?.(a.problem);
    await pause(timers, retryMs, o.signal);
  }
  return { lastId, unsupported: false, failed: null };
}

/** One connection to the stream from `after` on: each new event to `onEvent` until it ends or fails. */
async function attempt(
  o: FollowOptions,
  after: number,
  timers: Timers,
  onEvent: (e: StreamEvent) => void,
): Promise<Attempt> {
  let lastId = after;
  let res: StreamAnswer | null = null;
  try {
    res = await openStream({
      url: joinUrl(o.url, `/v1/events/stream?after=${after}`),
      token: o.token,
      headers: { accept: 'text/event-stream', 'last-event-id': String(after) },
      idleSeconds: (o.idleMs ?? 45_000) / 1000,
      signal: o.signal,
      timers,
    });
    if (res.status === 404) {
      res.close();
      return { kind: 'unsupported' };
    }
    if (res.status !== 200) {
      const problem = `the event stream answered HTTP ${res.status}${refusalDetail(await res.text())}`;
      if (res.status === 401 || res.status === 403 || res.status === 400) return { kind: 'refused', problem };
      return { kind: 'dropped', problem, connected: false };
    }
    let buf = '';
    for await (const piece of res.pieces()) {
      buf = parseFrames(buf + piece, (f) => {
        let row: unknown;
        try {
          row = JSON.parse(f.data);
        } catch {
          return;
        }
        if (isEventRecord(row) && row.id > lastId) {
          lastId = row.id;
          onEvent(row);
        }
      });
    }
    return { kind: 'dropped', problem: 'the event stream ended', connected: true };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    const problem = o.signal.aborted ? null : `the event stream failed (${e.code ?? e.message ?? 'error'})`;
    return { kind: 'dropped', problem, connected: res?.status === 200 };
  } finally {
    res?.close();
  }
}

/** ` (HQ_ERR_…: message)` of a refusal's JSON body, or ''. */
function refusalDetail(text: string): string {
  try {
    const b = fieldsOf(JSON.parse(text));
    const detail = [b.error, b.message].filter((x) => typeof x === 'string').join(': ');
    return detail === '' ? '' : ` (${detail})`;
  } catch {
    return '';
  }
}
