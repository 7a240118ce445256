/**
 * The status page (`GET /`): one server-rendered HTML document for an operator's phone — the
 * holder and generation large, the validity counting down, the maintenance banner, one row per
 * host, the last 50 events and the worst-case failover time. No build, no CDN: the CSS and a
 * small script are inline, and a Content-Security-Policy allows nothing else (the script by its
 * hash, `connect-src 'self'`).
 *
 * The script refreshes the page in place every `refreshSeconds`: it fetches `v1/lease`,
 * `v1/status` (what the page adds to the record: heartbeat ages, load, the maintenance reason,
 * failover) and `v1/events?after=<last id>`, and rebuilds only the parts that changed, with
 * `textContent` and `createElement` — never `innerHTML` — so no value from the arbiter is ever
 * parsed as HTML. The server side escapes every value it prints (`esc`). URLs are relative, so
 * the page also works behind a reverse proxy under a sub-path.
 *
 * Access: both routes have scope `read`, like the other GETs — open when `auth.openReads` is
 * true (the tailnet is the fence), a bearer token otherwise (a browser cannot send one, so with
 * `openReads: false` the page is for `curl` or a proxy that adds the header).
 *
 * The plugin reads everything through its options, so it depends on no arbiter internals;
 * `statusPageOptions(app.hq)` builds them from the app's context. The folder: `model` (pure:
 * what both renderers show), `schemas` (`GET /v1/status`), `render` (HTML, CSS, CSP),
 * `browser.js` (the script, a real file inlined by hash), `load` (the registry's load column),
 * and this file, the routes.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ArbiterState } from '@hq/lease-core';
import { PROTOCOL_VERSION, type LeaseRecord } from '@hq/protocol';
import type { HqContext } from '../../plugins/context.js';
import type { EventRow } from '../../store/store.js';
import { ErrorBody, StatusAnswer, StatusPageHtml } from '../../schemas/generated.js';
import {
  TIMELINE_EVENTS,
  arbitersText,
  statusModel,
  statusSettings,
  tailEvents,
  type HostVersion,
  type PeerPaths,
  type Refusal,
  type StatusSettings,
} from './model.js';
import type { LoadLookup } from './load.js';
import type { Awaitable } from '../../awaitable.js';
import type { GenerationRefusalNote } from '../../host-notes.js';
import type { ArbitersT } from '@hq/protocol/schemas';
import type { StatusAnswerT } from '../../schemas/status.js';

function withArbiters(m: StatusAnswerT, opts: StatusPageOptions): StatusAnswerT {
  if (opts.arbiters === undefined) return m;
  const arbiters = opts.arbiters();
  return { ...m, arbiters, arbitersLine: arbitersText(arbiters) };
}
import { STATUS_CSP, renderStatusPage } from './render.js';

export interface StatusPageOptions {
  /** One consistent read of the arbiter state (`arbiter.read()`). */
  readonly state: () => Awaitable<ArbiterState>;
  /** The API record of that state (`(s) => arbiter.record(s)`). */
  readonly record: (state: ArbiterState) => LeaseRecord;
  /** `store.listEvents(after, limit)`: ascending ids above `after`. */
  readonly listEvents: (after: number, limit: number) => Awaitable<readonly EventRow[]>;
  /** The newest `limit` events, ascending. When absent, found by paging through `listEvents`. */
  readonly recentEvents?: (limit: number) => Awaitable<readonly EventRow[]>;
  readonly settings: (state: ArbiterState) => StatusSettings;
  /** The registry's load for a host, when the registry is there (its `ready()`, when it has one, is awaited before each answer). */
  readonly load?: LoadLookup;
  /** The last request refused for a host's name (a member token of another machine), when any. */
  readonly refused?: (host: string) => Refusal | null;
  /** The last report or grant the generation bounds refused, when any. */
  readonly generationRefusal?: () => GenerationRefusalNote | null;
  /** What each host last said of its version (its heartbeat's protocol and release). */
  readonly versions?: (host: string) => HostVersion | null;
  /** Each candidate's confirmation path to each peer, as its last heartbeat reported it. */
  readonly peerPaths?: () => PeerPaths;
  /** Store etcd: which arbiter decides and etcd's health (absent: a single SQLite arbiter). */
  readonly arbiters?: () => ArbitersT;
  /** Seconds between the page's refreshes. Default 3. */
  readonly refreshSeconds?: number;
  /** The page title. Default "hq". */
  readonly title?: string;
}

/** The options from the app's context: `app.register(statusPage, statusPageOptions(app.hq))`. */
export function statusPageOptions(
  hq: HqContext,
  extra: Partial<Pick<StatusPageOptions, 'load' | 'recentEvents' | 'refreshSeconds' | 'title'>> = {},
): StatusPageOptions {
  return {
    state: () => hq.arbiter.read(),
    record: (s) => hq.arbiter.record(s),
    listEvents: (after, limit) => hq.store.listEvents(after, limit),
    settings: (state) => statusSettings(hq.config, state),
    refused: (host) => hq.arbiter.notes.refusedFor(host),
    generationRefusal: () => hq.arbiter.notes.generationRefusal(),
    versions: (host) =>
      host === hq.config.arbiter
        ? { protocol: PROTOCOL_VERSION, release: hq.version }
        : hq.arbiter.notes.versionOf(host),
    peerPaths: () => hq.arbiter.notes.peerPathsOf(),
    ...(hq.leadership == null ? {} : { arbiters: (() => hq.leadership!.status()) as () => ArbitersT }),
    ...extra,
  };
}

export const statusPage: FastifyPluginAsyncTypebox<StatusPageOptions> = async (app, opts) => {
  const refreshSeconds = opts.refreshSeconds ?? 3;
  const title = opts.title ?? 'hq';

  app.get(
    '/',
    {
      config: { scope: 'read' },
      schema: {
        description:
          'The status page (HTML): holder, generation, validity, maintenance, hosts, the last 50 events and the worst-case failover; refreshes itself.',
        response: { 200: StatusPageHtml, 401: ErrorBody },
      },
    },
    async (_req, reply) => {
      const state = await opts.state();
      await opts.load?.ready?.();
      const record = opts.record(state);
      const model = withArbiters(
        statusModel(state, record, opts.settings(state), opts.load, opts.refused, opts.versions, opts.peerPaths?.()),
        opts,
      );
      const events =
        opts.recentEvents !== undefined
          ? [...(await opts.recentEvents(TIMELINE_EVENTS))]
          : await tailEvents(opts.listEvents, TIMELINE_EVENTS);
      reply
        .type('text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('content-security-policy', STATUS_CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('x-frame-options', 'DENY');
      return renderStatusPage({ record, model, events: events.slice(-TIMELINE_EVENTS), refreshSeconds, title });
    },
  );

  app.get(
    '/v1/status',
    { config: { scope: 'read' }, schema: { response: { 200: StatusAnswer, 401: ErrorBody } } },
    async (_req, reply) => {
      const state = await opts.state();
      await opts.load?.ready?.();
      reply.header('cache-control', 'no-store');
      const model = withArbiters(
        statusModel(
          state,
          opts.record(state),
          opts.settings(state),
          opts.load,
          opts.refused,
          opts.versions,
          opts.peerPaths?.(),
        ),
        opts,
      );
      return { ...model, generationRefusal: opts.generationRefusal?.() ?? null };
    },
  );
};
