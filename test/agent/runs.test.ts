/**
 * The fenced children the agent knows of (daemon/runs.ts): claims checked against the
 * fence, and `end` with real process groups — TERM, KILL after the grace, gone — and the cases
 * in which it cannot vouch for a child (its supervisor died before it reported the group).
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FenceDecision } from '@hq/protocol';
import { Runs } from '../../apps/agent/src/daemon/runs.js';
import { readStamp, type StampClock } from '../../packages/runtime/src/clock.js';
import type { Log } from '../../apps/agent/src/daemon/observe.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };
const yes = (generation: number, validForSeconds: number | null = 5): FenceDecision => ({
  run: true,
  reason: 'holder',
  generation,
  holder: 'mbp',
  role: 'cron',
  validForSeconds,
});
const no: FenceDecision = {
  run: false,
  reason: 'not-holder',
  generation: 2,
  holder: 'node-b',
  role: 'cron',
  validForSeconds: null,
};

/**
 * The real clock, moved forward when the test says: the wait for a nudged supervisor (which this
 * test process is, and ignores) is skipped, while the groups still end in real time.
 */
interface JumpClock extends StampClock {
  jump(seconds: number): void;
}

function jumpClock(): JumpClock {
  let offset = 0;
  return {
    now: () => {
      const s = readStamp();
      return { wall: s.wall + offset, mono: s.mono + offset };
    },
    jump: (seconds) => {
      offset += seconds;
    },
  };
}

function runs(decision: () => FenceDecision, clock: StampClock = jumpClock()): Runs {
  return new Runs({ fence: () => decision(), clock, log: silent });
}

/** How long `end` waits before it signals a group whose supervisor it nudged: the grace and the slack. */
const nudgeWait = (graceSeconds: number): number => graceSeconds + 1.5;

/** A process group led by `sh`, optionally ignoring SIGTERM; resolves once it runs. */
function group(t: { teardown(fn: () => void): void }, ignoreTerm = false): ChildProcess {
  const child = spawn('sh', ['-c', `${ignoreTerm ? "trap '' TERM; " : ''}sleep 1000 & wait`], {
    detached: true,
    stdio: 'ignore',
  });
  t.teardown(() => {
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  return child;
}

function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

const claim = (generation: number, graceSeconds = 1, supervisorPid = process.pid) => ({
  role: 'cron',
  generation,
  graceSeconds,
  supervisorPid,
});
// Claims name this test process as their supervisor: the agent's nudge (SIGUSR2) lands here, and
// is ignored like a supervisor that does not stop its child itself (the agent then does).
process.on('SIGUSR2', () => {});

t.test('a claim is accepted only while the fence says run for that very generation', async (t) => {
  let d = yes(3);
  const r = runs(() => d);
  const ok = r.claim(claim(3));
  t.same(ok, { ok: true, id: '1' }, 'run at 3: registered');
  t.same(r.claim(claim(2)), { ok: false, reason: 'generation-changed' }, 'a claim for another generation is refused');
  d = no;
  t.same(r.claim(claim(3)), { ok: false, reason: 'not-holder' }, 'the fence says no: refused with its reason');
  t.same(r.list(), [{ id: '1', role: 'cron', generation: 3, pgid: null }], 'one run');
  t.equal(r.started('1', 4242), true, 'its group is recorded');
  t.equal(r.started('9', 4242), false, 'an unknown run is refused');
  t.equal(r.done('1'), true, 'done');
  t.equal(r.done('1'), false, 'done twice: unknown');
  t.same(r.list(), [], 'no run left');
});

t.test('end TERMs every group of the generation and below, waits until gone, leaves the newer ones', async (t) => {
  let d = yes(3);
  const clock = jumpClock();
  const r = runs(() => d, clock);
  const groups = [group(t), group(t), group(t)];
  for (const [i, g] of groups.entries()) {
    if (i === 2) d = yes(4); // a run of a later tenure
    const a = r.claim(claim(d.generation));
    if (a.ok) r.started(a.id, g.pid as number);
  }
  const [one, two, later] = groups.map((g) => g.pid as number) as [number, number, number];
  const ending = r.end(3);
  clock.jump(nudgeWait(1));
  const ended = await ending;
  t.same(ended, { gone: true, ended: 2, problem: null }, 'both groups of generation 3 are gone');
  t.ok(groupGone(one) && groupGone(two), 'the processes are really gone');
  t.notOk(groupGone(later), 'the run of generation 4 lives on');
  t.same(
    r.list().map((x) => x.generation),
    [4],
    'only it is left',
  );
  t.same(await r.end(3), { gone: true, ended: 0, problem: null }, 'nothing left of 3: gone at once');
});

t.test('a child that ignores SIGTERM gets SIGKILL after its grace', async (t) => {
  const clock = jumpClock();
  const r = runs(() => yes(3), clock);
  const stubborn = group(t, true);
  await new Promise((done) => setTimeout(done, 100)); // the trap is set
  const a = r.claim(claim(3, 0.5));
  if (a.ok) r.started(a.id, stubborn.pid as number);
  const ending = r.end(3);
  clock.jump(nudgeWait(0.5));
  const started = clock.now().mono;
  const ended = await ending;
  const ms = Math.round((clock.now().mono - started) * 1000);
  t.equal(ended.gone, true, 'gone');
  t.ok(ms >= 450, `not before the grace (${ms} ms)`);
  t.ok(groupGone(stubborn.pid as number), 'the group is gone');
});

t.test('end waits for a claim whose supervisor is alive to report its group', async (t) => {
  const r = runs(() => yes(3));
  const a = r.claim(claim(3));
  const child = group(t);
  setTimeout(() => {
    if (a.ok) r.started(a.id, child.pid as number);
  }, 150);
  const ended = await r.end(3);
  t.same([ended.gone, ended.ended], [true, 1], 'the late report is waited for, then the group ended');
  t.ok(groupGone(child.pid as number), 'gone');
});

t.test(
  'a claim whose supervisor died before it reported the group: a child may run unknown, so not gone',
  async (t) => {
    const r = runs(() => yes(3));
    const dead = spawn('true');
    await new Promise((done) => dead.once('exit', done));
    r.claim(claim(3, 1, dead.pid as number));
    const ended = await r.end(3);
    t.equal(ended.gone, false, 'not gone');
    t.match(ended.problem, /never reported its process group and its supervisor \d+ is gone/, 'says why');
    t.same(r.list(), [], 'the claim is dropped');
  },
);

t.test('a fail-open claim has no deadline, and a claim past its validity is not waited for', async (t) => {
  const r = runs(() => yes(3, 0));
  r.claim(claim(3));
  const ended = await r.end(3);
  t.equal(ended.gone, false, 'its validity is over and it never reported: not gone');
  const clock = jumpClock();
  const open = runs(() => yes(3, null), clock);
  const a = open.claim(claim(3));
  const child = group(t);
  if (a.ok) open.started(a.id, child.pid as number);
  const ending = open.end(3);
  clock.jump(nudgeWait(1));
  t.same((await ending).gone, true, 'a fail-open run is ended like any other');
});

/**
 * A stand-in supervisor: leads nothing itself, spawns `sleep` in a group of its own, writes the
 * group's pid to stdout, and on SIGUSR2 (the agent's nudge) ends the group itself and drops a marker.
 */
function supervisor(
  t: { teardown(fn: () => void): void },
  marker: string,
  obey: boolean,
): Promise<{ proc: ChildProcess; pgid: number }> {
  const code = `
    const { spawn } = require('node:child_process');
    const c = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' });
    process.stdout.write(String(c.pid) + '\\n');
    process.on('SIGUSR2', () => {
      require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'nudged');
      if (${obey}) process.kill(-c.pid, 'SIGTERM');
    });
    setInterval(() => {}, 1000);`;
  const proc = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => proc.kill('SIGKILL'));
  return new Promise((done) =>
    proc.stdout?.once('data', (d: Buffer) => done({ proc, pgid: Number(d.toString().trim()) })),
  );
}

t.test(
  'a live supervisor is nudged (SIGUSR2) and stops its child itself; one that does not, is overruled after its grace',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hq-runs-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    for (const obey of [true, false]) {
      const marker = join(dir, `nudged-${obey}`);
      const s = await supervisor(t, marker, obey);
      t.teardown(() => {
        try {
          process.kill(-s.pgid, 'SIGKILL');
        } catch {
          /* gone */
        }
      });
      const r = runs(() => yes(3));
      const a = r.claim(claim(3, 0.3, s.proc.pid as number));
      if (a.ok) r.started(a.id, s.pgid);
      const started = Date.now();
      const ended = await r.end(3);
      const ms = Date.now() - started;
      t.equal(ended.gone, true, `${obey ? 'obeying' : 'deaf'} supervisor: the group is gone`);
      t.ok(existsSync(marker), 'the supervisor was nudged');
      if (obey) t.ok(ms < 1500, `it stopped its child itself, at once (${ms} ms)`);
      else t.ok(ms >= 1700, `the agent waited the grace and the slack, then signalled the group itself (${ms} ms)`);
      t.ok(groupGone(s.pgid), 'really gone');
    }
  },
);

t.test('endBoundSeconds: how long a step-down can take now, from the runs registered', async (t) => {
  const r = runs(() => yes(3, 5));
  t.equal(r.endBoundSeconds(), 0, 'no runs: at once');
  const a = r.claim(claim(3, 2));
  t.ok(a.ok, 'claimed');
  const unreported = r.endBoundSeconds();
  t.ok(
    unreported > 2 * 2 + 1.5 + 2 && unreported <= 5 + 2 * 2 + 1.5 + 2,
    `a group not yet reported: its report wait (the validity, 5 s), the graces and the slack (${unreported.toFixed(2)} s)`,
  );
  if (a.ok) r.started(a.id, process.pid);
  t.equal(r.endBoundSeconds(), 2 * 2 + 1.5 + 2, 'reported: twice the grace, the nudge slack and the gone slack');
});
