/**
 * The arbiter's decisions. Pure functions of (state, input, context); the shell reads the
 * state in one immediate transaction, calls one of these, writes `next` back with a
 * compare-and-swap on `revision`, and only after commit logs `events`.
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
import type {
  AcquireRequest,
  CheckAnswer,
  HeartbeatAnswer,
  HeartbeatRequest,
  Host,
  LeaseRefusal,
  MaintenanceRequest,
  ReleaseRequest,
  RenewRequest,
  StepDownAck,
  StepDownRefusal,
  TransferRequest,
  View,
} from '@hq/protocol';
import type { Confirmation, Displaced, LeaseState, Observer } from './record.js';
import { isExpired } from './record.js';
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

const NO_OBSERVER: Observer = { view: null, confirmation: null, lastHeartbeatAt: null, heartbeatSeconds: null, refreshSeconds: null, requestTimeoutSeconds: null };

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

function allReported(ctx: Context, boot: Boot): boolean {
  return ctx.settings.candidates.every((c) => boot.reports.has(c));
}

/** The candidates whose report of this life (one that counts for S2.3/S2.4) is still missing. */
export function unreportedCandidates(ctx: Context, boot: Boot): Host[] {
  return ctx.settings.candidates.filter((c) => !boot.reports.has(c));
}

function allNeverSeen(ctx: Context, boot: Boot): boolean {
  return boot.noEarlierLife || (allReported(ctx, boot) && ctx.settings.candidates.every((c) => boot.reports.get(c) === 0));
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
export function reportDue(ctx: Context, boot: Boot, state: ArbiterState, host: Host, requestTimeoutSeconds: number | undefined): number | null {
  if (requestTimeoutSeconds === undefined || !isCandidate(ctx.settings, host)) return null;
  const line = boot.startAt + 2 * requestTimeoutSeconds;
  if (!boot.reports.has(host)) {
    const waiting = state.lease.floorPending || ctx.now < boot.startAt + ctx.settings.ttlSeconds + ctx.settings.safetyMarginSeconds;
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

function write(lease: LeaseState, patch: Partial<LeaseState>): LeaseState {
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
        events.push(leaseEvent('start-wait-lifted', l.holder, { generation: l.generation, notBefore: ctx.now, was: l.notBefore }, 'control'));
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
function grant(state: ArbiterState, ctx: Context, boot: Boot, host: Host, notBefore: number, from: Host | null, lifted = false): LeaseState {
  const { now, settings } = ctx;
  const start = lifted ? now : Math.max(notBefore, startWaitUntil(ctx, boot), now);
  const old = state.lease;
  // `from` is always the record's holder: the grant displaces it (G6).
  const displaced: Displaced | null =
    from === null ? null : { host: from, generation: old.generation, revision: old.revision + 1, floor: old.notBefore, acknowledgedAt: null, savedSeconds: null };
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
function renewed(lease: LeaseState, ctx: Context): LeaseState {
  const start = Math.max(ctx.now, lease.notBefore ?? -Infinity);
  return write(lease, {
    renewedAt: ctx.now,
    expiresAt: start + ctx.settings.ttlSeconds,
    ttlSeconds: ctx.settings.ttlSeconds,
    safetyMarginSeconds: ctx.settings.safetyMarginSeconds,
    dualUnreachableStreak: 0,
  });
}

// ---------------------------------------------------------------------------------------
// restart

/**
 * Called once at start, before the first decision: the stored times come from the previous
 * life's clock, which may have jumped while the arbiter was down. Nothing of the previous life
 * can lie after the start, and its lease cannot outlive the start by more than one TTL, so
 * every stored time is clamped to that (a backward jump would otherwise stretch lock-delays
 * and keep old views fresh). Forward jumps need no repair: the start wait (S2.3) covers them.
 */
export function atRestart(state: ArbiterState, ctx: Context): ArbiterState {
  const start = ctx.boot.startAt;
  const ttl = ctx.settings.ttlSeconds;
  const cap = (t: number | null, limit: number): number | null => (t === null ? null : Math.min(t, limit));
  const l = state.lease;
  let lease: LeaseState = {
    ...l,
    acquiredAt: cap(l.acquiredAt, start),
    renewedAt: cap(l.renewedAt, start),
    lastCheckAt: cap(l.lastCheckAt, start),
    expiresAt: cap(l.expiresAt, start + ttl),
    notBefore: cap(l.notBefore, start + ttl + ctx.settings.safetyMarginSeconds),
  };
  const d = l.displaced ?? null;
  const floor = d === null ? null : cap(d.floor, start + ttl + ctx.settings.safetyMarginSeconds);
  if (d !== null && floor !== d.floor) lease = { ...lease, displaced: { ...d, floor } };
  const observers = new Map<Host, Observer>();
  for (const [name, o] of state.observers) {
    observers.set(name, {
      view: o.view === null ? null : { ...o.view, at: Math.min(o.view.at, start) },
      confirmation: o.confirmation === null ? null : { ...o.confirmation, at: Math.min(o.confirmation.at, start) },
      lastHeartbeatAt: cap(o.lastHeartbeatAt, start),
      heartbeatSeconds: o.heartbeatSeconds,
      refreshSeconds: o.refreshSeconds ?? null,
      requestTimeoutSeconds: o.requestTimeoutSeconds ?? null,
    });
  }
  const changed =
    lease.acquiredAt !== l.acquiredAt ||
    lease.renewedAt !== l.renewedAt ||
    lease.lastCheckAt !== l.lastCheckAt ||
    lease.expiresAt !== l.expiresAt ||
    lease.notBefore !== l.notBefore ||
    lease.displaced !== l.displaced;
  return { ...state, lease: changed ? { ...lease, revision: l.revision + 1 } : lease, observers };
}

// ---------------------------------------------------------------------------------------
// acquire

/**
 * 1. Only a candidate may acquire. 2. Its seen generation raises the floor (S1).
 * 3. The recorded holder re-acquiring an unreleased lease renews it (even past expiry).
 * 4. A live lease of another host is refused (`held`). 5. Otherwise a grant, behind the old
 *    holder's lock-delay and the start wait.
 */
export function acquire(state0: ArbiterState, ctx: Context, input: AcquireRequest): Step<Verdict> {
  if (!isCandidate(ctx.settings, input.host)) {
    return refuse(state0, ctx.boot, 'not-candidate', 'acquire-refused', input.host, []);
  }
  const noted = noteReport(state0, ctx, ctx.boot, input.host, input.seenGeneration, undefined, input.requestTimeoutSeconds);
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder === input.host && !lease.released) {
    const next = { ...state, lease: renewed(lease, ctx) };
    return ok(next, noted.boot, [...noted.events, leaseEvent('renewed', input.host, { generation: lease.generation, via: 'acquire' })]);
  }
  if (lease.holder !== null && lease.holder !== input.host && !isExpired(lease, ctx.now)) {
    return refuse(state, noted.boot, 'held', 'acquire-refused', input.host, noted.events, { holder: lease.holder });
  }
  const previous = lease.holder === input.host ? null : lease.holder;
  const lease2 = grant(state, ctx, noted.boot, input.host, lockDelayUntil(state, ctx, previous), previous);
  return ok({ ...state, lease: lease2 }, noted.boot, [
    ...noted.events,
    leaseEvent('acquired', input.host, { generation: lease2.generation, notBefore: lease2.notBefore, from: previous }),
  ]);
}

// ---------------------------------------------------------------------------------------
// renew

/** Renew only by the holder, at the record's generation, of an unreleased lease. */
export function renew(state0: ArbiterState, ctx: Context, input: RenewRequest): Step<Verdict> {
  const noted = noteReport(state0, ctx, ctx.boot, input.host, undefined, input.generation);
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder !== input.host) {
    return refuse(state, noted.boot, 'not-holder', 'renew-refused', input.host, noted.events, { holder: lease.holder });
  }
  if (input.generation !== lease.generation) {
    return refuse(state, noted.boot, 'stale-generation', 'renew-refused', input.host, noted.events, { generation: lease.generation, sent: input.generation });
  }
  if (lease.released) {
    return refuse(state, noted.boot, 'expired', 'renew-refused', input.host, noted.events);
  }
  return ok({ ...state, lease: renewed(lease, ctx) }, noted.boot, [
    ...noted.events,
    leaseEvent('renewed', input.host, { generation: lease.generation }),
  ]);
}

// ---------------------------------------------------------------------------------------
// heartbeat

/**
 * What the decision answers; the route adds the record, the hold, the timing problems, the
 * failover sentence and the candidates (`HeartbeatAnswer` of @hq/protocol).
 */
export type HeartbeatDecision = Pick<HeartbeatAnswer, 'outcome' | 'reason' | 'reportInSeconds'>;

/**
 * 1. Only candidates heartbeat. 2. The report raises the floor. 3. The observer's view,
 * confirmation and heartbeat time are recorded. 4. The holder renews (an unreleased lease at
 * its generation, also past expiry: an arbiter outage must not end the lease, L2); anyone else
 * is a standby, or sees no lease.
 */
export function heartbeat(state0: ArbiterState, ctx: Context, input: HeartbeatRequest): Step<HeartbeatDecision> {
  if (!isCandidate(ctx.settings, input.host)) {
    const events = [leaseEvent('renew-refused', input.host, { reason: 'not-candidate' })];
    return { next: state0, boot: ctx.boot, events, answer: { outcome: 'renew-refused', reason: 'not-candidate', reportInSeconds: null } };
  }
  const noted = noteReport(state0, ctx, ctx.boot, input.host, input.seenGeneration, input.generation, input.requestTimeoutSeconds);
  const before = noted.state.observers.get(input.host) ?? NO_OBSERVER;
  const view: View | null = input.view === undefined ? before.view : { ...input.view, at: ctx.now };
  const confirmation: Confirmation | null =
    input.confirmation === undefined
      ? before.confirmation
      : {
          holder: input.confirmation.holder,
          generation: input.confirmation.generation,
          at: ctx.now - Math.max(0, input.confirmation.ageSeconds),
        };
  const observers = new Map(noted.state.observers);
  observers.set(input.host, {
    view,
    confirmation,
    lastHeartbeatAt: ctx.now,
    heartbeatSeconds: input.heartbeatSeconds ?? before.heartbeatSeconds,
    refreshSeconds: input.refreshSeconds ?? before.refreshSeconds ?? null,
    requestTimeoutSeconds: input.requestTimeoutSeconds ?? before.requestTimeoutSeconds ?? null,
  });
  // Recording the view is a write of the record too: its revision (the ETag) moves with it.
  const state: ArbiterState = { ...noted.state, observers, lease: write(noted.state.lease, {}) };
  const lease = state.lease;
  const events = [...noted.events];
  const reportInSeconds = reportDue(ctx, noted.boot, state, input.host, input.requestTimeoutSeconds);
  if (lease.holder === input.host) {
    let reason: LeaseRefusal | null = null;
    if (lease.released) reason = 'expired';
    else if (input.generation !== undefined && input.generation !== lease.generation) reason = 'stale-generation';
    if (reason !== null) {
      events.push(leaseEvent('renew-refused', input.host, { reason, generation: lease.generation }));
      return { next: state, boot: noted.boot, events, answer: { outcome: 'renew-refused', reason, reportInSeconds } };
    }
    events.push(leaseEvent('renewed', input.host, { generation: lease.generation, via: 'heartbeat' }));
    return { next: { ...state, lease: renewed(noted.state.lease, ctx) }, boot: noted.boot, events, answer: { outcome: 'renewed', reason: null, reportInSeconds } };
  }
  if (lease.holder === null) {
    events.push(leaseEvent('no-lease', input.host, {}));
    return { next: state, boot: noted.boot, events, answer: { outcome: 'no-lease', reason: null, reportInSeconds } };
  }
  events.push(leaseEvent('standby', input.host, { holder: lease.holder, generation: lease.generation, reachable: view?.reachable ?? null }));
  return { next: state, boot: noted.boot, events, answer: { outcome: 'standby', reason: null, reportInSeconds } };
}

// ---------------------------------------------------------------------------------------
// release and handover

/**
 * A handover or transfer target must be alive: heard from (a heartbeat) within its reported
 * interval × SILENCE_FACTOR + SILENCE_SLACK_SECONDS. The factor covers a missed cron tick's
 * jitter and a slow heartbeat; the slack, request latency. Too small refuses a healthy target
 * between two heartbeats; too large hands the lease to a host that just died.
 */
export const SILENCE_FACTOR = 1.5;
export const SILENCE_SLACK_SECONDS = 5;

export interface Silence {
  readonly lastHeartbeatAt: number | null;
  readonly heartbeatSeconds: number | null;
  /** How long a silence is tolerated; null when the target was never heard from. */
  readonly graceSeconds: number | null;
  readonly message: string;
}

/**
 * Null when `host` was heard from recently enough to receive the lease, else why not (with
 * when it was last heard). An agent that never reported its interval gets `viewFreshSeconds`
 * (the age beyond which the arbiter takes nothing an agent said as evidence).
 */
export function targetSilence(state: ArbiterState, ctx: Context, host: Host): Silence | null {
  const o = state.observers.get(host) ?? NO_OBSERVER;
  const last = o.lastHeartbeatAt;
  const interval = o.heartbeatSeconds;
  if (last === null) {
    return { lastHeartbeatAt: null, heartbeatSeconds: interval, graceSeconds: null, message: `${host} has never sent a heartbeat to this arbiter; start its agent, or force` };
  }
  const grace = interval === null ? ctx.settings.viewFreshSeconds : interval * SILENCE_FACTOR + SILENCE_SLACK_SECONDS;
  const age = ctx.now - last;
  if (age <= grace) return null;
  const rule = interval === null ? `viewFreshSeconds ${ctx.settings.viewFreshSeconds} s` : `its heartbeat interval ${interval} s × ${SILENCE_FACTOR} + ${SILENCE_SLACK_SECONDS} s`;
  return {
    lastHeartbeatAt: last,
    heartbeatSeconds: interval,
    graceSeconds: grace,
    message: `${host} was last heard ${Math.round(age)} s ago (${new Date(last * 1000).toISOString()}), longer than ${rule}; is its agent running? force overrides`,
  };
}

/**
 * Release keeps the holder and marks the lease expired. With `handoverTo` the named candidate
 * is granted at once: no lock-delay from the old holder, which stepped down before asking
 * (the start wait of S2.3 still applies, as to every grant, and so does a lock-delay the old
 * holder's own grant was still waiting out).
 */
export function release(state0: ArbiterState, ctx: Context, input: ReleaseRequest): Step<Verdict> {
  const noted = noteReport(state0, ctx, ctx.boot, input.host, undefined, input.generation);
  const state = noted.state;
  const lease = state.lease;
  if (lease.holder !== input.host) {
    return refuse(state, noted.boot, 'not-holder', 'release-refused', input.host, noted.events, { holder: lease.holder });
  }
  if (input.generation !== undefined && input.generation !== lease.generation) {
    return refuse(state, noted.boot, 'stale-generation', 'release-refused', input.host, noted.events, { generation: lease.generation });
  }
  if (input.handoverTo !== undefined) {
    if (!isCandidate(ctx.settings, input.handoverTo)) {
      return refuse(state, noted.boot, 'not-candidate', 'release-refused', input.host, noted.events, { handoverTo: input.handoverTo });
    }
    if (input.handoverTo === input.host) {
      return refuse(state, noted.boot, 'same-holder', 'release-refused', input.host, noted.events);
    }
    const silent = input.force === true ? null : targetSilence(state, ctx, input.handoverTo);
    if (silent !== null) {
      return refuse(state, noted.boot, 'target-silent', 'release-refused', input.host, noted.events, silenceData(input.handoverTo, silent, 'handoverTo'));
    }
    // The handing-over holder stepped down: no wait for it. But a lock-delay its own grant still
    // waited for protects the holder before it (a transfer just made to it), and stays.
    // G7: a holder that ran its generation hands over without the start wait once every
    // candidate reported nothing above it (the same proof as an acknowledgement's).
    const lifted = input.ran === true && input.generation === lease.generation && ctx.now < startWaitUntil(ctx, noted.boot) && allReported(ctx, noted.boot) && state.floor <= lease.generation;
    const next = grant(state, ctx, noted.boot, input.handoverTo, Math.max(ctx.now, lease.notBefore ?? -Infinity), input.host, lifted);
    return ok({ ...state, lease: next }, noted.boot, [
      ...noted.events,
      leaseEvent('released', input.host, { generation: lease.generation, handoverTo: input.handoverTo }),
      leaseEvent('acquired', input.handoverTo, { generation: next.generation, notBefore: next.notBefore, from: input.host, via: 'handover', ...(lifted ? { startWaitLifted: true } : {}) }),
    ]);
  }
  if (lease.released) return ok(state, noted.boot, noted.events);
  return ok({ ...state, lease: write(lease, { released: true }) }, noted.boot, [
    ...noted.events,
    leaseEvent('released', input.host, { generation: lease.generation }),
  ]);
}

// ---------------------------------------------------------------------------------------
// forced transfer and maintenance (admin)

/**
 * Forced failover: `to` gets generation + 1 behind the old holder's lock-delay. A target not
 * heard from within its heartbeat interval is refused (`target-silent`) unless `force`.
 */
export function transfer(state: ArbiterState, ctx: Context, input: TransferRequest): Step<Verdict> {
  const lease = state.lease;
  if (!isCandidate(ctx.settings, input.to)) {
    return refuse(state, ctx.boot, 'not-candidate', 'acquire-refused', input.to, [], { via: 'transfer' });
  }
  if (lease.holder === input.to && !isExpired(lease, ctx.now)) {
    return refuse(state, ctx.boot, 'same-holder', 'acquire-refused', input.to, [], { via: 'transfer' });
  }
  const silent = input.force === true ? null : targetSilence(state, ctx, input.to);
  if (silent !== null) {
    return refuse(state, ctx.boot, 'target-silent', 'acquire-refused', input.to, [], { via: 'transfer', ...silenceData(input.to, silent, 'to') });
  }
  const from = lease.holder === input.to ? null : lease.holder;
  const next = grant(state, ctx, ctx.boot, input.to, lockDelayUntil(state, ctx, from), from);
  return ok({ ...state, lease: next }, ctx.boot, [
    leaseEvent('promoted', input.to, { generation: next.generation, from, notBefore: next.notBefore, via: 'transfer' }),
  ]);
}

// ---------------------------------------------------------------------------------------
// the step-down acknowledgement

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
  return ctx.now < startWaitUntil(ctx, ctx.boot) && allReported(ctx, ctx.boot) && nothingNewer(state, ctx, d.generation);
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
  return state.floor <= l.generation && l.generation === g + 1 && l.acquiredAt !== null && l.acquiredAt > ctx.boot.startAt;
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
function ackRefusal(state: ArbiterState, ctx: Context, host: Host, generation: number, revision: number, ran: boolean): StepDownRefusal | null {
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
    const event = leaseEvent('step-down-refused', input.host, { reason, generation: input.generation, revision: input.revision, holder: lease.holder });
    return { next: state, boot: noted.boot, events: [...noted.events, event], answer: { ok: false, reason } };
  }
  const d = lease.displaced as Displaced;
  const was = lease.notBefore as number;
  const until = ackedUntil(state, d, ctx, ran);
  const savedSeconds = was - until;
  const next = write(lease, { notBefore: until, displaced: { ...d, acknowledgedAt: ctx.now, savedSeconds: savedSeconds + (d.savedSeconds ?? 0) } });
  const event = leaseEvent('stepped-down', input.host, { generation: input.generation, holder: lease.holder, to: lease.generation, notBefore: until, savedSeconds, ...(ran ? { ran: true } : {}) });
  return { next: { ...state, lease: next }, boot: noted.boot, events: [...noted.events, event], answer: { ok: true, savedSeconds, notBefore: until } };
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

/** The refusal event's data for a silent target; `message` is what the HTTP answer says. */
function silenceData(target: Host, s: Silence, key: 'handoverTo' | 'to'): LeaseEvent['data'] {
  return { [key]: target, lastHeartbeatAt: s.lastHeartbeatAt, heartbeatSeconds: s.heartbeatSeconds, graceSeconds: s.graceSeconds, message: s.message };
}

export function setMaintenance(state: ArbiterState, ctx: Context, input: MaintenanceRequest): Step<Verdict> {
  const reason = input.enabled ? (input.reason ?? null) : null;
  const lease = write(state.lease, { maintenance: input.enabled, maintenanceReason: reason });
  return ok({ ...state, lease }, ctx.boot, [leaseEvent('maintenance', null, { enabled: input.enabled, reason }, 'control')]);
}

// ---------------------------------------------------------------------------------------
// import of the old system's record (elanous HQ)

/** The old system's lease record, as the shell read it; times are arbiter epoch seconds. */
export interface OldLease {
  readonly holder: Host | null;
  readonly generation: number;
  /** The end of its holder's validity as the record says it; null when the record does not say. */
  readonly expiresAt: number | null;
  /** The old TTL: a renewal racing the import may extend the old validity by this much. */
  readonly ttlSeconds: number;
  readonly released: boolean;
}

export type ImportAnswer =
  | { readonly ok: true; readonly floor: number; readonly granted: { readonly holder: Host; readonly generation: number; readonly notBefore: number } | null }
  | { readonly ok: false; readonly reason: 'already-granted' | 'not-candidate'; readonly holder: Host | null; readonly generation: number };

/**
 * Takes over from the old system, on a new installation only.
 * 1. An installation that already granted is refused: its generations are hq's own.
 * 2. The old generation raises the floor as an agent's report does (S1), reported by the
 *    arbiter's own name so that it counts as no candidate's report for S2.3/S2.4.
 * 3. A live old holder keeps HQ: it is granted the next generation, above every old one, behind
 *    a lock-delay that outlasts the old validity — the record's end, or a renewal racing the
 *    import (now + the old TTL), plus one margin — so a job still running under the old lease
 *    ends before the first hq one may start. It must be a candidate.
 * 4. No live old holder: the floor alone; the operator acquires afresh.
 */
export function importOld(state0: ArbiterState, ctx: Context, old: OldLease): Step<ImportAnswer> {
  const current = state0.lease;
  if (current.generation > 0) {
    return { next: state0, boot: ctx.boot, events: [], answer: { ok: false, reason: 'already-granted', holder: current.holder, generation: current.generation } };
  }
  const live = old.holder !== null && !old.released && (old.expiresAt === null || old.expiresAt > ctx.now);
  if (live && !isCandidate(ctx.settings, old.holder as Host)) {
    return { next: state0, boot: ctx.boot, events: [], answer: { ok: false, reason: 'not-candidate', holder: old.holder, generation: old.generation } };
  }
  const noted = noteReport(state0, ctx, ctx.boot, ctx.settings.arbiter, old.generation, undefined);
  const state = noted.state;
  const imported = (granted: { holder: Host; generation: number; notBefore: number } | null): LeaseEvent =>
    leaseEvent('imported', old.holder, { from: 'elanous', oldGeneration: old.generation, floor: state.floor, granted: granted?.generation ?? null, notBefore: granted?.notBefore ?? null }, 'control');
  if (!live) {
    return { next: state, boot: noted.boot, events: [...noted.events, imported(null)], answer: { ok: true, floor: state.floor, granted: null } };
  }
  const holder = old.holder as Host;
  const oldValidity = Math.max(old.expiresAt ?? -Infinity, ctx.now + old.ttlSeconds);
  const lease = grant(state, ctx, noted.boot, holder, oldValidity + ctx.settings.safetyMarginSeconds, null);
  const granted = { holder, generation: lease.generation, notBefore: lease.notBefore as number };
  return {
    next: { ...state, lease },
    boot: noted.boot,
    events: [...noted.events, imported(granted), leaseEvent('acquired', holder, { generation: lease.generation, notBefore: lease.notBefore, from: null, via: 'import' })],
    answer: { ok: true, floor: state.floor, granted },
  };
}

// ---------------------------------------------------------------------------------------
// check (the only path to promotion)

export interface Probe {
  readonly ping: boolean;
  readonly health: boolean;
}

/**
 * The first candidate in priority order (never the holder) whose view is about this holder,
 * taken during its tenure and fresher than `viewFreshSeconds`, says unreachable, and who
 * reports no confirmation of this holder within `viewFreshSeconds` (S5).
 */
export function promotee(state: ArbiterState, ctx: Context): Host | null {
  const { lease } = state;
  if (lease.holder === null) return null;
  const preferred = ctx.settings.standby ?? null;
  const order = preferred !== null && ctx.settings.candidates.includes(preferred) ? [preferred, ...ctx.settings.candidates.filter((c) => c !== preferred)] : ctx.settings.candidates;
  for (const candidate of order) {
    if (candidate === lease.holder) continue;
    const o = state.observers.get(candidate);
    if (o === undefined || o.view === null) continue;
    const v = o.view;
    if (v.target !== lease.holder || v.reachable) continue;
    if (ctx.now - v.at > ctx.settings.viewFreshSeconds) continue;
    // Evidence from an earlier life of the arbiter does not count (its clock may have jumped).
    if (v.at <= ctx.boot.startAt) continue;
    if (lease.acquiredAt !== null && v.at < lease.acquiredAt) continue;
    const c = o.confirmation;
    if (c !== null && c.holder === lease.holder && ctx.now - c.at <= ctx.settings.viewFreshSeconds) continue;
    return candidate;
  }
  return null;
}

/**
 * One check. 1. Without a holder there is nothing to probe. 2. The arbiter's own view is
 * recorded. 3. A reachable holder resets the streak. 4. An unreachable holder with an eligible
 * promotee extends it; without one the streak resets. 5. At `promoteAfterChecks`, outside
 * maintenance, the promotee is granted behind the old holder's lock-delay.
 */
export function check(state: ArbiterState, ctx: Context, probe: Probe | null): Step<CheckAnswer> {
  const { lease } = state;
  const { now, settings } = ctx;
  if (lease.holder === null || probe === null) {
    const next = write(lease, { lastCheckAt: now, dualUnreachableStreak: 0 });
    return {
      next: { ...state, lease: next },
      boot: ctx.boot,
      events: [leaseEvent('arbiter-check', lease.holder, { streak: 0, holder: lease.holder, probed: false }, 'control')],
      answer: { promoted: false, streak: 0, holder: lease.holder, generation: lease.generation, ping: false, health: false, promotee: null },
    };
  }
  const holder = lease.holder;
  const reachable = probe.ping || probe.health;
  const observers = new Map(state.observers);
  const own = observers.get(settings.arbiter) ?? NO_OBSERVER;
  observers.set(settings.arbiter, { ...own, view: { target: holder, reachable, ping: probe.ping, health: probe.health, at: now } });
  const withView: ArbiterState = { ...state, observers };
  const candidate = reachable ? null : promotee(withView, ctx);
  const streak = candidate === null ? 0 : lease.dualUnreachableStreak + 1;
  const checkEvent = leaseEvent('arbiter-check', holder, { streak, ping: probe.ping, health: probe.health, promotee: candidate }, 'control');
  if (candidate !== null && streak >= settings.promoteAfterChecks && !lease.maintenance) {
    const next = grant(withView, ctx, ctx.boot, candidate, lockDelayUntil(withView, ctx, holder), holder);
    return {
      next: { ...withView, lease: { ...next, lastCheckAt: now } },
      boot: ctx.boot,
      events: [checkEvent, leaseEvent('promoted', candidate, { generation: next.generation, from: holder, notBefore: next.notBefore, streak })],
      answer: { promoted: true, streak, holder: candidate, generation: next.generation, ping: probe.ping, health: probe.health, promotee: candidate },
    };
  }
  const next = write(lease, { lastCheckAt: now, dualUnreachableStreak: streak });
  return {
    next: { ...withView, lease: next },
    boot: ctx.boot,
    events: [checkEvent],
    answer: { promoted: false, streak, holder, generation: lease.generation, ping: probe.ping, health: probe.health, promotee: candidate },
  };
}

// ---------------------------------------------------------------------------------------

function ok(next: ArbiterState, boot: Boot, events: readonly LeaseEvent[]): Step<Verdict> {
  return { next, boot, events, answer: { ok: true } };
}

function refuse(
  state: ArbiterState,
  boot: Boot,
  reason: LeaseRefusal,
  event: 'acquire-refused' | 'renew-refused' | 'release-refused',
  host: Host,
  events: readonly LeaseEvent[],
  data: LeaseEvent['data'] = {},
): Step<Verdict> {
  return { next: state, boot, events: [...events, leaseEvent(event, host, { reason, ...data })], answer: { ok: false, reason } };
}
