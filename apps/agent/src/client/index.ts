/**
 * `@hq/agent/client` — the fence for Node programs that fence themselves (a poller, a loop),
 * over the local agent's unix socket, with no third-party dependency:
 *
 *  - `fence(role)`: one decision, for a script (`{run: false, reason: 'agent-unreachable'}`
 *    when the agent does not answer);
 *  - `tenures(role)`: each stretch of time this host may run the role, as
 *    `{generation, holder, signal}`. `signal` aborts when the agent says the host lost the role
 *    AND, whatever the agent says or does not say, `stopBeforeSeconds` before the validity of
 *    its last answer ends (measured from when that answer was asked for, on a clock a sleep or
 *    a clock jump can only make early). The program stops its work when it aborts, and stamps
 *    `generation` into its writes so a store can refuse a stale one.
 *
 * Between answers it waits on the agent's long poll (the agent answers when its decision
 * changes), so waiting costs nothing; every validity comes from a plain query stamped at its send.
 * Time and timers are parameters: tests drive them.
 */
import {
  AGENT_UNREACHABLE,
  fenceWaitPath,
  isFenceDecision,
  type FenceDecision,
  type FenceSeen,
  type FenceUnanswered,
} from '@hq/protocol/fence';
import { pause, realTimers, sleepSafeClockMs, type MsClock, type Timers } from '@hq/runtime/clock';
import { callAgent, lightPaths } from '../cli/local.js';

export type { FenceDecision, FenceUnanswered };

/** One answer of the agent: its status and parsed body, or null when it did not answer (or `signal` aborted). */
export type Transport = (
  path: string,
  timeoutSeconds: number,
  signal?: AbortSignal,
) => Promise<{ readonly status: number; readonly body: unknown } | null>;

export interface ClientOptions {
  /** The agent's socket. Default: the config's (`$HQ_CONFIG`, ~/.hq/agent.json, /etc/hq/agent.json), else ~/.hq/agent.sock. */
  readonly socketPath?: string;
  /** The agent's config file, for its socket path. */
  readonly config?: string;
  /** Seconds a plain query may take. Default 2. */
  readonly requestTimeoutSeconds?: number;
  /** Epoch milliseconds that never run slow (default: the sleep-safe clock). */
  readonly clock?: MsClock;
  readonly timers?: Timers;
  /** Replaces the socket (tests). */
  readonly transport?: Transport;
}

export interface TenureOptions extends ClientOptions {
  /** `signal` aborts this long before the validity ends. Default 1 s. */
  readonly stopBeforeSeconds?: number;
  /** The longest long poll. Default 30 s. */
  readonly waitSeconds?: number;
  /** Aborted: no further tenure (the current one's `signal` aborts too). */
  readonly signal?: AbortSignal;
}

/** A stretch of time this host may run the role. */
export interface Tenure {
  /** The lease generation: stamp it into every write (the fencing token). */
  readonly generation: number;
  readonly holder: string | null;
  /** Aborts on loss and before the validity ends; `reason` says which. */
  readonly signal: AbortSignal;
}

/** Why a tenure's signal aborted (its `signal.reason`). */
export class TenureEnded extends Error {
  override name = 'TenureEnded';
  constructor(
    readonly why: 'lost' | 'validity' | 'ended',
    message: string,
  ) {
    super(message);
  }
}

const MIN_GAP_SECONDS = 0.2;
const UNREACHABLE_MAX_SECONDS = 5;

function transportOf(o: ClientOptions): Transport {
  if (o.transport !== undefined) return o.transport;
  const socket = o.socketPath ?? lightPaths(o.config).socketPath;
  return async (path, timeout, signal) => {
    const r = await callAgent(socket, 'GET', path, timeout, undefined, signal);
    return r.kind === 'answer' ? { status: r.status, body: r.body } : null;
  };
}

const plainPath = (role: string): string => `/v1/fence?role=${encodeURIComponent(role)}`;

/** Thrown for a role the agent does not know (its 400): a mistake to fix, not a state to wait out. */
export class UnknownRole extends Error {
  override name = 'UnknownRole';
}

async function ask(t: Transport, path: string, timeout: number, signal?: AbortSignal): Promise<FenceDecision | null> {
  const r = await t(path, timeout, signal);
  if (r === null) return null;
  if (r.status === 400) {
    const m = (r.body as { message?: unknown } | null)?.message;
    throw new UnknownRole(typeof m === 'string' ? m : 'the agent refused the query');
  }
  return r.status === 200 && isFenceDecision(r.body) ? r.body : null;
}

/** One decision for `role` now. */
export async function fence(role: string, o: ClientOptions = {}): Promise<FenceDecision | FenceUnanswered> {
  const d = await ask(transportOf(o), plainPath(role), o.requestTimeoutSeconds ?? 2);
  return d ?? { run: false, reason: AGENT_UNREACHABLE, generation: null, holder: null, role, validForSeconds: null };
}

/**
 * Each tenure of `role` on this host, one at a time: the next comes once the program's loop
 * body for the last one returned (and its signal aborted) and this host may run the role again
 * — at once when it still may (a body that returns early is started again; `break` ends it).
 */
export async function* tenures(role: string, o: TenureOptions = {}): AsyncGenerator<Tenure, void, undefined> {
  const transport = transportOf(o);
  const clock = o.clock ?? sleepSafeClockMs();
  const timers = o.timers ?? realTimers;
  const timeout = o.requestTimeoutSeconds ?? 2;
  const stopBefore = o.stopBeforeSeconds ?? 1;
  const maxWait = o.waitSeconds ?? 30;
  const outer = o.signal;
  const sleep = (seconds: number): Promise<void> => pause(timers, seconds * 1000, outer);
  const seenOf = (d: FenceDecision): FenceSeen => ({ run: d.run, reason: d.reason, generation: d.generation });
  let seen: FenceSeen | null = null;
  let retry = MIN_GAP_SECONDS;
  const stopped = (): boolean => outer?.aborted === true;
  while (!stopped()) {
    // Until this host may run the role: a long poll, then a plain query to stamp the validity.
    if (seen !== null) {
      const w = await ask(transport, fenceWaitPath(role, seen, maxWait), maxWait + timeout, outer);
      if (stopped()) break;
      if (w === null) {
        await sleep(retry);
        retry = Math.min(UNREACHABLE_MAX_SECONDS, retry * 2);
        seen = null;
        continue;
      }
      if (!w.run) {
        seen = seenOf(w);
        continue;
      }
    }
    const asked = clock.now();
    const a = await ask(transport, plainPath(role), timeout);
    if (a === null) {
      await sleep(retry);
      retry = Math.min(UNREACHABLE_MAX_SECONDS, retry * 2);
      continue;
    }
    retry = MIN_GAP_SECONDS;
    seen = seenOf(a);
    if (!a.run) continue;
    const tenure = holdTenure(a, asked, { transport, clock, timers, timeout, stopBefore, maxWait, role });
    const stopOuter = (): void => tenure.end(new TenureEnded('ended', 'the tenures were stopped'));
    outer?.addEventListener('abort', stopOuter, { once: true });
    try {
      yield tenure.tenure;
    } finally {
      outer?.removeEventListener('abort', stopOuter);
      tenure.end(new TenureEnded('ended', 'the loop body returned'));
    }
  }
}

interface Hold {
  readonly transport: Transport;
  readonly clock: MsClock;
  readonly timers: Timers;
  readonly timeout: number;
  readonly stopBefore: number;
  readonly maxWait: number;
  readonly role: string;
}

/**
 * One tenure from the answer `a` asked for at `asked` (ms): the abort at the validity's end minus
 * `stopBefore`, moved later only by a plain query that names the same generation and holder;
 * a long poll in between wakes it early for a loss.
 */
function holdTenure(
  a: FenceDecision,
  asked: number,
  h: Hold,
): { readonly tenure: Tenure; end(reason: TenureEnded): void } {
  const ctl = new AbortController();
  let until = a.validForSeconds === null ? Infinity : asked + a.validForSeconds * 1000;
  let timer: unknown = null;
  const end = (reason: TenureEnded): void => {
    if (timer !== null) h.timers.clear(timer);
    timer = null;
    if (!ctl.signal.aborted) ctl.abort(reason);
  };
  const arm = (): void => {
    if (timer !== null) h.timers.clear(timer);
    timer = null;
    if (!Number.isFinite(until)) return;
    const ms = until - h.stopBefore * 1000 - h.clock.now();
    const fire = (): void => end(new TenureEnded('validity', `the validity of generation ${a.generation} ends`));
    if (ms <= 0) fire();
    else timer = h.timers.set(fire, ms);
  };
  arm();
  const rest = (seconds: number): Promise<void> => pause(h.timers, seconds * 1000, ctl.signal);
  void (async () => {
    let last: FenceSeen = { run: a.run, reason: a.reason, generation: a.generation };
    while (!ctl.signal.aborted) {
      // Wake no later than a re-check must be sent to land before the abort.
      const room = (until - h.clock.now()) / 1000 - h.stopBefore - h.timeout - MIN_GAP_SECONDS;
      const wait = Math.min(h.maxWait, Math.max(0, room));
      if (wait > 0) {
        // A long poll that fails (an agent restarting, or one without long polls) is waited out
        // instead: the re-check then comes on its schedule, never in a tight loop.
        const w = await ask(h.transport, fenceWaitPath(h.role, last, wait), wait + h.timeout, ctl.signal).catch(
          () => null,
        );
        if (w === null) await rest(wait);
      } else await rest(MIN_GAP_SECONDS);
      if (ctl.signal.aborted) return;
      const at = h.clock.now();
      const b = await ask(h.transport, plainPath(h.role), h.timeout).catch(() => null);
      if (ctl.signal.aborted) return;
      if (b === null) {
        await rest(MIN_GAP_SECONDS);
        continue; // the abort timer ends it if no answer comes in time
      }
      if (!b.run || b.generation !== a.generation || b.holder !== a.holder) {
        return end(
          new TenureEnded(
            'lost',
            `role ${h.role} lost: ${b.reason}, generation ${b.generation}, holder ${b.holder ?? 'none'}`,
          ),
        );
      }
      last = { run: b.run, reason: b.reason, generation: b.generation };
      const next = b.validForSeconds === null ? Infinity : at + b.validForSeconds * 1000;
      if (next > until) {
        until = next;
        arm();
      }
    }
  })();
  return { tenure: { generation: a.generation, holder: a.holder, signal: ctl.signal }, end };
}
