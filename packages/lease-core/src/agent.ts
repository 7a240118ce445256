/**
 * The agent's decisions: what it believes after each answer, and the memory that the fence
 * (fence.ts: "may this host run role R now?"), peer confirmation (agent/confirm.ts) and the
 * step-down (agent/step-down.ts) work on. Pure: the shell passes `Stamp`s read from its
 * clock and persists `persisted(state)` (fsync'd) *before* it lets the new state answer anyone.
 *
 * Guarantees:
 *  A1  Validity runs from the *send* time of the confirming request, for `ttl − margin`, with
 *      elapsed = max(monotonic, wall): a sleep (monotonic stopped) or a forward wall jump can
 *      only shorten it, a backward wall jump cannot lengthen it (S2.5).
 *  A2  Every wait — lock-delay, the standby's wait after a confirmation, the start guard — is
 *      counted from the *receive* time on the monotonic clock alone (S2.5).
 *  A3  A record older than the seen generation is refused (`stale-generation`, S1), and the
 *      seen generation never decreases.
 *  A4  A standby that confirmed holder H never runs as holder before that confirmation's
 *      validity has passed (ttl + margin after it gave it), and an agent started with a
 *      confirmation or a lock-delay on record runs nothing before ttl + margin (S2.1, S2.2).
 *  A5  Without a fresh confirmation nothing runs (a restart forgets every validity), except
 *      fail-open roles of the last known holder; `ledger-cli` is never fail-open; and nothing
 *      at all, fail-open roles included, once a higher generation than the known one was seen.
 *  A6  The lease timing (`ttlSeconds`, `safetyMarginSeconds`) is the arbiter's (S6): it comes
 *      from the record, never from the agent's own configuration; `local.json` keeps the last
 *      values so the start guard (A4) waits as long as the lease that was confirmed.
 *  A7  A step-down from generation g (a release, or an answer showing another holder or a higher
 *      generation: the lease was lost) is in `persisted(state)` — the shell writes it before it
 *      lets anything else happen — and from then on no fence answer says `run: true` for a
 *      generation ≤ g: not from a grant, not from peer confirmations, not fail-open. A lost
 *      generation stays stepped down (`resume` only undoes a release's step-down, and one whose
 *      release provably never reached the arbiter undoes itself: `releasing`). The agent owes
 *      the arbiter an acknowledgement (`ackDue`) only for a generation this life of the agent
 *      could have run alone (above `ackFloor`): the fenced children of an earlier life are not
 *      known to it, so it cannot say they are gone; nor those of a generation whose children
 *      this life could not see gone (`unvouched` raises the floor to it).
 *  A8  A restart keeps the known record (holder, generation, lease timing) when it was final —
 *      its floor complete, not released: a holder restarted while the arbiter is down runs
 *      again, after its start guard (A4), only on every standby's confirmation (L2); nothing
 *      runs on the restored record alone, and a pending record (its generation may still be
 *      raised) is forgotten.
 */
import type { Host, KnownLease } from '@hq/protocol';
import { GENERATION_CEILING } from '@hq/protocol';
import type { RecordSummary } from './record.js';
import type { LeaseEvent } from './events.js';
import { leaseEvent } from './events.js';
import { elapsed, type Stamp } from './stamp.js';

export { elapsed, type Stamp } from './stamp.js';

export interface AgentSettings {
  readonly host: Host;
  readonly requestTimeoutSeconds: number;
  readonly failOpenRoles: readonly string[];
}

/** The lease timing as the arbiter's record states it (A6). */
export interface LeaseTimes {
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
}

/** A window in which this host may run: from `startMono` until `ttl − margin` after `sent`. */
export interface Grant {
  readonly generation: number;
  readonly sent: Stamp;
  readonly seconds: number;
  readonly startMono: number;
  /** The earliest start apart from the lock-delay (the receipt, the S2.3 hold): where an acknowledged step-down moves it. */
  readonly earliestMono: number;
  readonly source: 'arbiter' | 'peer';
}

/** An acknowledgement this agent owes the arbiter once every fenced child of `generation` is gone (A7). */
export interface AckDue {
  readonly generation: number;
  /** The revision of the record in which it saw the lease lost. */
  readonly revision: number;
  /** This life of the agent ran the generation (see `AgentState.ran`). */
  readonly ran: boolean;
}

/** The lease as last learned from the arbiter (the agent's `/v1/status` shows it as is). */
export type Known = KnownLease;

export interface Gave {
  readonly holder: Host;
  readonly generation: number;
  readonly at: Stamp;
  readonly untilMono: number;
  /** The lease timing the wait was computed with (kept for the start guard, A4). */
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
}

export interface AgentState {
  readonly host: Host;
  readonly started: Stamp;
  /**
   * A4: set when local.json had a flag at start; nothing runs before it. Infinity while the
   * flag's lease timing is unknown (a refused state file): the first record then sets it.
   */
  readonly startGuardUntilMono: number | null;
  readonly seen: number;
  readonly known: Known | null;
  /** The last arbiter answer was older than the seen generation. */
  readonly stale: boolean;
  readonly current: Grant | null;
  /** A renewal that may not start yet (S2.3 hold) while `current` still runs. */
  readonly pending: Grant | null;
  /** Lock-delay end of the known generation, monotonic (Infinity while the floor is pending). */
  readonly waitUntilMono: number;
  readonly arbiterOk: boolean;
  readonly gave: Gave | null;
  /** The highest generation this host stepped down from (release, handover, a lost lease); 0 = none. Persisted (A7). */
  readonly steppedDown: number;
  /** The highest generation it learned it lost: `resume` never goes below it. Persisted. */
  readonly lost: number;
  /** Generations up to this one may have run in an earlier life of this agent: never acknowledged (A7). */
  readonly ackFloor: number;
  /** The acknowledgement owed for a lost generation, until the shell sent it; memory only. */
  readonly ackDue: AckDue | null;
  /** A release step-down whose release may not have reached the arbiter (see `releaseSent`); memory only. */
  readonly releasing: Releasing | null;
  /**
   * The highest generation this life of the agent ran: a grant of it was current with its start
   * (lock-delay, hold) passed and neither the start guard nor a given confirmation holding it
   * back. Its lock-delay — which waited for the holder before it — was over. Memory only.
   */
  readonly ran: number;
}

/**
 * A release step-down of `generation` (persisted like every step-down) whose outcome this agent
 * does not know. A release is sent by `untilMono` minus one request timeout and never lands later
 * than one request timeout after its send, so a record from a request sent at `untilMono` or later
 * that still names this host at that generation, unreleased, proves it never landed: the step-down
 * is undone (else a CLI killed between its step-down and its release would leave HQ stuck).
 */
export interface Releasing {
  readonly generation: number;
  readonly untilMono: number;
}

/** What the agent keeps in `local.json` (the fence's memory plus the two flags of S2.2). */
export interface Persisted {
  readonly holder: Host | null;
  readonly generation: number;
  /** Wall time of the send of the last confirming request, or null. */
  readonly confirmedAt: number | null;
  /** The lease timing last learned (record or peer request); 0 when none was ever learned. */
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
  readonly gaveConfirmation: { readonly holder: Host; readonly generation: number; readonly at: number } | null;
  readonly lockDelayPending: boolean;
  /** A7: the step-down marks (absent in files written before them: 0). */
  readonly steppedDown?: number;
  readonly lost?: number;
  /**
   * The known record was released / had its floor pending (absent in files written before
   * they were kept: the record is then not known again after a restart, A8).
   */
  readonly released?: boolean;
  readonly floorPending?: boolean;
}

/** The start guard's length from what local.json kept (A4, A6); Infinity when it kept none. */
export function startGuardSeconds(p: Pick<Persisted, 'ttlSeconds' | 'safetyMarginSeconds'>): number {
  return p.ttlSeconds > 0 ? p.ttlSeconds + p.safetyMarginSeconds : Infinity;
}

/**
 * A8: the record local.json kept, known again after a restart — only a final one (its floor
 * complete, not released) with a holder and its lease timing. The restarted holder then asks
 * its peers as before (L2); a standby knows whom it confirms.
 */
function restoredKnown(p: Persisted | null): Known | null {
  if (p === null || p.holder === null || p.released !== false || p.floorPending !== false || !(p.ttlSeconds > 0))
    return null;
  return {
    holder: p.holder,
    generation: p.generation,
    expired: false,
    released: false,
    floorPending: false,
    ttlSeconds: p.ttlSeconds,
    safetyMarginSeconds: p.safetyMarginSeconds,
  };
}

export function initialAgent(
  settings: AgentSettings,
  started: Stamp,
  seen: number,
  persisted: Persisted | null,
): AgentState {
  const flagged = persisted !== null && (persisted.gaveConfirmation !== null || persisted.lockDelayPending);
  const lost = persisted?.lost ?? 0;
  const first = Math.max(seen, persisted?.generation ?? 0);
  const down = Math.max(persisted?.steppedDown ?? 0, lost);
  // A release step-down from an earlier life: its release was sent before this start, if at all.
  const releasing =
    down > lost ? { generation: down, untilMono: started.mono + 2 * settings.requestTimeoutSeconds } : null;
  return {
    host: settings.host,
    started,
    startGuardUntilMono: flagged ? started.mono + startGuardSeconds(persisted) : null,
    seen: first,
    known: restoredKnown(persisted),
    stale: false,
    current: null,
    pending: null,
    waitUntilMono: -Infinity,
    arbiterOk: false,
    gave: null,
    steppedDown: down,
    lost,
    ackFloor: first,
    ackDue: null,
    releasing,
    ran: 0,
  };
}

/** A grant this host may run on at `now`: its start has come and its validity runs (A1, A2). */
export function active(g: Grant | null, now: Stamp): boolean {
  return g !== null && now.mono >= g.startMono && elapsed(g.sent, now) < g.seconds;
}

function spent(g: Grant | null, now: Stamp): boolean {
  return g !== null && elapsed(g.sent, now) >= g.seconds;
}

/**
 * Folds a pending grant whose start has come into `current`, drops a spent confirmation, and
 * drops every grant whose validity is over: once seen over, a validity stays over, so a later
 * backward wall jump cannot bring it back. The shell calls this on every tick and query.
 */
export function settle(state: AgentState, now: Stamp): AgentState {
  let next = state;
  if (spent(next.current, now)) next = { ...next, current: null };
  if (spent(next.pending, now)) next = { ...next, pending: null };
  if (next.pending !== null && now.mono >= next.pending.startMono) {
    next = { ...next, current: next.pending, pending: null };
  }
  if (next.gave !== null && now.mono >= next.gave.untilMono) next = { ...next, gave: null };
  if (next.startGuardUntilMono !== null && now.mono >= next.startGuardUntilMono)
    next = { ...next, startGuardUntilMono: null };
  const c = next.current;
  if (
    c !== null &&
    c.generation > next.ran &&
    active(c, now) &&
    next.startGuardUntilMono === null &&
    next.gave === null
  )
    next = { ...next, ran: c.generation };
  return next;
}

export function persisted(state: AgentState, now: Stamp): Persisted {
  const latest = state.pending ?? state.current;
  const waiting =
    state.pending !== null ||
    (state.current !== null && state.current.startMono > now.mono) ||
    state.waitUntilMono > now.mono;
  return {
    holder: state.known?.holder ?? null,
    generation: state.known?.generation ?? state.seen,
    confirmedAt: latest === null ? null : latest.sent.wall,
    // The longer of the record's and the given confirmation's timing: the start guard must
    // outlast whichever of them a validity still running elsewhere was computed with.
    ttlSeconds: Math.max(state.known?.ttlSeconds ?? 0, state.gave?.ttlSeconds ?? 0),
    safetyMarginSeconds: Math.max(state.known?.safetyMarginSeconds ?? 0, state.gave?.safetyMarginSeconds ?? 0),
    gaveConfirmation:
      state.gave === null
        ? null
        : { holder: state.gave.holder, generation: state.gave.generation, at: state.gave.at.wall },
    lockDelayPending: waiting || state.startGuardUntilMono !== null,
    steppedDown: state.steppedDown,
    lost: state.lost,
    released: state.known?.released ?? false,
    floorPending: state.known?.floorPending ?? false,
  };
}

/** The answer of an arbiter call, as the agent saw it. */
export interface ArbiterAnswer {
  readonly record: RecordSummary;
  /** True when the answer renews or grants this host (heartbeat `renewed`, acquire/renew ok). */
  readonly confirms: boolean;
  /** S2.3 hold for a renewal (arbiter time), or null. */
  readonly hold: number | null;
  /** The generation the arbiter asks this host to acknowledge its step-down from (heartbeat answer), or null. */
  readonly stepDown?: number | null;
}

export interface AgentStep {
  readonly state: AgentState;
  readonly events: readonly LeaseEvent[];
}

/** A generation a peer or an answer names, taken as seen when it is higher and real (A3). */
export function adoptSeen(state: AgentState, generation: number, events: LeaseEvent[], from: string): AgentState {
  // A peer naming a generation above the ceiling names none real: never adopted (it also
  // withholds its confirmation, being above the known generation).
  if (generation <= state.seen || generation > GENERATION_CEILING) return state;
  events.push(leaseEvent('generation-adopted', state.host, { from: state.seen, to: generation, via: from }));
  return { ...state, seen: generation };
}

/**
 * A7: this host lost generation `g` (or the arbiter asks it to step down from it): mark it
 * stepped down for good and, when the new grant still waits and this life could have run `g`
 * alone, owe the arbiter the acknowledgement. `r` is the record that showed it.
 */
function lose(
  state: AgentState,
  g: number,
  r: RecordSummary,
  via: 'record' | 'asked',
  events: LeaseEvent[],
): AgentState {
  const owes =
    g > state.ackFloor &&
    r.holder !== null &&
    r.holder !== state.host &&
    !r.floorPending &&
    r.notBefore !== null &&
    r.notBefore > r.now;
  const ackDue = owes ? { generation: g, revision: r.revision, ran: state.ran >= g } : state.ackDue;
  events.push(
    leaseEvent('step-down', state.host, { generation: g, holder: r.holder, to: r.generation, via, acknowledge: owes }),
  );
  return {
    ...state,
    current: null,
    pending: null,
    steppedDown: Math.max(state.steppedDown, g),
    lost: Math.max(state.lost, g),
    ackDue,
  };
}

/**
 * An arbiter answer arrived. 1. Too late (after the request timeout) → ignored. 2. Older than
 * the seen generation → refused (A3). 3. Adopt its generation and holder; a change of holder
 * or generation drops every grant. 4. A generation this host held and the record no longer
 * gives it is lost: step down (A7); so is one the arbiter asks it to step down from. 5. If it
 * confirms this host, a new grant starts after the lock-delay (`notBefore − now`, from the
 * receive time) and the hold; an acknowledged step-down of the displaced holder ends the
 * lock-delay early, for a grant already waiting too.
 */
export function onArbiterAnswer(
  state0: AgentState,
  answer: ArbiterAnswer,
  sent: Stamp,
  received: Stamp,
  settings: AgentSettings,
): AgentStep {
  const events: LeaseEvent[] = [];
  if (elapsed(sent, received) > settings.requestTimeoutSeconds) {
    events.push(leaseEvent('arbiter-unreachable', state0.host, { reason: 'late-answer' }));
    return { state: { ...state0, arbiterOk: false }, events };
  }
  const r = answer.record;
  if (r.generation < state0.seen) {
    events.push(leaseEvent('stale-generation', state0.host, { generation: r.generation, seen: state0.seen }));
    return { state: { ...state0, stale: true, arbiterOk: true, current: null, pending: null }, events };
  }
  let state = adoptRecord(state0, r, received, events);
  state = loseHeld(state0, state, r, events);
  state = decideRelease(state, r, sent, events);
  state = answerAsked(state, answer.stepDown ?? null, r, events);
  state = grantIfConfirmed(state, answer, sent, received);
  return { state: settle(state, received), events };
}

/**
 * Step 3 of `onArbiterAnswer`: the record's generation, holder and timing become what this host
 * knows; a change of tenure drops every grant; the lock-delay is measured from receipt.
 */
function adoptRecord(state0: AgentState, r: RecordSummary, received: Stamp, events: LeaseEvent[]): AgentState {
  // A record whose floor is pending (S2.4) is not final: its generation may still be raised,
  // so it is not adopted as seen — else the reports that complete the floor would echo it.
  let state: AgentState = { ...state0, stale: false, arbiterOk: true };
  if (!r.floorPending) state = adoptSeen(state, r.generation, events, 'arbiter');
  const released = r.released;
  const known: Known = {
    holder: r.holder,
    generation: r.generation,
    expired: r.expired,
    released,
    floorPending: r.floorPending,
    ttlSeconds: r.ttlSeconds,
    safetyMarginSeconds: r.safetyMarginSeconds,
  };
  // A start guard whose timing local.json could not tell (A4, A6) is measured with this record's.
  if (state.startGuardUntilMono === Infinity) {
    state = { ...state, startGuardUntilMono: state.started.mono + r.ttlSeconds + r.safetyMarginSeconds };
  }
  const sameTenure = state.known !== null && state.known.holder === r.holder && state.known.generation === r.generation;
  const mine = r.holder === state.host;
  // A pending record (S2.4) vouches for nothing yet, even under the same number: no grant survives it.
  if (!sameTenure || !mine || released || r.floorPending) {
    state = { ...state, current: null, pending: null };
  }
  if (!sameTenure) state = { ...state, waitUntilMono: -Infinity };
  // The holder and the standby both say when they see the lease expired (the old system's
  // rule: the standby logs `expired-seen {holder, generation}`), once per tenure.
  const wasExpired =
    state0.known?.expired && state0.known.holder === r.holder && state0.known.generation === r.generation;
  if (r.expired && r.holder !== null && !wasExpired)
    events.push(leaseEvent('expired-seen', state.host, { holder: r.holder, generation: r.generation, released }));
  // Lock-delay of this generation, measured from receipt on the monotonic clock (A2). Within a
  // tenure it only grows — except once the displaced holder acknowledged its step-down: then
  // the arbiter ended it on purpose, and each answer's estimate is taken as it is.
  const lockDelay = r.floorPending ? Infinity : received.mono + Math.max(0, (r.notBefore ?? r.now) - r.now);
  const acknowledged = r.displaced !== null && r.displaced.acknowledgedAt !== null;
  const waitUntilMono =
    !sameTenure || state.waitUntilMono === Infinity || acknowledged
      ? lockDelay
      : Math.max(state.waitUntilMono, lockDelay);
  state = { ...state, known, waitUntilMono };
  if (acknowledged && state.pending !== null)
    state = { ...state, pending: { ...state.pending, startMono: Math.max(waitUntilMono, state.pending.earliestMono) } };
  return state;
}

/** Step 4 of `onArbiterAnswer`: a generation this host held that the record no longer gives it is lost (A7). */
function loseHeld(state0: AgentState, state: AgentState, r: RecordSummary, events: LeaseEvent[]): AgentState {
  const held = state0.known !== null && state0.known.holder === state.host ? state0.known.generation : 0;
  if (held > state.lost && (r.holder !== state.host || r.generation > held))
    return lose(state, held, r, 'record', events);
  return state;
}

/** A release under way is decided by the record (lost, released, another tenure), or undone once its time is up. */
function decideRelease(state: AgentState, r: RecordSummary, sent: Stamp, events: LeaseEvent[]): AgentState {
  const rel = state.releasing;
  if (
    rel !== null &&
    (rel.generation <= state.lost || r.generation !== rel.generation || r.holder !== state.host || r.released)
  ) {
    return { ...state, releasing: null }; // decided: lost, released, or another tenure
  }
  if (rel !== null && sent.mono >= rel.untilMono && !r.floorPending) {
    events.push(leaseEvent('step-down-undone', state.host, { generation: rel.generation }));
    return { ...resume(state), releasing: null };
  }
  return state;
}

/** The arbiter asks this host to step down from generation `asked` (A7): lose it, or owe the acknowledgement again. */
function answerAsked(state: AgentState, asked: number | null, r: RecordSummary, events: LeaseEvent[]): AgentState {
  if (asked === null || asked <= 0 || asked >= r.generation) return state;
  // Asked again after it acknowledged (the answer got lost): the children were gone then, and
  // nothing of that generation ran since (A7), so the same acknowledgement is still true.
  if (asked > state.lost) return lose(state, asked, r, 'asked', events);
  if (asked > state.ackFloor && state.ackDue === null)
    return { ...state, ackDue: { generation: asked, revision: r.revision, ran: state.ran >= asked } };
  return state;
}

/** Step 5 of `onArbiterAnswer`: an answer that confirms this host grants it, after the lock-delay and the hold. */
function grantIfConfirmed(state: AgentState, answer: ArbiterAnswer, sent: Stamp, received: Stamp): AgentState {
  const r = answer.record;
  if (!answer.confirms || r.holder !== state.host || r.released || r.generation <= state.steppedDown) return state;
  const holdUntil = answer.hold === null ? -Infinity : received.mono + Math.max(0, answer.hold - r.now);
  const earliestMono = Math.max(holdUntil, received.mono);
  const grant: Grant = {
    generation: r.generation,
    sent,
    seconds: r.ttlSeconds - r.safetyMarginSeconds,
    startMono: Math.max(state.waitUntilMono, earliestMono),
    earliestMono,
    source: 'arbiter',
  };
  if (grant.startMono <= received.mono) return { ...state, current: grant, pending: null };
  if (active(state.current, received)) return { ...state, pending: grant };
  return { ...state, current: null, pending: grant };
}

/** The arbiter could not be reached (or answered too late). */
export function onArbiterFailure(state: AgentState): AgentStep {
  return {
    state: { ...state, arbiterOk: false },
    events: state.arbiterOk ? [leaseEvent('arbiter-unreachable', state.host, {})] : [],
  };
}

/**
 * Undo a step-down whose release the arbiter refused; a lost generation stays stepped down (A7).
 * Here, not in agent/step-down.ts: an answer that proves the release never landed undoes it too.
 */
export function resume(state: AgentState): AgentState {
  return { ...state, steppedDown: state.lost, releasing: null };
}
