/**
 * A supervised child (S3: a fenced child never outlives its host's right to run it), shared by
 * `hq fence run` and `hq port run`:
 *
 *  1. CMD is spawned directly (no shell) as the leader of its own process group, stdio
 *     inherited; TERM, INT, HUP and QUIT received by this process are forwarded to the group.
 *  2. `stop(grace)`: SIGTERM to the group now, SIGKILL after `grace` — the caller picks a grace
 *     that ends before its right to run does.
 *  3. When CMD exits after a stop, what is left of its group is killed with it, and the end is
 *     `stopped` (exit 75, EX_TEMPFAIL); otherwise CMD's own code (a signal n → 128 + n), or 127
 *     / 126 when it could not be started.
 *
 * When to stop is the caller's (a fence re-check, a lease keeper); this module only runs the group.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { realTimers, type Timers } from './clock.js';

/** Exit code when the supervisor stopped the child (EX_TEMPFAIL). */
export const EXIT_LOST = 75;

/** kill(2) on a process (pid > 0) or a process group (pid < 0): 'ok', 'gone' (ESRCH) or 'denied'. */
export function sendSignal(pid: number, sig: NodeJS.Signals | 0): 'ok' | 'gone' | 'denied' {
  try {
    process.kill(pid, sig);
    return 'ok';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH' ? 'gone' : 'denied';
  }
}

const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];

export type GroupEnd =
  /** CMD ended on its own: its exit code, or 128 + n for signal n. */
  | { readonly kind: 'exited'; readonly code: number }
  /** CMD ended after `stop`: how it ended, for the log. */
  | { readonly kind: 'stopped'; readonly code: number | null; readonly signal: NodeJS.Signals | null }
  /** CMD could not be started: 127 not found, 126 otherwise. */
  | { readonly kind: 'spawn-failed'; readonly code: 126 | 127; readonly problem: string };

/** The supervisor's exit code for an end. */
export function exitCodeOf(end: GroupEnd): number {
  return end.kind === 'stopped' ? EXIT_LOST : end.code;
}

export interface GroupOptions {
  /** CMD and its arguments. */
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** Forward the signals this process receives (tests pass false to drive it). Default true. */
  readonly forwardSignals?: boolean;
  /** Called before a received signal is forwarded. */
  readonly onForward?: (signal: NodeJS.Signals) => void;
  /** Called once CMD runs. */
  readonly onSpawn?: (pid: number | undefined) => void;
  /** The grace timer after `stop`. Default real timers. */
  readonly timers?: Timers;
}

export interface ProcessGroup {
  /** True from `stop` on. */
  readonly stopping: boolean;
  /** True once CMD has ended (or failed to start); `ended` is then settled or about to be. */
  readonly finished: boolean;
  /** SIGTERM to the group now, SIGKILL after `graceMs` (`onKill` just before). Once only. */
  stop(graceMs: number, onKill?: () => void): void;
  readonly ended: Promise<GroupEnd>;
}

export function superviseGroup(o: GroupOptions): ProcessGroup {
  const [cmd, ...args] = o.argv as [string, ...string[]];
  const child = spawn(cmd, args, { detached: true, stdio: 'inherit', env: o.env });
  const pid = child.pid;
  let stopping = false;
  let finished = false;
  const timers = o.timers ?? realTimers;
  let killTimer: unknown = null;
  const signal = (sig: NodeJS.Signals): void => {
    if (pid !== undefined) sendSignal(-pid, sig); // a group already gone has nothing left to stop
  };
  const forward = (sig: NodeJS.Signals) => () => {
    o.onForward?.(sig);
    signal(sig);
  };
  const handlers = o.forwardSignals === false ? [] : FORWARDED.map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  const ended = new Promise<GroupEnd>((done) => {
    const finish = (end: GroupEnd): void => {
      if (finished) return;
      finished = true;
      if (killTimer !== null) timers.clear(killTimer);
      for (const [s, h] of handlers) process.off(s, h);
      done(end);
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      finish({ kind: 'spawn-failed', code: err.code === 'ENOENT' ? 127 : 126, problem: err.code ?? err.message });
    });
    child.once('exit', (code, sig) => {
      if (stopping) {
        signal('SIGKILL'); // anything left in the group goes with its leader
        return finish({ kind: 'stopped', code, signal: sig });
      }
      if (sig !== null)
        return finish({ kind: 'exited', code: 128 + ((constants.signals as { [k: string]: number })[sig] ?? 0) });
      finish({ kind: 'exited', code: code ?? 0 });
    });
  });
  child.once('spawn', () => o.onSpawn?.(pid));
  return {
    get stopping() {
      return stopping;
    },
    get finished() {
      return finished;
    },
    stop(graceMs, onKill) {
      if (stopping || finished) return;
      stopping = true;
      signal('SIGTERM');
      killTimer = timers.set(() => {
        onKill?.();
        signal('SIGKILL');
      }, graceMs);
    },
    ended,
  };
}
