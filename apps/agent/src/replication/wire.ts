/**
 * Wiring for the agent's peer listener, in one call:
 *
 *   const repl = loadAgentWithReplication(file).replication;          // or from the agent's own config load
 *   if (repl !== null) app.register(replicationPeerRoutes, await standbyPeerOptions({
 *     replication: repl, peerToken: agent.peerToken, seenGeneration: () => agent.snapshot().seen, log }));
 *
 * The peer token is re-read through the agent's `TokenFile` on every request (rotation needs no
 * restart) and compared in constant time; the agent's seen generation is the receiver's floor.
 */
import { peerTokenMatches, type TokenRead } from '../tokens.js';
import type { ReplicationConfig } from './config.js';
import { StandbyReceiver, type ReceiverLog } from './receiver.js';
import type { ReplicationPeerRoutesOptions } from './routes.js';

export async function standbyPeerOptions(input: {
  readonly replication: ReplicationConfig;
  readonly peerToken: { get(): Promise<TokenRead> };
  readonly seenGeneration?: () => number | Promise<number>;
  readonly log?: ReceiverLog;
}): Promise<ReplicationPeerRoutesOptions> {
  const receiver = await StandbyReceiver.open({
    standbyDir: input.replication.standbyDir,
    keep: input.replication.keep,
    ...(input.seenGeneration === undefined ? {} : { seenGeneration: input.seenGeneration }),
    ...(input.log === undefined ? {} : { log: input.log }),
  });
  return {
    receiver,
    verifyPeer: (authorization) => peerTokenMatches(input.peerToken, authorization),
  };
}
