/**
 * What a started, idle SQLite arbiter holds: a young generation that start-up did not
 * grow (@hq/runtime/v8-footprint, set by its bin), and not undici: the etcd client and the
 * forwarder that use it load only for `store.kind: "etcd"` (server/runtime.ts, leadership.ts,
 * plugins/forward.ts). Once it listens, a load grows the young generation. The real daemon
 * (dist): the young generation's size from /metrics, the modules from bench/heap-report.mjs
 * (preloaded; it writes on SIGUSR2, which also starts the daemon's close: so it comes last).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Report {
  readonly commonjs: readonly string[];
}

t.test(
  'an idle SQLite arbiter keeps a small young generation and has not loaded undici; under load it grows',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hq-arb-fp-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, 'arbiter.json');
    // The embedded default, as `npm start` runs it, with a temp dataDir and a free port.
    writeFileSync(
      config,
      JSON.stringify({
        dataDir: join(dir, 'var'),
        listen: { host: '127.0.0.1', port: 0 },
        tailscaleBin: '',
        candidates: ['mbp'],
      }),
    );
    const reportFile = join(dir, 'heap.json');
    const child = spawn(
      process.execPath,
      [
        '--import',
        join(ROOT, 'bench/heap-report.mjs'),
        join(ROOT, 'apps/arbiter/dist/cli.js'),
        'serve',
        '--config',
        config,
      ],
      {
        env: { ...process.env, NODE_OPTIONS: '', HQ_BENCH_HEAP_REPORT: reportFile },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    t.teardown(() => void child.kill('SIGKILL'));
    // Generous: a loaded machine can take many seconds to start node.
    let stdout = '';
    const listening = await new Promise<boolean>((done) => {
      const timer = setTimeout(() => done(false), 60_000);
      child.once('exit', () => done(false));
      createInterface({ input: child.stdout }).on('line', (l) => {
        stdout += `${l}\n`;
        if (l.includes('"msg":"serve lock held"')) {
          clearTimeout(timer);
          done(true);
        }
      });
    });
    t.ok(listening, `the arbiter started ${stderr}`);

    const port = Number(/"port":(\d+)[^\n]*"msg":"hq-arbiter listening"/.exec(stdout)?.[1]);
    t.ok(port > 0, 'the port from its listening line');
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32 });
    t.teardown(() => pool.close());
    const admin = readFileSync(join(dir, 'var/admin.token'), 'utf8').trim();
    // V8's own figure, as /metrics gives it (prom-client's default metrics).
    const youngMiB = async (): Promise<number> => {
      const res = await pool.request({
        method: 'GET',
        path: '/metrics',
        headers: { authorization: `Bearer ${admin}` },
      });
      const text = await res.body.text();
      return Number(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)/m.exec(text)?.[1] ?? NaN) / 2 ** 20;
    };
    const idle = await youngMiB();
    t.ok(idle <= 8, `the young generation is not grown by start-up (${idle.toFixed(1)} MiB)`);

    // Once it listens, a load may grow it (a third less CPU per heartbeat under load).
    let answered = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        for (let i = 0; i < 1000; i++) {
          const res = await pool.request({ method: 'GET', path: '/v1/health' });
          await res.body.text();
          if (res.statusCode === 200) answered++;
        }
      }),
    );
    t.equal(answered, 32 * 1000, 'every health read answered 200');
    const loaded = await youngMiB();
    t.ok(loaded >= 2 * idle, `after 32,000 reads from 32 connections it has grown (${loaded.toFixed(1)} MiB)`);

    // Last: the report (SIGUSR2 also starts the daemon's graceful close).
    rmSync(reportFile, { force: true });
    child.kill('SIGUSR2');
    let report: Report | null = null;
    for (let i = 0; i < 200 && report === null; i++) {
      await sleep(25);
      try {
        report = JSON.parse(readFileSync(reportFile, 'utf8')) as Report;
      } catch {
        // not written yet
      }
    }
    if (report === null) throw new Error('no heap report');
    const isLoaded = (mod: string): boolean => report.commonjs.some((p) => p.includes(mod));
    t.ok(isLoaded('/node_modules/fastify/'), 'Fastify is loaded (the API)');
    t.ok(isLoaded('/node_modules/better-sqlite3/'), 'better-sqlite3 is (the store)');
    t.notOk(isLoaded('/node_modules/undici/'), 'undici is not (the etcd client and the forwarder use it)');
    child.kill('SIGTERM');
  },
);
