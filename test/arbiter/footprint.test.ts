/**
 * What a started, idle SQLite arbiter holds (issue 20): a young generation that start-up did not
 * grow (@hq/runtime/v8-footprint, set by its bin), and not undici: the etcd client and the
 * forwarder that use it load only for `store.kind: "etcd"` (server/runtime.ts, leadership.ts,
 * forward.ts). The real daemon (dist), its memory read by bench/heap-report.mjs (preloaded; it writes on SIGUSR2).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Report {
  readonly spaces: Record<string, number>;
  readonly commonjs: readonly string[];
}

t.test('an idle SQLite arbiter keeps a small young generation and has not loaded undici', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hq-arb-fp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, 'arbiter.json');
  // The embedded default, as `npm start` runs it, with a temp dataDir and a free port.
  writeFileSync(config, JSON.stringify({ dataDir: join(dir, 'var'), listen: { host: '127.0.0.1', port: 0 }, tailscaleBin: '', candidates: ['mbp'] }));
  const reportFile = join(dir, 'heap.json');
  const child = spawn(process.execPath, ['--import', join(ROOT, 'bench/heap-report.mjs'), join(ROOT, 'apps/arbiter/dist/cli.js'), 'serve', '--config', config], {
    env: { ...process.env, NODE_OPTIONS: '', HQ_BENCH_HEAP_REPORT: reportFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  t.teardown(() => void child.kill('SIGKILL'));
  // Generous: a loaded machine can take many seconds to start node.
  const listening = await new Promise<boolean>((done) => {
    const timer = setTimeout(() => done(false), 60_000);
    child.once('exit', () => done(false));
    createInterface({ input: child.stdout }).on('line', (l) => {
      if (l.includes('"msg":"serve lock held"')) {
        clearTimeout(timer);
        done(true);
      }
    });
  });
  t.ok(listening, `the arbiter started ${stderr}`);

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
  const loaded = (mod: string): boolean => report.commonjs.some((p) => p.includes(mod));
  t.ok((report.spaces['new_space'] ?? Infinity) <= 8, `the young generation is not grown (${report.spaces['new_space']?.toFixed(1)} MiB)`);
  t.ok(loaded('/node_modules/fastify/'), 'Fastify is loaded (the API)');
  t.ok(loaded('/node_modules/better-sqlite3/'), 'better-sqlite3 is (the store)');
  t.notOk(loaded('/node_modules/undici/'), 'undici is not (the etcd client and the forwarder use it)');
  child.kill('SIGTERM');
});
