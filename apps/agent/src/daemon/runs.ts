/**
 * The fenced children this agent knows of. Every `hq fence run` supervisor registers
 * its run before it spawns the child (`claim`: refused unless the fence says run for that
 * generation now), reports the child's process group right after the spawn (`started`) and
 * deregisters when the child is gone (`done`). So the agent knows each group even if its
 * supervisor died, and a step-down can end them all (`end`): a live supervisor is asked to
 * re-check its fence now (SIGUSR2) and stops its child itself — SIGTERM, SIGKILL after its grace,
 * exit 75, as on any loss; a group whose supervisor is gone, or that outlives the supervisor's
 * grace, gets SIGTERM and SIGKILL from the agent. Then it waits until each group is gone.
 *
 * `end` says `gone: true` only when it saw every such group gone. A claim whose supervisor died
 * before it reported the group, or a group the agent may not signal (another user), leaves a
 * child it cannot vouch for: `gone: false`, and no acknowledgement is sent for that generation.
 * Memory only: after a restart the agent acknowledges no generation an earlier life could have
 * run (lease-core `ackFloor`), so runs registered with that life need not be remembered.
 */
import { readFileSync } from 'node:fs';
import type { FenceDecision, RunClaim, RunClaimAnswer } from '@hq/protocol';
import { pause, realTimers, type StampClock as Clock, type Timers } from '@hq/runtime/clock';
import { sendSignal as signal } from '@hq/runtime/supervise';
import type { Log } from './observe.js';

interface Run extends RunClaim {
  readonly id: string;
  pgid: number | null;
  /** Monotonic end of the validity the fence gave with the claim (Infinity: fail-open). */
  readonly untilMono: number;
}

export interface RunsOptions {
  /** The fence for a configured role, from memory. */
  readonly fence: (role: string) => FenceDecision;
  readonly clock: Clock;
  /** The polls while groups end (default real timers). */
  readonly timers?: Timers | undefined;
  readonly log: Log;
}

export interface Ended {
  /** Every group of the generation (and below) was seen gone. */
  readonly gone: boolean;
  /** How many groups were signalled. */
  readonly ended: number;
  /** Why not gone, else null. */
  readonly problem: string | null;
}

/** How often `end` looks again (a group's exit, a supervisor's report). */
const POLL_MS = 20;
/** Beyond the grace, how long a killed group may take to disappear (its parent reaps it). */
const GONE_SLACK_SECONDS = 2;
/** How long a nudged supervisor has, beyond its grace, before the agent signals the group itself (its re-check). */
const NUDGE_SLACK_SECONDS = 1.5;
/** A fail-open claim has no validity to end its wait for the group's report; its supervisor spawns right after the claim. */
const MAX_REPORT_WAIT_SECONDS = 30;

/** `pid (comm) state ppid pgrp …` of /proc/PID/stat (Linux), or null where there is none (macOS, gone). */
function procStat(pid: number | 'self'): { ppid: number; pgrp: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(f[1]), pgrp: Number(f[2]) };
}

/** This agent's process group (Linux; elsewhere its pid, which it is under launchd and systemd). */
const OWN_GROUP = procStat('self')?.pgrp ?? process.pid;

/**
 * Why a pid a client of the socket names for a run may not be signalled by this agent, or
 * null. The agent sends SIGUSR2 to a run's supervisor and SIGTERM/SIGKILL to its group, so
 * neither may be the agent itself or its own group (pid 1 and so kill(-1) the schema refuses);
 * and where /proc says so (Linux), the group must be led by a child of the run's supervisor —
 * not any process a client names.
 */
export function pidProblem(which: 'supervisorPid' | 'pgid', pid: number, supervisorPid?: number): string | null {
  if (pid === process.pid || pid === OWN_GROUP)
    return `${which} ${pid} is this agent's own process${pid === OWN_GROUP && pid !== process.pid ? ' group' : ''}`;
  if (which === 'pgid' && supervisorPid !== undefined) {
    const st = procStat(pid);
    if (st !== null && (st.pgrp !== pid || st.ppid !== supervisorPid))
      return `pgid ${pid} is not a process group led by a child of the run's supervisor ${supervisorPid}`;
  }
  return null;
}

export class Runs {
  private nextId = 1;
  private readonly runs = new Map<string, Run>();

  constructor(private readonly o: RunsOptions) {}

  /** The runs registered now (status, tests). */
  list(): readonly {
    readonly id: string;
    readonly role: string;
    readonly generation: number;
    readonly pgid: number | null;
  }[] {
    return [...this.runs.values()].map((r) => ({ id: r.id, role: r.role, generation: r.generation, pgid: r.pgid }));
  }

  /** Registers a run if the fence says run for its (configured) role at its generation now. */
  claim(c: RunClaim): RunClaimAnswer {
    const d = this.o.fence(c.role);
    if (!d.run) return { ok: false, reason: d.reason };
    if (d.generation !== c.generation) return { ok: false, reason: 'generation-changed' };
    const id = String(this.nextId++);
    const untilMono = d.validForSeconds === null ? Infinity : this.o.clock.now().mono + d.validForSeconds;
    this.runs.set(id, { ...c, id, pgid: null, untilMono });
    return { ok: true, id };
  }

  /** The supervisor spawned the child: its process group. False for an unknown run. */
  started(id: string, pgid: number): boolean {
    const r = this.runs.get(id);
    if (r === undefined) return false;
    r.pgid = pgid;
    return true;
  }

  /**
   * The longest `end` can take now, in seconds: per run, the wait for its group's report (while
   * its validity lasts), then the nudged supervisor's grace and the agent's own TERM…KILL, then
   * the slack for the group to disappear. `hq lease release` waits this long for the step-down.
   */
  endBoundSeconds(): number {
    const now = this.o.clock.now().mono;
    let bound = 0;
    for (const r of this.runs.values()) {
      const report = r.pgid === null ? Math.max(0, Math.min(r.untilMono, now + MAX_REPORT_WAIT_SECONDS) - now) : 0;
      bound = Math.max(bound, report + 2 * r.graceSeconds + NUDGE_SLACK_SECONDS + GONE_SLACK_SECONDS);
    }
    return bound;
  }

  /** The supervisor of run `id`, or undefined for an unknown run. */
  supervisorOf(id: string): number | undefined {
    return this.runs.get(id)?.supervisorPid;
  }

  /** The child is gone (the supervisor says so). False for an unknown run. */
  done(id: string): boolean {
    return this.runs.delete(id);
  }

  /**
   * Ends every run of `generation` or below: 1. waits for claims whose supervisor is alive to
   * report their group (it spawns right after its claim); 2. SIGTERM to every group; 3. SIGKILL
   * after the run's grace; 4. waits until every group is gone.
   */
  async end(generation: number): Promise<Ended> {
    const mine = (): Run[] => [...this.runs.values()].filter((r) => r.generation <= generation);
    const nowMono = (): number => this.o.clock.now().mono;
    let problem: string | null = null;
    const started = nowMono();
    // 1.
    for (;;) {
      const unreported = mine().filter((r) => r.pgid === null);
      const waiting = unreported.filter(
        (r) =>
          signal(r.supervisorPid, 0) === 'ok' && nowMono() < Math.min(r.untilMono, started + MAX_REPORT_WAIT_SECONDS),
      );
      if (waiting.length === 0) {
        for (const r of unreported) {
          // Its supervisor is gone without a word (or its validity is over): a child may run unknown.
          problem ??= `run ${r.id} (role ${r.role}) never reported its process group and its supervisor ${r.supervisorPid} is gone`;
          this.runs.delete(r.id);
        }
        break;
      }
      await pause(this.o.timers ?? realTimers, POLL_MS);
    }
    // 2. A live supervisor re-checks now and stops its child itself; the others get SIGTERM.
    const groups = mine().filter((r): r is Run & { pgid: number } => r.pgid !== null);
    /** When the agent sends SIGTERM itself (now, or once a nudged supervisor had its time), then SIGKILL. */
    const termAt = new Map<string, number>();
    const killAt = new Map<string, number>();
    for (const r of groups) {
      const nudged = signal(r.supervisorPid, 'SIGUSR2') === 'ok';
      termAt.set(r.id, nudged ? nowMono() + r.graceSeconds + NUDGE_SLACK_SECONDS : nowMono());
    }
    if (groups.length > 0)
      this.o.log.info(
        { category: 'hq.fence', event: 'children-terminated', generation, groups: groups.map((r) => r.pgid).join(',') },
        'children-terminated',
      );
    // 3. and 4.
    const giveUp =
      nowMono() + Math.max(0, ...groups.map((r) => 2 * r.graceSeconds + NUDGE_SLACK_SECONDS)) + GONE_SLACK_SECONDS;
    let left = groups;
    while (left.length > 0) {
      left = left.filter((r) => {
        if (signal(-r.pgid, 0) === 'gone') {
          this.runs.delete(r.id);
          return false;
        }
        const now = nowMono();
        if (!killAt.has(r.id) && now >= (termAt.get(r.id) ?? 0)) {
          killAt.set(r.id, now + r.graceSeconds);
          if (signal(-r.pgid, 'SIGTERM') === 'denied')
            problem ??= `the process group ${r.pgid} (role ${r.role}) may not be signalled by this agent`;
        }
        const k = killAt.get(r.id);
        if (k !== undefined && Number.isFinite(k) && now >= k) {
          killAt.set(r.id, Infinity);
          if (signal(-r.pgid, 'SIGKILL') === 'denied')
            problem ??= `the process group ${r.pgid} may not be killed by this agent`;
        }
        return true;
      });
      if (left.length === 0) break;
      if (nowMono() >= giveUp) {
        problem ??= `the process group(s) ${left.map((r) => r.pgid).join(', ')} still exist ${GONE_SLACK_SECONDS} s after SIGKILL`;
        break;
      }
      await pause(this.o.timers ?? realTimers, POLL_MS);
    }
    return { gone: problem === null, ended: groups.length, problem };
  }
}
