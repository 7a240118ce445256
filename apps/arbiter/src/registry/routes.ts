/**
 * The registry's HTTP API. Register after the auth plugin (`hq-auth`): routes declare
 * their scope in `config.scope` and read the caller from `req.principal` (set by that plugin);
 * refusals are `HttpError`s, answered `{error, message}` by the app's error handler. Every write
 * goes through one `GroupCommit` (the writes of one event-loop turn share a COMMIT); the clock is
 * read when the group runs, inside its transaction's turn.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { ERRORS, registryError, type RegistryRefusal, type Resource } from '@hq/protocol';
import { HttpError } from '@hq/runtime/refusal';
import { GroupCommit } from './group-commit.js';
import { inBand, type Actor, type AttrValue, type Attrs, type ResourceRow } from './decide.js';
import { attrsToObject, type RegistryStore } from './store.js';
import {
  Deleted,
  ErrorBody,
  LeaseIdHeaders,
  PortLeaseAnswer,
  PortLeaseBody,
  PortLeasesAnswer,
  PortParams,
  PortReleased,
  RegisterBody,
  ResourceHeartbeatBody,
  ResourceOut,
  ResourceParams,
  ResourcesAnswer,
  ResourcesQuery,
} from '../schemas/generated.js';

export interface RegistryRoutesOptions {
  readonly store: RegistryStore;
  /** The arbiter's clock in epoch milliseconds (e.g. `() => arbiter.now() * 1000`). */
  readonly now: () => number;
  /** A new lease id, 32 hex digits (tests may pin it). */
  readonly newLeaseId?: () => string;
}

function refuse(reason: RegistryRefusal, message: string): never {
  throw new HttpError(registryError(reason), message);
}

function actorOf(req: FastifyRequest): Actor {
  const p = req.principal;
  // The auth plugin never lets a member route through without a principal; refuse if unwired.
  if (p === null || p === undefined) throw new HttpError(ERRORS.UNAUTHORIZED);
  return { machine: p.machine, admin: p.scope === 'admin' };
}

function attrsMap(o: { [key: string]: unknown } | undefined): Attrs | undefined {
  if (o === undefined) return undefined;
  const m = new Map<string, AttrValue>();
  for (const [k, v] of Object.entries(o)) m.set(k, v as AttrValue);
  return m;
}

export function resourceOut(r: ResourceRow): Resource {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    machine: r.machine,
    owner: r.owner,
    attrs: attrsToObject(r.attrs),
    observedAt: r.observedAt,
    ttlMs: r.ttlMs,
    registeredAt: r.registeredAt,
    renewedAt: r.renewedAt,
    expiresAt: r.expiresAt,
  };
}

function emptyBody(body: unknown): void {
  if (
    body !== undefined &&
    (typeof body !== 'object' || body === null || Array.isArray(body) || Object.keys(body).length > 0)
  ) {
    throw new HttpError(ERRORS.BAD_REQUEST, 'body must be empty or {}');
  }
}

function portOf(store: RegistryStore, text: string): number {
  const port = Number(text);
  if (!inBand(port, store.bands.test)) {
    throw new HttpError(
      ERRORS.NOT_FOUND,
      `port ${text} is not in the test band ${store.bands.test.from}–${store.bands.test.to}`,
    );
  }
  return port;
}

const refusals = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };

type App = Parameters<FastifyPluginAsyncTypebox<RegistryRoutesOptions>>[0];

/** What both groups of routes use: the store, the clock, and the group commit every write goes through. */
interface Routes {
  readonly store: RegistryStore;
  readonly now: () => number;
  readonly group: GroupCommit;
  readonly newLeaseId: () => string;
}

export const registryRoutes: FastifyPluginAsyncTypebox<RegistryRoutesOptions> = async (app, opts) => {
  const routes: Routes = {
    store: opts.store,
    now: opts.now,
    group: new GroupCommit(opts.store),
    newLeaseId: opts.newLeaseId ?? (() => randomBytes(16).toString('hex')),
  };
  resourceRoutes(app, routes);
  portLeaseRoutes(app, routes);
  heldPortRoutes(app, routes);
};

/** Resources: register, heartbeat, list, delete. */
function resourceRoutes(app: App, { store, now, group }: Routes): void {
  app.post(
    '/v1/resources/register',
    { config: { scope: 'member' }, schema: { body: RegisterBody, response: { 200: ResourceOut, ...refusals } } },
    async (req) => {
      const b = req.body;
      const actor = actorOf(req);
      const input = {
        id: b.id,
        name: b.name,
        kind: b.kind,
        machine: b.machine,
        attrs: attrsMap(b.attrs) ?? new Map(),
        observedAt: b.observedAt,
        ttlMs: b.ttlMs,
      };
      const d = await group.submit(() => store.register(input, actor, now()));
      if (!d.ok) refuse(d.reason, d.message);
      return resourceOut(d.resource);
    },
  );

  app.post(
    '/v1/resources/:id/heartbeat',
    {
      config: { scope: 'member' },
      schema: { params: ResourceParams, body: ResourceHeartbeatBody, response: { 200: ResourceOut, ...refusals } },
    },
    async (req) => {
      const { id } = req.params;
      const attrs = attrsMap(req.body.attrs);
      const actor = actorOf(req);
      const d = await group.submit(() => store.heartbeatResource(id, attrs, actor, now()));
      if (!d.ok) refuse(d.reason, d.message);
      return resourceOut(d.resource);
    },
  );

  app.get(
    '/v1/resources',
    {
      config: { scope: 'read' },
      schema: { querystring: ResourcesQuery, response: { 200: ResourcesAnswer, 400: ErrorBody, 401: ErrorBody } },
    },
    async (req) => {
      const t = now();
      const filter = {
        ...(req.query.kind !== undefined ? { kind: req.query.kind } : {}),
        ...(req.query.machine !== undefined ? { machine: req.query.machine } : {}),
      };
      return { resources: (await store.listResources(filter, t)).map(resourceOut), now: t };
    },
  );

  app.delete(
    '/v1/resources/:id',
    { config: { scope: 'member' }, schema: { params: ResourceParams, response: { 200: Deleted, ...refusals } } },
    async (req) => {
      emptyBody(req.body);
      const { id } = req.params;
      const actor = actorOf(req);
      const d = await group.submit(() => store.deleteResource(id, actor, now()));
      if (!d.ok) refuse(d.reason, d.message);
      return { ok: true as const, id: req.params.id };
    },
  );
}

/** Port leases in the test band: lease one, list them. */
function portLeaseRoutes(app: App, { store, now, group, newLeaseId }: Routes): void {
  app.post(
    '/v1/leases/port',
    {
      config: { scope: 'member' },
      schema: { body: PortLeaseBody, response: { 200: PortLeaseAnswer, ...refusals, 503: ErrorBody } },
    },
    async (req) => {
      const actor = actorOf(req);
      const b = req.body;
      if (!actor.admin && b.machine !== actor.machine)
        refuse('wrong-host', `this member token belongs to "${actor.machine}", not "${b.machine}"`);
      const ask = { machine: b.machine, purpose: b.purpose, ttlMs: b.ttlMs, excluded: b.excluded ?? [] };
      const leaseId = newLeaseId();
      const d = await group.submit(() => store.allocatePort(ask, leaseId, now()));
      if (!d.ok) refuse(d.reason, d.message);
      req.log.info(
        {
          category: 'control',
          event: 'port-leased',
          port: d.lease.port,
          machine: d.lease.machine,
          purpose: d.lease.purpose,
          reused: d.reused !== null,
        },
        'port leased',
      );
      return { port: d.lease.port, leaseId: d.lease.leaseId, expiresAt: d.lease.expiresAt, ttlMs: d.lease.ttlMs };
    },
  );

  app.get(
    '/v1/leases/port',
    { config: { scope: 'read' }, schema: { response: { 200: PortLeasesAnswer, 401: ErrorBody } } },
    async () => {
      const t = now();
      const leases = (await store.listPortLeases(t)).map((l) => ({
        port: l.port,
        machine: l.machine,
        purpose: l.purpose,
        createdAt: l.createdAt,
        renewedAt: l.renewedAt,
        expiresAt: l.expiresAt,
      }));
      const { reserved, test, offline } = store.bands;
      return { leases, bands: { reserved: [...reserved], test: { ...test }, offline: { ...offline } }, now: t };
    },
  );
}

/** A held port lease, named by its id in `x-port-lease-id`: renew, release. */
function heldPortRoutes(app: App, { store, now, group }: Routes): void {
  app.post(
    '/v1/leases/port/:port/heartbeat',
    {
      config: { scope: 'member' },
      schema: { params: PortParams, headers: LeaseIdHeaders, response: { 200: PortLeaseAnswer, ...refusals } },
    },
    async (req) => {
      emptyBody(req.body);
      const port = portOf(store, req.params.port);
      const leaseId = req.headers['x-port-lease-id'];
      const actor = actorOf(req);
      const d = await group.submit(() => store.renewPort(port, leaseId, actor, now()));
      if (!d.ok) refuse(d.reason, d.message);
      return { port, leaseId: d.lease.leaseId, expiresAt: d.lease.expiresAt, ttlMs: d.lease.ttlMs };
    },
  );

  app.delete(
    '/v1/leases/port/:port',
    {
      config: { scope: 'member' },
      schema: { params: PortParams, headers: LeaseIdHeaders, response: { 200: PortReleased, ...refusals } },
    },
    async (req) => {
      emptyBody(req.body);
      const port = portOf(store, req.params.port);
      const leaseId = req.headers['x-port-lease-id'];
      const actor = actorOf(req);
      const d = await group.submit(() => store.releasePort(port, leaseId, actor, now()));
      if (!d.ok) refuse(d.reason, d.message);
      req.log.info({ category: 'control', event: 'port-released', port, machine: d.lease.machine }, 'port released');
      return { ok: true as const, port };
    },
  );
}
