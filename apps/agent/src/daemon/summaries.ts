/**
 * The summaries the listeners serve, read from the parts' memory (no I/O): the status
 * (`GET /v1/status`), the primary as this host knows it (`GET /v1/primary` on both listeners),
 * and what a peer asks of this host (`GET /v1/peer`).
 */
import { queryFence, settle, type AgentState } from '@hq/lease-core';
import { NEVER_FAIL_OPEN, type AgentStatus, type PeerInfo, type PrimaryAnswer } from '@hq/protocol';
import { VERSION } from '@hq/runtime/version';
import type { AgentParts } from './parts.js';

export type StatusParts = Pick<AgentParts, 'host' | 'clock' | 'settings' | 'store' | 'link' | 'peers' | 'runs'>;

export function agentStatus(p: StatusParts): AgentStatus {
  const now = p.clock.now();
  const { state: s, decision: d } = queryFence(p.store.state, NEVER_FAIL_OPEN, now, p.settings);
  const last = p.link.lastHeartbeat;
  return {
    host: p.host,
    version: VERSION,
    holder: s.known?.holder ?? null,
    generation: s.known?.generation ?? s.seen,
    seen: s.seen,
    known: s.known,
    run: d.run,
    reason: d.reason,
    validForSeconds: d.run ? d.validForSeconds : 0,
    arbiterOk: s.arbiterOk,
    stale: s.stale,
    lockDelaySeconds: s.waitUntilMono === Infinity ? null : Math.max(0, s.waitUntilMono - now.mono),
    floorPending: s.known?.floorPending ?? false,
    startGuardSeconds:
      s.startGuardUntilMono === null
        ? 0
        : Number.isFinite(s.startGuardUntilMono)
          ? Math.max(0, s.startGuardUntilMono - now.mono)
          : null,
    leaseTiming:
      s.known === null ? null : { ttlSeconds: s.known.ttlSeconds, safetyMarginSeconds: s.known.safetyMarginSeconds },
    cadence: p.link.cadence(),
    timingProblems: last?.timingProblems ?? [],
    tokenProblem: p.link.tokenProblem,
    failover: last?.failover ?? null,
    gaveConfirmation:
      s.gave === null
        ? null
        : {
            holder: s.gave.holder,
            generation: s.gave.generation,
            ageSeconds: now.mono - s.gave.at.mono,
            waitSeconds: Math.max(0, s.gave.untilMono - now.mono),
          },
    steppedDown: s.steppedDown,
    stepDownSeconds: p.runs.endBoundSeconds(),
    grant: s.current === null ? null : { generation: s.current.generation, source: s.current.source },
    pending:
      s.pending === null
        ? null
        : { generation: s.pending.generation, startsInSeconds: Math.max(0, s.pending.startMono - now.mono) },
    lastHeartbeat: last === null ? null : { ...last, ageSeconds: now.wall - last.at },
    peers: p.peers.hosts(),
    peerPaths: Object.fromEntries(
      [...p.peers.peerPaths].map(([peer, problem]) => [peer, { ok: problem === null, problem }]),
    ),
    uptimeSeconds: now.mono - s.started.mono,
  };
}

/** The primary as this host knows it; `generation` is the highest seen when no holder is known. */
export function primaryAnswer(s: AgentState): PrimaryAnswer {
  const k = s.known;
  return { known: k !== null && k.holder !== null, holder: k?.holder ?? null, generation: k?.generation ?? s.seen };
}

export function peerInfo(p: Pick<AgentParts, 'host' | 'clock' | 'store'>): PeerInfo {
  const s = settle(p.store.state, p.clock.now());
  return {
    host: p.host,
    holder: s.known?.holder ?? null,
    generation: s.known?.generation ?? 0,
    seenGeneration: s.seen,
    gaveConfirmation: s.gave === null ? null : { holder: s.gave.holder, generation: s.gave.generation },
  };
}
