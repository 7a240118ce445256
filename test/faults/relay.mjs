// The harness's HTTP client inside the arbiter's network namespace: one JSON request per stdin
// line `{id, method, path, headers?, body?}` → one JSON answer per stdout line
// `{id, status, body, t0, t1}` or `{id, error, t0, t1}`, t in CLOCK_MONOTONIC seconds.
// It talks to the arbiter on this namespace's loopback, or to the `base` a request names (store
// etcd: the other arbiter, an etcd member); it exits when stdin closes.
import { createInterface } from 'node:readline';

const base = process.argv[2] ?? 'http://127.0.0.1:8470';
const now = () => Number(process.hrtime.bigint()) / 1e9;
const rl = createInterface({ input: process.stdin });
rl.on('line', async (raw) => {
  let req;
  try {
    req = JSON.parse(raw);
  } catch {
    return;
  }
  const t0 = now();
  try {
    const r = await fetch((req.base ?? base) + req.path, {
      method: req.method,
      headers: { ...(req.body !== undefined ? { 'content-type': 'application/json' } : {}), ...(req.headers ?? {}) },
      body: req.body !== undefined ? JSON.stringify(req.body) : undefined,
      signal: AbortSignal.timeout(req.timeoutMs ?? 3000),
    });
    const text = await r.text();
    let body = text;
    try {
      body = JSON.parse(text);
    } catch {}
    process.stdout.write(`${JSON.stringify({ id: req.id, status: r.status, body, t0, t1: now() })}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ id: req.id, error: String(err?.name ?? err), t0, t1: now() })}\n`);
  }
});
rl.on('close', () => process.exit(0));
