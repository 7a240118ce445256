/**
 * `hq fence run` — the supervisor of a fenced child (S3: a fenced child never outlives its
 * host's validity).
 *
 *  1. Ask the fence; skip (exit 0 or `--skip-exit`) unless it says run.
 *  2. Spawn CMD directly (no shell) as the leader of its own process group, with
 *     HQ_GENERATION, HQ_HOLDER, HQ_ROLE; forward TERM/INT/HUP/QUIT to the group.
 *  3. Re-check every `recheck` seconds and, in any case, early enough before the validity ends
 *     that SIGTERM + `grace` + SIGKILL all fit inside it. Validity is measured from the moment
 *     the answer was *requested*, with elapsed = max(monotonic, wall) (a sleep or a clock jump
 *     can only shorten it).
 *  4. On loss (run false, another generation or holder, or no answer while the validity runs
 *     out) SIGTERM the group, then SIGKILL it after `grace` — never later than just before the
 *     validity ends. Exit 75 when it stopped the child, else the child's own code (a signal n
 *     → 128 + n).
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { AGENT_UNREACHABLE, GENERATION_CHANGED, type FenceDecision, type FenceRunReason } from '@hq/protocol/fence';

export type CheckResult =
  | { readonly kind: 'answer'; readonly fence: FenceDecision }
  | { readonly kind: 'down'; readonly problem: string }
  | { readonly kind: 'bad-role'; readonly message: string };

interface Stamp {
  readonly wall: number;
  readonly mono: number;
}

export interface SupervisorOptions {
  readonly role: string;
  readonly recheckSeconds: number;
  readonly graceSeconds: number;
  readonly skipExit: number;
  readonly argv: readonly string[];
  /** One fence query; should give up within `checkTimeoutSeconds`. */
  readonly check: () => Promise<CheckResult>;
  readonly log: (event: string, data: { [k: string]: unknown }) => void;
  readonly env?: NodeJS.ProcessEnv;
  readonly now?: () => Stamp;
  /** Forward these signals received by this process (tests pass false to drive it). */
  readonly forwardSignals?: boolean;
}

/** Exit code when the supervisor stopped the child (EX_TEMPFAIL). */
export const EXIT_LOST = 75;
/** How long a re-check may take; the schedule keeps this much room before the deadline. */
export const CHECK_TIMEOUT_SECONDS = 1;
const LEAD = CHECK_TIMEOUT_SECONDS + 0.25;
/** SIGKILL goes out at the latest this long before the validity ends. */
const KILL_LEAD = 0.25;
const MIN_GAP = 0.2;

const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];

function systemNow(): Stamp {
  return { wall: Date.now() / 1000, mono: Number(process.hrtime.bigint()) / 1e9 };
}

function elapsed(from: Stamp, to: Stamp): number {
  return Math.max(to.mono - from.mono, to.wall - from.wall);
}

interface Validity {
  readonly from: Stamp;
  readonly seconds: number; // Infinity for fail-open
}

export function superviseFence(opts: SupervisorOptions): Promise<number> {
  const now = opts.now ?? systemNow;
  const left = (v: Validity): number => v.seconds - elapsed(v.from, now());
  return (async () => {
    const asked = now();
    const first = await opts.check();
    if (first.kind === 'bad-role') return -2;
    if (first.kind === 'down') {
      opts.log('skipped', { role: opts.role, reason: AGENT_UNREACHABLE, problem: first.problem });
      return opts.skipExit;
    }
    const f = first.fence;
    if (!f.run) {
      opts.log('skipped', { role: opts.role, reason: f.reason, generation: f.generation, holder: f.holder });
      return opts.skipExit;
    }
    let validity: Validity = { from: asked, seconds: f.validForSeconds ?? Infinity };
    const generation = f.generation;
    const holder = f.holder;
    const [cmd, ...args] = opts.argv as [string, ...string[]];
    const env = {
      ...(opts.env ?? process.env),
      HQ_GENERATION: String(generation),
      HQ_HOLDER: holder ?? '',
      HQ_ROLE: opts.role,
    };
    const child = spawn(cmd, args, { detached: true, stdio: 'inherit', env });
    return new Promise<number>((done) => {
      let stopping = false;
      let finished = false;
      let checkTimer: NodeJS.Timeout | null = null;
      let killTimer: NodeJS.Timeout | null = null;
      const pid = child.pid;
      const group = (sig: NodeJS.Signals): void => {
        if (pid === undefined) return;
        try {
          process.kill(-pid, sig);
        } catch {
          /* the group is gone */
        }
      };
      const forward = (sig: NodeJS.Signals) => () => {
        opts.log('signal-forwarded', { role: opts.role, signal: sig });
        group(sig);
      };
      const handlers = opts.forwardSignals === false ? [] : FORWARDED.map((s) => [s, forward(s)] as const);
      for (const [s, h] of handlers) process.on(s, h);
      const finish = (code: number): void => {
        if (finished) return;
        finished = true;
        if (checkTimer !== null) clearTimeout(checkTimer);
        if (killTimer !== null) clearTimeout(killTimer);
        for (const [s, h] of handlers) process.off(s, h);
        done(code);
      };
      const lose = (reason: FenceRunReason, data: { [k: string]: unknown }): void => {
        if (stopping) return;
        stopping = true;
        if (checkTimer !== null) clearTimeout(checkTimer);
        const remaining = left(validity);
        const killIn = Math.max(0, Math.min(opts.graceSeconds, remaining - KILL_LEAD));
        opts.log('lost', { role: opts.role, reason, generation, holder, graceSeconds: killIn, validForSeconds: remaining, ...data });
        group('SIGTERM');
        killTimer = setTimeout(() => {
          opts.log('killed', { role: opts.role, generation });
          group('SIGKILL');
        }, killIn * 1000);
      };
      const schedule = (): void => {
        if (stopping || finished) return;
        const remaining = left(validity);
        const byDeadline = remaining - opts.graceSeconds - LEAD;
        const wait = Math.max(MIN_GAP, Math.min(opts.recheckSeconds, byDeadline));
        checkTimer = setTimeout(() => void recheck(), Number.isFinite(wait) ? wait * 1000 : opts.recheckSeconds * 1000);
      };
      const recheck = async (): Promise<void> => {
        checkTimer = null;
        if (stopping || finished) return;
        const at = now();
        const r = await opts.check();
        if (stopping || finished) return;
        if (r.kind === 'answer') {
          const a = r.fence;
          if (!a.run) return lose(a.reason, { now: { generation: a.generation, holder: a.holder } });
          if (a.generation !== generation || a.holder !== holder) {
            return lose(GENERATION_CHANGED, { now: { generation: a.generation, holder: a.holder } });
          }
          const next: Validity = { from: at, seconds: a.validForSeconds ?? Infinity };
          // Keep the later end: an answer can only extend what the earlier one promised.
          if (left(next) > left(validity)) validity = next;
          return schedule();
        }
        // No answer: keep going only while a later check still leaves room to stop in time.
        if (left(validity) <= opts.graceSeconds + LEAD + MIN_GAP) {
          return lose(AGENT_UNREACHABLE, { problem: r.kind === 'down' ? r.problem : r.message });
        }
        schedule();
      };
      child.once('error', (err: NodeJS.ErrnoException) => {
        opts.log('spawn-failed', { role: opts.role, command: cmd, problem: err.code ?? err.message });
        finish(err.code === 'ENOENT' ? 127 : 126);
      });
      child.once('exit', (code, signal) => {
        if (stopping) {
          group('SIGKILL'); // anything left in the group goes with its leader
          opts.log('stopped', { role: opts.role, generation, code, signal });
          return finish(EXIT_LOST);
        }
        if (signal !== null) {
          const n = (constants.signals as { [k: string]: number })[signal] ?? 0;
          return finish(128 + n);
        }
        finish(code ?? 0);
      });
      child.once('spawn', () => {
        opts.log('allowed', { role: opts.role, generation, holder, pid: child.pid, validForSeconds: left(validity) });
        schedule();
      });
    });
  })();
}
