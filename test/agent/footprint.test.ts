/**
 * What a started, idle hq-agent holds: a young generation that start-up did not grow,
 * and none of the libraries it needs only when asked — undici (never: the client is node:http),
 * ajv (at a route's first schema). The real daemon (dist) against a FakeArbiter, its memory read
 * by bench/heap-report.mjs (preloaded; it writes on SIGUSR2).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { callAgent } from '../../apps/agent/src/cli/local.js';
import { AGENT_CLI, FakeArbiter, ROOT, shortDir, sleep, writeConfig } from './helpers.js';

interface Report {
  readonly spaces: Record<string, number>;
  readonly commonjs: readonly string[];
}

t.test('an idle agent keeps a small young generation and has not loaded undici or ajv', async (t) => {
  const dir = shortDir(t);
  const arb = new FakeArbiter();
  await arb.listen();
  t.teardown(() => arb.close());
  const config = writeConfig(dir, { arbiterUrl: arb.url });
  mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, 'state', 'token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
  const reportFile = join(dir, 'heap.json');
  const child = spawn(
    process.execPath,
    ['--import', join(ROOT, 'bench/heap-report.mjs'), AGENT_CLI, '--config', config],
    {
      env: { ...process.env, HQ_CONFIG: '', NODE_OPTIONS: '', HQ_BENCH_HEAP_REPORT: reportFile },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  t.teardown(() => void child.kill('SIGKILL'));
  const sock = join(dir, 'agent.sock');
  // Generous: a loaded machine can take many seconds to start node.
  for (let i = 0; i < 600 && (!existsSync(sock) || arb.heartbeats.length === 0); i++) await sleep(50);
  t.ok(existsSync(sock) && arb.heartbeats.length > 0, `the agent started and heartbeats ${stderr}`);

  const report = async (): Promise<Report> => {
    rmSync(reportFile, { force: true });
    child.kill('SIGUSR2');
    for (let i = 0; i < 200; i++) {
      await sleep(25);
      try {
        return JSON.parse(readFileSync(reportFile, 'utf8')) as Report;
      } catch {
        // not written yet
      }
    }
    throw new Error('no heap report');
  };
  const loaded = (r: Report, pkg: string): boolean => r.commonjs.some((p) => p.includes(`/node_modules/${pkg}/`));

  const idle = await report();
  // About 4 MiB as V8 starts it; start-up grew it to 26–31 MiB (16 MiB × 2 of room) before it was kept small.
  t.ok(
    (idle.spaces['new_space'] ?? Infinity) <= 8,
    `the young generation is not grown (${idle.spaces['new_space']?.toFixed(1)} MiB)`,
  );
  t.ok(loaded(idle, 'fastify'), 'Fastify is loaded (the listeners)');
  t.notOk(loaded(idle, 'undici'), 'undici is not');
  t.notOk(loaded(idle, 'ajv'), 'ajv is not: no route was asked with a schema');
  t.notOk(loaded(idle, 'aws4'), 'nor the S3 signer of survival copies (only `hq standby` loads it)');

  const refused = await callAgent(sock, 'POST', '/v1/runs', 5, { role: 'cron' });
  t.match(refused, { status: 400 }, 'a body without supervisorPid is refused by its schema');
  const after = await report();
  t.ok(loaded(after, 'ajv'), 'ajv was loaded for it');
  child.kill('SIGTERM');
});
