/**
 * The passes over the whole OpenAPI document: shared schemas under `components.schemas`, the protocol and
 * answer headers, the blob upload's body. Apart from the per-route transform, which sees one route at a time.
 */
import { OPENAPI_PATH } from './openapi-operations.js';
import { ERRORS, PROTOCOL_HEADER, PROTOCOL_PREVIOUS, PROTOCOL_VERSION } from '@hq/protocol';

/** Schemas (by their TypeBox `title`) that the document shares under `components.schemas`. */
export const SHARED_SCHEMAS: ReadonlySet<string> = new Set([
  'LeaseRecord',
  'LeaseView',
  'LeaseGranted',
  'LeaseConflict',
  'Error',
  'Event',
]);

/** The header every request may carry and every answer carries: the protocol version. */
const PROTOCOL_PARAMETER = Object.freeze({
  in: 'header',
  name: PROTOCOL_HEADER,
  required: false,
  description: `The hq protocol version the request speaks (absent: ${PROTOCOL_PREVIOUS}). A body field marked x-hq-protocol-since needs at least that version; a version not served is ${ERRORS.PROTOCOL_VERSION.code}.`,
  schema: {
    type: 'string',
    enum: Array.from({ length: PROTOCOL_VERSION - PROTOCOL_PREVIOUS + 1 }, (_, i) => String(PROTOCOL_PREVIOUS + i)),
  },
});

const VERSION_HEADER = Object.freeze({
  description: "The protocol version the answer speaks (the request's).",
  schema: { type: 'string', pattern: '^[0-9]{1,6}$' },
});

/** Answer headers besides the protocol version. */
const ANSWER_HEADERS: Readonly<Record<string, Record<string, unknown>>> = Object.freeze({
  etag: {
    description: 'The lease record\'s revision (`"N"`), for If-Match.',
    schema: { type: 'string', pattern: '^"[0-9]+"$' },
  },
  'cache-control': { description: 'Whether the answer may be reused.', schema: { type: 'string' } },
  'content-security-policy': {
    description: "The status page's policy: its own inline script by hash, nothing from elsewhere.",
    schema: { type: 'string' },
  },
  'x-content-type-options': { description: '`nosniff`.', schema: { type: 'string' } },
  'referrer-policy': { description: '`no-referrer`.', schema: { type: 'string' } },
  'x-frame-options': { description: '`DENY`.', schema: { type: 'string' } },
  'x-accel-buffering': { description: '`no`: a reverse proxy passes each event at once.', schema: { type: 'string' } },
});

/** Operations whose answers carry the lease record, and with it its revision as `ETag`. */
const RECORD_ANSWERS = new Set([
  'get /v1/lease',
  'post /v1/lease/acquire',
  'post /v1/lease/renew',
  'post /v1/lease/release',
  'post /v1/lease/stepped-down',
  'post /v1/heartbeat',
  'post /v1/lease/transfer',
  'post /v1/lease/accept-generation',
  'put /v1/maintenance',
  'post /v1/check',
]);

/** The ANSWER_HEADERS an answer may carry. */
function answerHeaders(path: string, method: string, status: string): string[] {
  const out: string[] = [];
  if (RECORD_ANSWERS.has(`${method} ${path}`) && (status === '200' || status === '409' || status === '412'))
    out.push('etag');
  if (method !== 'get' || status !== '200') return out;
  if (path === OPENAPI_PATH || path === '/v1/status' || path === '/' || path === '/v1/events/stream')
    out.push('cache-control');
  if (path === '/') out.push('content-security-policy', 'x-content-type-options', 'referrer-policy', 'x-frame-options');
  if (path === '/v1/events/stream') out.push('x-accel-buffering');
  return out;
}

/** The blob upload's body (the route reads the raw stream; Fastify has no schema for it). */
const BLOB_BODY = Object.freeze({
  required: true,
  description: "The blob's bytes; their sha256 must be the path's (else HQ_ERR_CHECKSUM).",
  content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
});

/**
 * What the document says of every operation besides its route's schema: the `hq-protocol`
 * header on every request and answer, the other answer headers, and the blob upload's body.
 */
export function declareHeaders(doc: Record<string, unknown>): Record<string, unknown> {
  const paths = doc['paths'] as Record<string, Record<string, Record<string, unknown>>> | undefined;
  for (const [path, ops] of Object.entries(paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      const params = (op['parameters'] as Array<Record<string, unknown>> | undefined) ?? [];
      if (!params.some((p) => p['in'] === 'header' && p['name'] === PROTOCOL_HEADER))
        op['parameters'] = [...params, { ...PROTOCOL_PARAMETER }];
      if (
        method === 'put' &&
        path === '/v1/survival/{tier}/{generation}/blobs/{sha256}' &&
        op['requestBody'] === undefined
      )
        op['requestBody'] = BLOB_BODY;
      const responses = (op['responses'] as Record<string, Record<string, unknown>> | undefined) ?? {};
      for (const [status, r] of Object.entries(responses)) {
        const headers: Record<string, unknown> = {
          ...((r['headers'] as Record<string, unknown> | undefined) ?? {}),
          [PROTOCOL_HEADER]: VERSION_HEADER,
        };
        for (const h of answerHeaders(path, method, status)) headers[h] = ANSWER_HEADERS[h];
        r['headers'] = headers;
      }
    }
  }
  return doc;
}

/**
 * Moves every schema whose `title` is in `SHARED_SCHEMAS` to `components.schemas[title]` and puts
 * `{$ref}` in its place (inner ones first, so the lease record inside a conflict is a `$ref` too).
 * A description on the shared schema is dropped: @fastify/swagger copies the answer's description
 * there, and the answer keeps it. Two different schemas with one title
 * would be a programming error; the second stays inline rather than being misdescribed.
 */
export function shareSchemas(doc: Record<string, unknown>): Record<string, unknown> {
  const shared = new Map<string, { json: string; schema: Record<string, unknown> }>();
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) out[k] = walk(v);
    const title = out['title'];
    if (typeof title !== 'string' || !SHARED_SCHEMAS.has(title)) return out;
    const { description, ...schema } = out;
    const json = JSON.stringify(schema);
    const seen = shared.get(title);
    if (seen === undefined) shared.set(title, { json, schema });
    else if (seen.json !== json) return out;
    void description;
    return { $ref: `#/components/schemas/${title}` };
  };
  const paths = walk(doc['paths']);
  const components = { ...((doc['components'] as Record<string, unknown> | undefined) ?? {}) };
  const schemas = { ...((components['schemas'] as Record<string, unknown> | undefined) ?? {}) };
  for (const [title, { schema }] of [...shared].sort(([a], [b]) => a.localeCompare(b))) schemas[title] = schema;
  return { ...doc, paths, components: { ...components, schemas } };
}
