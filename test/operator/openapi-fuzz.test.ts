/**
 * A property-based client generated from the OpenAPI document the arbiter serves: for every
 * operation, requests built from the document's own JSON Schemas (valid ones, and near-valid
 * ones with one thing wrong), with no token, the admin token, a member token and a query token,
 * sent to a real `hq-arbiter serve` on loopback (store SQLite, then etcd with fewer requests). A response fails the test when
 * the document does not declare its status, its content type, a header it carries or its body's
 * shape; when it is a 5xx (a documented 503 with its code aside); and when a request the
 * document allows is refused as malformed (`400 HQ_ERR_BAD_REQUEST`, 413, 415), or a body it
 * refuses is accepted.
 *
 * HQ_OPENAPI_RUNS sets the requests per operation (default 24: about 700 requests);
 * HQ_OPENAPI_SEED replays a run (the seed is printed).
 */
import t from 'tap';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { CLI, childEnv, startArbiter, writeConfig } from '../arbiter/child.js';
import { etcdMembers } from '../etcd/members.js';

const RUNS = Number(process.env['HQ_OPENAPI_RUNS'] ?? 24);
const SEED =
  process.env['HQ_OPENAPI_SEED'] === undefined ? Date.now() % 2_147_483_647 : Number(process.env['HQ_OPENAPI_SEED']);

type Schema = Record<string, unknown>;
interface Parameter {
  readonly in: 'path' | 'query' | 'header';
  readonly name: string;
  readonly required?: boolean;
  readonly schema: Schema;
}
interface Answer {
  readonly description: string;
  readonly headers?: Record<string, unknown>;
  readonly content?: Record<string, { schema?: Schema }>;
}
interface Operation {
  readonly operationId: string;
  readonly 'x-scope': string;
  readonly parameters?: Parameter[];
  readonly requestBody?: { required?: boolean; content: Record<string, { schema?: Schema }> };
  readonly responses: Record<string, Answer>;
}
interface Doc {
  readonly paths: Record<string, Record<string, Operation>>;
  readonly components: { schemas: Record<string, Schema> };
}

/** Headers of HTTP itself, which no document lists. */
const TRANSPORT = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'content-type']);
/** The 503 codes an answer may carry: the load or the store, never bad input. */
const BUSY = new Set(['HQ_ERR_BAND_FULL', 'HQ_ERR_NOT_ELECTED', 'HQ_ERR_STORE_UNAVAILABLE', 'HQ_ERR_TOO_MANY_STREAMS']);
/** Names the arbiter knows, mixed into host-like fields so that requests reach the decisions. */
const HOSTS = ['mbp', 'node-b', 'cloud-vm'];
const HOST_FIELDS = new Set(['host', 'to', 'machine', 'target', 'holder', 'handoverTo']);

function resolveRef(doc: Doc, s: Schema): Schema {
  const ref = s['$ref'];
  if (typeof ref !== 'string') return s;
  const name = ref.replace('#/components/schemas/', '');
  return doc.components.schemas[name] as Schema;
}

/** Strips a leading negative lookahead (fast-check's stringMatching does not take one); the filter applies it. */
function generable(pattern: string): string {
  return pattern.replace(/^\^\(\?!(?:[^()]|\([^()]*\))*\)/, '^');
}

/** Values the schema allows (bounded in size, leaning on the boundaries). */
function valid(doc: Doc, raw: Schema, name = ''): fc.Arbitrary<unknown> {
  const s = resolveRef(doc, raw);
  if (Array.isArray(s['enum'])) return fc.constantFrom(...(s['enum'] as unknown[]));
  if ('const' in s) return fc.constant(s['const']);
  for (const k of ['anyOf', 'oneOf'] as const)
    if (Array.isArray(s[k])) return fc.oneof(...(s[k] as Schema[]).map((x) => valid(doc, x, name)));
  const type = s['type'];
  if (Array.isArray(type)) return fc.oneof(...type.map((ty) => valid(doc, { ...s, type: ty }, name)));
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer': {
      const min = typeof s['minimum'] === 'number' ? s['minimum'] : -1_000_000;
      const max = typeof s['maximum'] === 'number' ? s['maximum'] : 1_000_000;
      return fc.oneof(
        fc.integer({
          min: Math.max(min, -(2 ** 31)),
          max: Math.min(max, 2 ** 31 - 1, Math.max(min, -(2 ** 31)) + 100_000),
        }),
        fc.constantFrom(min, max),
      );
    }
    case 'number': {
      const min =
        typeof s['minimum'] === 'number'
          ? s['minimum']
          : typeof s['exclusiveMinimum'] === 'number'
            ? s['exclusiveMinimum']
            : -1e9;
      const max = typeof s['maximum'] === 'number' ? s['maximum'] : 1e9;
      const ex = s['exclusiveMinimum'];
      return fc
        .oneof(fc.double({ min, max, noNaN: true, noDefaultInfinity: true }), fc.constantFrom(max))
        .filter((n) => typeof ex !== 'number' || n > ex);
    }
    case 'string': {
      const minLength = typeof s['minLength'] === 'number' ? s['minLength'] : 0;
      const maxLength = typeof s['maxLength'] === 'number' ? s['maxLength'] : 64;
      let arb: fc.Arbitrary<string>;
      if (typeof s['pattern'] === 'string') {
        const re = new RegExp(s['pattern']);
        arb = fc.stringMatching(new RegExp(generable(s['pattern']))).filter((x) => re.test(x));
      } else {
        arb = fc.string({ minLength, maxLength: Math.min(maxLength, 40) });
      }
      arb = arb.filter((x) => x.length >= minLength && x.length <= maxLength);
      if (HOST_FIELDS.has(name))
        return fc.oneof(
          {
            arbitrary: fc
              .constantFrom(...HOSTS)
              .filter((x) => typeof s['pattern'] !== 'string' || new RegExp(s['pattern']).test(x)),
            weight: 3,
          },
          { arbitrary: arb, weight: 1 },
        );
      return arb;
    }
    case 'array': {
      const items = (s['items'] as Schema | undefined) ?? {};
      const maxItems = typeof s['maxItems'] === 'number' ? s['maxItems'] : 3;
      return fc.array(valid(doc, items, name), {
        minLength: typeof s['minItems'] === 'number' ? s['minItems'] : 0,
        maxLength: Math.min(maxItems, 3),
      });
    }
    case 'object': {
      const props = (s['properties'] as Record<string, Schema> | undefined) ?? {};
      const required = (s['required'] as string[] | undefined) ?? [];
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, v] of Object.entries(props)) model[k] = valid(doc, v, k);
      const base = fc.record(model, { requiredKeys: required.filter((k) => k in props) });
      const extra = s['additionalProperties'];
      if (extra === undefined || extra === false || Object.keys(props).length > 0) return base;
      const keyPattern = (s['propertyNames'] as { pattern?: string } | undefined)?.pattern;
      const keys =
        keyPattern === undefined
          ? fc.string({ minLength: 1, maxLength: 12 })
          : (valid(doc, { type: 'string', pattern: keyPattern }) as fc.Arbitrary<string>);
      const maxKeys = typeof s['maxProperties'] === 'number' ? Math.min(s['maxProperties'], 3) : 3;
      const values = extra === true ? fc.jsonValue({ maxDepth: 1 }) : valid(doc, extra as Schema);
      return fc.dictionary(
        keys.filter((k) => k !== '__proto__'),
        values,
        { maxKeys },
      );
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** One thing wrong with a valid body: a required field gone, an unknown one added, one of the wrong type. */
function nearValid(doc: Doc, raw: Schema): fc.Arbitrary<{ body: unknown; what: string }> | null {
  const s = resolveRef(doc, raw);
  const props = (s['properties'] as Record<string, Schema> | undefined) ?? {};
  const required = ((s['required'] as string[] | undefined) ?? []).filter((k) => k in props);
  if (s['type'] !== 'object' || Object.keys(props).length === 0) return null;
  const body = valid(doc, s) as fc.Arbitrary<Record<string, unknown>>;
  // A value of another type than the property's: a number where an object goes, else an object.
  const wrong = (k: string): unknown =>
    resolveRef(doc, props[k] as Schema)['type'] === 'object' ? 12345 : { not: ['the', 'type'] };
  const ways: Array<fc.Arbitrary<{ body: unknown; what: string }>> = [
    fc
      .tuple(body, fc.constantFrom(...Object.keys(props)))
      .map(([b, k]) => ({ body: { ...b, [k]: wrong(k) }, what: `${k} of the wrong type` })),
  ];
  if (s['additionalProperties'] === false)
    ways.push(body.map((b) => ({ body: { ...b, zzUnknownField: 1 }, what: 'an unknown field' })));
  if (required.length > 0) {
    ways.push(
      fc.tuple(body, fc.constantFrom(...required)).map(([b, k]) => {
        const { [k]: _gone, ...rest } = b;
        return { body: rest, what: `no ${k}` };
      }),
    );
  }
  return fc.oneof(...ways);
}

function fillPath(path: string, params: Record<string, string>): string {
  return path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(params[name] ?? ''));
}

interface Sent {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body?: string | Buffer;
  readonly valid: boolean;
  readonly what: string;
}

function requests(
  doc: Doc,
  path: string,
  method: string,
  op: Operation,
  tokens: Record<string, string | null>,
): fc.Arbitrary<Sent> {
  const params = op.parameters ?? [];
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const p of params) model[`${p.in}:${p.name}`] = valid(doc, p.schema, p.name);
  const required = params.filter((p) => p.required === true || p.in === 'path').map((p) => `${p.in}:${p.name}`);
  const parts = fc.record(model, { requiredKeys: required });
  const json = op.requestBody?.content['application/json']?.schema;
  const octets = op.requestBody?.content['application/octet-stream'] !== undefined;
  const goodBody: fc.Arbitrary<{ body: unknown; what: string } | null> =
    json !== undefined
      ? valid(doc, json).map((b) => ({ body: b, what: 'valid' }))
      : octets
        ? fc.uint8Array({ maxLength: 64 }).map((b) => ({ body: Buffer.from(b), what: 'valid' }))
        : fc.constant(null);
  const badBody = json === undefined ? null : nearValid(doc, json);
  const body =
    badBody === null
      ? goodBody.map((b) => ({ b, valid: true }))
      : fc.oneof(
          { arbitrary: goodBody.map((b) => ({ b, valid: true })), weight: 3 },
          { arbitrary: badBody.map((b) => ({ b, valid: false })), weight: 1 },
        );
  // The admin and the member token reach the decisions; no token and the query token mostly the refusals.
  const token = fc.oneof(
    ...Object.keys(tokens).map((k) => ({
      arbitrary: fc.constant(k),
      weight: k === 'admin' ? 3 : k === 'member' ? 2 : 1,
    })),
  );
  return fc.record({ parts, body, token }).map(({ parts: got, body: { b, valid: ok }, token }) => {
    const pathParams: Record<string, string> = {};
    const query = new URLSearchParams();
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(got as Record<string, unknown>)) {
      const [where, name] = key.split(':') as [string, string];
      if (where === 'path') pathParams[name] = String(value);
      else if (where === 'query') query.set(name, String(value));
      else headers[name] = String(value);
    }
    // A field of a later protocol is valid only with that protocol's header.
    if (ok && json !== undefined && b !== null && typeof b.body === 'object' && b.body !== null) {
      const props = (resolveRef(doc, json)['properties'] as Record<string, Schema> | undefined) ?? {};
      for (const [k, v] of Object.entries(props)) {
        const since = v['x-hq-protocol-since'];
        if (typeof since === 'number' && k in (b.body as object) && Number(headers['hq-protocol'] ?? 1) < since)
          headers['hq-protocol'] = String(since);
      }
    }
    const tok = tokens[token];
    if (tok !== null && tok !== undefined) headers['authorization'] = `Bearer ${tok}`;
    let payload: string | Buffer | undefined;
    if (b !== null) {
      if (Buffer.isBuffer(b.body)) {
        headers['content-type'] = 'application/octet-stream';
        payload = b.body;
      } else {
        headers['content-type'] = 'application/json';
        payload = JSON.stringify(b.body);
      }
    }
    const qs = query.toString();
    const url = fillPath(path, pathParams) + (qs === '' ? '' : `?${qs}`);
    return {
      method: method.toUpperCase(),
      url,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
      valid: ok,
      what: `${token} token, ${b?.what ?? 'no body'}`,
    };
  });
}

/** The document's answer for `status` (exact, `4XX`-style, or `default`). */
function declared(op: Operation, status: number): Answer | undefined {
  return op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses['default'];
}

/** A free loopback port (the etcd store's arbiter advertises its URL, so it cannot listen on port 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

t.test(
  'store sqlite: a client generated from the served OpenAPI document gets only what the document declares',
  async (t) => {
    const dir = t.testdir();
    await fuzz(t, dir, writeConfig(dir, { candidates: ['mbp', 'node-b'] }), RUNS);
  },
);

t.test('store etcd: the same client, fewer requests', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const dir = t.testdir();
  const port = await freePort();
  const store = {
    kind: 'etcd',
    endpoints: etcd.endpoints,
    prefix: '/hq-fuzz',
    advertiseUrl: `http://127.0.0.1:${port}`,
    dialTimeoutSeconds: 0.5,
    requestTimeoutSeconds: 1,
    electionTtlSeconds: 4,
  };
  await fuzz(
    t,
    dir,
    writeConfig(dir, { candidates: ['mbp', 'node-b'], listen: { host: '127.0.0.1', port }, store }),
    Math.max(4, Math.ceil(RUNS / 3)),
  );
});

async function fuzz(t: Tap.Test, dir: string, config: string, RUNS: number): Promise<void> {
  const a = await startArbiter(t, config);
  const issue = (name: string, scope: string) =>
    execFileSync(process.execPath, [CLI, 'token', 'issue', name, '--scope', scope, '--config', config], {
      env: childEnv(),
      encoding: 'utf8',
    }).trim();
  const tokens: Record<string, string | null> = {
    none: null,
    admin: readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim(),
    member: issue('mbp', 'member'),
    query: issue('grafana', 'query'),
  };
  const dispatcher = new Agent({ connections: 4, headersTimeout: 15_000, bodyTimeout: 15_000 });
  t.teardown(() => dispatcher.close());
  const served = await request(`${a.base}/v1/openapi.json`, { dispatcher });
  t.equal(served.statusCode, 200, 'the arbiter serves its document');
  const doc = (await served.body.json()) as Doc;
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
  ajv.addSchema({ ...doc, $id: 'hq:openapi' });
  const pointer = (...parts: string[]) =>
    `hq:openapi#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
  t.comment(`seed ${SEED}, ${RUNS} requests per operation (HQ_OPENAPI_SEED, HQ_OPENAPI_RUNS)`);

  const problems: string[] = [];
  const seen = new Map<string, Map<number, number>>();
  let sent = 0;
  async function check(path: string, method: string, op: Operation, r: Sent): Promise<string | null> {
    sent++;
    const res = await request(`${a.base}${r.url}`, {
      method: r.method as 'GET',
      headers: r.headers,
      ...(r.body === undefined ? {} : { body: r.body }),
      dispatcher,
    });
    const tally = seen.get(op.operationId) ?? new Map<number, number>();
    seen.set(op.operationId, tally.set(res.statusCode, (tally.get(res.statusCode) ?? 0) + 1));
    const type = String(res.headers['content-type'] ?? '');
    let text = '';
    if (type.startsWith('text/event-stream') && res.statusCode === 200) res.body.destroy();
    else text = await res.body.text();
    const where = `${r.method} ${r.url} (${r.what}) → ${res.statusCode} ${text.slice(0, 200)}`;
    let parsed: { error?: string } | null = null;
    try {
      parsed = type.startsWith('application/json') ? (JSON.parse(text) as { error?: string }) : null;
    } catch {
      return `${where}: the body is not the JSON its content type says`;
    }
    const answer = declared(op, res.statusCode);
    if (answer === undefined) return `${where}: status ${res.statusCode} is not in the document`;
    if (res.statusCode >= 500 && !(res.statusCode === 503 && BUSY.has(parsed?.error ?? ''))) return `${where}: a 5xx`;
    if (r.valid && res.statusCode === 400 && parsed?.error === 'HQ_ERR_BAD_REQUEST')
      return `${where}: a request the document allows is refused as malformed`;
    if (r.valid && (res.statusCode === 413 || res.statusCode === 415))
      return `${where}: a request the document allows is refused for its body`;
    if (!r.valid && res.statusCode < 400) return `${where}: a body the document refuses was accepted`;
    const media = Object.keys(answer.content ?? {});
    if (text !== '' || type !== '') {
      const base = type.split(';')[0]?.trim() ?? '';
      if (!media.some((m) => m.split(';')[0]?.trim() === base))
        return `${where}: content type "${type}" is not declared (${media.join(', ') || 'none'})`;
    }
    for (const name of Object.keys(res.headers)) {
      if (TRANSPORT.has(name)) continue;
      if (!Object.keys(answer.headers ?? {}).some((h) => h.toLowerCase() === name))
        return `${where}: header ${name} is not declared`;
    }
    const status = op.responses[String(res.statusCode)] !== undefined ? String(res.statusCode) : null;
    if (parsed !== null && status !== null && answer.content?.['application/json']?.schema !== undefined) {
      const validate = ajv.getSchema(
        pointer('paths', path, method, 'responses', status, 'content', 'application/json', 'schema'),
      );
      if (validate !== undefined && !validate(parsed))
        return `${where}: the body does not match the declared schema: ${ajv.errorsText(validate.errors)}`;
    }
    return null;
  }

  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const arb = requests(doc, path, method, op, tokens);
      const out = await fc.check(
        fc.asyncProperty(arb, async (r) => {
          const problem = await check(path, method, op, r);
          if (problem !== null) throw new Error(problem);
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
      const error = out.failed ? String((out.errorInstance as Error | undefined)?.message ?? out.counterexample) : null;
      t.equal(
        error,
        null,
        `${method.toUpperCase()} ${path} (${op.operationId}): ${RUNS} generated requests get only what the document declares`,
      );
      if (error !== null) problems.push(error);
    }
  }
  for (const [id, tally] of seen)
    t.comment(
      `${id}: ${[...tally]
        .sort(([x], [y]) => x - y)
        .map(([status, n]) => `${status}×${n}`)
        .join(' ')}`,
    );
  const reached = [...seen.values()].filter((tally) =>
    [...tally.keys()].some((status) => status >= 200 && status < 300),
  ).length;
  // A floor well below the usual 60-75 % (random seeds vary): it trips when the generated requests stop reaching decisions.
  t.ok(
    reached >= seen.size * 0.4,
    `most operations were answered 2xx at least once (${reached} of ${seen.size}): the generated requests reach the decisions`,
  );
  t.ok(sent >= RUNS * 20, `the client sent ${sent} requests over every operation`);

  // What no schema generates: HEAD beside every GET, an undocumented method, oversized and
  // malformed path parameters — each answered as the document and its description say.
  for (const [path, ops] of Object.entries(doc.paths)) {
    const methods = Object.keys(ops).map((m) => m.toUpperCase());
    const concrete = path
      .replace(/\{tier\}/, 'core')
      .replace(/\{generation\}/, '20260101T000000Z')
      .replace(/\{sha256\}/, 'a'.repeat(64))
      .replace(/\{port\}/, '31450')
      .replace(/\{[^}]+\}/g, 'x1');
    if (methods.includes('GET') && !path.includes('stream')) {
      for (const who of ['none', 'admin'] as const) {
        const headers: Record<string, string> = tokens[who] === null ? {} : { authorization: `Bearer ${tokens[who]}` };
        const get = await request(`${a.base}${concrete}`, { headers, dispatcher });
        await get.body.dump();
        const head = await request(`${a.base}${concrete}`, { method: 'HEAD', headers, dispatcher });
        const body = await head.body.text();
        t.equal(
          head.statusCode,
          get.statusCode,
          `HEAD ${concrete} with ${who} token answers like GET (${get.statusCode})`,
        );
        t.equal(body, '', `HEAD ${concrete} has no body`);
      }
    }
    const wrong = await request(`${a.base}${concrete}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${tokens['admin']}`, 'content-type': 'application/json' },
      body: '{}',
      dispatcher,
    });
    const wrongBody = (await wrong.body.json()) as { error?: string };
    t.equal(wrong.statusCode, 405, `PATCH ${concrete}: 405`);
    t.equal(wrongBody.error, 'HQ_ERR_METHOD_NOT_ALLOWED', `PATCH ${concrete}: the catalog code`);
    const allow = String(wrong.headers['allow'] ?? '')
      .split(', ')
      .sort();
    // Every documented path this URL matches (`/v1/resources/register` is also `/v1/resources/{id}`).
    const matching = Object.entries(doc.paths).filter(([p]) =>
      new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(concrete),
    );
    const documented = matching.flatMap(([, o]) => Object.keys(o).map((m) => m.toUpperCase()));
    t.same(
      allow,
      [...new Set([...documented, ...(documented.includes('GET') ? ['HEAD'] : [])])].sort(),
      `PATCH ${concrete}: Allow lists the documented methods`,
    );
    if (!path.includes('{')) continue;
    const method = methods.find((m) => m !== 'GET') ?? 'GET';
    for (const [what, url] of [
      ['a path parameter over 100 characters', path.replace(/\{[^}]+\}/, 'a'.repeat(120)).replace(/\{[^}]+\}/g, 'x1')],
      ['a malformed percent escape', path.replace(/\{[^}]+\}/, '%zz').replace(/\{[^}]+\}/g, 'x1')],
    ] as const) {
      const res = await request(`${a.base}${url}`, {
        method: method as 'GET',
        headers: { authorization: `Bearer ${tokens['admin']}` },
        dispatcher,
      });
      const body = (await res.body.json()) as Record<string, unknown>;
      t.equal(res.statusCode, 400, `${method} ${path} with ${what}: 400`);
      t.same(Object.keys(body).sort(), ['error', 'message'], `${method} ${path} with ${what}: hq's error shape`);
      t.equal(body['error'], 'HQ_ERR_BAD_REQUEST', `${method} ${path} with ${what}: the catalog code`);
      t.ok(
        doc.paths[path]?.[method.toLowerCase()]?.responses['400'] !== undefined,
        `${method} ${path}: the document declares its 400`,
      );
    }
  }
  t.equal(a.proc.exitCode, null, 'the arbiter is still up');
}
