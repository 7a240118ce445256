/** The port-lease keeper with a manual clock and timers: renew, retry, deadline, refusals, stop. */
import t from 'tap';
import { PortLeaseKeeper, leaseMargin, type LeaseLoss } from '../../apps/agent/src/registry-client/port-lease.js';
import type { HttpResult, JsonRequest } from '../../packages/runtime/src/http.js';
import { FakeTime } from './fake-time.js';

const LID = 'a'.repeat(32);

function setup(answer: (req: JsonRequest, at: number) => HttpResult | Promise<HttpResult>, ttlMs = 120_000) {
  const time = new FakeTime();
  const calls: { at: number; req: JsonRequest }[] = [];
  const losses: LeaseLoss[] = [];
  const keeper = new PortLeaseKeeper({
    arbiterUrl: 'http://127.0.0.1:8470',
    token: 'f'.repeat(64),
    port: 31450,
    leaseId: LID,
    ttlMs,
    acquiredAt: time.now,
    onLeaseLost: (l) => losses.push(l),
    clock: time.clock,
    timers: time,
    request: async (req) => {
      calls.push({ at: time.now, req });
      return answer(req, time.now);
    },
  });
  return { time, calls, losses, keeper, start: time.now };
}

const ok: HttpResult = {
  kind: 'answer',
  status: 200,
  body: { port: 31450, leaseId: LID, expiresAt: 0, ttlMs: 120_000 },
};
const down: HttpResult = { kind: 'unreachable', problem: 'ECONNREFUSED' };

t.test('the margin is 10 s, or a third of a short TTL', async (t) => {
  t.equal(leaseMargin(120_000), 10_000, 'a 120 s TTL has a 10 s margin');
  t.equal(leaseMargin(3000), 1000, 'a 3 s TTL has a 1 s margin');
});

t.test('renewals go out every 30 s with the lease id header and a 1 s timeout', async (t) => {
  const s = setup(() => ok);
  s.keeper.start();
  await s.time.advance(95_000);
  t.same(
    s.calls.map((c) => c.at - s.start),
    [30_000, 60_000, 90_000],
    'every 30 s',
  );
  const r = s.calls[0]!.req;
  t.equal(r.url, 'http://127.0.0.1:8470/v1/leases/port/31450/heartbeat', 'to the port heartbeat route');
  t.same(r.headers, { 'x-port-lease-id': LID }, 'with x-port-lease-id');
  t.equal(r.timeoutSeconds, 1, 'with a 1 s timeout');
  t.same(r.token, { token: 'f'.repeat(64), url: 'http://127.0.0.1:8470' }, 'the token is bound to the arbiter URL');
  t.equal(s.keeper.deadline, s.start + 90_000 + 110_000, 'the deadline is armed from the last success');
  t.same(s.losses, [], 'nothing is lost');
});

t.test('a failed renewal is retried every 5 s and the lease is lost once at the deadline', async (t) => {
  let answer: HttpResult = ok;
  const s = setup(() => answer);
  s.keeper.start();
  await s.time.advance(30_000);
  answer = down;
  await s.time.advance(30_000);
  t.equal(s.calls.length, 2, 'the second renewal failed');
  await s.time.advance(20_000);
  t.same(
    s.calls.slice(1).map((c) => c.at - s.start),
    [60_000, 65_000, 70_000, 75_000, 80_000],
    'retries every 5 s',
  );
  // last success was sent at 30 s: deadline 30 + 120 − 10 = 140 s
  await s.time.advance(59_999);
  t.same(s.losses, [], 'not lost one millisecond before the deadline');
  await s.time.advance(1);
  t.equal(s.losses.length, 1, 'lost at the deadline');
  t.equal(s.losses[0]!.reason, 'deadline', 'because the deadline passed');
  const n = s.calls.length;
  await s.time.advance(300_000);
  t.equal(s.calls.length, n, 'no renewal after the loss');
  t.equal(s.losses.length, 1, 'onLeaseLost was called once');
  t.same(await s.keeper.stop(), { released: false }, 'a lost lease is not released');
  t.equal(s.calls.length, n, 'and no DELETE is sent');
});

t.test('a success after failures re-arms the deadline from its own send time', async (t) => {
  let answer: HttpResult = down;
  const s = setup(() => answer);
  s.keeper.start();
  await s.time.advance(100_000);
  answer = ok;
  await s.time.advance(5_000);
  const lastOk = s.calls.at(-1)!.at;
  t.equal(s.keeper.deadline, lastOk + 110_000, 'the deadline moved to the successful send + ttl − margin');
  await s.time.advance(200_000);
  t.same(s.losses, [], 'renewals keep it alive');
  await s.keeper.stop();
});

for (const status of [400, 403, 404, 409]) {
  t.test(`an answer of ${status} loses the lease at once`, async (t) => {
    const s = setup(() => ({ kind: 'answer', status, body: { error: 'X' } }));
    s.keeper.start();
    await s.time.advance(30_000);
    t.equal(s.losses.length, 1, `${status} loses the lease`);
    t.match(s.losses[0], { reason: 'refused', status }, 'with the status');
    await s.time.advance(300_000);
    t.equal(s.calls.length, 1, 'nothing is sent after it');
  });
}

t.test('401 and 5xx are retried, not a loss', async (t) => {
  const answers: HttpResult[] = [
    { kind: 'answer', status: 401, body: null },
    { kind: 'answer', status: 503, body: null },
    ok,
  ];
  const s = setup(() => answers.shift() ?? ok);
  s.keeper.start();
  await s.time.advance(40_001);
  t.same(
    s.calls.map((c) => c.at - s.start),
    [30_000, 35_000, 40_000],
    'retried after 5 s each',
  );
  t.same(s.losses, [], 'not lost');
  await s.keeper.stop();
});

t.test('an answer that arrives after the loss is ignored', async (t) => {
  let release: (r: HttpResult) => void = () => undefined;
  const s = setup(() => new Promise<HttpResult>((r) => (release = r)), 12_000);
  s.keeper.start();
  // ttl 12 s: margin 4 s, deadline at 8 s, renewals every 4 s; the first never answers in time
  await s.time.advance(8_000);
  t.equal(s.losses.length, 1, 'the deadline passed while the renewal hung');
  release(ok);
  await s.time.advance(0);
  t.equal(s.losses.length, 1, 'the late success does not revive it');
  t.ok(s.keeper.lost, 'the keeper stays lost');
});

t.test('stop releases the lease with its id', async (t) => {
  const s = setup(() => ok);
  s.keeper.start();
  await s.time.advance(30_000);
  t.same(await s.keeper.stop(), { released: true }, 'the release is confirmed');
  const del = s.calls.at(-1)!.req;
  t.equal(del.method, 'DELETE', 'with DELETE');
  t.equal(del.url, 'http://127.0.0.1:8470/v1/leases/port/31450', 'on the port');
  t.same(del.headers, { 'x-port-lease-id': LID }, 'with the lease id');
  await s.time.advance(300_000);
  t.equal(s.calls.length, 2, 'nothing after stop');
  t.same(await s.keeper.stop(), { released: false }, 'a second stop sends nothing');
  t.same(s.losses, [], 'a stop is not a loss');
});

t.test('a short TTL renews often enough to fit two attempts before the deadline', async (t) => {
  const s = setup(() => ({ ...ok, body: { ttlMs: 3000 } }), 3000);
  s.keeper.start();
  t.equal(s.keeper.renewEveryMs, 1000, 'a 3 s TTL renews every second');
  await s.time.advance(10_000);
  t.same(s.losses, [], 'and is never lost while the arbiter answers');
  await s.keeper.stop();
});
