/**
 * The per-route transform of the OpenAPI document: scope and security, the error answers the shell can give,
 * ids and summaries from OPERATIONS, request bodies as the server reads them.
 */
import type { RouteOptions } from 'fastify';
import {
  ERRORS,
  PROTOCOL_HEADER,
  PROTOCOL_PREVIOUS,
  PROTOCOL_VERSION,
  REPLICATION_ERRORS,
  STREAM_ERRORS,
  fieldsAfter,
  type CatalogEntry,
} from '@hq/protocol';
import { ErrorBody, ManifestSchema } from '../schemas/generated.js';
import type { RouteScope } from '../plugins/context.js';

import { OPERATIONS } from './openapi-operations.js';

const SCOPE_TEXT: Readonly<Record<RouteScope, string>> = Object.freeze({
  none: 'No token.',
  read: 'Any valid token; none needed while auth.openReads is true (the query scope is enough).',
  member: 'A member token acting for its own host, or an admin token.',
  heartbeat: 'A member token acting for its own host.',
  admin: 'An admin token.',
});

/** Catalog codes by HTTP status, for answers a route declares without a description. */
function catalogText(status: number): string | undefined {
  const entries = Object.values(ERRORS).filter((e) => e.status === status);
  return entries.length === 0 ? undefined : entries.map((e) => `${e.code}: ${e.message}`).join('; ');
}

/** `GET /t/v1/x/:id` → `getTV1XId` (for routes missing from OPERATIONS). */
function derivedId(method: string, url: string): string {
  const words = url.split(/[^A-Za-z0-9]+/).filter((w) => w !== '');
  return method.toLowerCase() + words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');
}

/** Answers that are not JSON, by route URL. */
const MEDIA: ReadonlyMap<string, string> = new Map([
  ['/metrics', 'text/plain; version=0.0.4'],
  ['/', 'text/html'],
  ['/v1/events/stream', 'text/event-stream'],
]);

/** Mutations that honour `If-Match: "<revision>"`. */
const IF_MATCH = new Set([
  '/v1/lease/acquire',
  '/v1/lease/renew',
  '/v1/lease/release',
  '/v1/lease/transfer',
  '/v1/heartbeat',
  '/v1/maintenance',
]);

function scopeOf(route: { readonly config?: unknown }): RouteScope {
  const s = (route.config as { scope?: unknown } | undefined)?.scope;
  return s === 'read' || s === 'member' || s === 'heartbeat' || s === 'admin' ? s : 'none';
}

function errorResponse(entries: readonly CatalogEntry[], extra?: string): Record<string, unknown> {
  const text = entries.map((e) => `${e.code}: ${e.message}`).join('; ');
  return { ...ErrorBody, description: extra === undefined ? text : `${text}; ${extra}` };
}

/** The error answers a route can give besides those its schema declares. */
export function impliedErrors(
  url: string,
  method: string,
  scope: RouteScope,
  hasBody: boolean,
): Map<number, Record<string, unknown>> {
  const out = new Map<number, Record<string, unknown>>();
  const why = [
    ...(hasBody || url.includes(':') || url === '/v1/events' || url === '/v1/events/stream'
      ? [
          'the request does not match the schema (a path parameter over 100 characters or a malformed percent escape too)',
        ]
      : []),
    ...(scope !== 'none' ? ['more than one Authorization header'] : []),
    ...(fieldsAfter(PROTOCOL_PREVIOUS, `${method} ${url}`).length > 0
      ? [`a field of protocol ${PROTOCOL_VERSION} without ${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}`]
      : []),
  ];
  const bad: CatalogEntry[] =
    why.length > 0 ? [ERRORS.BAD_REQUEST, ERRORS.PROTOCOL_VERSION] : [ERRORS.PROTOCOL_VERSION];
  out.set(400, errorResponse(bad, [...why, `an ${PROTOCOL_HEADER} header this arbiter does not serve`].join('; or ')));
  if (scope !== 'none') {
    out.set(
      401,
      errorResponse(
        [ERRORS.UNAUTHORIZED],
        scope === 'read'
          ? 'only when a token is sent and is not valid, or auth.openReads is false'
          : 'no token, or an unknown or revoked one',
      ),
    );
  }
  if (scope === 'member' || scope === 'heartbeat' || scope === 'admin')
    out.set(403, errorResponse(scope === 'admin' ? [ERRORS.FORBIDDEN] : [ERRORS.FORBIDDEN, ERRORS.WRONG_HOST]));
  if (IF_MATCH.has(url)) out.set(412, errorResponse([ERRORS.PRECONDITION]));
  if (method !== 'GET' && method !== 'HEAD' && method !== 'DELETE') {
    out.set(413, errorResponse([ERRORS.TOO_LARGE]));
    out.set(415, errorResponse([ERRORS.UNSUPPORTED_MEDIA]));
  }
  out.set(500, errorResponse([ERRORS.INTERNAL], 'never with detail'));
  const busy = [
    'the arbiter is shutting down',
    `${ERRORS.NOT_ELECTED.code} or ${ERRORS.STORE_UNAVAILABLE.code} (store etcd: nothing was decided)`,
    ...(url === '/v1/events/stream'
      ? [`${STREAM_ERRORS.TOO_MANY_STREAMS.code}: ${STREAM_ERRORS.TOO_MANY_STREAMS.message}`]
      : []),
    ...(url === '/v1/leases/port' && method === 'POST'
      ? [
          `${ERRORS.BAND_FULL.code}: every port of the test band is leased, or the machine already holds its share (half the band)`,
        ]
      : []),
  ];
  out.set(503, { ...ErrorBody, description: busy.join('; ') });
  return out;
}

type AnyRoute = Pick<RouteOptions, 'url' | 'method' | 'config'>;

/** The per-route transform (exported for the tests). */
export function transformRoute(openReads: boolean) {
  return ({
    schema,
    url,
    route,
  }: {
    schema: unknown;
    url: string;
    route: AnyRoute;
  }): { schema: Record<string, unknown>; url: string } => {
    const s: Record<string, unknown> = { ...((schema as Record<string, unknown> | undefined) ?? {}) };
    const scope = scopeOf(route);
    const method = Array.isArray(route.method) ? String(route.method[0]) : String(route.method);
    s['x-scope'] = scope;
    const scopeText = `Scope: ${scope}. ${SCOPE_TEXT[scope]}`;
    s['description'] = typeof s['description'] === 'string' ? `${s['description']}\n\n${scopeText}` : scopeText;
    s['security'] = scope === 'none' ? [] : scope === 'read' && openReads ? [{}, { bearer: [] }] : [{ bearer: [] }];
    const text = OPERATIONS[`${method} ${url}`];
    s['operationId'] = text?.operationId ?? derivedId(method, url);
    s['summary'] = text?.summary ?? `${method} ${url}`;
    s['tags'] = [text?.tag ?? 'operator'];
    const response: Record<string, unknown> = { ...((s['response'] as Record<string, unknown> | undefined) ?? {}) };
    const okText = text?.ok ?? 'OK';
    const ok = response['200'] as Record<string, unknown> | undefined;
    if (ok === undefined && response['2xx'] === undefined) response['200'] = { description: okText };
    else if (ok !== undefined && ok['description'] === undefined) response['200'] = { ...ok, description: okText };
    const implied = impliedErrors(url, method, scope, s['body'] !== undefined);
    for (const [status, body] of implied) {
      const declared = response[String(status)] as Record<string, unknown> | undefined;
      if (declared === undefined) response[String(status)] = body;
      else if (declared['description'] === undefined && typeof declared === 'object')
        response[String(status)] = { ...declared, description: body['description'] };
    }
    for (const [status, declared] of Object.entries(response)) {
      const d = declared as Record<string, unknown>;
      if (typeof d !== 'object' || d === null || d['description'] !== undefined) continue;
      const fallback =
        status === '409'
          ? `Refused by the lease or registry state; the body says why. ${catalogText(409) ?? ''}`.trim()
          : (catalogText(Number(status)) ?? `HTTP ${status}`);
      response[status] = { ...d, description: fallback };
    }
    s['response'] = response;
    if (s['body'] !== undefined) s['body'] = documentedBody(method, url, s['body']);
    const media = MEDIA.get(url);
    if (media !== undefined && s['produces'] === undefined) s['produces'] = [media, 'application/json'];
    return { schema: s, url };
  };
}

/**
 * `patternProperties` as `propertyNames` + `additionalProperties` (the same constraint):
 * @fastify/swagger turns `patternProperties` into `additionalProperties` and drops the key
 * pattern, which would document keys the server refuses.
 */
export function keepKeyPatterns(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(keepKeyPatterns);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = keepKeyPatterns(v);
  const pp = out['patternProperties'] as Record<string, unknown> | undefined;
  if (pp !== undefined && Object.keys(pp).length === 1 && out['additionalProperties'] === false) {
    const [[pattern, value]] = Object.entries(pp) as [[string, unknown]];
    delete out['patternProperties'];
    out['propertyNames'] = { pattern };
    out['additionalProperties'] = value;
  }
  return out;
}

/**
 * A request body as the document states it: key patterns kept; each field of a later
 * protocol marked `x-hq-protocol-since` (a request without that `hq-protocol` is refused with
 * `HQ_ERR_PROTOCOL_VERSION`); the survival manifest with its schema (the route reads it
 * itself, answering `HQ_ERR_BAD_MANIFEST`, so the route's own schema leaves it open).
 */
function documentedBody(method: string, url: string, body: unknown): unknown {
  const out = keepKeyPatterns(body) as Record<string, unknown>;
  const props = out['properties'] as Record<string, Record<string, unknown>> | undefined;
  if (props === undefined) return out;
  for (let v = PROTOCOL_PREVIOUS; v < PROTOCOL_VERSION; v++) {
    for (const f of fieldsAfter(v, `${method} ${url}`))
      if (props[f] !== undefined && props[f]['x-hq-protocol-since'] === undefined)
        props[f] = { ...props[f], 'x-hq-protocol-since': v + 1 };
  }
  if (method === 'PUT' && url === '/v1/survival/:tier/:generation' && props['manifest'] !== undefined) {
    props['manifest'] = {
      ...(keepKeyPatterns(ManifestSchema) as Record<string, unknown>),
      description: `The survival manifest: its generation and tier those of the path, holder the token's machine, leaseGeneration at least 1, createdAt a date, paths relative and distinct; else ${REPLICATION_ERRORS.BAD_MANIFEST.code}.`,
    };
  }
  return out;
}
