/**
 * `hq lease acquire` and `hq lease renew`: this host asks the arbiter for the lease, then pokes its agent.
 * Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import { fieldsOf } from '@hq/protocol';
import { sleepSafeClockMs, type MsClock } from '@hq/runtime/clock';
import { CliError, flagBool, flagNumber, type Parsed } from './args.js';
import {
  agent,
  arbiter,
  failure,
  memberToken,
  reportFailure,
  network,
  out,
  seenGeneration,
  sleep,
  type Resolved,
} from './context.js';
import { agentRefuses, runsWhen } from './lease-record.js';

/** Asks the local agent for a heartbeat now, so it learns the new record at once. */
export async function pokeAgent(c: Resolved): Promise<void> {
  await agent(c, 'POST', '/v1/heartbeat', c.requestTimeoutSeconds + 1);
}

/** `clock` (epoch ms) measures `--wait`: sleep-safe, so the wait ends early rather than late. */
export async function leaseAcquire(p: Parsed, clock: MsClock = sleepSafeClockMs()): Promise<number> {
  const c = await network(p);
  const token = await memberToken(c);
  const wait = flagNumber(p, 'wait') ?? 0;
  const deadline = clock.now() + wait * 1000;
  const json = flagBool(p, 'json');
  for (;;) {
    const seen = await seenGeneration(c);
    const r = await arbiter(
      c,
      'POST',
      '/v1/lease/acquire',
      { host: c.hostName, seenGeneration: seen.generation, requestTimeoutSeconds: c.requestTimeoutSeconds },
      token,
    );
    if (r.kind === 'answer' && r.status === 200) {
      const lease = fieldsOf(r.body).lease;
      const refused = agentRefuses(lease);
      if (refused !== null)
        throw new CliError(1, `the arbiter granted a record no agent runs on (${refused}); see hq doctor`);
      await pokeAgent(c);
      out(
        json,
        r.body,
        `acquired: ${c.hostName} holds generation ${String(fieldsOf(lease).generation ?? '?')}; ${runsWhen(lease)}`,
      );
      return 0;
    }
    const retryable = r.kind === 'unreachable' || r.status === 409 || r.status >= 500;
    if (!retryable || clock.now() + 1000 > deadline) {
      const f = failure(r, 'lease acquire', c);
      if (json && r.kind === 'answer') out(true, r.body, '');
      reportFailure(f, p);
      return f.code;
    }
    await sleep(1000);
  }
}

export async function leaseRenew(p: Parsed): Promise<number> {
  const c = await network(p);
  const token = await memberToken(c);
  const seen = await seenGeneration(c);
  const r = await arbiter(c, 'POST', '/v1/lease/renew', { host: c.hostName, generation: seen.generation }, token);
  if (r.kind === 'answer' && r.status === 200) {
    await pokeAgent(c);
    out(flagBool(p, 'json'), r.body, `renewed: ${c.hostName} at generation ${seen.generation}`);
    return 0;
  }
  const f = failure(r, 'lease renew', c);
  if (flagBool(p, 'json') && r.kind === 'answer') out(true, r.body, '');
  reportFailure(f, p);
  return f.code;
}
