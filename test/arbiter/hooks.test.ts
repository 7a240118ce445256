import t from 'tap';
import { createServer } from 'node:http';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { harness } from './helper.js';
import { Hooks } from '../../apps/arbiter/src/events.js';
import { FakeTime } from '../registry/fake-time.js';

type Tap = Parameters<Parameters<typeof t.test>[1]>[0];

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A webhook on loopback: answers with `statuses` in turn (then 200), or never when `hang`. */
async function webhook(t: Tap, statuses: number[] = [], hang = false) {
  const got: Array<{ event: string; host: string | null; data: Record<string, unknown> }> = [];
  let attempts = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += String(d)));
    req.on('end', () => {
      attempts++;
      if (hang) return;
      const status = statuses.shift() ?? 200;
      if (status === 200) got.push(JSON.parse(body));
      res.writeHead(status);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, attempts: () => attempts };
}

function maintenance(h: Awaited<ReturnType<typeof harness>>, enabled: boolean) {
  return h.app.inject({
    method: 'PUT',
    url: '/v1/maintenance',
    headers: { authorization: `Bearer ${h.tokens.admin}`, 'content-type': 'application/json' },
    payload: { enabled, reason: 'test' },
  });
}

t.test('maintenance, renew-refused and a streak reach the webhook and the command hook', async (t) => {
  const dir = t.testdir();
  const script = join(dir, 'hook.sh');
  writeFileSync(script, `#!/bin/sh\ncat >> "$1"\necho >> "$1"\n`);
  chmodSync(script, 0o755);
  const out = join(dir, 'hook.out');
  const hook = await webhook(t);
  const h = await harness(t, { hooks: { urls: [hook.url], command: [script, out] } }, { dir: join(dir) });
  await maintenance(h, true);
  await until('the maintenance webhook', () => hook.got.length >= 1);
  t.match(
    hook.got[0],
    { event: 'maintenance', category: 'control', data: { enabled: true, reason: 'test' } },
    'the webhook got the event as JSON',
  );
  await until('the command hook', () => existsSync(out) && readFileSync(out, 'utf8').includes('maintenance'));
  t.match(
    JSON.parse(readFileSync(out, 'utf8').trim().split('\n')[0]!),
    { event: 'maintenance' },
    'the command got the event on stdin',
  );

  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  await h.post('/v1/lease/renew', { host: 'node-b', generation: 1 }, h.tokens.nodeb);
  await until('renew-refused', () => hook.got.some((e) => e.event === 'renew-refused'));
  t.pass('renew-refused was delivered');
  await h.post('/v1/check', undefined);
  t.notOk(
    hook.got.some((e) => e.event === 'arbiter-check'),
    'a check without a streak calls no hook',
  );
  await h.post(
    '/v1/heartbeat',
    { host: 'node-b', seenGeneration: 1, view: { target: 'mbp', reachable: false, ping: false, health: false } },
    h.tokens.nodeb,
  );
  await h.post('/v1/check', undefined);
  await until('arbiter-check with a streak', () => hook.got.some((e) => e.event === 'arbiter-check'));
  t.match(
    hook.got.find((e) => e.event === 'arbiter-check'),
    { host: 'mbp', data: { streak: 1 } },
    'the streak is in the hook',
  );
  t.notOk(
    hook.got.some((e) => e.event === 'renewed'),
    'routine events call no hook',
  );
});

t.test('a failing webhook is retried with backoff and a hanging one never blocks a decision', async (t) => {
  const flaky = await webhook(t, [500, 503]);
  const stuck = await webhook(t, [], true);
  const h = await harness(t, { hooks: { urls: [flaky.url, stuck.url] } });
  const t0 = Date.now();
  const res = await maintenance(h, true);
  t.equal(res.statusCode, 200, 'the decision is answered');
  t.ok(Date.now() - t0 < 4000, 'without waiting for the hanging hook (its timeout is 5 s)');
  // The retries wait on the runtime's timers (the harness's backoff: 20 ms, then 40 ms).
  await until('the first retry to wait', () => h.time.pending().length === 1);
  t.same(h.time.pending(), [20], 'the first failure waits the backoff');
  await h.time.advance(20);
  await until('the second retry to wait', () => flaky.attempts() === 2 && h.time.pending().length === 1);
  t.same(h.time.pending(), [40], 'the second twice as long');
  await h.time.advance(40);
  await until('the third attempt', () => flaky.got.length === 1);
  t.equal(flaky.attempts(), 3, 'two failures, then delivered');
  t.ok(stuck.attempts() >= 1, 'the hanging webhook was called');
});

t.test('agent silence is reported once per silence, on a check tick', async (t) => {
  const hook = await webhook(t);
  const h = await harness(t, { hooks: { urls: [hook.url] } });
  await h.post('/v1/heartbeat', { host: 'mbp', heartbeatSeconds: 1 }, h.tokens.mbp);
  await h.post('/v1/heartbeat', { host: 'node-b', heartbeatSeconds: 5 }, h.tokens.nodeb);
  h.clock.advance(3);
  await h.post('/v1/check', undefined);
  await h.post('/v1/check', undefined);
  const silent = async () =>
    ((await h.rt.store.listEvents(0, 1000)) as Array<{ event: string; host: string | null }>).filter(
      (e) => e.event === 'agent-silent',
    );
  t.same(
    (await silent()).map((e) => e.host),
    ['mbp'],
    'mbp (interval 1 s) is silent after 3 s, once; node-b (5 s) is not',
  );
  await until('the silence hook', () => hook.got.some((e) => e.event === 'agent-silent'));
  t.match(
    hook.got.find((e) => e.event === 'agent-silent'),
    { host: 'mbp', data: { intervalSeconds: 1 } },
    'the hook names the host and its interval',
  );
  await h.post('/v1/heartbeat', { host: 'mbp', heartbeatSeconds: 1 }, h.tokens.mbp);
  h.clock.advance(3);
  await h.post('/v1/check', undefined);
  t.same(
    (await silent()).map((e) => e.host),
    ['mbp', 'mbp'],
    'a new silence after a heartbeat is reported again',
  );
});

t.test('retries wait on the hooks timers: the backoff doubles, and close drops the waiting ones', async (t) => {
  const time = new FakeTime();
  const flaky = await webhook(t, [500, 503, 502]);
  const hooks = new Hooks(
    { urls: [flaky.url], command: null, attempts: 4, backoffMs: 1000 },
    pino({ level: 'silent' }),
    time,
  );
  const event = { id: 1, at: 1_800_000_000, category: 'control', event: 'maintenance', host: null, data: {} };
  hooks.deliver(event);
  await until('the first retry to wait', () => time.pending().length === 1);
  t.same(time.pending(), [1000], 'the first failure waits the backoff');
  await time.advance(999);
  t.equal(flaky.attempts(), 1, 'and sends nothing before it ends');
  await time.advance(1);
  await until('the second retry to wait', () => time.pending().length === 1);
  t.equal(flaky.attempts(), 2, 'then tries again');
  t.same(time.pending(), [2000], 'the second failure waits twice as long');
  await time.advance(2000);
  await until('the third retry to wait', () => time.pending().length === 1);
  t.same(time.pending(), [4000], 'the third twice as long again');
  await time.advance(4000);
  await until('the delivery', () => flaky.got.length === 1);
  t.equal(flaky.attempts(), 4, 'the fourth attempt delivers');
  t.equal(hooks.inFlight, 0, 'nothing left in flight');

  const down = await webhook(t, [500, 500, 500]);
  const closing = new Hooks(
    { urls: [down.url], command: null, attempts: 3, backoffMs: 1000 },
    pino({ level: 'silent' }),
    time,
  );
  closing.deliver(event);
  await until('a retry to wait', () => time.pending().length === 1);
  closing.close();
  t.same(time.pending(), [], 'close clears the waiting retry');
  await time.advance(60_000);
  t.equal(down.attempts(), 1, 'and it is never sent');
});
