/**
 * What the link makes of an arbiter's answer: a heartbeat's (it may confirm this host), a lease read's (the record
 * alone), or a failure (no answer, refused, unreadable), each one lease-core step committed to the store.
 */
import {
  arbiterDown,
  asksPeers,
  onArbiterAnswer,
  onArbiterFailure,
  parseRecord,
  type ArbiterAnswer,
  type ArbiterExchange,
  type Stamp,
} from '@hq/lease-core';
import {
  fieldsOf,
  isHeartbeatOutcome,
  type AgentHeartbeatOutcome,
  type HeartbeatAnswerRead,
  type HeartbeatReport,
} from '@hq/protocol';
import type { HttpResult } from '@hq/runtime/http';
import type { ArbiterCalls } from './arbiter-calls.js';
import type { LinkOptions } from './arbiter-link.js';

/** How an exchange ended, before the report names the record it left. */
interface Ending {
  readonly outcome: AgentHeartbeatOutcome;
  readonly status: number | null;
  readonly problem: string | null;
  readonly exchange: ArbiterExchange;
}

export class LinkAnswers {
  /** The last unreachable problem logged (null once the arbiter answered again). */
  unreachableSaid: string | null = null;

  constructor(
    private readonly o: LinkOptions,
    private readonly calls: ArbiterCalls,
  ) {}

  /** A heartbeat answer: it may confirm this host; then the holder may ask its peers. */
  async absorbHeartbeat(
    res: HttpResult,
    answer: HeartbeatAnswerRead | null,
    sent: Stamp,
    received: Stamp,
  ): Promise<HeartbeatReport> {
    let end: Ending;
    if (answer === null) end = await this.failed(res, 'heartbeat');
    else {
      const parsed = parseRecord(answer.lease);
      const o = answer.outcome;
      if (!parsed.ok) end = await this.invalid(parsed.problem, 'heartbeat');
      else if (!isHeartbeatOutcome(o)) end = await this.invalid('outcome missing or unknown', 'heartbeat');
      else {
        const confirms = o === 'renewed';
        const a: ArbiterAnswer = {
          record: parsed.value,
          confirms,
          hold: confirms ? answer.hold : null,
          stepDown: answer.stepDown,
        };
        await this.o.store.commit((s) => onArbiterAnswer(s, a, sent, received, this.o.settings));
        end = { outcome: o, status: 200, problem: null, exchange: { kind: 'answered', answer: a } };
      }
    }
    let peerConfirmation: HeartbeatReport['peerConfirmation'] = null;
    const k = this.o.store.state.known;
    if (k !== null && asksPeers(this.o.store.state, end.exchange))
      peerConfirmation = (await this.o.peers.ask(k)) ? 'confirmed' : 'not-confirmed';
    return this.report(end, received, answer?.timingProblems ?? [], answer?.failover ?? null, peerConfirmation);
  }

  /** A lease read: the record alone, never a confirmation. */
  async absorbLease(res: HttpResult, sent: Stamp, received: Stamp): Promise<HeartbeatReport> {
    let end: Ending;
    if (res.kind !== 'answer' || res.status !== 200) end = await this.failed(res, 'refresh');
    else {
      const parsed = parseRecord(res.body);
      if (!parsed.ok) end = await this.invalid(parsed.problem, 'refresh');
      else {
        const a: ArbiterAnswer = { record: parsed.value, confirms: false, hold: null };
        await this.o.store.commit((s) => onArbiterAnswer(s, a, sent, received, this.o.settings));
        end = {
          outcome: a.record.holder === this.o.settings.host ? 'renewed' : 'standby',
          status: 200,
          problem: null,
          exchange: { kind: 'answered', answer: a },
        };
      }
    }
    return this.report(end, received, [], null, null);
  }

  /** No answer, or not 200: the arbiter is marked unreachable (lease-core logs the transition). */
  private async failed(res: HttpResult, via: 'heartbeat' | 'refresh'): Promise<Ending> {
    if (res.kind === 'unreachable') {
      await this.o.store.commit((s) => onArbiterFailure(s));
      // Said once per new problem, also when the arbiter was never reached since the start.
      if (this.unreachableSaid !== res.problem) {
        this.unreachableSaid = res.problem;
        this.o.log.warn(
          { category: 'hq.lease', event: 'arbiter-unreachable', via, url: this.calls.url, problem: res.problem },
          `arbiter unreachable at ${this.calls.url}: ${res.problem}`,
        );
      } else this.o.log.debug({ category: 'hq.lease', via, problem: res.problem }, 'arbiter request failed');
      return { outcome: 'unreachable', status: null, problem: res.problem, exchange: { kind: 'no-answer' } };
    }
    const b = fieldsOf(res.body);
    let problem = typeof b.message === 'string' ? b.message : `HTTP ${res.status}`;
    if (res.status === 404) problem = (await this.calls.notAnArbiter()) ?? problem;
    const exchange: ArbiterExchange = { kind: 'refused', status: res.status };
    await this.o.store.commit((s) => onArbiterFailure(s));
    this.o.log.warn(
      { category: 'hq.lease', event: 'arbiter-refused', via, status: res.status, error: b.error ?? null, problem },
      'arbiter refused the request',
    );
    return { outcome: arbiterDown(exchange) ? 'unreachable' : 'refused', status: res.status, problem, exchange };
  }

  /** A 200 whose body does not read: treated as a failure, never acted on. */
  private async invalid(problem: string, via: 'heartbeat' | 'refresh'): Promise<Ending> {
    await this.o.store.commit((s) => onArbiterFailure(s));
    this.o.log.warn({ category: 'hq.lease', event: 'arbiter-invalid-answer', via, problem }, 'arbiter answer refused');
    return { outcome: 'invalid-answer', status: 200, problem, exchange: { kind: 'invalid' } };
  }

  private report(
    end: Ending,
    received: Stamp,
    timingProblems: readonly string[],
    failover: string | null,
    peerConfirmation: HeartbeatReport['peerConfirmation'],
  ): HeartbeatReport {
    const after = this.o.store.state;
    return {
      status: end.status,
      problem: end.problem,
      at: received.wall,
      timingProblems,
      failover,
      outcome: end.outcome,
      holder: after.known?.holder ?? null,
      generation: after.known?.generation ?? after.seen,
      peerConfirmation,
    };
  }
}
