/**
 * The arbiter's decisions, one file each under arbiter/ (acquire, renew, heartbeat, release,
 * transfer, maintenance, step-down, import, check, restart), and what they share here: the
 * state, the context, the reports and waits, the write and the grant. Pure functions of (state,
 * input, context); the shell reads the state in one immediate transaction, calls one of them,
 * writes `next` back with a compare-and-swap on `revision`, and only after commit logs `events`.
 *
 * Guarantees (each tested, and the simulator checks them on random schedules):
 *  G1  `generation` never decreases, and every grant to a host other than the current holder
 *      uses a generation strictly above every generation any agent ever reported (the floor, S1).
 *  G2  one holder per generation: a generation is only ever written together with one holder,
 *      except that a grant made while the floor is pending (S2.4) may be *raised* before its
 *      holder can run with it.
 *  G3  lock-delay on every change of holder except a handover: `notBefore` is at least the old
 *      holder's last possible validity (its `expiresAt`, and every peer confirmation a standby
 *      reported giving it, + ttl) plus one safety margin (S2.1).
 *  G4  after a start, grants wait until `ttl + margin` after the start unless every candidate
 *      reported never having seen a generation (S2.3) — once established, for every grant of
 *      this life (`Boot.noEarlierLife`); renewals of the recorded holder carry a
 *      `hold` until the floor is known to be no higher than the record (a restored backup).
 *  G5  promotion only by `check`, only after `promoteAfterChecks` consecutive checks in which the
 *      arbiter cannot reach the holder and the promotee's fresh view agrees, never while the
 *      promotee reports a recent confirmation of the holder, never in maintenance (S5).
 *  G6  a lock-delay ends early only on the displaced holder's step-down acknowledgement, for
 *      exactly the generation it held, while the lock-delay still runs, once; and never below
 *      what it waits for besides that holder: the displaced holder's own lock-delay (the holder
 *      before it), the start wait (S2.3), a pending floor (S2.4) — except G7.
 *  G7  during the start wait, an acknowledgement saying the displaced holder ran its generation
 *      also ends the start wait and that holder's own lock-delay, once every candidate reported
 *      (in a request that counts) no generation above it (`ranLifts`).
 *
 * Not guaranteed here: that the shell's clock is monotonic (it passes `now` from a clock that
 * is — see the arbiter's `Clock`), or that writes are durable (the store's job, S4).
 */
import type { Host, LeaseRefusal } from '@hq/protocol';
import type { Displaced, LeaseState, Observer } from './record.js';
import type { LeaseEvent } from './events.js';
import { leaseEvent } from './events.js';

export interface ArbiterSettings {
  /** This arbiter's host name: the observer name of its own view. Never a candidate. */
  readonly arbiter: Host;
  /** Promotion priority. */
  readonly candidates: readonly Host[];
  /**
   * The preferred promotee (the seeds' `standby` key): when set and eligible it is promoted
   * first, then the other candidates in `candidates` order.
   */
  readonly standby?: Host | null;
  readonly ttlSeconds: number;
  readonly safetyMarginSeconds: number;
  readonly promoteAfterChecks: number;
  readonly viewFreshSeconds: number;
}

/**
 * What the arbiter knows about its own life, in memory only.
 * `reports` holds, per candidate, the highest seen generation it reported in a request that
 * counts for S2.3/S2.4: one received at least 2 × requestTimeout after the start, with the
 * request timeout the request itself declares (the sender's own setting, S6: the arbiter never
 * assumes it; a request that declares none never counts). A request is never delivered more
 * than requestTimeout after it was sent (its sender has given up and discards the answer), so
 * such a request was sent at least requestTimeout after the start.
 */
export interface Boot {
  readonly startAt: number;
  readonly reports: ReadonlyMap<Host, number>;
  /**
   * Every candidate has reported never having seen a generation, in reports that count: no
   * validity of an earlier life exists anywhere. A fact about the previous life, so it stays
   * for the whole life — the grants of this life that make reports non-zero cannot undo it.
   */
  readonly noEarlierLife: boolean;
}

export interface ArbiterState {
  readonly lease: LeaseState;
  readonly observers: ReadonlyMap<Host, Observer>;
  /** The highest generation any agent ever reported (persisted). */
  readonly floor: number;
}

export interface Context {
  readonly now: number;
  readonly settings: ArbiterSettings;
  readonly boot: Boot;
}

/** The outcome of one decision: the next state (identical objects where nothing changed). */
export interface Step<A> {
  readonly next: ArbiterState;
  readonly boot: Boot;
  readonly events: readonly LeaseEvent[];
  readonly answer: A;
}

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly reason: LeaseRefusal };

export const NO_OBSERVER: Observer = {
  view: null,
  confirmation: null,
  lastHeartbeatAt: null,
  heartbeatSeconds: null,
  refreshSeconds: null,
  requestTimeoutSeconds: null,
};

/** Added to a report-again delay so the report lands just past the line, not on it. */
const REPORT_SLACK_SECONDS = 0.25;
/** The holder of a pending grant reports a second after the others may have (see `reportDue`)… */
const HOLDER_REPORT_DELAY_SECONDS = 1;
/** …and only this long after the line: a candidate that never reports cannot make it spin. */
const HOLDER_REPORT_WINDOW_SECONDS = 30;

export function newBoot(startAt: number): Boot {
  return { startAt, reports: new Map(), noEarlierLife: false };
}

export function isCandidate(settings: ArbiterSettings, host: Host): boolean {
  return settings.candidates.includes(host);
}

export function allReported(ctx: Context, boot: Boot): boolean {
  return ctx.settings.candidates.every((c) => boot.reports.has(c));
}

/** The candidates whose report of this life (one that counts for S2.3/S2.4) is still missing. */
export function unreportedCandidates(ctx: Context, boot: Boot): Host[] {
  return ctx.settings.candidates.filter((c) => !boot.reports.has(c));
}

function allNeverSeen(ctx: Context, boot: Boot): boolean {
  return (
    boot.noEarlierLife || (allReported(ctx, boot) && ctx.settings.candidates.every((c) => boot.reports.get(c) === 0))
  );
}

/** True when a report sent now with this request timeout counts for S2.3/S2.4. */
function reportCounts(ctx: Context, boot: Boot, requestTimeoutSeconds: number | undefined): boolean {
  return requestTimeoutSeconds !== undefined && ctx.now >= boot.startAt + 2 * requestTimeoutSeconds;
}

/**
 * When `host` should report again (seconds from now), or null when nothing waits for it. On a
 * new installation every candidate's start-up heartbeat comes too early after the arbiter's
 * start to count (S2.3), and the next one would come a whole cron interval later: the first
 * holder would sit behind the start wait for half an hour at the default settings. Instead the
 * answer asks the agent to report again the moment its report can count, while the start wait
 * or the floor (S2.4) still waits for it.
 */
export function reportDue(
  ctx: Context,
  boot: Boot,
  state: ArbiterState,
  host: Host,
  requestTimeoutSeconds: number | undefined,
): number | null {
  if (requestTimeoutSeconds === undefined || !isCandidate(ctx.settings, host)) return null;
  const line = boot.startAt + 2 * requestTimeoutSeconds;
  if (!boot.reports.has(host)) {
    const waiting =
      state.lease.floorPending || ctx.now < boot.startAt + ctx.settings.ttlSeconds + ctx.settings.safetyMarginSeconds;
    return waiting ? Math.max(0, line - ctx.now) + REPORT_SLACK_SECONDS : null;
  }
  // The holder of a grant whose floor is pending learns that it may run only from an answer
  // after the floor completed (a refresh never confirms): it comes back once the others'
  // reports can have landed, for a short window after the line (then its refresh takes over).
  const l = state.lease;
  if (l.floorPending && l.holder === host && ctx.now < line + HOLDER_REPORT_WINDOW_SECONDS) {
    return Math.max(0, line - ctx.now) + HOLDER_REPORT_DELAY_SECONDS;
  }
  return null;
}

/** S2.3: the arbiter time before which no grant of this life may let its holder run. */
export function startWaitUntil(ctx: Context, boot: Boot): number {
  if (allNeverSeen(ctx, boot)) return -Infinity;
  return ctx.boot.startAt + ctx.settings.ttlSeconds + ctx.settings.safetyMarginSeconds;
}

/**
 * G4, renewals: until every candidate has reported (in a request that counts) and none
 * reported more than the record's generation, a renewal may not start a *new* validity before
 * the start wait ends. A holder already running keeps running on what it has (its peers
 * confirm it); this only closes the restored-backup case, where the record's holder may not
 * be the latest one.
 */
export function renewHold(ctx: Context, boot: Boot, state: ArbiterState): number | null {
  const until = startWaitUntil(ctx, boot);
  if (ctx.now >= until) return null;
  if (allReported(ctx, boot) && state.floor <= state.lease.generation) return null;
  return until;
}

/**
 * G3: the old holder's last possible validity, plus one margin. The holder's own validity ends
 * `ttl − margin` after it *sent* the request the arbiter answered, on its clock; the arbiter
 * received it later and set `expiresAt = receive + ttl`, so `expiresAt` bounds it with a margin
 * to spare for drift. A standby's confirmation bounds the holder's validity by `at + ttl` in
 * the same way (the holder sent its request before the standby gave the confirmation).
 */
export function lockDelayUntil(state: ArbiterState, ctx: Context, oldHolder: Host | null): number {
  if (oldHolder === null) return ctx.now;
  let last = state.lease.holder === oldHolder && state.lease.expiresAt !== null ? state.lease.expiresAt : -Infinity;
  for (const observer of state.observers.values()) {
    const c = observer.confirmation;
    if (c !== null && c.holder === oldHolder) last = Math.max(last, c.at + ctx.settings.ttlSeconds);
  }
  return Math.max(ctx.now, last + ctx.settings.safetyMarginSeconds);
}

export function write(lease: LeaseState, patch: Partial<LeaseState>): LeaseState {
  return { ...lease, ...patch, revision: lease.revision + 1 };
}

/**
 * S1 bookkeeping for every request that carries a generation: raise the floor, count the
 * report for this life (S2.3/S2.4), complete a pending floor, and repair a record that an
 * agent proves stale (its generation below one an agent reported: a restored backup).
 */
export function noteReport(
  state: ArbiterState,
  ctx: Context,
  boot: Boot,
  host: Host,
  seen: number | undefined,
  generation: number | undefined,
  requestTimeoutSeconds?: number,
): { state: ArbiterState; boot: Boot; events: LeaseEvent[] } {
  const events: LeaseEvent[] = [];
  // While the floor is pending, a request's `generation` may echo this life's pending grant
  // (agents do not adopt it as seen, but the holder names it when it renews): only the seen
  // generation counts then, or every heartbeat would raise the grant again.
  const reported = Math.max(seen ?? 0, state.lease.floorPending ? 0 : (generation ?? 0));
  const floor = Math.max(state.floor, reported);
  let nextBoot = boot;
  if (seen !== undefined && reportCounts(ctx, boot, requestTimeoutSeconds) && isCandidate(ctx.settings, host)) {
    const reports = new Map(boot.reports);
    reports.set(host, Math.max(reports.get(host) ?? 0, seen));
    nextBoot = { startAt: boot.startAt, reports, noEarlierLife: boot.noEarlierLife };
    if (!boot.noEarlierLife && allNeverSeen(ctx, nextBoot)) nextBoot = { ...nextBoot, noEarlierLife: true };
  }
  let lease = state.lease;
  if (lease.floorPending) {
    // S2.4: a grant made before the floor was known is raised above every report.
    if (lease.holder !== null && floor >= lease.generation) {
      events.push(leaseEvent('generation-raised', lease.holder, { from: lease.generation, to: floor + 1, floor }));
      lease = write(lease, { generation: floor + 1 });
    }
    if (allReported(ctx, nextBoot)) {
      events.push(leaseEvent('floor-complete', null, { floor }, 'control'));
      lease = write(lease, { floorPending: false });
      // S2.3's own exception: every candidate reported never having seen a generation, so no
      // validity of an earlier life can be running anywhere. A grant of this life to a first
      // holder (no old holder whose lock-delay it carries) was held back by the start wait
      // alone: it may start now. Agents take the record's notBefore afresh once the floor is
      // complete (they held no finite wait for a pending record), so the holder runs at once
      // instead of waiting out ttl + margin (the issue: 25.5 minutes at the defaults).
      const l = lease;
      if (
        allNeverSeen(ctx, nextBoot) &&
        l.holder !== null &&
        l.promotedFrom === null &&
        l.acquiredAt !== null &&
        l.acquiredAt >= boot.startAt &&
        l.notBefore !== null &&
        l.notBefore > ctx.now
      ) {
        events.push(
          leaseEvent(
            'start-wait-lifted',
            l.holder,
            { generation: l.generation, notBefore: ctx.now, was: l.notBefore },
            'control',
          ),
        );
        lease = write(l, { notBefore: ctx.now, expiresAt: ctx.now + ctx.settings.ttlSeconds });
      }
    }
  } else if (lease.holder !== null && floor > lease.generation) {
    // A record older than a generation an agent saw (restored backup): re-grant to the same
    // holder above the floor, behind the start wait; the newer holder's validity came from the
    // previous life (over by then) or from standbys that confirmed it (they wait themselves).
    events.push(leaseEvent('generation-raised', lease.holder, { from: lease.generation, to: floor + 1, floor }));
    const wait = startWaitUntil(ctx, nextBoot);
    lease = write(lease, {
      generation: floor + 1,
      notBefore: Math.max(lease.notBefore ?? -Infinity, wait, ctx.now),
    });
  }
  const changed = lease !== state.lease || floor !== state.floor;
  return { state: changed ? { ...state, lease, floor } : state, boot: nextBoot, events };
}

/**
 * A grant to `host`: a new generation above record and floor, behind the needed waits (`lifted`:
 * a handover by a holder that ran, G7 — no start wait, no wait of the old grant).
 */
export function grant(
  state: ArbiterState,
  ctx: Context,
  boot: Boot,
  host: Host,
  notBefore: number,
  from: Host | null,
  lifted = false,
): LeaseState {
  const { now, settings } = ctx;
  const start = lifted ? now : Math.max(notBefore, startWaitUntil(ctx, boot), now);
  const old = state.lease;
  // `from` is always the record's holder: the grant displaces it (G6).
  const displaced: Displaced | null =
    from === null
      ? null
      : {
          host: from,
          generation: old.generation,
          revision: old.revision + 1,
          floor: old.notBefore,
          acknowledgedAt: null,
          savedSeconds: null,
        };
  return write(state.lease, {
    holder: host,
    generation: Math.max(state.lease.generation, state.floor) + 1,
    acquiredAt: now,
    renewedAt: now,
    ttlSeconds: settings.ttlSeconds,
    safetyMarginSeconds: settings.safetyMarginSeconds,
    expiresAt: start + settings.ttlSeconds,
    released: false,
    notBefore: start,
    dualUnreachableStreak: 0,
    promotedFrom: from,
    displaced,
  });
}

/**
 * A renewal by the holder. It also ends a dual-unreachable streak: a holder whose renewal the
 * arbiter accepted since the last check is alive, whatever the probes said (its health port
 * may be firewalled with ping off), so the next check starts counting from zero.
 */
export function renewed(lease: LeaseState, ctx: Context): LeaseState {
  const start = Math.max(ctx.now, lease.notBefore ?? -Infinity);
  return write(lease, {
    renewedAt: ctx.now,
    expiresAt: start + ctx.settings.ttlSeconds,
    ttlSeconds: ctx.settings.ttlSeconds,
    safetyMarginSeconds: ctx.settings.safetyMarginSeconds,
    dualUnreachableStreak: 0,
  });
}

export function ok(next: ArbiterState, boot: Boot, events: readonly LeaseEvent[]): Step<Verdict> {
  return { next, boot, events, answer: { ok: true } };
}

export function refuse(
  state: ArbiterState,
  boot: Boot,
  reason: LeaseRefusal,
  event: 'acquire-refused' | 'renew-refused' | 'release-refused',
  host: Host,
  events: readonly LeaseEvent[],
  data: LeaseEvent['data'] = {},
): Step<Verdict> {
  return {
    next: state,
    boot,
    events: [...events, leaseEvent(event, host, { reason, ...data })],
    answer: { ok: false, reason },
  };
}
