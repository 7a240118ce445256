/**
 * The receiving side of replication as the agent daemon wires it onto its peer listener — the
 * only replication module the daemon loads, and only when a replication block is configured.
 * It reaches the receiver, its routes and the config check; never the sending side (snapshot,
 * push, survival, promote), which is `hq standby …` (cli/standby.ts).
 *
 *   await registerStandby(peerApp, { block: config.replication, stateDir: config.stateDir,
 *     peerToken: agent.peerToken, seenGeneration: () => agent.snapshot().seen, log });
 *
 * The peer token is re-read through the agent's `TokenFile` on every request (rotation needs no
 * restart) and compared in constant time; the agent's seen generation is the receiver's floor.
 */
import type { FastifyInstance } from 'fastify';
import { peerTokenMatches, type TokenRead } from '../tokens.js';
import { resolveReplication, validateReplication, type ReplicationConfig } from './config.js';
import { StandbyReceiver, type ReceiverLog } from './receiver.js';
import { replicationPeerRoutes, type ReplicationPeerRoutesOptions } from './routes.js';

/** Checks and resolves the agent's `replication` block (a ConfigError names the key), opens the receiver, registers its routes. */
export async function registerStandby(
  peer: FastifyInstance,
  input: {
    readonly block: unknown;
    readonly stateDir: string;
    readonly peerToken: { get(): Promise<TokenRead> };
    readonly seenGeneration: () => number | Promise<number>;
    /** Asks the arbiter now (a heartbeat): a push from a holder granted since the last refresh. */
    readonly learnGeneration?: () => Promise<unknown>;
    readonly log: ReceiverLog;
  },
): Promise<void> {
  const replication = resolveReplication(validateReplication(input.block), input.stateDir);
  await peer.register(
    replicationPeerRoutes,
    await standbyPeerOptions({
      replication,
      peerToken: input.peerToken,
      seenGeneration: input.seenGeneration,
      ...(input.learnGeneration === undefined ? {} : { learnGeneration: input.learnGeneration }),
      log: input.log,
    }),
  );
}

export async function standbyPeerOptions(input: {
  readonly replication: ReplicationConfig;
  readonly peerToken: { get(): Promise<TokenRead> };
  /** The agent's seen generation: the floor under the accepted mark, and the most a push may claim. */
  readonly seenGeneration: () => number | Promise<number>;
  readonly learnGeneration?: () => Promise<unknown>;
  readonly log?: ReceiverLog;
}): Promise<ReplicationPeerRoutesOptions> {
  const receiver = await StandbyReceiver.open({
    standbyDir: input.replication.standbyDir,
    keep: input.replication.keep,
    seenGeneration: input.seenGeneration,
    knownGeneration: input.seenGeneration,
    ...(input.learnGeneration === undefined ? {} : { learnGeneration: input.learnGeneration }),
    ...(input.log === undefined ? {} : { log: input.log }),
  });
  return {
    receiver,
    verifyPeer: (authorization) => peerTokenMatches(input.peerToken, authorization),
  };
}
