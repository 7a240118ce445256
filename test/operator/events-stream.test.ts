/**
 * `GET /v1/events/stream` over a real socket (the instance mounted under PREFIX with this
 * test's timings, see helper.ts): the backlog after `after`, new events as they are
 * committed (woken by `EventWaiters.notify`, wired here the way the arbiter is asked to: after
 * the sink emits), resumption with Last-Event-ID, the slow-poll fallback, keep-alive comments,
 * the stream limit, auth, and that closing the app ends every stream.
 */
import { request, type IncomingMessage } from 'node:http';
import t from 'tap';
import type { EventRow } from '../../apps/arbiter/src/store/store.js';
import { EventWaiters, sseFrame } from '../../apps/arbiter/src/routes/events-stream.js';
import { PREFIX, operatorHarness, wireNotify, type OperatorHarness } from './helper.js';

interface Stream {
  res: IncomingMessage;
  text: () => string;
  until: (pred: (text: string) => boolean, ms: number) => Promise<string>;
  close: () => void;
}

function open(port: number, path: string, headers: Record<string, string> = {}): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, headers: { accept: 'text/event-stream', ...headers } },
      (res) => {
        let buf = '';
        const waiters = new Set<() => void>();
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          buf += c;
          for (const w of [...waiters]) w();
        });
        res.on('end', () => {
          for (const w of [...waiters]) w();
        });
        resolve({
          res,
          text: () => buf,
          until: (pred, ms) =>
            new Promise((ok, fail) => {
              const check = (): void => {
                if (pred(buf)) {
                  clearTimeout(timer);
                  waiters.delete(check);
                  ok(buf);
                } else if (res.complete) {
                  clearTimeout(timer);
                  waiters.delete(check);
                  fail(new Error(`stream ended before the condition; got: ${buf.slice(-300)}`));
                }
              };
              const timer = setTimeout(() => {
                waiters.delete(check);
                fail(new Error(`condition not met within ${ms} ms; got: ${buf.slice(-300)}`));
              }, ms);
              waiters.add(check);
              check();
            }),
          close: () => req.destroy(),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function listen(h: OperatorHarness): Promise<number> {
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  return (h.app.server.address() as { port: number }).port;
}

function ids(text: string): number[] {
  return [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
}

t.test('the stream sends the backlog, then each committed event at once', async (t) => {
  const h = await operatorHarness(t, {}, { streamPollMs: 60_000 });
  wireNotify(h);
  await h.settle();
  const backlog = await h.rt.store.listEvents(0, 1000);
  t.ok(backlog.length > 0, 'settling wrote events');
  const port = await listen(h);
  const s = await open(port, `${PREFIX}/v1/events/stream?after=0`);
  t.teardown(() => s.close());
  t.equal(s.res.statusCode, 200, 'the stream answers 200');
  t.match(s.res.headers['content-type'], /^text\/event-stream/, 'the stream is text/event-stream');
  const last = (backlog[backlog.length - 1] as EventRow).id;
  await s.until((x) => ids(x).includes(last), 5000);
  t.same(
    ids(s.text()),
    backlog.map((e) => e.id),
    'the backlog arrives in id order',
  );
  const started = Date.now();
  const a = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(a.statusCode, 200, 'mbp acquires');
  const text = await s.until((x) => /"event":"acquired"/.test(x), 5000);
  t.ok(Date.now() - started < 2000, 'the new event arrived on notify, long before the 60 s poll');
  const frame = text.split('\n\n').find((f) => f.includes('"event":"acquired"')) ?? '';
  const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? 'null') as EventRow;
  t.equal(data.host, 'mbp', 'the row carries its host');
  t.equal(frame.split('\n')[0], `id: ${data.id}`, 'the frame id is the event id');
  t.match(frame, /^event: hq$/m, 'the frame is named hq');
});

t.test('without notify the slow poll still delivers within a poll interval', async (t) => {
  const h = await operatorHarness(t, {}, { streamPollMs: 200 });
  await h.settle();
  const port = await listen(h);
  const after = (await h.rt.store.listEvents(0, 1000)).reduce((m, e) => Math.max(m, e.id), 0);
  const s = await open(port, `${PREFIX}/v1/events/stream?after=${after}`);
  t.teardown(() => s.close());
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  await s.until((x) => /"event":"acquired"/.test(x), 3000);
  t.ok(
    ids(s.text()).every((id) => id > after),
    'only events after the given id are sent',
  );
});

t.test('Last-Event-ID resumes after the last event the client saw', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  const rows = await h.rt.store.listEvents(0, 1000);
  t.ok(rows.length >= 2, 'there are at least two events');
  const port = await listen(h);
  const first = (rows[0] as EventRow).id;
  const s = await open(port, `${PREFIX}/v1/events/stream?after=0`, { 'last-event-id': String(first) });
  t.teardown(() => s.close());
  const last = (rows[rows.length - 1] as EventRow).id;
  await s.until((x) => ids(x).includes(last), 5000);
  t.notOk(ids(s.text()).includes(first), 'the event named by Last-Event-ID is not sent again');
});

/** Until the test's stream instance has read and parked on its waiters again. */
async function parked(h: OperatorHarness): Promise<void> {
  const end = Date.now() + 5000;
  while (h.waiters.size === 0) {
    if (Date.now() > end) throw new Error('the stream never waited');
    await new Promise((r) => setTimeout(r, 5));
  }
}

t.test(
  'a quiet stream gets a keep-alive comment once keepAliveMs passed on the arbiter clock, and closing the app ends it',
  async (t) => {
    const h = await operatorHarness(t, {}, { streamPollMs: 60_000, keepAliveMs: 15_000 });
    const port = await listen(h);
    const s = await open(port, `${PREFIX}/v1/events/stream?after=999999`);
    await parked(h);
    for (let i = 0; i < 3; i++) {
      h.waiters.notify();
      await parked(h);
    }
    t.notOk(s.text().includes(': keep-alive'), 'woken three times while the clock stands: no keep-alive is due');
    h.clock.advance(15);
    h.waiters.notify();
    await s.until((x) => x.includes(': keep-alive'), 5000);
    t.pass('keepAliveMs later on the clock, the next wake-up sends a keep-alive comment');
    const started = Date.now();
    const ended = new Promise<void>((r) => s.res.on('end', () => r()));
    await h.app.close();
    await ended;
    t.ok(Date.now() - started < 3000, 'app.close ended the open stream promptly');
  },
);

t.test('the stream limit, bad ids and openReads', async (t) => {
  const h = await operatorHarness(t, { auth: { openReads: false } }, { maxStreams: 1 });
  const port = await listen(h);
  const anon = await open(port, `${PREFIX}/v1/events/stream`);
  t.equal(anon.res.statusCode, 401, 'without a token the stream is refused while openReads is false');
  anon.close();
  const auth = { authorization: `Bearer ${h.tokens.query}` };
  const bad = await open(port, `${PREFIX}/v1/events/stream?after=-1`, auth);
  t.equal(bad.res.statusCode, 400, 'a negative id is a 400');
  bad.close();
  const one = await open(port, `${PREFIX}/v1/events/stream`, auth);
  t.teardown(() => one.close());
  t.equal(one.res.statusCode, 200, 'the first stream opens');
  const two = await open(port, `${PREFIX}/v1/events/stream`, auth);
  t.equal(two.res.statusCode, 503, 'a stream over the limit is a 503');
  const body = JSON.parse(await two.until(() => two.res.complete, 2000)) as { error: string };
  t.equal(body.error, 'HQ_ERR_TOO_MANY_STREAMS', 'with its code');
});

t.test('EventWaiters: notify wakes every waiter, a timeout or an abort resolves false', async (t) => {
  const w = new EventWaiters();
  const a = w.wait(10_000);
  const b = w.wait(10_000);
  t.equal(w.size, 2, 'two waiters are parked');
  w.notify([{ id: 7, at: 0, category: 'hq.lease', event: 'renewed', host: 'mbp', data: {} }]);
  t.same(await Promise.all([a, b]), [true, true], 'both woke');
  t.equal(w.lastId, 7, 'the highest notified id is kept');
  t.equal(await w.wait(10), false, 'a timeout resolves false');
  const ctl = new AbortController();
  const c = w.wait(10_000, ctl.signal);
  ctl.abort();
  t.equal(await c, false, 'an abort resolves false');
  t.equal(w.size, 0, 'no waiter is left behind');
  w.notify([]);
  t.pass('notify with no rows is harmless');
  t.equal(
    sseFrame({ id: 3, at: 1, category: 'control', event: 'x', host: null, data: { s: 'a\nb' } }).split('\n').length,
    5,
    'a newline inside data stays escaped in one data line',
  );
});

t.test('the stream app.ts mounts at /v1/events/stream delivers committed events', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  const port = await listen(h);
  const after = (await h.rt.store.listEvents(0, 1000)).reduce((m, e) => Math.max(m, e.id), 0);
  const s = await open(port, `/v1/events/stream?after=${after}`);
  t.teardown(() => s.close());
  t.equal(s.res.statusCode, 200, 'the stream at /v1/events/stream answers 200');
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  await s.until((x) => /"event":"acquired"/.test(x), 5000);
  t.pass('the acquire arrived');
});

t.test('a stream without after and without Last-Event-ID starts at the tail: the newest 20', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  await h.rt.store.appendEvents(
    Array.from({ length: 40 }, (_, i) => ({
      at: h.clock.now(),
      category: 'control',
      event: `bulk-${i}`,
      host: null,
      data: {},
    })),
  );
  const rows = await h.rt.store.listEvents(0, 1000);
  const newest = rows.slice(-20).map((e) => e.id);
  const port = await listen(h);
  const s = await open(port, '/v1/events/stream');
  t.teardown(() => s.close());
  await s.until((x) => ids(x).includes(newest[newest.length - 1]!), 5000);
  t.same(ids(s.text()), newest, 'exactly the newest 20 events, oldest first, not the history from id 1');
  const all = await open(port, '/v1/events/stream?after=0');
  t.teardown(() => all.close());
  await all.until((x) => ids(x).includes(newest[newest.length - 1]!), 5000);
  t.equal(ids(all.text())[0], rows[0]!.id, 'after=0 still asks for the whole kept history');
});
