/**
 * `npm start` (the README's first command): the arbiter is npm's own child (the script `exec`s
 * node, no shell in between) and runs with --exit-with-parent, so killing npm — gracefully or
 * with SIGKILL — stops the arbiter too instead of leaving it orphaned under PID 1.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ROOT, buildDist, childEnv, writeConfig } from './child.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return !alive(pid);
}

/** The parent of `pid` from /proc (Linux), else null. */
function ppidOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
  t.test(`killing npm start with ${signal} stops the arbiter it started`, async (t) => {
    buildDist();
    const dir = t.testdir();
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(childEnv())) if (!/^npm_/i.test(k)) env[k] = v;
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...env, HQ_ARBITER_CONFIG: writeConfig(dir) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let arbiterPid = 0;
    t.teardown(() => {
      if (arbiterPid !== 0 && alive(arbiterPid)) process.kill(arbiterPid, 'SIGKILL');
      if (npm.exitCode === null) npm.kill('SIGKILL');
    });
    const lines: Record<string, unknown>[] = [];
    let stderr = '';
    npm.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    await new Promise<void>((done, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`npm start did not get the arbiter listening in 60 s: ${stderr}`)),
        60_000,
      );
      createInterface({ input: npm.stdout }).on('line', (raw) => {
        try {
          const l = JSON.parse(raw) as Record<string, unknown>;
          lines.push(l);
          if (l['msg'] === 'hq-arbiter listening') {
            arbiterPid = l['pid'] as number;
            clearTimeout(timer);
            done();
          }
        } catch {
          /* npm's own "> hq@… start" lines */
        }
      });
    });
    const ppid = ppidOf(arbiterPid);
    if (ppid !== null) t.equal(ppid, npm.pid, 'the arbiter is npm’s direct child: no shell in between');
    npm.kill(signal);
    t.ok(await gone(arbiterPid, 8_000), `the arbiter (pid ${arbiterPid}) is gone within 8 s of npm's ${signal}`);
    if (signal === 'SIGKILL')
      t.ok(
        lines.some((l) => l['msg'] === 'parent exited; stopping'),
        'it logged that its parent was gone',
      );
  });
}
