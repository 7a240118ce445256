/**
 * The admin-token verbs on the lease: `hq maintenance on|off`, `hq lease accept-generation G`, `hq failover`.
 * Exit codes: 0 ok, 1 refused, 2 usage/config, 3 unreachable.
 */
import { fieldsOf, generationField, isHost } from '@hq/protocol';
import { sleepSafeClockMs, type MsClock } from '@hq/runtime/clock';
import { CliError, flagBool, flagNumber, flagString, type Parsed } from './args.js';
import { adminToken, arbiter, failure, reportFailure, network, out } from './context.js';
import { agentRefuses } from './lease-record.js';
import { waitUntilRuns } from './lease-wait.js';

export async function maintenance(p: Parsed): Promise<number> {
  const c = await network(p);
  const token = await adminToken(c, p);
  const enabled = p.positionals[0] === 'on';
  const reason = flagString(p, 'reason');
  const body: { [k: string]: unknown } = { enabled };
  if (reason !== undefined) body['reason'] = reason;
  const r = await arbiter(c, 'PUT', '/v1/maintenance', body, token);
  if (r.kind === 'answer' && r.status === 200) {
    out(flagBool(p, 'json'), r.body, `maintenance ${enabled ? 'on' : 'off'}`);
    return 0;
  }
  const f = failure(r, 'maintenance', c);
  reportFailure(f, p);
  return f.code;
}

export async function leaseAcceptGeneration(p: Parsed): Promise<number> {
  const text = p.positionals[0] as string;
  const generation = /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(generation))
    throw new CliError(2, `G must be a generation, a whole number ≥ 1 (got ${JSON.stringify(text)})`);
  const c = await network(p);
  const token = await adminToken(c, p);
  const r = await arbiter(c, 'POST', '/v1/lease/accept-generation', { generation }, token);
  if (r.kind === 'answer' && r.status === 200) {
    const b = fieldsOf(r.body);
    out(
      flagBool(p, 'json'),
      r.body,
      b.floor === b.was
        ? `nothing to accept: the floor is ${String(b.floor ?? '?')} already`
        : `accepted: the floor is ${String(b.floor ?? '?')} (was ${String(b.was ?? '?')}); reports up to it are taken`,
    );
    return 0;
  }
  const f = failure(r, 'lease accept', c);
  if (flagBool(p, 'json') && r.kind === 'answer') out(true, r.body, '');
  reportFailure(f, p);
  return f.code;
}

/** `clock` (epoch ms) measures `--wait`, as in `leaseAcquire`. */
export async function failover(p: Parsed, clock: MsClock = sleepSafeClockMs()): Promise<number> {
  const c = await network(p);
  const to = flagString(p, 'to') as string;
  if (!isHost(to)) throw new CliError(2, `--to: "${to}" is not a host name`);
  const wait = flagNumber(p, 'wait') ?? 0;
  if (!(wait >= 0) || !Number.isFinite(wait))
    throw new CliError(2, `--wait must be a number of seconds ≥ 0 (got ${wait})`);
  const token = await adminToken(c, p);
  const json = flagBool(p, 'json');
  const started = clock.now();
  const r = await arbiter(c, 'POST', '/v1/lease/transfer', flagBool(p, 'force') ? { to, force: true } : { to }, token);
  if (r.kind !== 'answer' || r.status !== 200) {
    const f = failure(r, 'failover', c);
    if (json && r.kind === 'answer') out(true, r.body, '');
    reportFailure(f, p);
    return f.code;
  }
  const granted = fieldsOf(r.body).lease;
  const refused = agentRefuses(granted);
  if (refused !== null)
    throw new CliError(
      1,
      `the arbiter answered a record no agent runs on (${refused}); ${to} will not run; see hq doctor`,
    );
  const generation = generationField(granted, 'generation') ?? 0;
  if (wait === 0) {
    out(json, r.body, `transferred to ${to} at generation ${generation || '?'}`);
    return 0;
  }
  if (!json)
    process.stdout.write(
      `transferred to ${to} at generation ${generation || '?'}; waiting up to ${wait} s until it may run\n`,
    );
  const w = await waitUntilRuns(c, clock, token, to, generation, started, wait, json, 'failover');
  if (json) out(true, { ok: w.code === 0, lease: w.lease, ...w.result }, '');
  else (w.code === 0 ? process.stdout : process.stderr).write(`${w.code === 0 ? '' : 'hq failover: '}${w.line}\n`);
  return w.code;
}
