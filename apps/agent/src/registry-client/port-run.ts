/**
 * `hq port run --purpose P [--ttl S] [--grace G] -- CMD…`:
 *
 *  1. Lease a test-band port from the arbiter for this machine.
 *  2. Probe that the port can be bound here; if not, release it and ask again with the port in
 *     `excluded` (up to `MAX_PROBES` times).
 *  3. Run CMD directly (no shell) as the leader of its own process group with `HQ_PORT` (and
 *     `HQ_PORT_LEASE_ID`) set; forward TERM/INT/HUP/QUIT to the group; renew the lease in the
 *     background (`PortLeaseKeeper`).
 *  4. On loss: SIGTERM the group, SIGKILL after the grace; exit 75 (`@hq/runtime/supervise`).
 *  5. When CMD ends: release the lease and exit with CMD's code (a signal n → 128 + n).
 */
import { createServer } from 'node:net';
import { fieldsOf } from '@hq/protocol/answer';
import { sleepSafeClockMs } from '@hq/runtime/clock';
import { exitCodeOf, superviseGroup } from '@hq/runtime/supervise';
import { describe, joinUrl, requestJson, type Requester } from '@hq/runtime/http';
import { PortLeaseKeeper, type LeaseLoss } from './port-lease.js';

/** Binding probes before giving up (each failed one excludes its port). */
export const MAX_PROBES = 8;

/** Can this process bind `port` on every interface? (`::` covers IPv4 too on dual-stack hosts.) */
export function canBind(port: number, host?: string): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen({ port, ...(host === undefined ? {} : { host }), exclusive: true }, () =>
      server.close(() => done(true)),
    );
  });
}

export interface PortRunOptions {
  readonly arbiterUrl: string;
  readonly token: string;
  readonly machine: string;
  readonly purpose: string;
  readonly ttlMs: number;
  readonly graceMs: number;
  readonly argv: readonly string[];
  readonly requestTimeoutMs: number;
  readonly log: (event: string, data: { [k: string]: unknown }) => void;
  readonly env?: NodeJS.ProcessEnv;
  readonly request?: Requester;
  readonly probe?: (port: number) => Promise<boolean>;
  /** The address the bind probe uses. Default: every interface (what CMD will most likely bind). */
  readonly probeHost?: string;
  readonly forwardSignals?: boolean;
  /** Keeper tunables (tests shorten them). */
  readonly renewEveryMs?: number;
  readonly retryEveryMs?: number;
  readonly marginMs?: number;
}

export type Leased = {
  readonly ok: true;
  readonly port: number;
  readonly leaseId: string;
  readonly ttlMs: number;
  readonly sentAt: number;
};
export type LeaseFailure = { readonly ok: false; readonly code: number; readonly line: string };

/** Steps 1–2: a leased port this host can bind, or the exit code and one line. */
export async function leaseBindablePort(o: PortRunOptions, clock: { now(): number }): Promise<Leased | LeaseFailure> {
  const request = o.request ?? requestJson;
  const probe = o.probe ?? ((p: number) => canBind(p, o.probeHost));
  const excluded: number[] = [];
  const token = { token: o.token, url: o.arbiterUrl };
  for (let attempt = 0; attempt < MAX_PROBES; attempt++) {
    const sentAt = clock.now();
    const r = await request({
      method: 'POST',
      url: joinUrl(o.arbiterUrl, '/v1/leases/port'),
      body: { machine: o.machine, purpose: o.purpose, ttlMs: o.ttlMs, ...(excluded.length > 0 ? { excluded } : {}) },
      token,
      timeoutSeconds: o.requestTimeoutMs / 1000,
    });
    if (r.kind === 'unreachable')
      return { ok: false, code: 3, line: `port run: the arbiter is unreachable (${r.problem})` };
    const b = fieldsOf(r.body);
    if (r.status !== 200 || typeof b.port !== 'number' || typeof b.leaseId !== 'string') {
      const msg = typeof b.message === 'string' ? `: ${b.message}` : '';
      // 503 band full is a refusal of this request, not an outage: exit 1 like other refusals.
      return {
        ok: false,
        code: r.status >= 500 && r.status !== 503 ? 3 : 1,
        line: `port run: refused (${describe(r)}${msg})`,
      };
    }
    const ttlMs = typeof b.ttlMs === 'number' ? b.ttlMs : o.ttlMs;
    if (await probe(b.port)) return { ok: true, port: b.port, leaseId: b.leaseId, ttlMs, sentAt };
    o.log('port-busy', { port: b.port, purpose: o.purpose });
    excluded.push(b.port);
    await request({
      method: 'DELETE',
      url: joinUrl(o.arbiterUrl, `/v1/leases/port/${b.port}`),
      headers: { 'x-port-lease-id': b.leaseId },
      token,
      timeoutSeconds: o.requestTimeoutMs / 1000,
    });
  }
  return {
    ok: false,
    code: 1,
    line: `port run: none of the leased ports could be bound here (${excluded.join(', ')})`,
  };
}

/** The whole command; resolves to the exit code. */
export async function runWithPort(o: PortRunOptions): Promise<number | LeaseFailure> {
  const clock = sleepSafeClockMs();
  const leased = await leaseBindablePort(o, clock);
  if (!leased.ok) return leased;
  const { port, leaseId } = leased;
  const env = { ...(o.env ?? process.env), HQ_PORT: String(port), HQ_PORT_LEASE_ID: leaseId };
  const g = superviseGroup({
    argv: o.argv,
    env,
    ...(o.forwardSignals === undefined ? {} : { forwardSignals: o.forwardSignals }),
    onSpawn: (pid) => {
      o.log('started', { port, purpose: o.purpose, pid, ttlMs: leased.ttlMs });
      keeper.start();
    },
  });
  const keeper = new PortLeaseKeeper({
    arbiterUrl: o.arbiterUrl,
    token: o.token,
    port,
    leaseId,
    ttlMs: leased.ttlMs,
    acquiredAt: leased.sentAt,
    clock,
    ...(o.request === undefined ? {} : { request: o.request }),
    ...(o.renewEveryMs === undefined ? {} : { renewEveryMs: o.renewEveryMs }),
    ...(o.retryEveryMs === undefined ? {} : { retryEveryMs: o.retryEveryMs }),
    ...(o.marginMs === undefined ? {} : { marginMs: o.marginMs }),
    log: o.log,
    onLeaseLost: (loss: LeaseLoss) => {
      if (g.finished || g.stopping) return;
      o.log('lost', { port, purpose: o.purpose, ...loss, graceMs: o.graceMs });
      g.stop(o.graceMs, () => o.log('killed', { port }));
    },
  });
  const end = await g.ended;
  if (end.kind === 'spawn-failed') o.log('spawn-failed', { command: o.argv[0], problem: end.problem });
  if (end.kind === 'stopped') o.log('stopped', { port, code: end.code, signal: end.signal });
  await keeper.stop();
  return exitCodeOf(end);
}
