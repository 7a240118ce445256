/**
 * `hq fence run --follow` — a service that follows HQ: one follower on each candidate keeps
 * exactly one copy of CMD running fleet-wide.
 *
 *  1. Wait until this host may run the role: a long poll on the agent's fence naming the
 *     decision last seen, so the agent answers when it changes (no polling). An agent that does
 *     not answer (restarting, not yet up) is asked again after a back-off; the wait goes on.
 *  2. Run CMD exactly as `hq fence run` does (`superviseFence`: its own process group, the
 *     HQ_* environment, re-checks, SIGTERM then SIGKILL before the validity ends, registration
 *     with the agent), with the long poll as a second, faster way to learn of a loss.
 *  3. CMD stopped on a loss, or skipped: back to 1. CMD ended by itself: per `restart`
 *     (`on-failure`: a non-zero code; `always`; `never`) it starts again after a back-off that
 *     doubles up to a bound and starts over after a healthy run; else the follower exits with
 *     CMD's code.
 *  4. `stop` aborted (SIGTERM/SIGINT): CMD is stopped as on a loss and the follower ends, 0.
 *
 * Timers come from `timers`, times from `clock` (seconds): tests drive both.
 */
import type { FenceDecision, FenceSeen } from '@hq/protocol/fence';
import type { SecondsClock, Timers } from '@hq/runtime/clock';
import type { FenceQueryResult, SupervisorOutcome } from './fence-run.js';

export const RESTART_POLICIES = Object.freeze(['on-failure', 'always', 'never'] as const);
export type RestartPolicy = (typeof RESTART_POLICIES)[number];

export interface Backoff {
  /** The first delay before CMD starts again. */
  readonly initialSeconds: number;
  /** The delay doubles up to this. */
  readonly maxSeconds: number;
  /** A run at least this long starts the delay over at `initialSeconds`. */
  readonly healthySeconds: number;
}

export const RESTART_BACKOFF: Backoff = Object.freeze({ initialSeconds: 1, maxSeconds: 30, healthySeconds: 60 });
/** How long one long poll waits at most before it is asked again. */
export const FOLLOW_WAIT_SECONDS = 30;
/** How soon an agent that did not answer is asked again (doubling up to the bound). */
const UNREACHABLE_FIRST = 0.5;
const UNREACHABLE_MAX = 5;
/** After a skip with the fence saying run (a registration refused): never ask faster than this. */
const SKIP_PAUSE = 1;

export interface FollowOptions {
  readonly role: string;
  readonly restart: RestartPolicy;
  /** The long poll: the first answer differing from `seen` (at once when `seen` is null), or after `waitSeconds`. */
  readonly wait: (seen: FenceSeen | null, waitSeconds: number) => Promise<FenceQueryResult>;
  /** One supervision of CMD as `hq fence run` does it; `stop` ends it as a loss would. */
  readonly supervise: (stop: AbortSignal) => Promise<SupervisorOutcome>;
  readonly log: (event: string, data: { [k: string]: unknown }) => void;
  /** Seconds, never going back (the back-off's healthy run is measured on it). */
  readonly clock: SecondsClock;
  readonly timers: Timers;
  /** Aborted: stop CMD and end. */
  readonly stop: AbortSignal;
  readonly backoff?: Backoff;
  readonly waitSeconds?: number;
}

export type FollowOutcome =
  | { readonly kind: 'exit'; readonly code: number }
  | { readonly kind: 'bad-role'; readonly message: string };

const seenOf = (f: FenceDecision): FenceSeen => ({ run: f.run, reason: f.reason, generation: f.generation });

export async function followFence(o: FollowOptions): Promise<FollowOutcome> {
  const backoff = o.backoff ?? RESTART_BACKOFF;
  const waitSeconds = o.waitSeconds ?? FOLLOW_WAIT_SECONDS;
  /** Resolves after `seconds`, or at once when `stop` is aborted. */
  const sleep = (seconds: number): Promise<void> =>
    new Promise((done) => {
      const finish = (): void => {
        o.timers.clear(h);
        o.stop.removeEventListener('abort', finish);
        done();
      };
      const h = o.timers.set(finish, seconds * 1000);
      o.stop.addEventListener('abort', finish, { once: true });
    });
  const stopped = new Promise<null>((done) =>
    o.stop.aborted ? done(null) : o.stop.addEventListener('abort', () => done(null), { once: true }),
  );
  let seen: FenceSeen | null = null;
  let unreachable = UNREACHABLE_FIRST;
  let restartIn = backoff.initialSeconds;
  let saidWaiting = false;
  while (!o.stop.aborted) {
    // 1. Until this host may run the role.
    const r = await Promise.race([o.wait(seen, seen === null ? 0 : waitSeconds), stopped]);
    if (r === null || o.stop.aborted) break;
    if (r.kind === 'bad-role') return { kind: 'bad-role', message: r.message };
    if (r.kind === 'unreachable') {
      if (seen !== null || unreachable === UNREACHABLE_FIRST)
        o.log('waiting', { role: o.role, reason: 'agent-unreachable', problem: r.problem });
      seen = null;
      await sleep(unreachable);
      unreachable = Math.min(UNREACHABLE_MAX, unreachable * 2);
      continue;
    }
    unreachable = UNREACHABLE_FIRST;
    seen = seenOf(r.fence);
    if (!r.fence.run) {
      if (!saidWaiting)
        o.log('waiting', {
          role: o.role,
          reason: r.fence.reason,
          generation: r.fence.generation,
          holder: r.fence.holder,
        });
      saidWaiting = true;
      continue;
    }
    saidWaiting = false;
    // 2. CMD, supervised as `hq fence run` does it.
    const started = o.clock.now();
    const out = await o.supervise(o.stop);
    if (out.kind === 'bad-role') return out;
    if (o.stop.aborted || out.end === 'stopped') break;
    // 3. Why it is not running, and what comes next.
    if (out.end === 'skipped') {
      seen = out.fence === undefined ? null : seenOf(out.fence);
      await sleep(SKIP_PAUSE);
      continue;
    }
    if (out.end === 'lost') {
      // Ask afresh: the decision may be run again already (an agent back with the same tenure).
      seen = null;
      continue;
    }
    if (o.restart === 'never' || (o.restart === 'on-failure' && out.code === 0)) {
      o.log('exited', { role: o.role, code: out.code, restart: o.restart });
      return { kind: 'exit', code: out.code };
    }
    if (o.clock.now() - started >= backoff.healthySeconds) restartIn = backoff.initialSeconds;
    o.log('restarting', { role: o.role, code: out.code, restart: o.restart, inSeconds: restartIn });
    await sleep(restartIn);
    restartIn = Math.min(backoff.maxSeconds, restartIn * 2);
    seen = null;
  }
  o.log('follower-stopped', { role: o.role });
  return { kind: 'exit', code: 0 };
}
