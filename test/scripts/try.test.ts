/**
 * `npm run try` (scripts/try.mjs): it starts an arbiter and two agents, prints commands that
 * work as printed, says "ready", and on SIGINT stops every daemon and removes its directory.
 */
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = resolve(import.meta.dirname, '../..');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function sh(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) =>
    execFile(
      '/bin/sh',
      ['-c', command],
      { env: { ...process.env, NODE_OPTIONS: '', HQ_CONFIG: '' }, timeout: 30_000 },
      (err, stdout, stderr) =>
        done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }),
    ),
  );
}

t.test('npm run try starts three daemons, its printed commands work, and Ctrl-C removes everything', async (t) => {
  for (const f of ['apps/arbiter/dist/cli.js', 'apps/agent/dist/daemon-cli.js']) {
    if (!existsSync(resolve(ROOT, f))) {
      t.fail(`${f} is missing: run npx tsc -b`);
      return;
    }
  }
  const proc = spawn(process.execPath, [resolve(ROOT, 'scripts/try.mjs')], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  const out: string[] = [];
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((done) => proc.on('exit', (code) => done(code)));
  let pids: number[] = [];
  t.teardown(() => {
    for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
    if (proc.exitCode === null) proc.kill('SIGKILL');
  });
  const ready = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`no ready line in 60 s: ${out.join('\n')} ${stderr}`)), 60_000);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      out.push(line);
      if (line.startsWith('ready: ')) {
        clearTimeout(timer);
        done(line);
      }
    });
    void exited.then((code) => fail(new Error(`try exited ${code} before ready: ${stderr}`)));
  });
  const m = /^ready: arbiter pid (\d+), mbp pid (\d+), node-b pid (\d+), dir (\S+)$/.exec(ready);
  t.ok(m, `the ready line names the pids and the directory (${ready})`);
  if (m === null) return;
  pids = [Number(m[1]), Number(m[2]), Number(m[3])];
  const dir = m[4] as string;
  t.ok(pids.every(alive), 'the arbiter and both agents run');

  const arbiterConfig = JSON.parse(readFileSync(resolve(dir, 'arbiter.json'), 'utf8')) as Record<string, unknown>;
  const agentConfig = JSON.parse(readFileSync(resolve(dir, 'mbp.json'), 'utf8')) as Record<string, unknown>;
  for (const key of ['hostName', 'arbiterUrl', 'peers', 'stateDir', 'refreshSeconds'])
    t.notOk(key in arbiterConfig, `the arbiter's file has no agent key ${key}`);
  for (const key of ['candidates', 'standby', 'checkCron', 'dataDir', 'promoteAfterChecks', 'viewFreshSeconds'])
    t.notOk(key in agentConfig, `an agent's file has no arbiter key ${key}`);

  const printed = (what: RegExp): string => (out.find((l) => what.test(l)) ?? '').trim();
  const acquire = printed(/ lease acquire --config /);
  t.match(acquire, /^node \S+ lease acquire --config \S+mbp\.json$/, 'an acquire command is printed');
  const r = await sh(acquire);
  t.equal(r.code, 0, `the printed acquire works as printed (${r.stderr.trim()})`);
  t.match(r.stdout, /^acquired: mbp holds generation 1/, 'mbp is HQ');
  // The holder's own agent learns of its lease on its next heartbeat (every second here).
  const holderFence = printed(/fence check --role cron --config \S+mbp\.json/);
  let h = await sh(holderFence);
  for (let i = 0; i < 50 && h.code !== 0; i++) {
    await new Promise((r) => setTimeout(r, 200));
    h = await sh(holderFence);
  }
  t.equal(h.code, 0, `mbp's fence says run (${h.stdout.trim()})`);
  t.match(h.stdout, /^run: holder/, 'as the holder');
  const fence = printed(/fence check --role cron --config \S+node-b\.json/);
  const f = await sh(fence);
  t.equal(f.code, 1, `node-b's fence says skip (${f.stdout.trim()})`);

  proc.kill('SIGINT');
  t.equal(await exited, 0, 'try exits 0 on SIGINT');
  t.notOk(existsSync(dir), `${dir} is removed`);
  t.same(pids.filter(alive), [], 'no daemon is left running');
});
