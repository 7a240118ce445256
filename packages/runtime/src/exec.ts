/**
 * Running a helper program (tailscale) as an argv: never a shell, bounded in time (SIGKILL at
 * the deadline — a bounded wait must not rest on the child honouring SIGTERM) and in output.
 * Never rejects: a program that is missing, fails or overruns is a result like any other.
 */
import { execFile } from 'node:child_process';

export interface RunResult {
  /** Exit 0. */
  readonly ok: boolean;
  /** 0, the exit code, the spawn error's code (`ENOENT`), or -1 when killed at the deadline. */
  readonly code: number | string;
  readonly stdout: string;
  /** One line when not ok: the code, the error, or the deadline. */
  readonly problem: string | null;
}

export interface RunOptions {
  readonly timeoutMs: number;
  /** Largest stdout accepted, bytes (default 4 MiB: `tailscale status --json` of a large tailnet). */
  readonly maxBuffer?: number;
}

export function runFile(bin: string, args: readonly string[], opts: RunOptions): Promise<RunResult> {
  const timeoutMs = Math.max(1, Math.round(opts.timeoutMs));
  return new Promise((resolve) => {
    execFile(
      bin,
      args,
      {
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: opts.maxBuffer ?? 4 << 20,
        shell: false,
        windowsHide: true,
      },
      (err, stdout) => {
        if (err === null) return resolve({ ok: true, code: 0, stdout: String(stdout), problem: null });
        const e = err as NodeJS.ErrnoException & { code?: number | string | null; killed?: boolean };
        const code = e.code ?? -1;
        const problem = e.killed === true ? `no answer within ${timeoutMs / 1000} s` : String(e.code ?? e.message);
        resolve({ ok: false, code, stdout: String(stdout ?? ''), problem });
      },
    );
  });
}
