/** Shared setup for the arbiter tests: a runtime on a testdir, a manual clock, tokens. */
import pino from 'pino';
import type { Test } from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { GenerationLimits, Probe } from '@hq/lease-core';
import { issueToken } from '../../apps/arbiter/src/auth.js';
import { manualClock, type ManualClock } from '../../packages/runtime/src/clock.js';
import { validateConfig, type ArbiterConfig } from '../../apps/arbiter/src/config.js';
import '../../apps/arbiter/src/config-checker.js';
import { createRuntime, type Runtime } from '../../apps/arbiter/src/server/runtime.js';
import type { Prober } from '../../apps/arbiter/src/checks.js';
import { main } from '../../apps/arbiter/src/commands.js';
import { FakeTime } from '../registry/fake-time.js';

/** The arbiter's own keys at the fast test settings of L1 (checks every second, ttl 6, margin 1). */
export const FAST = {
  checkCron: '* * * * * *',
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  viewFreshSeconds: 6,
  tailscaleBin: '',
} as const;

/** The agents' request timeout at the fast settings: theirs, declared in each request (S6). */
export const AGENT_REQUEST_TIMEOUT = 1;

export function fastConfig(dataDir: string, extra: Record<string, unknown> = {}): ArbiterConfig {
  const r = validateConfig({ ...FAST, dataDir, ...extra });
  if (!r.ok) throw new Error(`test config invalid: ${r.key} ${r.message}`);
  return r.config;
}

/** A prober whose answers the test sets per host (default: unreachable). */
export class FakeProber implements Prober {
  readonly answers = new Map<string, Probe>();
  calls: string[] = [];
  async probe(host: string): Promise<Probe> {
    this.calls.push(host);
    return this.answers.get(host) ?? { ping: false, health: false };
  }
}

export interface Harness {
  readonly dir: string;
  readonly rt: Runtime;
  readonly app: FastifyInstance;
  readonly clock: ManualClock;
  /** The runtime's timers (hook retries, the check schedule, the check lock's wait): they fire only when advanced. */
  readonly time: FakeTime;
  readonly prober: FakeProber;
  readonly tokens: { admin: string; mbp: string; nodeb: string; query: string };
  post(
    url: string,
    body: unknown,
    token?: string | null,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  get(url: string, token?: string | null): Promise<LightMyRequestResponse>;
  /** Past the start waits: both candidates report, in requests that count, never having seen a generation. */
  settle(): Promise<void>;
  /** Moves the clock `seconds` on, then the timers as far, firing the ones now due (the check schedule's). */
  tick(seconds: number): Promise<void>;
}

export async function harness(
  t: Test,
  extra: Record<string, unknown> = {},
  opts: {
    dir?: string;
    prober?: Prober;
    clockStart?: number;
    realProbes?: boolean;
    restart?: boolean;
    registry?: boolean;
    processMetrics?: boolean;
    limits?: GenerationLimits;
    operator?: boolean;
  } = {},
): Promise<Harness> {
  const dir = opts.dir ?? t.testdir();
  const config = fastConfig(dir, extra);
  const clock = manualClock(opts.clockStart);
  const prober = new FakeProber();
  const time = new FakeTime();
  const rt = await createRuntime({
    config,
    clock,
    timers: time,
    wallClockMs: { now: () => clock.now() * 1000 },
    log: pino({ level: 'silent' }),
    prober: opts.realProbes === true ? undefined : (opts.prober ?? prober),
    processMetrics: opts.processMetrics ?? false,
    hookBackoffMs: 20,
    restart: opts.restart ?? true,
    registry: opts.registry ?? false,
    ...(opts.limits === undefined ? {} : { limits: opts.limits }),
    operator: opts.operator ?? false,
  });
  const app = await rt.app();
  t.teardown(() => rt.close());
  const now = clock.now();
  const tokens = {
    admin: await issueToken(rt.store, 'cloud-vm', 'admin', now),
    mbp: await issueToken(rt.store, 'mbp', 'member', now),
    nodeb: await issueToken(rt.store, 'node-b', 'member', now),
    query: await issueToken(rt.store, 'grafana', 'query', now),
  };
  const h: Harness = {
    dir,
    rt,
    app,
    clock,
    time,
    prober,
    tokens,
    post: (url, body, token = tokens.admin, headers = {}) =>
      app.inject({
        method: 'POST',
        url,
        headers: {
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
      }),
    get: (url, token = null) =>
      app.inject({ method: 'GET', url, headers: token === null ? {} : { authorization: `Bearer ${token}` } }),
    async settle() {
      clock.advance(2 * AGENT_REQUEST_TIMEOUT + 0.5);
      await h.post(
        '/v1/heartbeat',
        { host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        tokens.mbp,
      );
      await h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: 0, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        tokens.nodeb,
      );
    },
    async tick(seconds) {
      clock.advance(seconds);
      await time.advance(seconds * 1000);
    },
  };
  return h;
}

/** `hq-arbiter ARGS` in this process: its exit code and everything it printed. */
export async function arbiterCommand(
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main([...args], { out: (s) => (stdout += s), err: (s) => (stderr += s) });
  return { code, stdout, stderr };
}
