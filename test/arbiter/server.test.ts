import t from 'tap';
import { connect, type AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { harness } from './helper.js';
import { CLI, childEnv, startArbiter, writeConfig } from './child.js';
import { LockError, takeServeLock } from '../../apps/arbiter/src/serve-lock.js';

/** The built bin, as an operator runs it. */
function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv(), timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.end(text));
    let out = '';
    s.on('data', (d) => (out += String(d)));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

t.test('a real listener: duplicate Authorization is 400, keep-alive is reused, revocation applies on the same connection', async (t) => {
  const h = await harness(t);
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const port = (h.app.server.address() as AddressInfo).port;
  let connections = 0;
  h.app.server.on('connection', () => connections++);

  const body = '{"host":"mbp"}';
  const dup = await raw(
    port,
    `POST /v1/lease/acquire HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.tokens.mbp}\r\nAuthorization: Bearer ${h.tokens.admin}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
  t.match(dup, /^HTTP\/1\.1 400 /, 'two Authorization headers are a 400');
  t.match(dup, /"error":"HQ_ERR_BAD_REQUEST"/, 'with the catalog code');

  const agent = new Agent({ connections: 1 });
  t.teardown(() => agent.close());
  connections = 0;
  const call = async (token: string, scheme = 'Bearer') => {
    const res = await request(`http://127.0.0.1:${port}/v1/lease/acquire`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `${scheme} ${token}`, 'content-type': 'application/json' },
      body,
    });
    return { status: res.statusCode, body: (await res.body.json()) as { error?: string } };
  };
  t.equal((await call(h.tokens.mbp, 'BEARER')).status, 200, 'an upper-case scheme is accepted');
  t.equal((await call(h.tokens.mbp, 'bearer')).status, 200, 'a lower-case scheme is accepted');
  h.rt.store.revokeTokens('mbp', h.clock.now());
  const after = await call(h.tokens.mbp);
  t.equal(after.status, 401, 'the revoked token fails on the next request');
  t.equal(connections, 1, 'all three requests used one keep-alive connection');
});

t.test('SIGTERM finishes the in-flight request, closes the database and exits 0 within 10 s', async (t) => {
  const dir = t.testdir();
  let release: (() => void) | null = null;
  const slow = createServer((_req, res) => {
    release = () => {
      res.writeHead(200);
      res.end('{"status":"ok"}');
    };
    setTimeout(() => release?.(), 300);
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => slow.close(() => r())));
  let probed: () => void = () => undefined;
  const probedOnce = new Promise<void>((r) => (probed = r));
  slow.on('request', () => probed());
  const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/v1/health`;
  // Checks only on request (a schedule that never fires in this test: 23:59:59 would, so use the request path only).
  const config = writeConfig(dir, { healthUrls: { mbp: url }, checkCron: '*/30 * * * * *', heartbeatCron: '*/30 * * * * *', ttlSeconds: 60, viewFreshSeconds: 60 });
  const a = await startArbiter(t, config);
  const token = readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const acq = await request(`${a.base}/v1/lease/acquire`, { method: 'POST', headers, body: '{"host":"mbp"}' });
  t.equal(acq.statusCode, 200, 'acquired');
  await acq.body.dump();

  const inflight = request(`${a.base}/v1/check`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  await probedOnce;
  const t0 = Date.now();
  a.proc.kill('SIGTERM');
  const res = await inflight;
  t.equal(res.statusCode, 200, 'the in-flight check was answered');
  t.match((await res.body.json()) as object, { holder: 'mbp', health: true }, 'with its result');
  const exit = await a.exited;
  t.equal(exit.code, 0, 'exit code 0');
  t.ok(Date.now() - t0 < 10_000, `within 10 s (${Date.now() - t0} ms)`);
  t.ok(a.lines.some((l) => l['msg'] === 'closed'), 'logged its close');
  t.ok(a.lines.every((l) => typeof l['level'] === 'number' && typeof l['time'] === 'number'), 'stdout is pino JSON lines');
  const refused = await request(`${a.base}/v1/health`).then(
    () => false,
    () => true,
  );
  t.ok(refused, 'nothing listens after the close');
});

t.test('a second serve on the same database is refused while check and token keep working; a stale lock is taken over', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir, { checkCron: '*/30 * * * * *', heartbeatCron: '*/30 * * * * *', ttlSeconds: 60, viewFreshSeconds: 60 });
  const lockPath = join(dir, 'var', 'arbiter.lock');
  const a = await startArbiter(t, config);
  t.equal(readFileSync(lockPath, 'utf8'), `${a.proc.pid}\n`, 'the daemon holds the lock with its PID');
  t.equal(statSync(lockPath).mode & 0o777, 0o600, 'the lock is 0600');
  const second = await runCli(['serve', '--config', config]);
  t.equal(second.code, 2, 'a second serve exits 2');
  t.equal(
    second.stderr,
    `hq-arbiter: another hq-arbiter (pid ${a.proc.pid}) serves ${join(dir, 'var')} (lock ${lockPath}); stop it first, or remove the lock if pid ${a.proc.pid} is not an hq-arbiter\n`,
    'one line naming the holder PID and the lock',
  );
  t.equal(readFileSync(lockPath, 'utf8'), `${a.proc.pid}\n`, 'the refused start left the lock alone');
  const check = await runCli(['check', '--config', config]);
  t.equal(check.code, 0, `hq-arbiter check shares the database with the daemon (${check.stderr.trim().slice(-200)})`);
  const token = await runCli(['token', 'issue', 'mbp', '--config', config]);
  t.equal(token.code, 0, 'token issue works while the daemon runs');
  a.proc.kill('SIGTERM');
  t.equal((await a.exited).code, 0, 'the daemon exits 0');
  t.notOk(existsSync(lockPath), 'and removes its lock');

  // A lock left by a dead PID (a crash): the next start takes it over.
  const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
  writeFileSync(lockPath, `${dead}\n`, { mode: 0o600 });
  const b = await startArbiter(t, config);
  t.equal(readFileSync(lockPath, 'utf8'), `${b.proc.pid}\n`, `a stale lock of dead pid ${dead} is taken over`);
  b.proc.kill('SIGKILL');
  await b.exited;
  t.equal(readFileSync(lockPath, 'utf8'), `${b.proc.pid}\n`, 'a killed daemon leaves its lock behind');
  const c = await startArbiter(t, config);
  t.equal(readFileSync(lockPath, 'utf8'), `${c.proc.pid}\n`, 'and the next start takes that over too');
  c.proc.kill('SIGTERM');
  await c.exited;
});

t.test('takeServeLock: alive holder refused, own or dead PID taken over, garbage replaced, release only removes its own lock', async (t) => {
  const dir = t.testdir();
  const path = join(dir, 'arbiter.lock');
  const alive = (pid: number) => pid === 111;
  const first = takeServeLock(dir, { pid: 111, alive });
  t.equal(readFileSync(path, 'utf8'), '111\n', 'created with the PID');
  t.throws(() => takeServeLock(dir, { pid: 222, alive }), new LockError(`another hq-arbiter (pid 111) serves ${dir} (lock ${path}); stop it first, or remove the lock if pid 111 is not an hq-arbiter`), 'an alive holder is refused');
  const same = takeServeLock(dir, { pid: 111, alive });
  t.equal(readFileSync(path, 'utf8'), '111\n', 'a lock with our own PID is a stale one of an earlier life (a container restart): taken over');
  same.release();
  t.notOk(existsSync(path), 'release removes it');
  first.release();
  writeFileSync(path, '333\n');
  const over = takeServeLock(dir, { pid: 222, alive });
  t.equal(readFileSync(path, 'utf8'), '222\n', 'a dead PID is taken over');
  writeFileSync(path, '444\n');
  over.release();
  t.equal(readFileSync(path, 'utf8'), '444\n', "release never removes someone else's lock");
  writeFileSync(path, 'garbage');
  takeServeLock(dir, { pid: 555, alive }).release();
  t.notOk(existsSync(path), 'a garbage lock is replaced (and released)');
  t.same(readdirSync(dir), [], 'nothing left aside');
});
