/**
 * The step-down acknowledgement: the displaced holder says its generation is gone, and the
 * lock-delay may end early (G6, G7).
 */
import type { Host, StepDownAck, StepDownRefusal } from '@hq/protocol';
import type { Displaced } from '../record.js';
import { leaseEvent } from '../events.js';
import {
  type ArbiterState,
  type Context,
  type Step,
  allReported,
  startWaitUntil,
  write,
  noteReport,
} from '../arbiter.js';

export type StepDownVerdict =
  | { readonly ok: true; readonly savedSeconds: number; readonly notBefore: number }
  | { readonly ok: false; readonly reason: StepDownRefusal };

/**
 * G7: an acknowledgement that says the displaced holder *ran* its generation in the agent's life
 * that acknowledges ends the start wait too, and the displaced grant's own lock-delay. Running
 * proves that lock-delay over on the agent's monotonic clock (an arbiter clock that jumped forward
 * while it was down cannot); the acknowledgement proves the holder's validity over; and every
 * candidate has reported, in a request that counts, no generation above the displaced one: no
 * newer holder exists that the kept record does not know (a restored backup). Only while the
 * start wait runs: after it, the lock-delays are the arbiter's own again.
 */
function ranLifts(state: ArbiterState, d: Displaced, ctx: Context): boolean {
  return (
    ctx.now < startWaitUntil(ctx, ctx.boot) && allReported(ctx, ctx.boot) && nothingNewer(state, ctx, d.generation)
  );
}

/**
 * No report names a generation above `g` that this life did not grant: the agents learn the
 * displacing grant (g + 1, made in this life right above g) and report it, which says nothing of
 * an earlier life; a report above the record, or a grant that had to jump above g + 1 (the floor
 * was higher), does.
 */
function nothingNewer(state: ArbiterState, ctx: Context, g: number): boolean {
  const l = state.lease;
  if (state.floor <= g) return true;
  return (
    state.floor <= l.generation && l.generation === g + 1 && l.acquiredAt !== null && l.acquiredAt > ctx.boot.startAt
  );
}

/** Where an acknowledgement accepted now would end the lock-delay (G6: never below the other waits; G7). */
function ackedUntil(state: ArbiterState, d: Displaced, ctx: Context, ran: boolean): number {
  if (ran && ranLifts(state, d, ctx)) return ctx.now;
  return Math.max(ctx.now, d.floor ?? -Infinity, startWaitUntil(ctx, ctx.boot));
}

/**
 * Null when an acknowledgement from `host` for `generation` would end the lock-delay now, else
 * why not. A second one counts only when it ends more (G7: the reports completed since the first).
 */
function ackRefusal(
  state: ArbiterState,
  ctx: Context,
  host: Host,
  generation: number,
  revision: number,
  ran: boolean,
): StepDownRefusal | null {
  const lease = state.lease;
  const d = lease.displaced ?? null;
  if (d === null || lease.holder === null || d.host !== host) return 'not-previous-holder';
  if (generation !== d.generation) return 'wrong-generation';
  if (revision < d.revision) return 'stale-revision';
  if (d.acknowledgedAt !== null && !(ran && ranLifts(state, d, ctx))) return 'duplicate';
  if (lease.notBefore === null || ctx.now >= lease.notBefore) return 'late';
  if (lease.floorPending || ackedUntil(state, d, ctx, ran) >= lease.notBefore) return 'other-wait';
  return null;
}

/**
 * The displaced holder's agent says "generation g stepped down, no child alive": it persisted the
 * step-down before anything else (it never again answers `run: true` for g, whatever peers
 * confirmed) and saw every fenced child of g gone. The lock-delay waited only for that holder's
 * validity, so it ends now — down to the other waits (G6). 1. The report raises the floor.
 * 2. Refused unless this host is the displaced one, for exactly its generation, having seen the
 * displacing grant, once, while the lock-delay still runs. 3. `notBefore` moves to now (or the
 * other waits); `expiresAt` stays, so the next lock-delay is no shorter than it would have been.
 */
export function steppedDown(state0: ArbiterState, ctx: Context, input: StepDownAck): Step<StepDownVerdict> {
  const noted = noteReport(state0, ctx, ctx.boot, input.host, undefined, input.generation);
  const state = noted.state;
  const lease = state.lease;
  const ran = input.ran === true;
  const reason = ackRefusal(state, ctx, input.host, input.generation, input.revision, ran);
  if (reason !== null) {
    const event = leaseEvent('step-down-refused', input.host, {
      reason,
      generation: input.generation,
      revision: input.revision,
      holder: lease.holder,
    });
    return { next: state, boot: noted.boot, events: [...noted.events, event], answer: { ok: false, reason } };
  }
  const d = lease.displaced as Displaced;
  const was = lease.notBefore as number;
  const until = ackedUntil(state, d, ctx, ran);
  const savedSeconds = was - until;
  const next = write(lease, {
    notBefore: until,
    displaced: { ...d, acknowledgedAt: ctx.now, savedSeconds: savedSeconds + (d.savedSeconds ?? 0) },
  });
  const event = leaseEvent('stepped-down', input.host, {
    generation: input.generation,
    holder: lease.holder,
    to: lease.generation,
    notBefore: until,
    savedSeconds,
    ...(ran ? { ran: true } : {}),
  });
  return {
    next: { ...state, lease: next },
    boot: noted.boot,
    events: [...noted.events, event],
    answer: { ok: true, savedSeconds, notBefore: until },
  };
}

/**
 * The generation the arbiter asks `host` to acknowledge its step-down from (in the heartbeat
 * answer), or null: only while an acknowledgement would be accepted, so an agent whose
 * acknowledgement got lost sends it again, and one that never learned of the grant learns now.
 * The arbiter cannot know whether the holder ran (G7): it asks when an acknowledgement that says
 * so would be accepted.
 */
export function stepDownAsked(state: ArbiterState, ctx: Context, host: Host): number | null {
  const d = state.lease.displaced ?? null;
  if (d === null) return null;
  return ackRefusal(state, ctx, host, d.generation, d.revision, true) === null ? d.generation : null;
}
