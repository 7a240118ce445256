/**
 * The CLI's own JSON lines on stderr (`hq fence run --verbose`, `hq port run`, `hq guard`), in
 * the daemons' shape (pino's): `level`, `time` in epoch milliseconds, `pid`, `name`, then
 * `category`, `event` and the data — so one log pipeline reads the CLI, the agent and the
 * arbiter alike. Imports no code (the clock is the caller's): it sits on the fence path.
 */
import type { MsClock } from '@hq/runtime/clock';

/** pino's level numbers. */
const LEVELS = { info: 30, warn: 40 } as const;

export type LineLevel = keyof typeof LEVELS;

/** One line, as text with its newline. `now` is epoch milliseconds. */
export function cliLine(
  category: string,
  event: string,
  data: { readonly [k: string]: unknown },
  level: LineLevel,
  now: number,
): string {
  return `${JSON.stringify({ level: LEVELS[level], time: now, pid: process.pid, name: 'hq', category, event, ...data })}\n`;
}

/** Writes `cliLine(…)` to stderr, stamped by `clock` (epoch ms: the process's `wallClockMs`). */
export function writeCliLine(
  clock: MsClock,
  category: string,
  event: string,
  data: { readonly [k: string]: unknown },
  level: LineLevel = 'info',
): void {
  process.stderr.write(cliLine(category, event, data, level, clock.now()));
}
