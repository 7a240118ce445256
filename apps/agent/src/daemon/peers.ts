/**
 * Peer confirmation (rule ③, L2), both ways, decided by lease-core:
 *  - `ask`: the arbiter is down (or renewed behind a hold) and this host holds the lease; every
 *    standby peer is asked to confirm it, and `onPeerResults` decides whether the answers make
 *    a validity;
 *  - `confirm`: a peer asks this agent; `onConfirmRequest` decides, the store persists
 *    `gaveConfirmation` (fsync), and only then is the answer returned (S2.2).
 * The peers are the configured ones, or the other candidates the arbiter names.
 */
import {
  onConfirmRequest,
  onPeerResults,
  type AgentSettings,
  type GivenConfirmation,
  type Known,
  type PeerResult,
} from '@hq/lease-core';
import { fieldsOf, isGeneration, type ConfirmAnswer, type ConfirmRequest, type PeerPathReport } from '@hq/protocol';
import { peersFromCandidates, type AgentConfig } from '../config.js';
import type { StampClock as Clock } from '@hq/runtime/clock';
import { joinUrl, requestJson, type HttpResult } from '@hq/runtime/http';
import type { TokenFile } from '../tokens.js';
import type { AgentObserver, Log } from './observe.js';
import type { AgentStore } from './store.js';

export interface PeersOptions {
  readonly config: AgentConfig;
  readonly settings: AgentSettings;
  readonly store: AgentStore;
  readonly clock: Clock;
  readonly log: Log;
  readonly observer?: AgentObserver | undefined;
  readonly peerToken: TokenFile;
  /** The confirmation local.json kept at start, if any. */
  readonly given: GivenConfirmation | null;
}

export class Peers {
  /** Host → base URL of its peer listener (tailnet addresses unless configured). */
  private peers: ReadonlyMap<string, string>;
  private lastGiven: GivenConfirmation | null;

  constructor(private readonly o: PeersOptions) {
    this.peers = o.config.peers;
    this.lastGiven = o.given;
  }

  /** The peers' host names. */
  hosts(): string[] {
    return [...this.peers.keys()];
  }

  /** The last confirmation this agent gave, remembered past its wait (reported with heartbeats). */
  get given(): GivenConfirmation | null {
    return this.lastGiven;
  }

  /** The arbiter named the candidates: the peers are the others (unless configured). */
  setCandidates(candidates: readonly string[]): void {
    this.peers = peersFromCandidates(this.o.config, candidates);
  }

  /** Asks every peer to confirm `known` (this host's tenure); true when they made a validity. */
  async ask(known: Known): Promise<boolean> {
    const { generation, ttlSeconds, safetyMarginSeconds } = known;
    const peers = [...this.peers.entries()];
    const hosts = peers.map(([h]) => h);
    const t = await this.o.peerToken.get();
    if (!t.ok)
      this.o.log.warn(
        { category: 'hq.lease', event: 'peer-token-unavailable', problem: t.problem },
        'peer token unavailable',
      );
    const sent = this.o.clock.now();
    const results: PeerResult[] = await Promise.all(
      peers.map(async ([peer, url]): Promise<PeerResult> => {
        if (!t.ok) return { peer, answered: false };
        const r = await requestJson({
          method: 'POST',
          url: joinUrl(url, '/v1/peer/confirm'),
          body: { host: this.o.settings.host, generation, ttlSeconds, safetyMarginSeconds },
          token: t.token,
          timeoutSeconds: this.o.settings.requestTimeoutSeconds,
        });
        if (r.kind !== 'answer' || r.status !== 200) return { peer, answered: false };
        const b = fieldsOf(r.body);
        return {
          peer,
          answered: true,
          ...(typeof b.confirmed === 'boolean' ? { confirmed: b.confirmed } : {}),
          ...(isGeneration(b.generation) ? { generation: b.generation } : {}),
        };
      }),
    );
    const received = this.o.clock.now();
    const step = await this.o.store.commit((s) => onPeerResults(s, results, hosts, sent, received, this.o.settings));
    const ok = step.events.some((e) => e.event === 'quorum-standby');
    this.o.observer?.peerConfirm?.(ok ? 'confirmed' : 'not-confirmed');
    if (!ok) {
      this.o.log.warn(
        {
          category: 'hq.lease',
          event: 'no-quorum',
          generation,
          answers: results.map((r) => `${r.peer}:${r.answered ? String(r.confirmed) : 'no-answer'}`).join(','),
        },
        'peers did not confirm',
      );
    }
    return ok;
  }

  /** Each peer's path as the last probe found it (null = works, else the problem) and since when (monotonic seconds). */
  private paths = new Map<string, { readonly problem: string | null; readonly sinceMono: number }>();

  /** The last probe's findings, peer → problem (null: the path works). */
  get peerPaths(): ReadonlyMap<string, string | null> {
    return new Map([...this.paths].map(([peer, p]) => [peer, p.problem]));
  }

  /** True when the last probe found a path broken (then each lease read probes again, not only each heartbeat). */
  get anyBroken(): boolean {
    for (const p of this.paths.values()) if (p.problem !== null) return true;
    return false;
  }

  /** The findings as a heartbeat reports them (empty before the first probe). */
  peerPathReports(): PeerPathReport[] {
    const mono = this.o.clock.now().mono;
    return [...this.paths].map(([peer, p]) => ({
      peer,
      ok: p.problem === null,
      problem: p.problem,
      ageSeconds: Math.min(31_536_000, Math.max(0, mono - p.sinceMono)),
    }));
  }

  /**
   * Proves the confirmation path to every peer while nothing depends on it: `POST
   * /v1/peer/confirm` with `probe: true` (answered without granting). A peer token that differs,
   * a listener that is not reached, a peer that refuses: each is an error line when it starts
   * (and an info line when it ends), the metric, `GET /v1/status` (hq doctor) and the next
   * heartbeat (the arbiter's status page) — found now, not in an arbiter outage when the holder
   * would stop for want of a confirmation. Resolves true when a peer's finding changed.
   */
  async probe(): Promise<boolean> {
    const t = await this.o.peerToken.get();
    const found = await Promise.all(
      [...this.peers.entries()].map(async ([peer, url]): Promise<[string, string | null]> => {
        if (!t.ok) return [peer, `this host's peer token: ${t.problem}`];
        const r = await requestJson({
          method: 'POST',
          url: joinUrl(url, '/v1/peer/confirm'),
          body: { host: this.o.settings.host, generation: 1, probe: true },
          token: t.token,
          timeoutSeconds: this.o.settings.requestTimeoutSeconds,
        });
        return [peer, peerPathProblem(url, r)];
      }),
    );
    const mono = this.o.clock.now().mono;
    const next = new Map<string, { problem: string | null; sinceMono: number }>();
    let changed = found.length !== this.paths.size;
    for (const [peer, problem] of found) {
      const before = this.paths.get(peer);
      if (problem !== null && problem !== before?.problem)
        this.o.log.error(
          { category: 'hq.lease', event: 'peer-path-broken', peer, problem },
          `${peer} could not confirm this host in an arbiter outage`,
        );
      if (problem === null && before !== undefined && before.problem !== null)
        this.o.log.info(
          { category: 'hq.lease', event: 'peer-path-ok', peer },
          `the confirmation path to ${peer} works again`,
        );
      const same = before !== undefined && before.problem === problem;
      if (!same) changed = true;
      next.set(peer, same ? before : { problem, sinceMono: mono });
    }
    this.paths = next;
    return changed;
  }

  /** A peer asks this agent to confirm it: decided, persisted (fsync), then answered (S2.2). */
  async confirm(req: ConfirmRequest): Promise<ConfirmAnswer> {
    let answer: ConfirmAnswer | null = null;
    const step = await this.o.store.commit((s) => {
      const r = onConfirmRequest(s, req, this.o.clock.now(), this.o.settings);
      answer = r.answer;
      return r;
    });
    const a = answer as ConfirmAnswer | null;
    if (a === null) throw new Error('no answer');
    if (a.confirmed && step.state.gave !== null) {
      this.lastGiven = {
        holder: step.state.gave.holder,
        generation: step.state.gave.generation,
        atMono: step.state.gave.at.mono,
      };
    }
    return a;
  }
}

/** What a probe's answer says about the path to a peer: null when it works, else one line with the fix. */
export function peerPathProblem(url: string, r: HttpResult): string | null {
  if (r.kind === 'unreachable')
    return `${url} does not answer (${r.problem}): is hq-agent running there, and its port reachable from here?`;
  if (r.status === 200) return null;
  if (r.status === 401)
    return `${url} refuses this host's peer token (HTTP 401): the peer tokens differ; copy one peer-token file to the other host (mode 0600), or join both again`;
  // An agent of an earlier release refuses the probe field before it checks the token.
  if (r.status === 400)
    return `${url} refused the confirmation probe (HTTP 400): it runs an earlier hq that cannot be probed, so the path is not proven; upgrade it`;
  return `${url} answered HTTP ${r.status} to the confirmation probe`;
}
