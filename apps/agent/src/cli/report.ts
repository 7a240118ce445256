/**
 * Events the CLI reports to the local agent's log (\`hq standby\`, \`hq primary\`). Its own module,
 * apart from the socket client in ./local.ts, so the fence path (\`hq fence check|run\`) never loads
 * lease-core's index for it.
 */
import { REPORTED_DATA_LIMITS, type ReportedCategory, type ReportedEvent } from '@hq/protocol';
import { callAgent } from './local.js';

/** How long a command waits for the agent to take a reported event: a wedged agent costs no more. */
export const REPORT_TIMEOUT_SECONDS = 0.5;

/**
 * Reports an event to the local agent (`POST /v1/events`), which logs it beside its own. Best
 * effort: an agent that is down (no socket: an immediate error) or slow (REPORT_TIMEOUT_SECONDS)
 * or refusing is ignored — the command's output and exit code never depend on it.
 */
export async function reportEvent<C extends ReportedCategory>(
  socketPath: string,
  category: C,
  event: ReportedEvent<C>,
  data: { readonly [k: string]: string | number | boolean | null } = {},
): Promise<void> {
  const max = REPORTED_DATA_LIMITS.maxString;
  const clipped = Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, typeof v === 'string' && v.length > max ? `${v.slice(0, max - 1)}…` : v]),
  );
  await callAgent(socketPath, 'POST', '/v1/events', REPORT_TIMEOUT_SECONDS, { category, event, data: clipped }).catch(
    () => undefined,
  );
}
