/**
 * `hq fence run` — the supervisor of a fenced child (S3: a fenced child never outlives its
 * host's validity).
 *
 *  1. Ask the fence; skip (exit 0 or `--skip-exit`) unless it says run.
 *  2. Register the run with the agent — refused, it skips; then spawn CMD directly
 *     (no shell) as the leader of its own process group, with HQ_GENERATION (and its old
 *     name ELANOUS_HQ_GENERATION), HQ_HOLDER, HQ_ROLE, and tell the agent the group; forward TERM/INT/HUP/QUIT to the group (the group
 *     is `@hq/runtime/supervise`'s, shared with `hq port run`). The agent can so end the child
 *     on a step-down even if this supervisor died.
 *  3. Re-check every `recheck` seconds and, in any case, early enough before the validity ends
 *     that SIGTERM + `grace` + SIGKILL all fit inside it. Validity is measured from the moment
 *     the answer was *requested*, with elapsed = max(monotonic, wall) (a sleep or a clock jump
 *     can only shorten it).
 *  4. On loss (run false, another generation or holder, or no answer while the validity runs
 *     out) SIGTERM the group, then SIGKILL it after `grace` — never later than just before the
 *     validity ends. Exit 75 when it stopped the child, else the child's own code (a signal n
 *     → 128 + n). SIGUSR2 (the agent stepping down) makes it re-check at once.
 *  5. Under `hq fence run --follow` (fence-follow.ts): a long poll on the agent (`watch`) makes
 *     it re-check as soon as the decision changes, and `stop` ends CMD as a loss does; the
 *     outcome says why CMD is not running any more, so the follower knows what comes next.
 */
import { AGENT_UNREACHABLE, GENERATION_CHANGED, type FenceDecision, type FenceRunReason } from '@hq/protocol/fence';
import { elapsed, realTimers, stampClock, type Stamp, type Timers } from '@hq/runtime/clock';
import { exitCodeOf, superviseGroup, type ProcessGroup } from '@hq/runtime/supervise';

export type FenceQueryResult =
  | { readonly kind: 'answer'; readonly fence: FenceDecision }
  | { readonly kind: 'unreachable'; readonly problem: string }
  | { readonly kind: 'bad-role'; readonly message: string };

/** The run as registered with the agent: report the child's group, then that it is gone. */
export interface Registered {
  started(pgid: number): Promise<void>;
  done(): Promise<void>;
}

/**
 * The registration's outcome: registered; `unsupported` (an agent without runs — it never
 * acknowledges a step-down either, so nothing depends on it knowing the child); or refused /
 * down, and the supervisor skips (a child the agent does not know of could outlive its step-down).
 */
export type Registration =
  | { readonly kind: 'registered'; readonly run: Registered }
  | { readonly kind: 'unsupported' }
  | { readonly kind: 'refused'; readonly reason: string }
  | { readonly kind: 'unreachable'; readonly problem: string };

export interface SupervisorOptions {
  readonly role: string;
  readonly recheckSeconds: number;
  readonly graceSeconds: number;
  readonly skipExit: number;
  /** The exit when the agent could not be asked (default: skipExit). */
  readonly unreachableExit?: number;
  readonly argv: readonly string[];
  /** One fence query; should give up within `checkTimeoutSeconds`. */
  readonly check: () => Promise<FenceQueryResult>;
  /** Registers the run with the agent before the spawn; absent: no registration (tests). */
  readonly register?: (generation: number) => Promise<Registration>;
  readonly log: (event: string, data: { [k: string]: unknown }) => void;
  readonly env?: NodeJS.ProcessEnv;
  readonly now?: () => Stamp;
  /** The re-check schedule and the kill grace. Default real timers. */
  readonly timers?: Timers;
  /** Forward these signals received by this process (tests pass false to drive it). */
  readonly forwardSignals?: boolean;
  /**
   * Waits until the agent's decision differs from `fence` or a while passed (a long poll; `hq
   * fence run --follow`): true makes the supervisor re-check at once instead of at the next
   * scheduled re-check; false (no answer) leaves it to the schedule until a re-check succeeds.
   */
  readonly watch?: (fence: FenceDecision) => Promise<boolean>;
  /** Aborted: stop CMD as on a loss (SIGTERM, SIGKILL after the grace) and end `stopped`. */
  readonly stop?: AbortSignal;
}

/** How long a re-check may take; the schedule keeps this much room before the deadline. */
export const CHECK_TIMEOUT_SECONDS = 1;
const LEAD = CHECK_TIMEOUT_SECONDS + 0.25;
/** SIGKILL goes out at the latest this long before the validity ends. */
const KILL_LEAD = 0.25;
const MIN_GAP = 0.2;

interface Validity {
  readonly from: Stamp;
  readonly seconds: number; // Infinity for fail-open
}

/**
 * Why CMD is not running any more: it never started (`skipped`, also when `stop` came first), the
 * supervisor stopped it on a loss (`lost`) or on `stop` (`stopped`), or it ended by itself
 * (`exited`, also a failed spawn).
 */
export type SupervisorEnd = 'skipped' | 'lost' | 'stopped' | 'exited';

/** How a supervision ended: the exit code of `hq fence run` and why, or a role the agent does not know (exit 2 with its message). */
export type SupervisorOutcome =
  | { readonly kind: 'exit'; readonly code: number; readonly end: SupervisorEnd; readonly fence?: FenceDecision }
  | { readonly kind: 'bad-role'; readonly message: string };

export async function superviseFence(opts: SupervisorOptions): Promise<SupervisorOutcome> {
  const now = opts.now ?? stampClock.now;
  const admitted = await admit(opts, now);
  if ('kind' in admitted) return admitted;
  return new Supervision(opts, now, admitted).run();
}

/** A run the fence allowed and the agent registered (or cannot register): what it is fenced on. */
interface Admitted {
  readonly fence: FenceDecision;
  /** When the allowing answer was requested: its validity counts from there. */
  readonly asked: Stamp;
  readonly run: Registered | null;
}

/** Steps 1–2 before the spawn: the fence asked, the run registered; the outcome when CMD does not start. */
async function admit(opts: SupervisorOptions, now: () => Stamp): Promise<Admitted | SupervisorOutcome> {
  const skip = (fence?: FenceDecision, code = opts.skipExit): SupervisorOutcome => ({
    kind: 'exit',
    code,
    end: 'skipped',
    ...(fence === undefined ? {} : { fence }),
  });
  const asked = now();
  const first = await opts.check();
  if (first.kind === 'bad-role') return { kind: 'bad-role', message: first.message };
  if (first.kind === 'unreachable') {
    const code = opts.unreachableExit ?? opts.skipExit;
    opts.log('skipped', { role: opts.role, reason: AGENT_UNREACHABLE, problem: first.problem, exit: code });
    return skip(undefined, code);
  }
  const f = first.fence;
  if (!f.run) {
    opts.log('skipped', { role: opts.role, reason: f.reason, generation: f.generation, holder: f.holder });
    return skip(f);
  }
  const reg: Registration = opts.register === undefined ? { kind: 'unsupported' } : await opts.register(f.generation);
  if (reg.kind === 'refused' || reg.kind === 'unreachable') {
    const code = reg.kind === 'refused' ? opts.skipExit : (opts.unreachableExit ?? opts.skipExit);
    const why =
      reg.kind === 'refused' ? { reason: reg.reason } : { reason: AGENT_UNREACHABLE, problem: reg.problem, exit: code };
    opts.log('skipped', { role: opts.role, generation: f.generation, holder: f.holder, ...why });
    return skip(f, code);
  }
  const run = reg.kind === 'registered' ? reg.run : null;
  if (opts.stop?.aborted === true) {
    await run?.done().catch(() => undefined);
    return skip(f);
  }
  return { fence: f, asked, run };
}

/** Steps 2–5 once admitted: CMD spawned in its group, re-checked on a schedule (and on a nudge or a change), stopped on a loss. */
class Supervision {
  private readonly timers: Timers;
  private readonly generation: number;
  private readonly holder: string | null;
  private validity: Validity;
  private checkTimer: unknown = null;
  private end: SupervisorEnd = 'exited';
  /** A long poll is out (one at a time while CMD runs). */
  private watching = false;
  /** A re-check is in flight. */
  private checking = false;
  /** A nudge came during a re-check: its answer may predate the step-down, so ask again after it. */
  private nudged = false;
  private g!: ProcessGroup;

  constructor(
    private readonly opts: SupervisorOptions,
    private readonly now: () => Stamp,
    private readonly admitted: Admitted,
  ) {
    this.timers = opts.timers ?? realTimers;
    this.generation = admitted.fence.generation;
    this.holder = admitted.fence.holder;
    this.validity = { from: admitted.asked, seconds: admitted.fence.validForSeconds ?? Infinity };
  }

  private left(v: Validity): number {
    return v.seconds - elapsed(v.from, this.now());
  }

  private get over(): boolean {
    return this.g.stopping || this.g.finished;
  }

  async run(): Promise<SupervisorOutcome> {
    const { opts, generation, holder } = this;
    const f = this.admitted.fence;
    const run = this.admitted.run;
    const env = {
      ...(opts.env ?? process.env),
      HQ_GENERATION: String(generation),
      // The old system's name, for jobs not yet changed to read HQ_GENERATION.
      ELANOUS_HQ_GENERATION: String(generation),
      HQ_HOLDER: holder ?? '',
      HQ_ROLE: opts.role,
    };
    this.g = superviseGroup({
      argv: opts.argv,
      env,
      timers: this.timers,
      ...(opts.forwardSignals === undefined ? {} : { forwardSignals: opts.forwardSignals }),
      onForward: (signal) => opts.log('signal-forwarded', { role: opts.role, signal }),
      onSpawn: (pid) => {
        opts.log('allowed', { role: opts.role, generation, holder, pid, validForSeconds: this.left(this.validity) });
        if (run !== null && pid !== undefined) void run.started(pid);
        this.schedule();
        this.watch(f);
      },
    });
    opts.stop?.addEventListener('abort', this.onStop);
    if (opts.forwardSignals !== false) process.on('SIGUSR2', this.nudge);
    const ended = await this.g.ended;
    if (this.checkTimer !== null) this.timers.clear(this.checkTimer);
    opts.stop?.removeEventListener('abort', this.onStop);
    // The child is gone: the agent may forget the run (best effort; it checks the group itself).
    // Only then the nudge goes: SIGUSR2 with no listener would kill this supervisor (exit 140
    // instead of the child's code) if a step-down came while the agent still knew the run.
    if (run !== null) await run.done().catch(() => undefined);
    process.off('SIGUSR2', this.nudge);
    if (ended.kind === 'spawn-failed')
      opts.log('spawn-failed', { role: opts.role, command: opts.argv[0], problem: ended.problem });
    if (ended.kind === 'stopped')
      opts.log('stopped', { role: opts.role, generation, code: ended.code, signal: ended.signal });
    return { kind: 'exit', code: exitCodeOf(ended), end: ended.kind === 'stopped' ? this.end : 'exited', fence: f };
  }

  /** SIGTERM the group, SIGKILL after the grace — never later than just before the validity ends. */
  private halt(event: 'lost' | 'stopping', data: { [k: string]: unknown }): void {
    if (this.over) return;
    if (this.checkTimer !== null) this.timers.clear(this.checkTimer);
    this.end = event === 'lost' ? 'lost' : 'stopped';
    const remaining = this.left(this.validity);
    const killIn = Math.max(0, Math.min(this.opts.graceSeconds, remaining - KILL_LEAD));
    this.opts.log(event, {
      role: this.opts.role,
      generation: this.generation,
      holder: this.holder,
      graceSeconds: killIn,
      validForSeconds: remaining,
      ...data,
    });
    this.g.stop(killIn * 1000, () => this.opts.log('killed', { role: this.opts.role, generation: this.generation }));
  }

  private lose(reason: FenceRunReason, data: { [k: string]: unknown }): void {
    this.halt('lost', { reason, ...data });
  }

  private readonly onStop = (): void => this.halt('stopping', {});

  /** One long poll at a time while CMD runs; its end (a change, or its wait over) is a re-check now. */
  private watch(d: FenceDecision): void {
    if (this.opts.watch === undefined || this.watching || this.over) return;
    this.watching = true;
    void this.opts
      .watch(d)
      .catch(() => false)
      .then((due) => {
        this.watching = false;
        if (due) this.nudge();
      });
  }

  /** The next re-check: every `recheck` seconds, and early enough that SIGTERM + grace + SIGKILL fit inside the validity. */
  private schedule(): void {
    if (this.over) return;
    const remaining = this.left(this.validity);
    const byDeadline = remaining - this.opts.graceSeconds - LEAD;
    const wait = Math.max(MIN_GAP, Math.min(this.opts.recheckSeconds, byDeadline));
    this.checkTimer = this.timers.set(
      () => void this.recheck(),
      Number.isFinite(wait) ? wait * 1000 : this.opts.recheckSeconds * 1000,
    );
  }

  /** The agent stepping down asks for a re-check now (daemon/runs.ts): the loss is then this supervisor's own. */
  private readonly nudge = (): void => {
    if (this.over) return;
    if (this.checking) {
      this.nudged = true; // the answer in flight may predate the step-down: ask again after it
      return;
    }
    if (this.checkTimer !== null) this.timers.clear(this.checkTimer);
    void this.recheck();
  };

  private async recheck(): Promise<void> {
    this.checkTimer = null;
    if (this.over) return;
    const at = this.now();
    this.checking = true;
    const r = await this.opts.check().finally(() => {
      this.checking = false;
    });
    if (this.over) return;
    if (this.nudged) {
      this.nudged = false;
      return void this.recheck();
    }
    if (r.kind === 'answer') {
      const a = r.fence;
      if (!a.run) return this.lose(a.reason, { now: { generation: a.generation, holder: a.holder } });
      if (a.generation !== this.generation || a.holder !== this.holder) {
        return this.lose(GENERATION_CHANGED, { now: { generation: a.generation, holder: a.holder } });
      }
      const next: Validity = { from: at, seconds: a.validForSeconds ?? Infinity };
      // Keep the later end: an answer can only extend what the earlier one promised.
      if (this.left(next) > this.left(this.validity)) this.validity = next;
      this.watch(a);
      return this.schedule();
    }
    // No answer: keep going only while a later check still leaves room to stop in time.
    if (this.left(this.validity) <= this.opts.graceSeconds + LEAD + MIN_GAP) {
      return this.lose(AGENT_UNREACHABLE, { problem: r.kind === 'unreachable' ? r.problem : r.message });
    }
    this.schedule();
  }
}
