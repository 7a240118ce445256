/**
 * The agent's shell around lease-core is these parts, each along one seam:
 *  - store.ts: the state and its disk — decide → persist (fsync) → swap → log, one at a time;
 *  - fence.ts: the fence from memory, and the socket's fence answer (fast path and route);
 *  - arbiter-link.ts: heartbeats and lease reads, one exchange in flight at a time;
 *  - peers.ts: peer confirmation, asked (the holder, arbiter down) and given (a standby);
 *  - runs.ts: the fenced children the supervisors registered;
 *  - step-down.ts: ending them and telling the arbiter when this host lost the lease.
 * `openAgent` opens them in order and wires them to each other; the daemon hands each listener
 * the parts it serves (servers.ts), and the summaries are functions of them (summaries.ts).
 */
import type { AgentSettings } from '@hq/lease-core';
import type { StampClock as Clock, Timers } from '@hq/runtime/clock';
import type { ProbeResult } from '@hq/runtime/probe';
import type { AgentConfig } from '../config.js';
import { TokenFile } from '../tokens.js';
import { ArbiterLink } from './arbiter-link.js';
import { Fence } from './fence.js';
import type { AgentObserver, Log } from './observe.js';
import { Peers } from './peers.js';
import { Runs } from './runs.js';
import { StepDowns } from './step-down.js';
import { AgentStore } from './store.js';

export type { AgentObserver, Log } from './observe.js';

export type ResolvedConfig = AgentConfig & { readonly arbiterUrl: string };

export interface AgentOptions {
  readonly config: ResolvedConfig;
  readonly clock: Clock;
  readonly log: Log;
  readonly observer?: AgentObserver;
  /** Replaces the ping ⊕ health probe (tests). */
  readonly probe?: (target: string) => Promise<ProbeResult>;
  /** The timers of the fence's long polls (tests; default the real ones). */
  readonly timers?: Timers;
  /** The timers of the arbiter link (refresh, extra heartbeats) and of the runs' polls (tests; default the real ones). */
  readonly linkTimers?: Timers;
}

/** The agent: its parts, open and wired, not yet heartbeating (`link.start()` starts it). */
export interface AgentParts {
  readonly config: ResolvedConfig;
  /** This machine's name (the config's `hostName`). */
  readonly host: string;
  readonly clock: Clock;
  readonly log: Log;
  readonly settings: AgentSettings;
  readonly store: AgentStore;
  readonly fence: Fence;
  readonly link: ArbiterLink;
  readonly peers: Peers;
  readonly runs: Runs;
  readonly stepDowns: StepDowns;
  /** The member token (heartbeats, the registry). */
  readonly token: TokenFile;
  /** The peer token (confirmations asked and given, standby replication). */
  readonly peerToken: TokenFile;
}

/** Opens the state (see `AgentStore.open`: a refused file fails closed), then each part in the order they use each other. */
export async function openAgent(opts: AgentOptions): Promise<AgentParts> {
  const { config, clock, log, observer } = opts;
  const settings: AgentSettings = {
    host: config.hostName,
    requestTimeoutSeconds: config.requestTimeoutSeconds,
    failOpenRoles: config.failOpenRoles,
  };
  const { store, given } = await AgentStore.open({ stateDir: config.stateDir, settings, clock, log });
  const token = new TokenFile(config.tokenFile);
  const peerToken = new TokenFile(config.peerTokenFile);
  const peers = new Peers({ config, settings, store, clock, log, observer, peerToken, given });
  const shared = { settings, clock, log, observer };
  const fence = new Fence({ ...shared, memory: store, roles: config.roles, timers: opts.timers });
  // A long poll on the fence learns of every change of the state at once.
  store.onCommit(() => fence.changed());
  const link = new ArbiterLink({ ...shared, config, store, peers, token, probe: opts.probe, timers: opts.linkTimers });
  const runs = new Runs({ fence: (role) => fence.decide(role), clock, timers: opts.linkTimers, log });
  const stepDowns = new StepDowns({ ...shared, store, runs, link, peers });
  return {
    config,
    host: config.hostName,
    clock,
    log,
    settings,
    store,
    fence,
    link,
    peers,
    runs,
    stepDowns,
    token,
    peerToken,
  };
}

/** Stops heartbeating, lets an acknowledgement under way finish, and waits for the last write. */
export async function stopAgent(parts: Pick<AgentParts, 'link' | 'stepDowns' | 'store'>): Promise<void> {
  await parts.link.stop();
  await parts.stepDowns.idle();
  await parts.store.drain();
}
