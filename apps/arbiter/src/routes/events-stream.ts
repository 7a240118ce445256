/**
 * `GET /v1/events/stream?after=ID` — the event log as Server-Sent Events, for `hq events
 * --follow`, `curl -N` and a browser's `EventSource`.
 *
 * Why SSE and not a long-poll: one request per follower instead of one per batch, resumption is
 * built into the format (`id:` on every event; a reconnecting client sends `Last-Event-ID`), and
 * the rows are exactly those of `GET /v1/events` (one JSON object per `data:` line).
 *
 * How it wakes up: the arbiter calls `EventWaiters.notify()` after it commits events (see the
 * wiring note in the report / docs); every open stream then reads the rows after its last id
 * from the store. A slow poll (`pollMs`, default 1 s) backs that up, so an event appended by
 * any path — or before `notify` is wired — still reaches every stream within a second.
 * `EventWaiters.wait()` serves a long-poll too (`GET /v1/events?after=ID&wait=S`) if that is
 * ever wanted: it resolves on the next notify or at the timeout.
 *
 * Streams end on app close (`preClose`), on client disconnect, and never block a decision.
 * Comment lines (`: keep-alive`) are sent every `keepAliveMs` (on the arbiter's clock, looked at
 * on each wake-up) so neither the arbiter's idle socket timeout nor a proxy closes a quiet stream.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { ERRORS, STREAM_ERRORS } from '@hq/protocol';
import { ErrorBody, EventStreamQuery, EventStreamText } from '../schemas/generated.js';
import { HttpError } from '@hq/runtime/refusal';
import type { EventRow } from '../store/store.js';
import type { Awaitable } from '../awaitable.js';
import { realTimers, type Timers } from '@hq/runtime/clock';

/** Rows read per store query while catching up. */
const PAGE = 500;

/** One waiter list per arbiter. `notify` is cheap and synchronous: call it after every commit. */
export class EventWaiters {
  private readonly waiting = new Set<() => void>();
  private lastNotified = 0;

  /** `timers`: the waits' timeouts (default real timers). */
  constructor(private readonly timers: Timers = realTimers) {}

  /** Wakes every waiter. `rows` (optional) only records the highest id seen, for tests. */
  notify(rows?: readonly EventRow[]): void {
    if (rows !== undefined) for (const r of rows) this.lastNotified = Math.max(this.lastNotified, r.id);
    if ((rows !== undefined && rows.length === 0) || this.waiting.size === 0) return;
    const all = [...this.waiting];
    this.waiting.clear();
    for (const wake of all) wake();
  }

  /** The highest event id passed to `notify` (0 when none). */
  get lastId(): number {
    return this.lastNotified;
  }

  /** How many waiters are parked (streams between reads, long-polls). */
  get size(): number {
    return this.waiting.size;
  }

  /**
   * Resolves `true` on the next `notify`, `false` after `timeoutMs` or when `signal` aborts.
   * Never rejects.
   */
  wait(timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (woken: boolean): void => {
        if (done) return;
        done = true;
        this.timers.clear(timer);
        this.waiting.delete(wake);
        signal?.removeEventListener('abort', abort);
        resolve(woken);
      };
      const wake = (): void => finish(true);
      const abort = (): void => finish(false);
      const timer = this.timers.set(() => finish(false), Math.max(0, timeoutMs));
      if (signal?.aborted === true) return finish(false);
      signal?.addEventListener('abort', abort, { once: true });
      this.waiting.add(wake);
    });
  }
}

export interface EventStreamOptions {
  /** The store's `listEvents(after, limit)`: ascending ids above `after`. */
  readonly listEvents: (after: number, limit: number) => Awaitable<readonly EventRow[]>;
  /** The store's `tailAfter(n)`: where a stream without `after` or Last-Event-ID starts. */
  readonly tailAfter: (n: number) => Awaitable<number>;
  /** Woken by the arbiter after each commit. */
  readonly waiters: EventWaiters;
  /** Backup poll when no notify comes. Default 1000 ms. */
  readonly pollMs?: number;
  /** Comment line interval. Must stay below the app's `connectionTimeout` (30 s). Default 15000 ms. */
  readonly keepAliveMs?: number;
  /**
   * The arbiter's clock in epoch ms (`() => arbiter.now() * 1000`): what decides a keep-alive is
   * due. The wake-ups that look stay real timers (`pollMs`).
   */
  readonly nowMs: () => number;
  /** Streams open at once; one more gets 503. Default 64 (an operator's phone, a CLI or two). */
  readonly maxStreams?: number;
}

/**
 * A stream opened without `after` and without Last-Event-ID starts with the newest STREAM_TAIL
 * events (context for a fresh dashboard), not the whole history; `after=0` asks for all of it.
 */
export const STREAM_TAIL = 20;

/** One SSE frame: `id`, `event: hq`, the row as one JSON line (JSON never contains a raw newline). */
export function sseFrame(e: EventRow): string {
  return `id: ${e.id}\nevent: hq\ndata: ${JSON.stringify({ id: e.id, at: e.at, category: e.category, event: e.event, host: e.host, data: e.data })}\n\n`;
}

function startId(
  query: string | undefined,
  lastEventId: string | string[] | undefined,
  tail: () => Awaitable<number>,
): Awaitable<number> {
  const raw = typeof lastEventId === 'string' && /^[0-9]{1,16}$/.test(lastEventId.trim()) ? lastEventId.trim() : query;
  if (raw === undefined) return tail();
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new HttpError(ERRORS.BAD_REQUEST, 'after must be a safe integer ≥ 0');
  return n;
}

export const eventStreamRoutes: FastifyPluginAsyncTypebox<EventStreamOptions> = async (app, opts) => {
  const pollMs = opts.pollMs ?? 1000;
  const keepAliveMs = opts.keepAliveMs ?? 15_000;
  const maxStreams = opts.maxStreams ?? 64;
  const open = new Set<AbortController>();

  app.addHook('preClose', async () => {
    for (const c of open) c.abort();
  });

  app.get(
    '/v1/events/stream',
    {
      config: { scope: 'read' },
      schema: {
        description:
          'The event log as Server-Sent Events (text/event-stream): every row after `after` (or the Last-Event-ID header; with neither, the newest 20), then each new one as it is committed; `: keep-alive` comments in between.',
        querystring: EventStreamQuery,
        response: { 200: EventStreamText, 400: ErrorBody, 401: ErrorBody, 503: ErrorBody },
      },
    },
    async (req, reply) => {
      let after = await startId(req.query.after, req.headers['last-event-id'], () => opts.tailAfter(STREAM_TAIL));
      if (open.size >= maxStreams) {
        throw new HttpError(STREAM_ERRORS.TOO_MANY_STREAMS);
      }
      const ctl = new AbortController();
      open.add(ctl);
      const raw = reply.raw;
      reply.hijack();
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      // Tells EventSource how long to wait before reconnecting.
      raw.write(`retry: ${Math.max(1000, pollMs)}\n\n`);
      const end = (): void => ctl.abort();
      raw.on('close', end);
      raw.on('error', end);
      let lastWrite = opts.nowMs();
      try {
        while (!ctl.signal.aborted) {
          let rows = await opts.listEvents(after, PAGE);
          while (rows.length > 0 && !ctl.signal.aborted) {
            const ok = write(raw, rows.map(sseFrame).join(''));
            after = (rows[rows.length - 1] as EventRow).id;
            lastWrite = opts.nowMs();
            if (!ok) await drained(raw, ctl.signal);
            rows = rows.length === PAGE ? await opts.listEvents(after, PAGE) : [];
          }
          if (ctl.signal.aborted) break;
          if (opts.nowMs() - lastWrite >= keepAliveMs) {
            write(raw, ': keep-alive\n\n');
            lastWrite = opts.nowMs();
          }
          await opts.waiters.wait(Math.min(pollMs, keepAliveMs), ctl.signal);
        }
      } catch (err) {
        req.log.warn({ err }, 'event stream failed');
      } finally {
        open.delete(ctl);
        raw.off('close', end);
        if (!raw.writableEnded) raw.end();
      }
    },
  );
};

function write(raw: FastifyReply['raw'], text: string): boolean {
  if (raw.writableEnded || raw.destroyed) return true;
  return raw.write(text);
}

function drained(raw: FastifyReply['raw'], signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      raw.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    raw.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
