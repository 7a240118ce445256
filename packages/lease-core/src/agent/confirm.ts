/**
 * Peer confirmation (rule ③, L2), both sides: a standby asked to confirm the holder while the
 * arbiter is unreachable, and the holder deciding whether its peers' answers make a validity.
 */
import type { ConfirmAnswer, ConfirmRequest, Host } from '@hq/protocol';
import type { LeaseEvent } from '../events.js';
import { leaseEvent } from '../events.js';
import {
  type AgentSettings,
  type Grant,
  type AgentState,
  active,
  settle,
  type AgentStep,
  adoptSeen,
  elapsed,
  type Stamp,
} from '../agent.js';

/**
 * A holder asks this agent to confirm it while the arbiter is unreachable. Refused for itself,
 * for a generation below the seen one, for a holder other than the one it knows at that
 * generation or above, and while this agent runs as holder. A confirmation is remembered (A4):
 * the shell persists `gaveConfirmation` before it answers.
 */
export function onConfirmRequest(
  state0: AgentState,
  req: ConfirmRequest,
  received: Stamp,
  _settings: AgentSettings,
): AgentStep & { answer: ConfirmAnswer } {
  const state = settle(state0, received);
  const refuse = (reason: ConfirmAnswer['reason']): AgentStep & { answer: ConfirmAnswer } => ({
    state,
    events: [
      leaseEvent('confirmation-refused', state.host, {
        holder: req.host,
        generation: req.generation,
        reason,
        seen: state.seen,
      }),
    ],
    answer: { confirmed: false, generation: state.seen, reason },
  });
  if (req.host === state.host) return refuse('self');
  if (state.seen > req.generation) return refuse('higher-generation');
  if (
    state.known !== null &&
    state.known.holder !== req.host &&
    state.known.holder !== null &&
    state.known.generation >= req.generation
  ) {
    return refuse('other-holder');
  }
  if (active(state.current, received) || active(state.pending, received)) return refuse('holding');
  // The wait this confirmation imposes covers the requester's validity (A4): the longer of the
  // timing it states and the one this agent knows (else the last one it confirmed with); with
  // none there is nothing to wait by, and it confirms nothing.
  const stated = Math.max(req.ttlSeconds ?? 0, state.known?.ttlSeconds ?? 0);
  const ttl = stated > 0 ? stated : (state.gave?.ttlSeconds ?? 0);
  const margin =
    stated > 0
      ? Math.max(req.safetyMarginSeconds ?? 0, state.known?.safetyMarginSeconds ?? 0)
      : (state.gave?.safetyMarginSeconds ?? 0);
  if (!(ttl > 0)) return refuse('unknown-timing');
  const events: LeaseEvent[] = [];
  let next = adoptSeen(state, req.generation, events, 'peer');
  const untilMono = received.mono + ttl + margin;
  next = {
    ...next,
    current: null,
    pending: null,
    gave: {
      holder: req.host,
      generation: req.generation,
      at: received,
      untilMono: Math.max(untilMono, next.gave?.untilMono ?? -Infinity),
      // An earlier confirmation's longer wait is kept, and so is the timing it was computed
      // with: local.json's start guard must cover both (A4).
      ttlSeconds: Math.max(ttl, next.gave?.ttlSeconds ?? 0),
      safetyMarginSeconds: Math.max(margin, next.gave?.safetyMarginSeconds ?? 0),
    },
  };
  events.push(leaseEvent('confirmation-given', state.host, { holder: req.host, generation: req.generation }));
  return { state: next, events, answer: { confirmed: true, generation: next.seen, reason: 'confirmed' } };
}

export interface PeerResult {
  readonly peer: Host;
  /** The peer answered within the request timeout. */
  readonly answered: boolean;
  readonly confirmed?: boolean;
  readonly generation?: number;
}

/**
 * The holder asked every standby peer (`peers`) to confirm it. A validity from `sent` exists
 * only when every one of them answered, confirmed, and named a generation no higher than this
 * host's (a missing generation withholds the confirmation; a higher one is adopted, L2).
 */
export function onPeerResults(
  state0: AgentState,
  results: readonly PeerResult[],
  peers: readonly Host[],
  sent: Stamp,
  received: Stamp,
  settings: AgentSettings,
): AgentStep {
  const events: LeaseEvent[] = [];
  let state = state0;
  for (const r of results) {
    if (r.answered && typeof r.generation === 'number') state = adoptSeen(state, r.generation, events, 'peer');
  }
  const known = state.known;
  if (
    known === null ||
    known.holder !== state.host ||
    known.released ||
    known.floorPending ||
    state.stale ||
    known.generation < state.seen ||
    known.generation <= state.steppedDown
  ) {
    if (state.seen !== state0.seen) state = { ...state, current: null, pending: null };
    return { state: settle(state, received), events };
  }
  if (elapsed(sent, received) > settings.requestTimeoutSeconds) return { state: settle(state, received), events };
  const byPeer = new Map(results.map((r) => [r.peer, r] as const));
  const quorum =
    peers.length > 0 &&
    peers.every((p) => {
      const r = byPeer.get(p);
      return (
        r?.answered && r.confirmed === true && typeof r.generation === 'number' && r.generation <= known.generation
      );
    });
  if (!quorum) return { state: settle(state, received), events };
  const grant: Grant = {
    generation: known.generation,
    sent,
    seconds: known.ttlSeconds - known.safetyMarginSeconds,
    startMono: Math.max(received.mono, state.waitUntilMono),
    earliestMono: received.mono,
    source: 'peer',
  };
  events.push(leaseEvent('quorum-standby', state.host, { generation: known.generation, peers: peers.length }));
  if (grant.startMono <= received.mono) state = { ...state, current: grant };
  else if (!active(state.current, received)) state = { ...state, current: null, pending: grant };
  return { state: settle(state, received), events };
}
