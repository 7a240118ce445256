/**
 * The agent's heartbeat, decided: what it reports to the arbiter, and whether the holder then
 * asks its peers to confirm it (rule ③, L2). Pure: the shell probes the holder when
 * `heartbeatProbe` names one, sends `heartbeatContent`, folds the answer into its state
 * (`onArbiterAnswer` / `onArbiterFailure`, agent.ts), persists, and only then asks
 * `asksPeers` with what the exchange was.
 *
 * Guarantees:
 *  H1  The holder reports the generation it renews and nothing it saw of others; a standby
 *      reports its view of the holder and the last confirmation it gave, never a generation.
 *  H2  A reported confirmation's age is measured on the monotonic clock (A2) and is never
 *      negative, so the arbiter's estimate of when it was given can only be late (S2.1).
 *  H3  The holder asks its peers only when the arbiter failed (no answer, or a 5xx) or renewed
 *      behind a hold (S2.3), and never for a record whose floor is pending (S2.4).
 */
import type { AgentState, ArbiterAnswer, Stamp } from './agent.js';
import { fieldsOf, type ConfirmationReport, type HeartbeatRequest, type Host, type ViewReport } from '@hq/protocol';
import type { Cadence } from './timing.js';

/** The part of this agent's cadence a heartbeat reports (S6: the agent owns it; the probe timeout stays home). */
export type ReportedCadence = Pick<Cadence, 'heartbeatSeconds' | 'refreshSeconds' | 'requestTimeoutSeconds'>;

/**
 * The last confirmation this agent gave, as the shell remembers it once lease-core's `gave`
 * has ended (its wait is over, or the agent restarted with it in local.json): `atMono` is the
 * monotonic reading it was given at, or no earlier than that (the start, for one read back).
 */
export interface GivenConfirmation {
  readonly holder: Host;
  readonly generation: number;
  readonly atMono: number;
}

/** The host a standby probes before its heartbeat (its view): the known holder, unless that is itself. */
export function heartbeatProbe(state: AgentState): Host | null {
  const holder = state.known?.holder ?? null;
  return holder === null || holder === state.host ? null : holder;
}

/** The confirmation to report (H2): the one whose wait still runs, else the last one remembered. */
export function confirmationToReport(
  state: AgentState,
  given: GivenConfirmation | null,
  now: Stamp,
): ConfirmationReport | null {
  if (state.gave !== null)
    return {
      holder: state.gave.holder,
      generation: state.gave.generation,
      ageSeconds: Math.max(0, now.mono - state.gave.at.mono),
    };
  if (given !== null)
    return { holder: given.holder, generation: given.generation, ageSeconds: Math.max(0, now.mono - given.atMono) };
  return null;
}

/**
 * What a heartbeat tells the arbiter (H1): this host, its seen generation and its cadence, then
 * 1. the holder: the generation it renews; 2. a standby: its view of the holder (when it probed
 * one) and the last confirmation it gave (when there is one).
 */
export function heartbeatContent(
  state: AgentState,
  cadence: ReportedCadence,
  view: ViewReport | null,
  confirmation: ConfirmationReport | null,
): HeartbeatRequest {
  const base = { host: state.host, seenGeneration: state.seen, ...cadence };
  const known = state.known;
  if (known !== null && known.holder === state.host) return { ...base, generation: known.generation };
  return { ...base, ...(view === null ? {} : { view }), ...(confirmation === null ? {} : { confirmation }) };
}

/** One exchange with the arbiter, as the agent saw it. */
export type ArbiterExchange =
  /** No answer in time (the network, a timeout). */
  | { readonly kind: 'no-answer' }
  /** An answer other than 200. */
  | { readonly kind: 'refused'; readonly status: number }
  /** A 200 whose body the agent could not read. */
  | { readonly kind: 'invalid' }
  | { readonly kind: 'answered'; readonly answer: ArbiterAnswer };

/** The arbiter failed rather than refused: no answer, or a 5xx (it could not decide). */
export function arbiterDown(exchange: ArbiterExchange): boolean {
  return exchange.kind === 'no-answer' || (exchange.kind === 'refused' && exchange.status >= 500);
}

/**
 * Whether the holder asks its peers to confirm it after a heartbeat (H3, rule ③, L2): when the
 * arbiter failed, or renewed behind a hold (S2.3). Never for a record whose floor is pending
 * (S2.4): such a grant makes no validity from peers anyway, and a peer that adopted its
 * generation as seen would report it back and raise the grant above itself. `state` is the
 * state after the exchange was folded in.
 */
export function asksPeers(state: AgentState, exchange: ArbiterExchange): boolean {
  const heldRenewal =
    exchange.kind === 'answered' &&
    exchange.answer.confirms &&
    exchange.answer.hold !== null &&
    exchange.answer.hold > exchange.answer.record.now;
  if (!heldRenewal && !arbiterDown(exchange)) return false;
  const k = state.known;
  return (
    k !== null &&
    k.holder === state.host &&
    !k.released &&
    !k.floorPending &&
    !state.stale &&
    k.generation > state.steppedDown
  );
}

/**
 * Whether a record read between heartbeats (`GET /v1/lease`) asks this host for a heartbeat now:
 * the record's `wait` names it among the candidates whose report the start wait or a pending
 * floor still needs, or the start wait holds a move away from it, every report is in, and only
 * its step-down acknowledgement is missing (the arbiter asks for that in a heartbeat's answer).
 * Otherwise that report would come at the next cron tick — ten minutes at the defaults — and a
 * planned move right after an arbiter restart would wait for it. Liveness only: a heartbeat
 * never lets anything run that would not run anyway.
 */
export function reportWanted(lease: unknown, host: Host): boolean {
  const r = fieldsOf(lease);
  const w = fieldsOf(r.wait);
  const unreported = Array.isArray(w.unreported) ? w.unreported : [];
  if (unreported.includes(host)) return true;
  const d = fieldsOf(r.displaced);
  return w.kind === 'start-wait' && unreported.length === 0 && d.host === host && d.acknowledgedAt === null;
}
