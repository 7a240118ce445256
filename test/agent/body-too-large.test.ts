/**
 * A body the agent refuses on its Content-Length alone (over 64 KiB), sent whole by a client
 * that writes all of it before reading: both listeners answer 413 with the catalogue's code,
 * every time, and no reset takes the answer away (the arbiter reads such a body to its end
 * before answering, server/app.ts `lingerThen`; the agent's listeners end the connection
 * without losing the answer: 300 of 300 on each, `R=300`). `R` rounds per listener (20).
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { stampClock } from '../../packages/runtime/src/clock.js';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { listenSocket, peerApp, socketApp } from '../../apps/agent/src/daemon/servers.js';
import { agentSetup, shortDir } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };
const ROUNDS = Number(process.env['R'] ?? 20);
const BODY = Buffer.alloc(2 * 1024 * 1024, 0x61);

/** Writes the request and its whole body, then reads until the server ends: the status line and the error code, or what went wrong. */
function sendWhole(open: () => Socket, path: string): Promise<string> {
  return new Promise((done) => {
    const s = open();
    let text = '';
    let settled = false;
    const finish = (what: string): void => {
      if (settled) return;
      settled = true;
      s.destroy();
      done(what);
    };
    s.on('data', (c: Buffer) => (text += c.toString('latin1')));
    const answer = (): string =>
      `${text.split('\r\n')[0] ?? ''}${text.includes('"error":"HQ_ERR_TOO_LARGE"') ? ' HQ_ERR_TOO_LARGE' : ''}`;
    s.on('end', () => finish(answer()));
    s.on('error', (err: NodeJS.ErrnoException) =>
      finish(text.startsWith('HTTP/') ? answer() : `error ${err.code ?? err.message}`),
    );
    s.on('close', () => finish(text.startsWith('HTTP/') ? answer() : 'closed without an answer'));
    s.write(
      `POST ${path} HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n`,
    );
    s.write(BODY);
  });
}

t.test('a 2 MiB body is answered 413 on both listeners, every time', async (t) => {
  const dir = shortDir(t);
  const { config } = await agentSetup(t, dir);
  const agent = await openAgent({ config, clock: stampClock, log: silent });
  const socket = socketApp(agent, null);
  await listenSocket(socket, config.socketPath, config.stateDir);
  const peer = peerApp(agent, null);
  await peer.listen({ host: '127.0.0.1', port: 0 });
  const port = (peer.server.address() as { port: number }).port;
  t.teardown(async () => {
    await stopAgent(agent);
    await socket.close();
    await peer.close();
  });
  for (const [name, open, path] of [
    ['the unix socket', () => connect(config.socketPath), '/v1/events'],
    ['the peer listener', () => connect(port, '127.0.0.1'), '/v1/peer/confirm'],
  ] as const) {
    const seen = new Map<string, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const line = await sendWhole(open, path);
      seen.set(line, (seen.get(line) ?? 0) + 1);
    }
    t.same(
      [...seen],
      [['HTTP/1.1 413 Payload Too Large HQ_ERR_TOO_LARGE', ROUNDS]],
      `${name}: ${ROUNDS} of ${ROUNDS} answered 413 (${JSON.stringify([...seen])})`,
    );
  }
});
