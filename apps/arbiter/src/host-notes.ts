/**
 * What the arbiter remembers of its hosts beside the lease record: each host's version, its
 * paths to its peers, its timing problems, the last request refused for its name, and the last
 * refused generation. In memory only: after a restart every agent says them again with its next
 * heartbeat. The status page, /metrics and hq doctor (through /v1/status) read them; a change
 * worth an operator's notice is told once (an event, a log line), never once per heartbeat.
 */
import type { ArbiterState, GenerationRefusal } from '@hq/lease-core';
import { upgradeNote, type PeerPathReport, type TimingProblem } from '@hq/protocol';
import type { SecondsClock } from '@hq/runtime/clock';
import type { ArbiterConfig } from './config.js';
import type { EventSink } from './events.js';
import type { EventInput } from './store/store.js';
import { TimingNotes, failoverOf } from './timing.js';

/** One candidate's path to a peer as its probes last found it; `since` in arbiter time. */
export interface PeerPath {
  readonly ok: boolean;
  readonly problem: string | null;
  readonly since: number;
}

/** The last refused generation, for the status page and `hq doctor`. */
export interface GenerationRefusalNote {
  readonly at: number;
  readonly host: string | null;
  readonly kind: GenerationRefusal['kind'];
  /** The generation refused: the report, or the grant above the ceiling. */
  readonly generation: number;
  readonly message: string;
}

export interface HostVersion {
  readonly protocol: number;
  readonly release: string | null;
}

export interface HostNotesDeps {
  readonly config: ArbiterConfig;
  readonly clock: SecondsClock;
  readonly sink: EventSink;
  /** Writes shell-side events to the log, then logs and hooks them (`Arbiter.note`). */
  readonly tell: (events: readonly EventInput[]) => Promise<void>;
}

export class HostNotes {
  private readonly refused = new Map<string, { at: number; message: string }>();
  private readonly versions = new Map<string, HostVersion>();
  /** host → peer → finding. */
  private readonly peerPaths = new Map<string, Map<string, PeerPath>>();
  private readonly timingNotes = new TimingNotes();
  private lastFailover: string | null = null;
  private lastGenerationRefusal: GenerationRefusalNote | null = null;

  constructor(private readonly deps: HostNotesDeps) {}

  private isCandidate(host: string): boolean {
    return this.deps.config.candidates.includes(host);
  }

  /** A member token of another machine acting for `host` (403 wrong host): the page shows it. */
  noteRefused(host: string, message: string): void {
    if (this.isCandidate(host)) this.refused.set(host, { at: this.deps.clock.now(), message });
  }

  refusedFor(host: string): { at: number; message: string } | null {
    return this.refused.get(host) ?? null;
  }

  /** A report or grant the generation bounds refused; its host's row says it too. */
  noteGenerationRefusal(note: GenerationRefusalNote): void {
    this.lastGenerationRefusal = note;
    if (note.host !== null) this.noteRefused(note.host, note.message);
  }

  generationRefusal(): GenerationRefusalNote | null {
    return this.lastGenerationRefusal;
  }

  /** The protocol version and release a heartbeat said; a change is logged once. */
  noteVersion(host: string, protocol: number, release: string | null): void {
    const was = this.versions.get(host);
    if (was?.protocol === protocol && was.release === release) return;
    this.versions.set(host, { protocol, release });
    this.deps.sink.say(
      { event: 'host-version', host, protocol, release, upgrade: upgradeNote(host, protocol, release) },
      'host version',
    );
  }

  versionOf(host: string): HostVersion | null {
    return this.versions.get(host) ?? null;
  }

  /** Every host heard so far and its version (`hq_host_version`). */
  hostVersions(): ReadonlyMap<string, HostVersion> {
    return this.versions;
  }

  /**
   * A heartbeat's `peerPaths`: a path that broke or works again is an event once (log, timeline,
   * hook). Resolves undefined when nothing changed (no promise per report).
   */
  notePeerPaths(host: string, reports: readonly PeerPathReport[] | undefined): Promise<void> | undefined {
    if (reports === undefined || !this.isCandidate(host)) return undefined;
    const at = this.deps.clock.now();
    const was = this.peerPaths.get(host);
    const next = new Map<string, PeerPath>();
    const events: EventInput[] = [];
    for (const r of reports) {
      const before = was?.get(r.peer);
      if (before !== undefined && before.ok === r.ok && before.problem === r.problem) {
        next.set(r.peer, before);
        continue;
      }
      next.set(r.peer, { ok: r.ok, problem: r.problem, since: at - r.ageSeconds });
      if (!r.ok)
        events.push({
          at,
          category: 'hq.lease',
          event: 'peer-path-broken',
          host,
          data: { peer: r.peer, problem: r.problem },
        });
      else if (before !== undefined)
        events.push({ at, category: 'hq.lease', event: 'peer-path-ok', host, data: { peer: r.peer } });
    }
    this.peerPaths.set(host, next);
    return events.length === 0 ? undefined : this.deps.tell(events);
  }

  /** Every candidate's paths to its peers as last reported (host → peer → finding). */
  peerPathsOf(): ReadonlyMap<string, ReadonlyMap<string, PeerPath>> {
    return this.peerPaths;
  }

  /**
   * After a report: a change of `host`'s cross-side problems is recorded once (event, warn log,
   * hook), and a change of the worst-case failover it implies is logged once.
   */
  noteTiming(host: string, problems: readonly TimingProblem[], state: ArbiterState): Promise<void> | undefined {
    const change = this.timingNotes.change(host, problems);
    // Nearly every report changes nothing: then nothing is awaited (no promise per heartbeat).
    if (change === null) {
      this.noteFailover(state);
      return undefined;
    }
    const event = { at: this.deps.clock.now(), category: 'control', event: change.event, host, data: change.data };
    return this.deps.tell([event]).then(() => this.noteFailover(state));
  }

  private noteFailover(state: ArbiterState): void {
    const f = failoverOf(this.deps.config, state);
    if (f.text === this.lastFailover) return;
    this.lastFailover = f.text;
    this.deps.sink.say(
      { event: 'failover-estimate', failoverSeconds: f.seconds, failover: f.text },
      'worst-case failover',
    );
  }
}
