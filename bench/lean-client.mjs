#!/usr/bin/env node
// A lean closed-loop HTTP/1.1 client for one GET on a unix socket, so that the server, not the
// client, is what a run measures: raw node:net connections kept alive, each with `depth`
// requests in flight (pipelined), every answer's status and body checked with byte searches,
// and the requests an answer frees written back in one write. Plain node, no loader.
//
//   node bench/lean-client.mjs SOCKET PATH SECONDS CONNECTIONS DEPTH [MUST-CONTAIN…]
//
// Prints one JSON line: answers, answers/s, p50/p99 ms (request written → its answer read,
// with a read's answers stamped at the read), answers that were not 200 or lacked a
// MUST-CONTAIN text, and this client's own CPU µs per answer.
import { connect } from 'node:net';

const [socketPath, path, secondsArg, connectionsArg, depthArg, ...must] = process.argv.slice(2);
const seconds = Number(secondsArg);
const connections = Number(connectionsArg);
const depth = Number(depthArg);
const request = Buffer.from(`GET ${path} HTTP/1.1\r\nhost: localhost\r\n\r\n`);
const requests = Buffer.concat(Array.from({ length: depth }, () => request));
const mustBytes = must.map((m) => Buffer.from(m));
const HEAD_END = Buffer.from('\r\n\r\n');
const LENGTH = Buffer.from('ontent-length: ');

let answers = 0;
let bad = 0;
let stopping = false;
const latencies = new Float64Array(4_000_000);
let kept = 0;

function run(done) {
  const s = connect(socketPath);
  // Send times of the requests in flight, oldest first (a ring of `depth`).
  const sent = new Float64Array(depth);
  let head = 0;
  let inFlight = 0;
  let buf = Buffer.alloc(0);
  const send = (n) => {
    const t = performance.now();
    for (let i = 0; i < n; i++) sent[(head + inFlight + i) % depth] = t;
    inFlight += n;
    s.write(n === depth ? requests : requests.subarray(0, n * request.length));
  };
  s.on('connect', () => send(depth));
  s.on('data', (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const now = performance.now();
    let at = 0;
    let freed = 0;
    for (;;) {
      const end = buf.indexOf(HEAD_END, at);
      if (end < 0) break;
      const l = buf.indexOf(LENGTH, at);
      if (l < 0 || l > end) throw new Error('an answer without content-length');
      const length = Number(buf.toString('latin1', l + LENGTH.length, buf.indexOf(13, l)));
      const bodyAt = end + 4;
      if (buf.length < bodyAt + length) break;
      const ok = buf[at + 9] === 0x32 && buf[at + 10] === 0x30 && buf[at + 11] === 0x30;
      const body = buf.subarray(bodyAt, bodyAt + length);
      if (!ok || mustBytes.some((m) => body.indexOf(m) < 0)) bad++;
      if (kept < latencies.length) latencies[kept++] = now - sent[head];
      head = (head + 1) % depth;
      inFlight--;
      answers++;
      freed++;
      at = bodyAt + length;
    }
    buf = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
    if (stopping) {
      if (inFlight === 0) s.end();
    } else if (freed > 0) send(freed);
  });
  s.on('error', (e) => {
    process.stderr.write(`lean-client: ${e.message}\n`);
    process.exit(1);
  });
  s.on('close', done);
}

const cpu0 = process.cpuUsage();
const t0 = performance.now();
let open = connections;
let t1 = 0;
let counted = 0;
const finished = new Promise((res) => {
  for (let i = 0; i < connections; i++) run(() => --open === 0 && res());
});
setTimeout(() => {
  // Answers/s over the window; the answers still in flight drain afterwards (and count for CPU).
  t1 = performance.now();
  counted = answers;
  stopping = true;
}, seconds * 1000);
await finished;
const cpu = process.cpuUsage(cpu0);
const sorted = latencies.subarray(0, kept).sort();
const q = (p) => (kept === 0 ? 0 : sorted[Math.min(kept - 1, Math.floor(p * kept))]);
process.stdout.write(
  `${JSON.stringify({
    answers,
    rps: counted / ((t1 - t0) / 1000),
    p50: q(0.5),
    p99: q(0.99),
    bad,
    clientCpuUs: (cpu.user + cpu.system) / Math.max(1, answers),
  })}\n`,
);
