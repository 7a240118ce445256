/**
 * How the daemon's parts tell what they did: the log each is given (a pino child logger in the
 * daemon, a recorder in tests) and the hooks the metrics module observes. Types only.
 */
import type { FenceDecision } from '@hq/protocol';

export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/** What the metrics module observes; every hook optional. */
export interface AgentObserver {
  fence?(d: FenceDecision): void;
  heartbeat?(outcome: string): void;
  peerConfirm?(result: string): void;
  stepDown?(result: string): void;
}
