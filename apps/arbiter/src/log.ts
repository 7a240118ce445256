/**
 * The arbiter's log lines: one JSON object per line with `level`, `time` (epoch milliseconds,
 * pino's default), `pid`, `name` (`hq-arbiter`), then the event's own keys (`category`, `event`,
 * `host` when the event is about a host), each once. The agent writes the same shape
 * (apps/agent/src/daemon/log.ts). No `hostname` binding: `host` is the event's subject here.
 */
import pino, { type DestinationStream, type Logger } from 'pino';

export function arbiterLogger(destination?: DestinationStream): Logger {
  const opts = { name: 'hq-arbiter', base: { pid: process.pid } };
  return destination === undefined ? pino(opts) : pino(opts, destination);
}
