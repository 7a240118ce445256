/**
 * The real arbiter app (test/arbiter/helper.ts `harness`: runtime, manual clock, tokens) with
 * the operator pieces added the way app.ts is asked to add them:
 *  - `registerOpenApi` before every route. Until app.ts calls it, the test registers it from the
 *    `fastify.initialization` diagnostics channel, i.e. as the very first plugin of the app that
 *    `buildApp` creates; once app.ts calls it, that call finds it registered and does nothing.
 *  - the status page and the event stream, unless app.ts already registered them (then with
 *    the test's options); and always a second instance of each under `/t` with the test's
 *    options (load, stream timings, the test's own waiters), for the tests that need them
 *    whatever app.ts passes;
 *  - the operator gauges on the runtime's registry (a no-op once runtime.ts registers them).
 * Every route the app registers is collected with an `onRoute` hook from the same channel.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import fp from 'fastify-plugin';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Test } from 'tap';
import { harness, type Harness } from '../arbiter/helper.js';
import { registerOpenApi } from '../../apps/arbiter/src/server/openapi.js';
import {
  statusPage,
  statusPageOptions,
  type StatusPageOptions,
} from '../../apps/arbiter/src/routes/status-page/index.js';
import { EventWaiters, eventStreamRoutes } from '../../apps/arbiter/src/routes/events-stream.js';
import { registerOperatorMetrics } from '../../apps/arbiter/src/operator-metrics.js';

/** Where the instances with the test's options are mounted. */
export const PREFIX = '/t';

export interface OperatorHarness extends Harness {
  readonly routes: RouteOptions[];
  /** The waiters of the test's stream instances (wire them with `wireNotify`). */
  readonly waiters: EventWaiters;
}

/** Makes every committed batch wake the test's waiters too (as runtime.ts does for its own). */
export function wireNotify(h: OperatorHarness): void {
  const sink = h.rt.arbiter.deps.sink;
  const emit = sink.emit.bind(sink);
  sink.emit = (rows) => {
    emit(rows);
    h.waiters.notify(rows);
  };
}

export interface OperatorOptions {
  readonly status?: Partial<Pick<StatusPageOptions, 'load' | 'refreshSeconds' | 'title' | 'recentEvents'>>;
  readonly streamPollMs?: number;
  readonly keepAliveMs?: number;
  readonly maxStreams?: number;
  /** Passed to test/arbiter/helper.ts `harness` (clockStart, …). */
  readonly harness?: Parameters<typeof harness>[2];
}

export async function operatorHarness(
  t: Test,
  extra: Record<string, unknown> = {},
  opts: OperatorOptions = {},
): Promise<OperatorHarness> {
  const routes: RouteOptions[] = [];
  const openReads = (extra['auth'] as { openReads?: boolean } | undefined)?.openReads ?? true;
  const onInit = (message: unknown): void => {
    const app = (message as { fastify: FastifyInstance }).fastify;
    app.addHook('onRoute', (r) => {
      routes.push(r);
    });
    app.register(
      fp(async (root: FastifyInstance) => registerOpenApi(root, { version: '0.0.0-test', openReads }), {
        name: 'hq-openapi-test',
        fastify: '5.x',
      }),
    );
  };
  subscribe('fastify.initialization', onInit);
  let h: Harness;
  try {
    h = await harness(t, extra, opts.harness);
  } finally {
    unsubscribe('fastify.initialization', onInit);
  }
  registerOperatorMetrics(h.rt.metrics.registry, () => h.rt.store.read(), h.rt.config, h.clock);
  const waiters = new EventWaiters();
  const status = { ...statusPageOptions(h.app.hq), ...opts.status };
  const stream = {
    listEvents: (a: number, l: number) => h.rt.store.listEvents(a, l),
    tailAfter: (n: number) => h.rt.store.tailAfter(n),
    waiters,
    pollMs: opts.streamPollMs ?? 1000,
    keepAliveMs: opts.keepAliveMs,
    maxStreams: opts.maxStreams,
    nowMs: () => h.clock.now() * 1000,
  };
  if (!h.app.hasRoute({ method: 'GET', url: '/' })) await h.app.register(statusPage, status);
  if (!h.app.hasRoute({ method: 'GET', url: '/v1/events/stream' })) await h.app.register(eventStreamRoutes, stream);
  await h.app.register(statusPage, { ...status, prefix: PREFIX });
  await h.app.register(eventStreamRoutes, { ...stream, prefix: PREFIX });
  return { ...h, routes, waiters };
}
