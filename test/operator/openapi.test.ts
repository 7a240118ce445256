/**
 * The OpenAPI document is generated from the real app's routes: the runtime's `buildApp`, with
 * `registerOpenApi` registered before every route (see helper.ts), and the operator plugins
 * (status page, event stream) registered too. Every route the app registers
 * (collected with an `onRoute` hook) must be in the document with its scope and errors.
 */
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { OPENAPI_PATH, OPERATIONS } from '../../apps/arbiter/src/server/openapi.js';
import { PREFIX, operatorHarness } from './helper.js';

async function build(t: Tap.Test, extra: Record<string, unknown> = {}, registry = false) {
  const h = await operatorHarness(t, extra, { harness: { registry } });
  await h.app.ready();
  return { app: h.app, routes: h.routes, admin: h.tokens.admin };
}

type Operation = { 'x-scope'?: string; security?: unknown[]; responses?: Record<string, { description?: string }> };
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** Fastify's `/v1/x/:id` is OpenAPI's `/v1/x/{id}`. */
function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

t.test('every route the real app registers is in the OpenAPI document with its scope', async (t) => {
  const { app, routes } = await build(t);
  const res = await app.inject({ method: 'GET', url: OPENAPI_PATH });
  t.equal(res.statusCode, 200, 'the document is served without a token while openReads is true');
  t.match(res.headers['content-type'], /application\/json/, 'the document is JSON');
  const doc = res.json() as Doc;
  t.match(doc.openapi, /^3\.1/, 'the document is OpenAPI 3.1');
  const methods = routes.flatMap((r) =>
    (Array.isArray(r.method) ? r.method : [r.method]).map((m) => ({
      method: String(m),
      url: r.url,
      scope: (r.config as { scope?: string } | undefined)?.scope ?? 'none',
    })),
  );
  t.ok(methods.length >= 15, `the onRoute hook saw the app's routes (${methods.length})`);
  for (const wanted of [
    '/v1/lease',
    '/v1/lease/acquire',
    '/v1/heartbeat',
    '/v1/check',
    '/v1/maintenance',
    '/v1/events',
    '/metrics',
    '/',
    '/v1/status',
    '/v1/events/stream',
    OPENAPI_PATH,
  ]) {
    t.ok(
      methods.some((m) => m.url === wanted),
      `${wanted} was registered`,
    );
  }
  for (const m of methods) {
    if (m.method === 'HEAD') {
      t.ok(
        methods.some((g) => g.method === 'GET' && g.url.replace(/\/$/, '') === m.url.replace(/\/$/, '')),
        `HEAD ${m.url} mirrors a GET that is documented`,
      );
      continue;
    }
    const op = doc.paths[openapiPath(m.url)]?.[m.method.toLowerCase()];
    t.ok(op !== undefined, `${m.method} ${m.url} is in the document`);
    if (op === undefined) continue;
    t.equal(op['x-scope'], m.scope, `${m.method} ${m.url} states its scope ${m.scope}`);
    t.ok(Array.isArray(op.security), `${m.method} ${m.url} states its security`);
    t.ok(op.responses?.['500'] !== undefined, `${m.method} ${m.url} documents the 500 answer`);
    if (m.scope !== 'none') t.ok(op.responses?.['401'] !== undefined, `${m.method} ${m.url} documents 401`);
    if (m.scope === 'admin' || m.scope === 'member' || m.scope === 'heartbeat')
      t.ok(op.responses?.['403'] !== undefined, `${m.method} ${m.url} documents 403`);
  }
});

t.test('the document carries the TypeBox schemas and the error catalog codes', async (t) => {
  const { app } = await build(t);
  const doc = (await app.inject({ method: 'GET', url: OPENAPI_PATH })).json() as Doc & {
    components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    paths: Record<
      string,
      Record<
        string,
        {
          requestBody?: {
            content?: Record<
              string,
              { schema?: { properties?: Record<string, unknown>; additionalProperties?: unknown } }
            >;
          };
          responses: Record<
            string,
            { description?: string; content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> }
          >;
        }
      >
    >;
  };
  const acquire = doc.paths['/v1/lease/acquire']?.['post'];
  t.ok(
    acquire?.requestBody?.content?.['application/json']?.schema?.properties?.['host'] !== undefined,
    'the acquire body schema names host',
  );
  t.equal(
    acquire?.requestBody?.content?.['application/json']?.schema?.additionalProperties,
    false,
    'the acquire body refuses unknown fields',
  );
  const conflict = doc.components.schemas['LeaseConflict'];
  t.match(
    acquire?.responses['409']?.content?.['application/json']?.schema,
    { anyOf: [{ $ref: '#/components/schemas/LeaseConflict' }, { $ref: '#/components/schemas/Error' }] },
    'the 409 answer is the shared conflict schema, or an error body (a refusal by the generation bounds)',
  );
  t.match(
    acquire?.responses['409']?.description ?? '',
    /HQ_ERR_GENERATION_JUMP/,
    'the 409 answer names the generation-jump code',
  );
  t.ok(conflict?.properties?.['reason'] !== undefined, 'the 409 conflict answer has its reason');
  t.match(acquire?.responses['412']?.description ?? '', /HQ_ERR_PRECONDITION/, 'the 412 answer names its catalog code');
  t.match(
    acquire?.responses['415']?.description ?? '',
    /HQ_ERR_UNSUPPORTED_MEDIA/,
    'the 415 answer names its catalog code',
  );
  t.match(
    acquire?.responses['403']?.description ?? '',
    /HQ_ERR_WRONG_HOST/,
    'the 403 answer names the wrong-host code',
  );
  const lease = doc.paths['/v1/lease']?.['get'];
  t.same(
    lease?.responses['200']?.content?.['application/json']?.schema,
    { $ref: '#/components/schemas/LeaseRecord' },
    'GET /v1/lease answers the shared lease record',
  );
  t.ok(
    doc.components.schemas['LeaseRecord']?.properties?.['generation'] !== undefined,
    'the lease record schema is in the document',
  );
  t.ok(
    doc.paths['/metrics']?.['get']?.responses['200']?.content?.['text/plain; version=0.0.4'] !== undefined,
    '/metrics is documented as Prometheus text',
  );
  t.ok(
    doc.paths['/']?.['get']?.responses['200']?.content?.['text/html'] !== undefined,
    'the status page is documented as HTML',
  );
  t.ok(
    doc.paths['/v1/events/stream']?.['get']?.responses['200']?.content?.['text/event-stream'] !== undefined,
    'the event stream is documented as text/event-stream',
  );
  t.same((doc.paths['/v1/health']?.['get'] as { security?: unknown })?.security, [], '/v1/health needs no token');
});

type FullOperation = {
  operationId?: string;
  summary?: string;
  tags?: string[];
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Record<string, unknown> }> }>;
};

t.test('the document is valid OpenAPI 3.1 that code generators and Swagger UI can use', async (t) => {
  const { app, routes } = await build(t, {}, true);
  const doc = (await app.inject({ method: 'GET', url: OPENAPI_PATH })).json() as {
    tags: { name: string }[];
    paths: Record<string, Record<string, FullOperation>>;
    components: { schemas?: Record<string, { properties?: Record<string, unknown> }> };
  };
  const validator = new Validator();
  const result = await validator.validate(structuredClone(doc)); // it resolves the $refs in its copy
  t.ok(
    result.valid,
    `the OpenAPI 3.1 schema validator accepts the document (errors: ${JSON.stringify(result.errors)})`,
  );
  t.doesNotThrow(() => validator.resolveRefs(), 'every $ref resolves');

  const tags = new Set(doc.tags.map((x) => x.name));
  const ids = new Map<string, string>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const where = `${method.toUpperCase()} ${path}`;
      t.match(op.operationId, /^[a-z][A-Za-z0-9]+$/, `${where} has an operationId`);
      t.notOk(
        ids.has(op.operationId ?? ''),
        `${where}: operationId ${op.operationId} is unique (also on ${ids.get(op.operationId ?? '')})`,
      );
      ids.set(op.operationId ?? '', where);
      t.ok(typeof op.summary === 'string' && op.summary.length > 0, `${where} has a summary`);
      t.equal(op.tags?.length, 1, `${where} has one tag`);
      t.ok(tags.has(op.tags?.[0] ?? ''), `${where}: its tag "${op.tags?.[0]}" is one of the document's tags`);
      for (const [status, r] of Object.entries(op.responses ?? {})) {
        t.ok(
          typeof r.description === 'string' && r.description !== '' && r.description !== 'Default Response',
          `${where} ${status} has a description of its own (${r.description})`,
        );
      }
    }
  }
  const own = routes.filter((r) => r.method !== 'HEAD' && !r.url.startsWith(`${PREFIX}/`));
  t.ok(
    own.some((r) => r.url === '/v1/resources/register'),
    'the registry routes are part of this app',
  );
  for (const r of own) {
    const key = `${String(r.method)} ${r.url}`;
    t.ok(OPERATIONS[key] !== undefined, `${key} has its id, summary and tag in OPERATIONS (not the derived fallback)`);
  }

  const record = { $ref: '#/components/schemas/LeaseRecord' };
  t.ok(
    doc.components.schemas?.['LeaseRecord']?.properties?.['generation'] !== undefined,
    'the lease record is one shared component',
  );
  t.same(
    doc.paths['/v1/lease']?.['get']?.responses?.['200']?.content?.['application/json']?.schema,
    record,
    'GET /v1/lease answers the shared lease record by $ref',
  );
  t.same(
    doc.components.schemas?.['LeaseConflict']?.properties?.['lease'],
    record,
    'the conflict answer refers to the lease record too',
  );
  const heartbeatProperties = doc.paths['/v1/heartbeat']?.['post']?.responses?.['200']?.content?.['application/json']
    ?.schema?.['properties'] as Record<string, unknown> | undefined;
  t.same(heartbeatProperties?.['lease'], record, 'so does the heartbeat answer');
  const text = JSON.stringify(doc.paths);
  t.notOk(text.includes('"dualUnreachableStreak"'), 'the lease record is not repeated inline anywhere under paths');
  t.same(
    doc.paths['/v1/lease/acquire']?.['post']?.responses?.['412']?.content?.['application/json']?.schema,
    { $ref: '#/components/schemas/Error' },
    'error answers share the error body',
  );
  t.equal(
    doc.paths['/v1/heartbeat']?.['post']?.tags?.[0],
    'lease',
    '/v1/heartbeat is tagged lease (not with its scope name)',
  );
});

t.test('with openReads false the document itself needs a token', async (t) => {
  const { app, admin } = await build(t, { auth: { openReads: false } });
  const anon = await app.inject({ method: 'GET', url: OPENAPI_PATH });
  t.equal(anon.statusCode, 401, 'without a token the document is refused');
  const res = await app.inject({ method: 'GET', url: OPENAPI_PATH, headers: { authorization: `Bearer ${admin}` } });
  t.equal(res.statusCode, 200, 'with a token it is served');
  const op = (res.json() as Doc).paths['/v1/lease']?.['get'];
  t.same(op?.security, [{ bearer: [] }], 'read routes then require the bearer token');
});
