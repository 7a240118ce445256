/**
 * The agent's registry membership: schedule, refresh, backoff, log-on-change, re-register on
 * 404 — with a manual clock and timers, and once against the real arbiter routes over HTTP.
 */
import t from 'tap';
import { Member } from '../../apps/agent/src/registry-client/member.js';
import type { HttpResult, JsonRequest } from '../../packages/runtime/src/http.js';
import { FakeTime } from './fake-time.js';
import { registryHarness } from './helper.js';

const load = (now: number) => ({
  loadAvg: [0.5, 0.25, 0.1],
  cpuCount: 4,
  freeMem: 100,
  totalMem: 400,
  observedAt: now,
});

function setup(answer: (req: JsonRequest) => HttpResult) {
  const time = new FakeTime();
  const calls: { at: number; req: JsonRequest }[] = [];
  const logs: { level: string; obj: any }[] = [];
  const member = new Member({
    arbiterUrl: 'http://127.0.0.1:8470',
    machine: 'mbp',
    token: async () => 'f'.repeat(64),
    duties: () => ['cron', 'telegram-poller'],
    clock: time.clock,
    timers: time,
    load,
    request: async (req) => {
      calls.push({ at: time.now, req });
      return answer(req);
    },
    log: { info: (obj) => logs.push({ level: 'info', obj }), warn: (obj) => logs.push({ level: 'warn', obj }) },
  });
  return { time, calls, logs, member, start: time.now };
}

const ok: HttpResult = { kind: 'answer', status: 200, body: {} };
const kind = (req: JsonRequest): string => (req.url.endsWith('/register') ? 'register' : 'heartbeat');

t.test('it registers at once, heartbeats every 30 s and re-registers every 300 s', async (t) => {
  const s = setup(() => ok);
  s.member.start();
  await s.time.advance(0);
  t.equal(s.calls.length, 1, 'one exchange at start');
  const first = s.calls[0]!.req;
  t.equal(kind(first), 'register', 'the first exchange registers');
  t.match(
    first.body,
    { id: 'mbp', name: 'mbp', kind: 'machine', machine: 'mbp', observedAt: s.start, ttlMs: 120_000 },
    'the record has the seeds fields',
  );
  t.same(
    (first.body as any).attrs,
    {
      loadAvg: [0.5, 0.25, 0.1],
      cpuCount: 4,
      freeMem: 100,
      totalMem: 400,
      observedAt: s.start,
      duties: ['cron', 'telegram-poller'],
    },
    'attrs carry the load and the duties',
  );
  t.same(first.token, { token: 'f'.repeat(64), url: 'http://127.0.0.1:8470' }, 'the token is bound to the arbiter URL');
  await s.time.advance(299_999);
  t.same(
    s.calls.map((c) => kind(c.req)),
    ['register', ...Array(9).fill('heartbeat')],
    'nine heartbeats in the next 270 s',
  );
  t.same(
    s.calls.map((c) => c.at - s.start),
    [0, 30_000, 60_000, 90_000, 120_000, 150_000, 180_000, 210_000, 240_000, 270_000],
    'every 30 s',
  );
  t.equal(s.calls[1]!.req.url, 'http://127.0.0.1:8470/v1/resources/mbp/heartbeat', 'heartbeats go to the record');
  t.same(
    [...new Set(s.calls.map((c) => c.req.keepAlive))],
    [false],
    'every 30 s: each exchange closes its connection with the answer (no keep-alive timer between)',
  );
  await s.time.advance(1);
  t.equal(kind(s.calls.at(-1)!.req), 'register', 'at 300 s the record is registered again');
  await s.member.stop();
  await s.time.advance(600_000);
  t.equal(s.calls.length, 11, 'nothing happens after stop');
});

t.test('failures back off 30, 60, 120, 240, 300, 300 s and the reason is logged only when it changes', async (t) => {
  let answer: HttpResult = { kind: 'unreachable', problem: 'ECONNREFUSED' };
  const s = setup(() => answer);
  s.member.start();
  await s.time.advance(0);
  await s.time.advance(30_000 + 60_000 + 120_000 + 240_000 + 300_000 + 300_000);
  const gaps = s.calls.slice(1).map((c, i) => c.at - s.calls[i]!.at);
  t.same(gaps, [30_000, 60_000, 120_000, 240_000, 300_000, 300_000], 'the delays double from 30 s and stop at 300 s');
  t.equal(s.logs.filter((l) => l.level === 'warn').length, 1, 'seven identical failures log once');
  t.match(
    s.logs[0]!.obj,
    { event: 'registry-failed', reason: 'unreachable: ECONNREFUSED', retryInSeconds: 30 },
    'the log names the reason and the retry',
  );
  answer = { kind: 'answer', status: 503, body: { error: 'HQ_ERR_INTERNAL' } };
  await s.time.advance(300_000);
  t.equal(s.logs.filter((l) => l.level === 'warn').length, 2, 'a different reason is logged');
  t.match(s.logs[1]!.obj, { reason: 'HTTP 503 HQ_ERR_INTERNAL' }, 'with the new reason');
  answer = ok;
  await s.time.advance(300_000);
  t.match(
    s.logs.at(-1),
    { level: 'info', obj: { event: 'registry-ok', after: 'HTTP 503 HQ_ERR_INTERNAL' } },
    'recovery is logged once',
  );
  const n = s.calls.length;
  await s.time.advance(30_000);
  t.equal(s.calls.length, n + 1, 'after a success the period is 30 s again');
  t.equal(s.member.status.failures, 0, 'the failure count is reset');
  await s.member.stop();
});

t.test('a heartbeat answered 404 re-registers in the same exchange', async (t) => {
  let expired = false;
  const s = setup((req) =>
    expired && kind(req) === 'heartbeat' ? { kind: 'answer', status: 404, body: { error: 'HQ_ERR_NOT_FOUND' } } : ok,
  );
  s.member.start();
  await s.time.advance(30_000);
  expired = true;
  await s.time.advance(30_000);
  const last = s.calls.slice(-2);
  t.same(
    last.map((c) => kind(c.req)),
    ['heartbeat', 'register'],
    'the 404 is followed by a registration',
  );
  t.equal(last[1]!.at, last[0]!.at, 'at once, not after a backoff');
  t.equal(s.member.status.failures, 0, 'it counts as a success');
  t.equal(s.logs.length, 0, 'and logs nothing');
  await s.member.stop();
});

t.test('without a token every exchange fails and backs off', async (t) => {
  const time = new FakeTime();
  let calls = 0;
  const member = new Member({
    arbiterUrl: 'http://127.0.0.1:8470',
    machine: 'mbp',
    token: async () => null,
    clock: time.clock,
    timers: time,
    load,
    request: async () => {
      calls++;
      return ok;
    },
  });
  member.start();
  await time.advance(0);
  t.equal(calls, 0, 'no request is sent without a token');
  t.match(member.status, { failures: 1, lastReason: 'no member token' }, 'the failure is recorded');
  t.same(time.pending(), [30_000], 'and retried after 30 s');
  await member.stop();
});

t.test('against the real arbiter routes: register, renew, expiry and re-registration', async (t) => {
  const h = await registryHarness(t);
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
  const time = new FakeTime();
  const member = new Member({
    arbiterUrl: url,
    machine: 'mbp',
    token: async () => h.tokens.mbp,
    duties: () => ['cron'],
    ttlMs: 60_000,
    clock: time.clock,
    timers: time,
    load,
  });
  const out1 = await member.exchange();
  t.match(out1, { ok: true, action: 'registered' }, 'the first exchange registers');
  const out2 = await member.exchange();
  t.match(out2, { ok: true, action: 'renewed' }, 'the second renews');
  h.clock.advance(61);
  const out3 = await member.exchange();
  t.match(out3, { ok: true, action: 're-registered' }, 'after the record expired at the arbiter it re-registers');
  const list = await h.req('GET', '/v1/resources?kind=machine', { token: null });
  t.same(JSON.parse(list.body).resources[0].attrs.duties, ['cron'], 'the arbiter lists the machine with its duties');
  const wrong = new Member({
    arbiterUrl: url,
    machine: 'node-b',
    token: async () => h.tokens.mbp,
    clock: time.clock,
    timers: time,
    load,
  });
  const refused = await wrong.exchange();
  t.match(
    refused,
    { ok: false, reason: 'HTTP 403 HQ_ERR_WRONG_HOST' },
    "a token of another machine is refused with the arbiter's code",
  );
});
