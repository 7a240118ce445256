/**
 * Which wait holds the record's holder back, for the operator: the arbiter answers it with the
 * record (`wait`), and the status page, `hq lease status` and the CLI's waits print its sentence.
 * It lets nothing run: the waits themselves are the grant's `notBefore`, the floor and the agents'
 * own waits; this names the one that ends last, until when, and what would end it sooner (agents
 * read it only to report sooner, `reportWanted`).
 */
import type { Host, LeaseRecord, LeaseWait } from '@hq/protocol';
import type { ArbiterState, Context } from './arbiter.js';
import { startWaitUntil, unreportedCandidates } from './arbiter.js';
import { isExpired, toRecord } from './record.js';
import { lockDelaySeconds } from './timing.js';

function iso(t: number): string {
  return new Date(t * 1000).toISOString();
}

function names(hosts: readonly Host[]): string {
  return `${hosts.join(', ')} ${hosts.length === 1 ? 'has' : 'have'} not`;
}

/** Null when the holder may run as far as the arbiter knows (or there is no holder to wait). */
export function leaseWait(state: ArbiterState, ctx: Context): LeaseWait | null {
  const l = state.lease;
  if (l.holder === null || l.released || isExpired(l, ctx.now)) return null;
  const unreported = unreportedCandidates(ctx, ctx.boot);
  if (l.floorPending) {
    return {
      kind: 'floor-pending',
      until: null,
      host: null,
      unreported,
      text: `the arbiter's database is new: ${l.holder} may run once every candidate has reported the generation it has seen, in a request sent since the arbiter started (${unreported.length === 0 ? 'all have; the next answer completes it' : `${names(unreported)} yet`})`,
    };
  }
  const nb = l.notBefore;
  if (nb !== null && nb > ctx.now) {
    const d = l.displaced ?? null;
    // A grant inside the start wait starts no earlier than its end, and an acknowledgement lowers
    // it no further: a notBefore at exactly that instant is the start wait's.
    if (nb === startWaitUntil(ctx, ctx.boot))
      return { kind: 'start-wait', until: nb, host: null, unreported, text: startWaitText(state, ctx, nb, unreported) };
    const old = d?.host ?? l.promotedFrom;
    let text: string;
    if (d !== null && d.acknowledgedAt !== null) {
      text = `lock-delay until ${iso(nb)}: ${d.host} acknowledged its step-down; what remains is the lock-delay its own grant still waited out, for the holder before it`;
    } else {
      const confirmed = [...state.observers].filter(
        ([, o]) =>
          o.confirmation !== null &&
          o.confirmation.holder === old &&
          o.confirmation.at + lockDelaySeconds(ctx.settings) >= nb,
      );
      const by =
        confirmed.length > 0
          ? ` (including the peer confirmation ${confirmed.map(([n]) => n).join(', ')} gave it)`
          : '';
      text =
        old === null
          ? `lock-delay until ${iso(nb)}: it waits out the last possible validity of the holder before ${l.holder}`
          : `lock-delay until ${iso(nb)}: it waits out ${old}'s last possible validity${by}; it ends at once when ${old}'s agent acknowledges its step-down${d === null ? '' : ` from generation ${d.generation}`}`;
    }
    return { kind: 'lock-delay', until: nb, host: old, unreported, text };
  }
  // The new holder confirmed the old one while the arbiter was unreachable: its own agent waits
  // that confirmation out (ttl + margin from when it gave it), whatever the record says.
  const c = state.observers.get(l.holder)?.confirmation ?? null;
  if (c !== null && c.holder !== l.holder && c.generation < l.generation) {
    const until = c.at + lockDelaySeconds(ctx.settings);
    if (until > ctx.now) {
      return {
        kind: 'confirmation',
        until,
        host: c.holder,
        unreported,
        text: `${l.holder} confirmed ${c.holder} (generation ${c.generation}) to its peers at about ${iso(c.at)}, while the arbiter was unreachable; its agent waits that confirmation out, until about ${iso(until)} (ttl + margin), which no acknowledgement ends`,
      };
    }
  }
  return null;
}

/** Why the start wait still holds, and what would end it sooner. */
function startWaitText(state: ArbiterState, ctx: Context, until: number, unreported: readonly Host[]): string {
  const l = state.lease;
  const d = l.displaced ?? null;
  const head = `the arbiter's start wait until ${iso(until)} (ttl + margin after it started at ${iso(ctx.boot.startAt)}): a validity granted before that start may still be running`;
  if (unreported.length > 0) {
    const sooner =
      d === null ? '' : `, and ${d.host} acknowledges its step-down saying it ran generation ${d.generation}`;
    return `${head}; it ends sooner once every candidate has reported, in a request sent since the start (${names(unreported)} yet)${sooner}`;
  }
  if (state.floor > l.generation)
    return `${head}; a candidate reported generation ${state.floor}, above the record's ${l.generation} (an older database?), so nothing ends it sooner`;
  if (d === null) return `${head}; no old holder's acknowledgement can end it, as this grant displaced none`;
  if (d.acknowledgedAt === null)
    return `${head}; it ends sooner once ${d.host} acknowledges its step-down saying it ran generation ${d.generation}`;
  return `${head}; ${d.host} acknowledged its step-down without saying it ran generation ${d.generation} in its agent's current life (or a candidate reported a generation above it), so that does not end it`;
}

/**
 * The record as every answer shows it: the lease, its views and its wait. Before its first grant
 * the record has no timing of its own (it was created with a zero margin): it shows the
 * configured one, which that grant will write.
 */
export function recordOf(state: ArbiterState, ctx: Context): LeaseRecord {
  const r = toRecord(state.lease, state.observers, ctx.now, leaseWait(state, ctx));
  if (state.lease.acquiredAt !== null) return r;
  return { ...r, ttlSeconds: ctx.settings.ttlSeconds, safetyMarginSeconds: ctx.settings.safetyMarginSeconds };
}
