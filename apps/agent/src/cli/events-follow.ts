/**
 * The client side of `GET /v1/events/stream` (Server-Sent Events) for `hq events --follow`:
 * reads frames as they arrive, hands each event row to `onEvent`, and on a dropped connection
 * reconnects after `retryMs` from the last id it saw (so no event is lost or printed twice).
 * A stream that stays silent longer than `idleMs` (the arbiter sends a keep-alive comment every
 * 15 s) counts as dropped. Ends when `signal` aborts; resolves with the last id seen.
 *
 * Wiring, in lease.ts `events()` when `--follow` is given (after printing the backlog):
 *     await followEvents({ url: c.arbiterUrl, token, after, signal, onEvent: print, onProblem: (l) => process.stderr.write(`hq: ${l}; retrying\n`) });
 * An arbiter without the stream (404) makes `followEvents` return `{ unsupported: true }`;
 * fall back to the polling loop then.
 */
import { request } from 'undici';
import { PROTOCOL_HEADER, PROTOCOL_VERSION } from '@hq/protocol/version';
import { fieldsOf } from '@hq/protocol/answer';
import { isEventRecord, type EventRecord } from '@hq/protocol';
import { joinUrl } from '@hq/runtime/http';

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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export async function followEvents(o: FollowOptions): Promise<FollowResult> {
  const retryMs = o.retryMs ?? 1000;
  const idleMs = o.idleMs ?? 45_000;
  let lastId = o.after;
  let attempts = 0;
  while (!o.signal.aborted) {
    attempts++;
    const ctl = new AbortController();
    const abort = (): void => ctl.abort();
    o.signal.addEventListener('abort', abort, { once: true });
    let idle: NodeJS.Timeout | null = null;
    const arm = (): void => {
      if (idle !== null) clearTimeout(idle);
      idle = setTimeout(() => ctl.abort(), idleMs);
    };
    let problem: string | null = null;
    let connected = false;
    try {
      arm();
      const headers: Record<string, string> = {
        accept: 'text/event-stream',
        'last-event-id': String(lastId),
        [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
      };
      if (o.token !== null) headers['authorization'] = `Bearer ${o.token}`;
      const res = await request(joinUrl(o.url, `/v1/events/stream?after=${lastId}`), {
        method: 'GET',
        headers,
        signal: ctl.signal,
        headersTimeout: idleMs,
        bodyTimeout: idleMs,
      });
      if (res.statusCode === 404) {
        await res.body.dump();
        return { lastId, unsupported: true, failed: null };
      }
      if (res.statusCode !== 200) {
        const text = await res.body.text().catch(() => '');
        let detail = '';
        try {
          const b = fieldsOf(JSON.parse(text));
          detail = [b.error, b.message].filter((x) => typeof x === 'string').join(': ');
        } catch {
          detail = '';
        }
        problem = `the event stream answered HTTP ${res.statusCode}${detail === '' ? '' : ` (${detail})`}`;
        if (res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 400)
          return { lastId, unsupported: false, failed: problem };
      } else {
        connected = true;
        res.body.setEncoding('utf8');
        let buf = '';
        for await (const chunk of res.body) {
          arm();
          buf = parseFrames(buf + (chunk as string), (f) => {
            let row: unknown;
            try {
              row = JSON.parse(f.data);
            } catch {
              return;
            }
            if (isEventRecord(row) && row.id > lastId) {
              lastId = row.id;
              o.onEvent(row);
            }
          });
        }
        problem = 'the event stream ended';
      }
    } catch (err) {
      if (o.signal.aborted) break;
      const e = err as { code?: string; message?: string };
      problem = `the event stream failed (${e.code ?? e.message ?? 'error'})`;
    } finally {
      if (idle !== null) clearTimeout(idle);
      o.signal.removeEventListener('abort', abort);
    }
    if (o.signal.aborted) break;
    if (!connected && attempts === 1 && o.failFast === true) return { lastId, unsupported: false, failed: problem };
    if (problem !== null) o.onProblem?.(problem);
    await sleep(retryMs, o.signal);
  }
  return { lastId, unsupported: false, failed: null };
}
