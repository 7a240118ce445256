/** The Fastify base both daemons build on: one way of answering what went wrong, and the version on every answer. */
import t from 'tap';
import { ERRORS, PROTOCOL_HEADER, PROTOCOL_VERSION } from '../../packages/protocol/src/index.js';
import { BODY_LIMIT, fastifyBase } from '../../packages/runtime/src/fastify-base.js';
import { HttpError } from '../../packages/runtime/src/refusal.js';

class Special extends Error {}

function app() {
  const a = fastifyBase({
    side: () => 'hq-test on mbp',
    requestTimeoutMs: 1_000,
    connectionTimeoutMs: 1_000,
    fastify: { logger: false },
    ownErrors: (err, _req, reply) => (err instanceof Special ? reply.code(418).send({ own: true }) : undefined),
  });
  a.get('/refused', async () => {
    throw new HttpError(ERRORS.CONFLICT, 'taken');
  });
  a.get('/broken', async () => {
    throw new Error('secret detail');
  });
  a.get('/special', async () => {
    throw new Special('mine');
  });
  a.post('/echo', async (req) => req.body);
  return a;
}

t.test('refusals, unexpected errors and the daemon’s own errors', async (t) => {
  const a = app();
  t.teardown(() => a.close());
  const refused = await a.inject({ method: 'GET', url: '/refused' });
  t.equal(refused.statusCode, 409, 'a refusal answers its catalog status');
  t.same(refused.json(), { error: ERRORS.CONFLICT.code, message: 'taken' }, 'in {error, message}');
  const broken = await a.inject({ method: 'GET', url: '/broken' });
  t.equal(broken.statusCode, 500, 'anything unexpected is a 500');
  t.notMatch(broken.body, /secret detail/, 'without its detail');
  t.equal(broken.json().error, ERRORS.INTERNAL.code, 'named as the catalog names it');
  const special = await a.inject({ method: 'GET', url: '/special' });
  t.equal(special.statusCode, 418, 'the daemon’s own errors are tried first');
  t.same(special.json(), { own: true }, 'and answered as the daemon says');
});

t.test('unknown routes, other methods, bodies too large, and the version on every answer', async (t) => {
  const a = app();
  t.teardown(() => a.close());
  const v = { [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) };
  const missing = await a.inject({ method: 'GET', url: '/nowhere', headers: v });
  t.equal(missing.statusCode, 404, 'an unknown path is a 404');
  t.equal(missing.json().error, ERRORS.NOT_FOUND.code, 'in the one shape');
  const wrong = await a.inject({ method: 'DELETE', url: '/refused', headers: v });
  t.equal(wrong.statusCode, 405, 'a known path asked with another method is a 405');
  t.equal(wrong.headers.allow, 'GET, HEAD', 'naming the methods it answers');
  const large = await a.inject({
    method: 'POST',
    url: '/echo',
    headers: { ...v, 'content-type': 'application/json' },
    payload: JSON.stringify({ x: 'y'.repeat(BODY_LIMIT) }),
  });
  t.equal(large.statusCode, 413, 'a body over the limit is refused');
  t.equal(large.json().error, ERRORS.TOO_LARGE.code, 'in the one shape');
  for (const r of [missing, wrong, large])
    t.equal(r.headers[PROTOCOL_HEADER], String(PROTOCOL_VERSION), 'the answer carries the version it was spoken to');
  const unserved = await a.inject({ method: 'GET', url: '/refused', headers: { [PROTOCOL_HEADER]: '999' } });
  t.equal(unserved.statusCode, 400, 'a version this side does not serve goes no further');
  t.match(unserved.json().message, /hq-test on mbp/, 'and the refusal names the side');
});
