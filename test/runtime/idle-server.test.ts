/**
 * sweepOnlyWhileConnected: Node's sweep of request deadlines runs only while a connection is open
 * (no timer of the server's while the daemon idles), and still ends a request past its deadline.
 */
import t from 'tap';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { sweepOnlyWhileConnected } from '../../packages/runtime/src/idle-server.js';

/**
 * Counts Node's sweeps of `server` from now on: each one asks the server's connection list for
 * the expired connections (`expired`, wrapped on the instance).
 */
function countSweeps(server: Server): () => number {
  const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections');
  const list =
    key === undefined
      ? undefined
      : (server as unknown as Record<symbol, { expired: (...a: unknown[]) => unknown }>)[key];
  if (list === undefined) throw new Error('no connection list on the server (a Node this test does not know)');
  let n = 0;
  const expired = list.expired.bind(list);
  list.expired = (...a: unknown[]) => {
    n++;
    return expired(...a);
  };
  return () => n;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function listening(
  t: { teardown(fn: () => unknown): void },
  take: boolean,
): Promise<{ server: Server; port: number; took: boolean | null }> {
  // Deadlines of a few hundred ms, swept every 100 ms: the drip below is ended within a second.
  const server = createServer(
    { connectionsCheckingInterval: 100, requestTimeout: 400, headersTimeout: 300 },
    (_req, res) => res.end('ok'),
  );
  const took = take ? sweepOnlyWhileConnected(server) : null;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { server, port: (server.address() as AddressInfo).port, took: took === null ? null : await took };
}

/** A client that sends half a request line and then nothing: what only the sweep ends. */
function drip(port: number): Promise<string> {
  return new Promise((done, fail) => {
    const s = connect(port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nhost: x\r\n'));
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
  const plain = await listening(t, false);
  const plainSweeps = countSweeps(plain.server);
  const idle = await listening(t, true);
  const idleSweeps = countSweeps(idle.server);
  t.equal(idle.took, true, "Node's sweep was found and taken over");
  await sleep(550);
  t.ok(plainSweeps() >= 2, `without: Node sweeps with no connection open (${plainSweeps()} times in 550 ms at 100 ms)`);
  t.equal(idleSweeps(), 0, 'with: no sweep while no connection is open');
});

t.test(
  'a request past its deadline is still ended while connected, and the timer goes with the last connection',
  async (t) => {
    const { server, port } = await listening(t, true);
    const sweeps = countSweeps(server);
    const answer = await drip(port);
    t.match(
      answer,
      /^HTTP\/1\.1 408 /,
      `the dripping request was ended by the sweep (${JSON.stringify(answer.slice(0, 40))})`,
    );
    t.ok(sweeps() >= 1, `swept while connected (${sweeps()} times)`);
    await sleep(50);
    const after = sweeps();
    await sleep(350);
    t.equal(sweeps(), after, 'no sweep once the connection is gone');
    const again = await drip(port);
    t.match(again, /^HTTP\/1\.1 408 /, 'and the next connection is swept again');
  },
);
