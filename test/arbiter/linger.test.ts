/**
 * A body refused before it was read (413 on its Content-Length): the arbiter reads the rest
 * before answering, for at most its linger time on the injected timers, so a client that never
 * stops sending still gets its answer and one that finishes gets it at once.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import pino from 'pino';
import { buildApp } from '../../apps/arbiter/src/server/app.js';
import { FakeTime, flush } from '../registry/fake-time.js';
import { harness } from './helper.js';

const DECLARED = 100_000;

async function setup(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const h = await harness(t, { auth: { openReads: true } });
  const hq = {
    arbiter: h.rt.arbiter,
    checker: h.rt.checker,
    store: h.rt.store,
    metrics: h.rt.metrics,
    config: h.rt.config,
    version: 'test',
  };
  const time = new FakeTime();
  const app = await buildApp({ hq, log: pino({ level: 'silent' }), fastPath: false, timers: time });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  /** Sends the head and the first part of a body too large; what comes back is collected. */
  const send = async (): Promise<{ socket: Socket; received: () => string }> => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (b) => {
      text += b.toString('latin1');
    });
    socket.on('error', () => undefined);
    await new Promise<void>((done) => socket.once('connect', () => done()));
    socket.write(
      `POST /v1/lease/acquire HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${h.tokens.mbp}\r\ncontent-type: application/json\r\ncontent-length: ${DECLARED}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(1000, 0x20));
    t.teardown(() => socket.destroy());
    return { socket, received: () => text };
  };
  /** Lets the server's side of the loopback run (no real time waited) until `ready()`, or gives up. */
  const until = async (ready: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !ready(); i++) await flush();
  };
  return { time, send, until };
}

t.test('a sender that never finishes hears its 413 when the linger time is up, not before', async (t) => {
  const s = await setup(t);
  const c = await s.send();
  await s.until(() => s.time.pending().length > 0);
  t.same(s.time.pending(), [2_000], 'the read of the rest is bounded by one timer');
  t.equal(c.received(), '', 'no answer while the rest is read');
  await s.time.advance(2_000);
  await s.until(() => c.received() !== '');
  t.match(c.received(), /^HTTP\/1\.1 413 /, 'the 413 goes out when the time is up');
  t.match(c.received(), /HQ_ERR_TOO_LARGE/, 'in the one shape');
});

t.test('a sender that finishes its body hears the 413 at once, and the timer is cleared', async (t) => {
  const s = await setup(t);
  const c = await s.send();
  await s.until(() => s.time.pending().length > 0);
  c.socket.write(Buffer.alloc(DECLARED - 1000, 0x20));
  await s.until(() => c.received() !== '');
  t.match(c.received(), /^HTTP\/1\.1 413 /, 'answered once the body ended');
  t.same(s.time.pending(), [], 'no timer left behind');
});
