/**
 * sweepOnlyWhileConnected: Node's sweep of request deadlines runs only while a connection is open
 * (no timer of the server's while the daemon idles), and still ends a request past its deadline.
 */
import t from 'tap';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { sweepOnlyWhileConnected } from '../../packages/runtime/src/idle-server.js';
import { FakeTime } from '../registry/fake-time.js';

/**
 * Counts Node's sweeps of `server` from now on: each one asks the server's connection list for
 * the expired connections (`expired`, wrapped on the instance). `reach(n)` resolves at the n-th.
 */
function countSweeps(server: Server): { (): number; reach(n: number): Promise<void> } {
  const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections');
  const list =
    key === undefined
      ? undefined
      : (server as unknown as Record<symbol, { expired: (...a: unknown[]) => unknown }>)[key];
  if (list === undefined) throw new Error('no connection list on the server (a Node this test does not know)');
  let n = 0;
  const waiting: { n: number; done: () => void }[] = [];
  const expired = list.expired.bind(list);
  list.expired = (...a: unknown[]) => {
    n++;
    for (const w of waiting.filter((w) => w.n <= n)) w.done();
    return expired(...a);
  };
  const count = () => n;
  count.reach = (at: number) => new Promise<void>((done) => (at <= n ? done() : waiting.push({ n: at, done })));
  return count;
}

/** Node's sweep period on the servers below; the taken-over sweep runs on the test's timers. */
const SWEEP_MS = 100;

async function listening(
  t: { teardown(fn: () => unknown): void },
  take: FakeTime | null,
): Promise<{ server: Server; port: number; took: boolean | null }> {
  // Deadlines of a few tens of ms: the drip below is past them by the time the test sweeps.
  const server = createServer(
    { connectionsCheckingInterval: SWEEP_MS, requestTimeout: 20, headersTimeout: 10 },
    (_req, res) => res.end('ok'),
  );
  const took = take === null ? null : sweepOnlyWhileConnected(server, take);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { server, port: (server.address() as AddressInfo).port, took: took === null ? null : await took };
}

/** A client that sends half a request line and then nothing: what only the sweep ends. `sent` once it has. */
function drip(port: number, sent: () => void = () => undefined): Promise<string> {
  return new Promise((done, fail) => {
    const s = connect(port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nhost: x\r\n', sent));
    let got = '';
    s.on('data', (d) => (got += String(d)));
    s.on('close', () => done(got));
    s.on('error', fail);
    // A bound on the test, not a timing claim: without the sweep the server never ends it.
    setTimeout(() => {
      s.destroy();
      done('still open after 5 s');
    }, 5000).unref();
  });
}

t.test("an idle server is not swept; Node's own is, every interval", async (t) => {
  const plain = await listening(t, null);
  const plainSweeps = countSweeps(plain.server);
  const time = new FakeTime();
  const idle = await listening(t, time);
  const idleSweeps = countSweeps(idle.server);
  t.equal(idle.took, true, "Node's sweep was found and taken over");
  // Node's own timer, real time: the comparison the module exists for.
  await plainSweeps.reach(2);
  t.pass(`without: Node sweeps with no connection open (twice at ${SWEEP_MS} ms)`);
  t.same(time.pending(), [], 'with: no sweep timer while no connection is open');
  await time.advance(10 * SWEEP_MS);
  t.equal(idleSweeps(), 0, 'and no sweep, however long it idles');
});

/** Runs the test's sweeps until `answer` settles: the request's deadline itself is Node's, on real time. */
async function sweepUntil(time: FakeTime, answer: Promise<string>): Promise<string> {
  let settled = false;
  void answer.finally(() => (settled = true));
  while (!settled && time.pending().length > 0) await time.advance(SWEEP_MS);
  return answer;
}

/** Resolves once the server's next connection has closed. */
function nextClosed(server: Server): Promise<void> {
  return new Promise((done) => server.once('connection', (c) => c.once('close', () => done())));
}

t.test(
  'a request past its deadline is still ended while connected, and the timer goes with the last connection',
  async (t) => {
    const time = new FakeTime();
    const { server, port } = await listening(t, time);
    const sweeps = countSweeps(server);
    const gone = nextClosed(server);
    let sent!: () => void;
    const wrote = new Promise<void>((r) => (sent = r));
    const answer = drip(port, sent);
    await wrote;
    t.same(time.pending(), [SWEEP_MS], "a connection arms the sweep at Node's period");
    const ended = await sweepUntil(time, answer);
    t.match(
      ended,
      /^HTTP\/1\.1 408 /,
      `the dripping request was ended by the sweep (${JSON.stringify(ended.slice(0, 40))})`,
    );
    t.ok(sweeps() >= 1, `swept while connected (${sweeps()} times)`);
    await gone;
    t.same(time.pending(), [], 'no sweep timer once the connection is gone');
    const after = sweeps();
    await time.advance(10 * SWEEP_MS);
    t.equal(sweeps(), after, 'no sweep once the connection is gone');
    const again = drip(port);
    await new Promise<void>((r) => server.once('connection', () => r()));
    t.match(await sweepUntil(time, again), /^HTTP\/1\.1 408 /, 'and the next connection is swept again');
  },
);
