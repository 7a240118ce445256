/** The one refusal style: an HttpError is its catalog entry's status and code, and its body. */
import t from 'tap';
import { ERRORS } from '../../packages/protocol/src/index.js';
import { HttpError, refusalBody, refusalOf } from '../../packages/runtime/src/refusal.js';

t.test("a refusal carries its catalog entry's status and code, and the entry's message unless told", async (t) => {
  const plain = new HttpError(ERRORS.UNAUTHORIZED);
  t.equal(plain.statusCode, 401, 'the status is the entry’s');
  t.equal(plain.code, 'HQ_ERR_UNAUTHORIZED', 'the code is the entry’s');
  t.equal(plain.message, ERRORS.UNAUTHORIZED.message, 'the message is the entry’s');
  t.ok(plain instanceof Error && plain.name === 'HttpError', 'an Error named HttpError');
  t.same(
    refusalBody(plain),
    { error: 'HQ_ERR_UNAUTHORIZED', message: ERRORS.UNAUTHORIZED.message },
    'its body is {error, message}',
  );
  const told = new HttpError(ERRORS.BAD_REQUEST, 'after  must be\na safe integer');
  t.same(
    refusalBody(told, (m) => m.replace(/\s+/g, ' ')),
    { error: 'HQ_ERR_BAD_REQUEST', message: 'after must be a safe integer' },
    'the app shapes the message of a default body (the arbiter: one line)',
  );
});

t.test('a refusal that carries more answers with its own body, verbatim and in its order', async (t) => {
  const lease = { holder: 'mbp', generation: 3 };
  const body = { ok: false, reason: 'held', lease, error: ERRORS.STALE_GENERATION.code, message: 'held  by mbp' };
  const e = new HttpError(ERRORS.STALE_GENERATION, body.message, body);
  t.equal(e.statusCode, 409, 'the status is still the entry’s');
  t.equal(
    JSON.stringify(refusalBody(e, () => 'shaped')),
    JSON.stringify(body),
    'the body is sent as given: fields, order and message untouched',
  );
});

t.test(
  'the one error handler: refusals, schema failures and Fastify 4xx in one line; the rest is a 500 with no detail',
  async (t) => {
    t.same(refusalOf(new HttpError(ERRORS.BAD_REQUEST, 'after  must be\na safe integer')), {
      status: 400,
      body: { error: 'HQ_ERR_BAD_REQUEST', message: 'after must be a safe integer' },
    });
    const lease = { record: { generation: 3 } };
    t.same(
      refusalOf(new HttpError(ERRORS.CONFLICT, 'held', lease)),
      { status: 409, body: lease },
      'a refusal with its own body answers it whole',
    );
    t.same(
      refusalOf({
        message: "must have required property 'role'",
        statusCode: 400,
        validation: [],
        validationContext: 'body',
      }),
      { status: 400, body: { error: 'HQ_ERR_BAD_REQUEST', message: "body must have required property 'role'" } },
      'a schema failure names where',
    );
    t.same(refusalOf({ message: 'Body is not valid JSON', statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' }), {
      status: 400,
      body: { error: 'HQ_ERR_BAD_REQUEST', message: ERRORS.BAD_REQUEST.message },
    });
    t.same(refusalOf({ message: 'too big', statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }), {
      status: 413,
      body: { error: 'HQ_ERR_TOO_LARGE', message: ERRORS.TOO_LARGE.message },
    });
    t.same(
      refusalOf({ message: 'odd\nthing', statusCode: 406 }),
      { status: 400, body: { error: 'HQ_ERR_BAD_REQUEST', message: 'odd thing' } },
      'another 4xx is a 400',
    );
    t.equal(refusalOf({ message: 'secret detail', statusCode: 502 }), null, 'a 5xx is left to the 500');
    t.equal(refusalOf(new Error('boom')), null, 'an unexpected error is left to the 500');
  },
);
