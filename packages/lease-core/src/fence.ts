/**
 * The fence: may this host run role R now? Answered from the agent's memory alone (agent.ts keeps
 * it), never by asking anyone, so the answer is as fast and as available as the agent itself.
 * What it answers, by situation:
 *  - holder, arbiter answering: `run: true`, `holder`, for `ttl − margin` from the send time of
 *    the heartbeat the arbiter confirmed (A1); each renewal starts a new validity.
 *  - standby: `not-holder`, fail-open roles included, whatever the arbiter's state; a standby runs
 *    nothing until the arbiter names it holder.
 *  - lock-delay: a new holder answers `lock-delay` until the arbiter's `notBefore` has passed, the
 *    record's floor is complete, and the wait after its own last confirmation of the old holder is
 *    over (A4); only then `holder`.
 *  - arbiter outage: the holder keeps its last validity (`within-ttl`), and meanwhile asks every
 *    standby peer to confirm it (heartbeat.ts `asksPeers`, the shell's daemon/peers.ts); when all
 *    confirm and none has seen a higher generation it runs on that validity (`quorum-standby`,
 *    L2). With neither, only fail-open roles run (`fail-open`, never `ledger-cli`), the others get
 *    `no-quorum-expired`. A standby that confirmed the holder stays `not-holder`, and if it is
 *    promoted later it waits out that confirmation first (`lock-delay`).
 *  - restart: every validity is forgotten (A5). A holder whose record was final knows it again
 *    (A8) but runs only fail-open roles until the arbiter or every peer confirms it; one that had
 *    given a confirmation or had a lock-delay pending first runs nothing at all for ttl + margin
 *    (the start guard, A4: `lock-delay`). With no record kept: `no-lease`, or
 *    `no-lease-after-seen` once any generation was seen.
 * Whatever the situation: a higher generation seen anywhere answers `stale-generation`, fail-open
 * roles included (A3, A5), and a generation this host stepped down from is `not-holder` (A7).
 */
import type { FenceDecision, FenceReason } from '@hq/protocol';
import { NEVER_FAIL_OPEN } from '@hq/protocol';
import { active, settle, type AgentSettings, type AgentState } from './agent.js';
import { elapsed, type Stamp } from './stamp.js';

export function isFailOpen(settings: Pick<AgentSettings, 'failOpenRoles'>, role: string): boolean {
  return role !== NEVER_FAIL_OPEN && settings.failOpenRoles.includes(role);
}

/**
 * May this host run `role` now? From memory only. In order: no record → no-lease(-after-seen);
 * a stale record → stale-generation; another holder → not-holder; start guard, the standby's
 * own wait and lock-delay → lock-delay; a live grant → holder / within-ttl / quorum-standby;
 * otherwise fail-open for fail-open roles, else no-quorum-expired (or no-lease once released).
 */
export function fence(state0: AgentState, role: string, now: Stamp, settings: AgentSettings): FenceDecision {
  return decideFence(settle(state0, now), role, now, settings);
}

/**
 * The fence query as the shell answers it: settled once, the decision on that settled state,
 * and the settled state for the shell to keep in memory (a validity once seen over stays over,
 * so a later backward wall jump cannot revive it; settling only drops grants and flags, so the
 * disk stays the more cautious copy until the next commit writes it).
 */
export function queryFence(
  state0: AgentState,
  role: string,
  now: Stamp,
  settings: AgentSettings,
): { readonly state: AgentState; readonly decision: FenceDecision } {
  const state = settle(state0, now);
  return { state, decision: decideFence(state, role, now, settings) };
}

/** `fence` on a state already settled at `now`. */
function decideFence(state: AgentState, role: string, now: Stamp, settings: AgentSettings): FenceDecision {
  const known = state.known;
  const base = {
    generation: known?.generation ?? state.seen,
    holder: known?.holder ?? null,
    role,
    validForSeconds: null,
  };
  const no = (reason: FenceReason): FenceDecision => ({ ...base, run: false, reason });
  if (state.stale) return no('stale-generation');
  // A5: a higher generation seen (a peer reported it) ends everything, fail-open roles included.
  if (known !== null && known.generation < state.seen) return no('stale-generation');
  if (known === null || known.holder === null) return no(state.seen > 0 ? 'no-lease-after-seen' : 'no-lease');
  if (known.holder !== state.host) return no('not-holder');
  if (known.released) return no(state.seen > 0 ? 'no-lease-after-seen' : 'no-lease');
  // A7: a generation this host stepped down from is not its own any more, whatever it holds.
  if (known.generation <= state.steppedDown) return no('not-holder');
  if (state.startGuardUntilMono !== null) return no('lock-delay');
  if (state.gave !== null) return no('lock-delay');
  for (const g of [state.current, state.pending]) {
    if (g !== null && active(g, now) && g.generation === known.generation) {
      const reason: FenceReason = g.source === 'peer' ? 'quorum-standby' : state.arbiterOk ? 'holder' : 'within-ttl';
      return { ...base, run: true, reason, validForSeconds: g.seconds - elapsed(g.sent, now) };
    }
  }
  const waiting =
    known.floorPending ||
    now.mono < state.waitUntilMono ||
    (state.pending !== null &&
      now.mono < state.pending.startMono &&
      elapsed(state.pending.sent, now) < state.pending.seconds);
  if (waiting) return no('lock-delay');
  if (isFailOpen(settings, role)) return { ...base, run: true, reason: 'fail-open' };
  return no('no-quorum-expired');
}
