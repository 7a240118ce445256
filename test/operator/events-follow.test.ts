/**
 * The `hq events --follow` client (apps/agent/src/cli/events-follow.ts) against the real
 * event stream of a real arbiter on loopback: events arrive as they are committed, a dropped
 * connection resumes from the last id without loss or repeats, an arbiter without the stream is
 * reported as unsupported, and a refused token stops it.
 */
import { createServer } from 'node:http';
import t from 'tap';
import { followEvents, parseFrames, type StreamEvent } from '../../apps/agent/src/cli/events-follow.js';
import { PREFIX, operatorHarness, wireNotify } from './helper.js';

function until(pred: () => boolean, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const started = Date.now();
    const tick = setInterval(() => {
      if (pred() || Date.now() - started > ms) {
        clearInterval(tick);
        resolve(pred());
      }
    }, 10);
  });
}

t.test('followEvents delivers each committed event once, across a dropped connection', async (t) => {
  const h = await operatorHarness(t, {}, { streamPollMs: 60_000 });
  wireNotify(h);
  await h.settle();
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}${PREFIX}`;
  const after = (await h.rt.store.listEvents(0, 1000)).reduce((m, e) => Math.max(m, e.id), 0);
  const seen: StreamEvent[] = [];
  const problems: string[] = [];
  const ctl = new AbortController();
  const done = followEvents({
    url,
    token: null,
    after,
    signal: ctl.signal,
    onEvent: (e) => seen.push(e),
    onProblem: (l) => problems.push(l),
    retryMs: 50,
  });
  await new Promise((r) => setTimeout(r, 200));
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.ok(await until(() => seen.some((e) => e.event === 'acquired'), 5000), 'the acquire arrived on the stream');
  h.app.server.closeAllConnections();
  t.ok(await until(() => problems.length > 0, 5000), `the dropped connection was noticed (${problems.join('; ')})`);
  await h.post('/v1/lease/transfer', { to: 'node-b' });
  t.ok(await until(() => seen.some((e) => e.event === 'promoted'), 5000), 'the promotion arrived after the reconnect');
  ctl.abort();
  const r = await done;
  const ids = seen.map((e) => e.id);
  t.same(
    ids,
    [...new Set(ids)].sort((a, b) => a - b),
    'every event arrived once, in id order',
  );
  t.ok(
    ids.every((id) => id > after),
    'nothing at or before the start id was sent',
  );
  t.equal(r.lastId, ids[ids.length - 1], 'the last id seen is returned');
  t.equal(r.unsupported, false, 'the stream was supported');
});

t.test('an arbiter without the stream is reported as unsupported; a refused token stops', async (t) => {
  const old = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"HQ_ERR_NOT_FOUND","message":"no route"}');
  });
  await new Promise<void>((r) => old.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => old.close(() => r())));
  const ctl = new AbortController();
  t.teardown(() => ctl.abort());
  const r = await followEvents({
    url: `http://127.0.0.1:${(old.address() as { port: number }).port}`,
    token: null,
    after: 0,
    signal: ctl.signal,
    onEvent: () => undefined,
  });
  t.equal(r.unsupported, true, 'a 404 means the arbiter has no stream (fall back to polling)');

  const h = await operatorHarness(t, { auth: { openReads: false } });
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
  const refused = await followEvents({
    url,
    token: '0'.repeat(64),
    after: 0,
    signal: ctl.signal,
    onEvent: () => undefined,
  });
  t.match(refused.failed ?? '', /HTTP 401 \(HQ_ERR_UNAUTHORIZED/, 'an unknown token stops with the 401 in one line');
});

t.test('parseFrames handles split chunks, comments, CRLF and multi-line data', async (t) => {
  const got: Array<{ id: string | null; event: string | null; data: string }> = [];
  let rest = parseFrames(': keep-alive\n\nid: 1\nevent: hq\nda', (f) => got.push(f));
  t.equal(got.length, 0, 'a comment and a half frame give nothing yet');
  rest = parseFrames(`${rest}ta: {"a":1}\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\n`, (f) => got.push(f));
  t.same(
    got,
    [
      { id: '1', event: 'hq', data: '{"a":1}' },
      { id: '2', event: null, data: 'x\ny' },
    ],
    'both frames are parsed',
  );
  t.equal(rest, '', 'nothing is left over');
});
