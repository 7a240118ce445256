/**
 * Events leave the arbiter three ways, all after commit: one pino line per event (constant
 * message, the event's fields as fields), the `events` row (written inside the decision's
 * transaction by the store), and hooks for the events an operator must hear about. Hook
 * delivery is fire-and-forget with bounded retries: it never blocks or fails a decision.
 */
import { spawn } from 'node:child_process';
import { unrefTimers, type Timers } from '@hq/runtime/clock';
import { requestJson } from '@hq/runtime/http';
import type { Logger } from 'pino';
import type { EventRow } from './store/store.js';

/** The events that call hooks: promotion, refused renewal, a streak, maintenance, silence, a broken peer path. */
export function wantsHook(e: EventRow): boolean {
  switch (e.event) {
    case 'promoted':
    case 'renew-refused':
    case 'maintenance':
    case 'agent-silent':
    case 'timing-problem':
    case 'peer-path-broken':
      return true;
    case 'arbiter-check':
      return typeof e.data['streak'] === 'number' && e.data['streak'] > 0;
    default:
      return false;
  }
}

export interface HookSettings {
  readonly urls: readonly string[];
  readonly command: readonly string[] | null;
  /** Attempts per target (first try included). */
  readonly attempts?: number;
  /** First retry delay, doubled each time, capped at 30 s. */
  readonly backoffMs?: number;
  /** Per-attempt timeout. */
  readonly timeoutMs?: number;
}

/** At most this many deliveries in flight or waiting; beyond, new ones are dropped and logged. */
const MAX_PENDING = 256;

export class Hooks {
  private pending = 0;
  private closed = false;
  private readonly retries = new Set<unknown>();
  private readonly attempts: number;
  private readonly backoffMs: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly settings: HookSettings,
    private readonly log: Logger,
    /** The retries' waits (default: real timers that never keep the process alive). */
    private readonly timers: Timers = unrefTimers,
  ) {
    this.attempts = settings.attempts ?? 5;
    this.backoffMs = settings.backoffMs ?? 1000;
    this.timeoutMs = settings.timeoutMs ?? 5000;
  }

  get enabled(): boolean {
    return this.settings.urls.length > 0 || this.settings.command !== null;
  }

  deliver(e: EventRow): void {
    if (this.closed || !this.enabled) return;
    const event = { id: e.id, at: e.at, category: e.category, event: e.event, host: e.host, data: e.data };
    for (const url of this.settings.urls) this.schedule(`url ${url}`, () => this.post(url, event), 1);
    const command = this.settings.command;
    if (command !== null) this.schedule(`command ${command[0]}`, () => this.run(command, JSON.stringify(event)), 1);
  }

  private schedule(target: string, attempt: () => Promise<void>, n: number): void {
    if (n === 1) {
      if (this.pending >= MAX_PENDING) {
        this.log.warn({ target }, 'hook dropped');
        return;
      }
      this.pending++;
    }
    attempt().then(
      () => {
        this.pending--;
      },
      (err: unknown) => {
        if (this.closed || n >= this.attempts) {
          this.pending--;
          this.log.warn({ target, attempts: n, err }, 'hook failed');
          return;
        }
        const waitMs = Math.min(30_000, this.backoffMs * 2 ** (n - 1));
        const timer = this.timers.set(() => {
          this.retries.delete(timer);
          this.schedule(target, attempt, n + 1);
        }, waitMs);
        this.retries.add(timer);
      },
    );
  }

  private async post(url: string, event: object): Promise<void> {
    const r = await requestJson({ method: 'POST', url, body: event, timeoutSeconds: this.timeoutMs / 1000 });
    if (r.kind === 'unreachable') throw new Error(`webhook unreachable: ${r.problem}`);
    if (r.status < 200 || r.status >= 300) throw new Error(`webhook answered ${r.status}`);
  }

  private run(argv: readonly string[], body: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(argv[0] as string, argv.slice(1), {
        stdio: ['pipe', 'ignore', 'ignore'],
        shell: false,
        timeout: this.timeoutMs,
      });
      child.on('error', reject);
      child.on('close', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`hook command exited ${code ?? signal}`)),
      );
      child.stdin.on('error', () => undefined);
      child.stdin.end(body);
    });
  }

  /** Stops retries; deliveries already running finish on their own timeouts. */
  close(): void {
    this.closed = true;
    for (const t of this.retries) this.timers.clear(t);
    this.retries.clear();
  }

  /** For tests: how many deliveries are still in flight or waiting for a retry. */
  get inFlight(): number {
    return this.pending;
  }
}

/** Events logged at warn: each says something is wrong that only an operator can fix. */
const LOUD_EVENTS: ReadonlySet<string> = new Set([
  'timing-problem',
  'peer-path-broken',
  'agent-silent',
  'renew-refused',
  'generation-refused',
  'generation-accepted',
]);

export class EventSink {
  constructor(
    private readonly log: Logger,
    private readonly hooks: Hooks | null,
    /** Called once per committed batch (wakes the event stream). */
    private readonly committed: ((rows: readonly EventRow[]) => void) | null = null,
  ) {}

  /** One pino line per committed event, then hooks. Call only after commit. */
  emit(rows: readonly EventRow[]): void {
    for (const e of rows) {
      // Event data first so the fixed fields below cannot be overwritten by it. A problem an
      // operator must act on is a warning, not one more info line.
      const level = LOUD_EVENTS.has(e.event) ? 'warn' : 'info';
      this.log[level](
        { ...e.data, category: e.category, event: e.event, host: e.host, eventId: e.id, at: e.at },
        'hq event',
      );
      if (this.hooks !== null && wantsHook(e)) this.hooks.deliver(e);
    }
    if (rows.length > 0 && this.committed !== null) this.committed(rows);
  }

  /** A log line that is no event row (the failover estimate). */
  say(fields: Record<string, unknown>, msg: string): void {
    this.log.info({ category: 'control', ...fields }, msg);
  }
}
