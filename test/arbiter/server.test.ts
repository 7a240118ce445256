import t from 'tap';
import { connect, type AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { harness } from './helper.js';
import { CLI, ROOT, childEnv, startArbiter, writeConfig } from './child.js';
import { SqliteStore } from '../../apps/arbiter/src/store/sqlite/lease.js';
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

t.test(
  'a real listener: duplicate Authorization is 400, keep-alive is reused, revocation applies on the same connection',
  async (t) => {
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
    await h.rt.store.revokeTokens('mbp', h.clock.now());
    const after = await call(h.tokens.mbp);
    t.equal(after.status, 401, 'the revoked token fails on the next request');
    t.equal(connections, 1, 'all three requests used one keep-alive connection');
  },
);

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
  const config = writeConfig(dir, {
    healthUrls: { mbp: url },
    checkCron: '*/30 * * * * *',
    ttlSeconds: 60,
    viewFreshSeconds: 60,
  });
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
  t.ok(
    a.lines.some((l) => l['msg'] === 'closed'),
    'logged its close',
  );
  t.ok(
    a.lines.every((l) => typeof l['level'] === 'number' && typeof l['time'] === 'number'),
    'stdout is pino JSON lines',
  );
  const refused = await request(`${a.base}/v1/health`).then(
    () => false,
    () => true,
  );
  t.ok(refused, 'nothing listens after the close');
});

t.test(
  'a second serve on the same database is refused while check and token keep working; a stale lock is taken over',
  async (t) => {
    const dir = t.testdir();
    const config = writeConfig(dir, { checkCron: '*/30 * * * * *', ttlSeconds: 60, viewFreshSeconds: 60 });
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
  },
);

t.test(
  'takeServeLock: alive holder refused, own or dead PID taken over, garbage replaced, release only removes its own lock',
  async (t) => {
    const dir = t.testdir();
    const path = join(dir, 'arbiter.lock');
    const alive = (pid: number) => pid === 111;
    const first = takeServeLock(dir, { pid: 111, alive });
    t.equal(readFileSync(path, 'utf8'), '111\n', 'created with the PID');
    t.throws(
      () => takeServeLock(dir, { pid: 222, alive }),
      new LockError(
        `another hq-arbiter (pid 111) serves ${dir} (lock ${path}); stop it first, or remove the lock if pid 111 is not an hq-arbiter`,
      ),
      'an alive holder is refused',
    );
    const same = takeServeLock(dir, { pid: 111, alive });
    t.equal(
      readFileSync(path, 'utf8'),
      '111\n',
      'a lock with our own PID is a stale one of an earlier life (a container restart): taken over',
    );
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
  },
);

t.test(
  'the daemon sweeps old events at start; its stream starts at the tail; hq events --tail and --since',
  async (t) => {
    const dir = t.testdir();
    // Default timings and a daily check twelve hours from now: no background write adds events under the comparisons.
    const hour = (new Date().getUTCHours() + 12) % 24;
    const config = writeConfig(dir, {
      checkCron: `0 ${hour} * * *`,
      ttlSeconds: 1500,
      viewFreshSeconds: 1500,
      safetyMarginSeconds: 30,
      events: { maxAgeDays: 30, maxCount: 100 },
    });
    const now = Date.now() / 1000;
    const pre = new SqliteStore({ dataDir: join(dir, 'var'), ttlSeconds: 60 });
    pre.appendEvents(
      Array.from({ length: 20 }, (_, i) => ({
        at: now - 40 * 86_400 + i,
        category: 'control',
        event: 'ancient',
        host: null,
        data: {},
      })),
    );
    pre.appendEvents(
      Array.from({ length: 150 }, (_, i) => ({
        at: now - 3600 + i * 10,
        category: 'control',
        event: `recent-${i}`,
        host: null,
        data: {},
      })),
    );
    pre.close();
    const a = await startArbiter(t, config);
    const all = (
      (await (await fetch(`${a.base}/v1/events?after=0&limit=1000`)).json()) as {
        events: Array<{ id: number; at: number; event: string }>;
      }
    ).events;
    t.notOk(
      all.some((e) => e.event === 'ancient'),
      'events older than maxAgeDays were swept at start',
    );
    t.ok(all.length <= 100 + 5, `at most maxCount kept, plus what the start wrote after the sweep (${all.length})`);
    t.notOk(
      all.some((e) => e.event === 'recent-0'),
      'beyond maxCount the oldest went first',
    );

    const agentConfig = join(dir, 'agent.json');
    writeFileSync(
      agentConfig,
      JSON.stringify({
        hostName: 'mbp',
        arbiterUrl: a.base,
        stateDir: join(dir, 'state'),
        socketPath: join(dir, 'agent.sock'),
        tailscaleBin: '',
      }),
    );
    const hq = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile(
          process.execPath,
          [join(ROOT, 'apps/agent/dist/cli/entry.js'), 'events', '--config', agentConfig, ...args],
          { env: childEnv(), timeout: 60_000 },
          (err, stdout, stderr) => {
            resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
          },
        );
      });
    const newest = all.slice(-3).map((e) => e.id);
    const tail = await hq(['--tail', '3', '--json']);
    t.equal(tail.code, 0, `hq events --tail 3 exits 0 (${tail.stderr.trim()})`);
    t.same(
      (JSON.parse(tail.stdout) as { events: Array<{ id: number }> }).events.map((e) => e.id),
      newest,
      'the newest three events',
    );
    const cut = all[all.length - 10]!;
    const since = await hq(['--since', String(cut.at), '--json']);
    t.same(
      (JSON.parse(since.stdout) as { events: Array<{ id: number }> }).events.map((e) => e.id),
      all.slice(-10).map((e) => e.id),
      '--since epoch seconds: the events at or after it',
    );
    const iso = await hq(['--since', new Date(Math.floor(cut.at) * 1000).toISOString()]);
    t.equal(iso.code, 0, '--since takes an ISO time');
    t.ok(iso.stdout.trim().split('\n').length >= 10, 'and prints the events from then on, one a line');
    for (const [args, msg] of [
      [['--tail', '0'], 'hq events: --tail must be an integer from 1 to 1000 (got 0)\n'],
      [['--tail', '5', '--since', '1'], 'hq events: give at most one of --after, --tail and --since\n'],
      [
        ['--since', 'yesterday'],
        'hq events: --since must be epoch seconds (1764600000) or an ISO time (2026-12-01T10:00:00Z), got "yesterday"\n',
      ],
    ] as const) {
      const r = await hq([...args]);
      t.equal(r.code, 2, `${args.join(' ')} exits 2`);
      t.equal(r.stderr, msg, `${args.join(' ')} says what to fix in one line`);
    }

    const filtered = await hq(['--event', 'recent-149,recent-148', '--json']);
    t.same(
      (JSON.parse(filtered.stdout) as { events: Array<{ event: string }> }).events.map((e) => e.event).sort(),
      ['recent-148', 'recent-149'],
      '--event keeps only the named events',
    );
    t.equal((await hq(['--event', 'Bad Name'])).code, 2, 'a malformed --event is a usage error');
    const { readableData } = await import('../../apps/agent/src/cli/events.js');
    t.same(
      readableData({ notBefore: 1_800_000_000.5, from: 'mbp', generation: 3 }),
      { notBefore: '2027-01-15T08:00:00.500Z', from: 'mbp', generation: 3 },
      'times in the data print as ISO times, other values as they are',
    );
    // --follow starts from the newest 20, not the whole kept history.
    const follow = execFile(
      process.execPath,
      [join(ROOT, 'apps/agent/dist/cli/entry.js'), 'events', '--follow', '--config', agentConfig],
      { env: childEnv() },
    );
    let followed = '';
    follow.stdout!.on('data', (d) => (followed += String(d)));
    for (let i = 0; i < 300 && !followed.includes(`${all[all.length - 1]!.id} `); i++)
      await new Promise((r) => setTimeout(r, 50));
    follow.kill('SIGKILL');
    const ids = followed
      .trim()
      .split('\n')
      .map((l) => Number(l.split(' ')[0]));
    t.same(
      ids,
      all.slice(-20).map((e) => e.id),
      'hq events --follow prints the newest 20 first, then follows',
    );

    // The daemon's own stream (app.ts wiring): without after or Last-Event-ID, the newest 20.
    const ctl = new AbortController();
    const res = await fetch(`${a.base}/v1/events/stream`, { signal: ctl.signal });
    const reader = res.body!.getReader();
    let text = '';
    const want = all[all.length - 1]!.id;
    while (!new RegExp(`^id: ${want}$`, 'm').test(text)) text += new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    const got = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    t.same(
      got,
      all.slice(-20).map((e) => e.id),
      'the stream without after starts with the newest 20',
    );
    a.proc.kill('SIGTERM');
    await a.exited;
  },
);
