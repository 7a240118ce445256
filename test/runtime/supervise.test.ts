/** The process-group supervisor: CMD's own exit, a stop with its grace, and a CMD that cannot start. */
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT_LOST, exitCodeOf, superviseGroup } from '../../packages/runtime/src/supervise.js';

const sh = (script: string): string[] => ['/bin/sh', '-c', script];

/** Running, not a zombie (a killed orphan waits for its reaper, which may never come in a container). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

t.test("CMD's own end is its exit code, a signal n is 128 + n", async (t) => {
  const spawned: (number | undefined)[] = [];
  const g = superviseGroup({
    argv: sh('exit 7'),
    env: process.env,
    forwardSignals: false,
    onSpawn: (pid) => spawned.push(pid),
  });
  const end = await g.ended;
  t.same(end, { kind: 'exited', code: 7 }, 'exit 7');
  t.equal(exitCodeOf(end), 7, 'is exit code 7');
  t.equal(spawned.length, 1, 'onSpawn ran once');
  t.ok(g.finished && !g.stopping, 'finished, never stopped');
  const killed = await superviseGroup({ argv: sh('kill -TERM $$'), env: process.env, forwardSignals: false }).ended;
  t.same(killed, { kind: 'exited', code: 128 + 15 }, 'a SIGTERM of its own is 143');
});

t.test(
  'a stop sends SIGTERM, then SIGKILL after the grace to a CMD that ignores it, and takes the group along',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hq-supervise-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    let leader = 0;
    const g = superviseGroup({
      // The leader ignores TERM; its child (same group) would outlive it without the group kill.
      argv: sh(`trap "" TERM; sleep 30 & echo $! > ${dir}/pid; while :; do sleep 0.05; done`),
      env: process.env,
      forwardSignals: false,
      onSpawn: (pid) => (leader = pid ?? 0),
    });
    for (let i = 0; i < 200 && !existsSync(join(dir, 'pid')); i++) await new Promise((r) => setTimeout(r, 25));
    const member = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    let killedAt = 0;
    const t0 = Date.now();
    g.stop(300, () => (killedAt = Date.now()));
    g.stop(0); // a second stop changes nothing
    t.ok(g.stopping, 'stopping from the first stop on');
    const end = await g.ended;
    t.match(end, { kind: 'stopped', signal: 'SIGKILL' }, 'it ended by SIGKILL');
    t.equal(exitCodeOf(end), EXIT_LOST, 'exit 75');
    t.ok(killedAt - t0 >= 250, `SIGKILL came after the grace (${killedAt - t0} ms)`);
    t.notOk(running(leader), 'the leader is gone');
    // SIGKILL is sent to the group; the member's exit follows within moments.
    for (let i = 0; i < 200 && running(member); i++) await new Promise((r) => setTimeout(r, 10));
    t.notOk(running(member), 'and so is the rest of its group');
  },
);

t.test('a CMD that cannot start is 127 when missing', async (t) => {
  const end = await superviseGroup({ argv: ['/nonexistent/hq-cmd'], env: process.env, forwardSignals: false }).ended;
  t.same(end, { kind: 'spawn-failed', code: 127, problem: 'ENOENT' }, 'ENOENT is 127');
});
