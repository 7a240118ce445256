/**
 * The agent's step-down (A7): before a release or handover, and what follows it (the release
 * sent, the acknowledgement sent, children the shell could not see gone). Undoing a refused
 * release (`resume`) is in agent.ts, as an arbiter answer can undo it too.
 */
import type { AgentSettings, AgentState, Stamp } from '../agent.js';

/**
 * Step down before a release or handover: nothing of this generation runs any more (A7). The
 * shell persists it, ends the fenced children, then lets the release go (`releaseSent`).
 */
export function stepDown(state: AgentState): AgentState {
  const k = state.known;
  const g = Math.max(state.steppedDown, k !== null && k.holder === state.host ? k.generation : 0);
  const releasing = g > state.lost ? { generation: g, untilMono: Infinity } : state.releasing;
  return { ...state, current: null, pending: null, steppedDown: g, releasing };
}

/**
 * The release of a step-down leaves now (the CLI sends it at once, within one request timeout):
 * from one more request timeout on, a record still naming this host proves it never landed.
 */
export function releaseSent(state: AgentState, now: Stamp, settings: AgentSettings): AgentState {
  const r = state.releasing;
  return r === null
    ? state
    : { ...state, releasing: { ...r, untilMono: now.mono + 2 * settings.requestTimeoutSeconds } };
}

/** The shell sent the acknowledgement owed for `generation` (whatever the arbiter answered). */
export function acknowledged(state: AgentState, generation: number): AgentState {
  return state.ackDue !== null && state.ackDue.generation === generation ? { ...state, ackDue: null } : state;
}

/**
 * The shell could not see every child of `generation` gone (a supervisor died before it said
 * its group, a group it may not signal): nothing is owed, and nothing ever will be for it —
 * `generation` joins the floor of the generations never acknowledged (A7), so the arbiter asking
 * again does not make it owed again (when a second look would find no child it knows of).
 */
export function unvouched(state: AgentState, generation: number): AgentState {
  const cleared = state.ackDue !== null && state.ackDue.generation <= generation ? null : state.ackDue;
  return { ...state, ackDue: cleared, ackFloor: Math.max(state.ackFloor, generation) };
}
