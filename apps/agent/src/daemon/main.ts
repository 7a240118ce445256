/**
 * `hq-agent [--config F]`: load and check the config (one line and exit 2 when it is wrong, or
 * when its socket or peer port is taken),
 * open the state, listen on the socket and the peer port, heartbeat on the cron, and on
 * SIGTERM/SIGINT stop the timers, close the listeners, remove the socket and exit 0 — with
 * `handoverOnStop`, the holder first hands the lease to a standby (its children ended first).
 */
import { unlink } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { agentLogger, componentLogger } from './log.js';
import { advertisedUrl, ConfigError, loadConfigLazily, resolveNetwork } from '../config.js';
import { ensureDir } from '@hq/runtime/files';
import { ArbiterEndpoints } from '@hq/runtime/http';
import { TokenFile, tokenFileFix } from '../tokens.js';
import { stampClock, type StampClock } from '@hq/runtime/clock';
import { VERSION } from '@hq/runtime/version';
import { openAgent, stopAgent, type AgentParts, type ResolvedConfig } from './parts.js';
import { createMetrics, type AgentMetrics } from './metrics.js';
import type { Member } from '../registry-client/member.js';
import { listenSocket, peerApp, socketApp, SocketInUse } from './servers.js';

/**
 * A start-up that cannot go on although the config is valid: the socket or the peer port is
 * taken. Exit 2 as for a config error (something must change before a restart helps), but not
 * a `ConfigError`: nothing in the file is wrong. `key` names the setting to change.
 */
export class CannotStart extends Error {
  override name = 'CannotStart';
  constructor(
    readonly key: 'socketPath' | 'listen',
    message: string,
  ) {
    super(message);
  }
}

export interface DaemonHandle {
  readonly agent: AgentParts;
  readonly peerPort: number;
  /** `handover`: hand the lease over first when `handoverOnStop` is set (the signal path). */
  stop(opts?: { readonly handover?: boolean }): Promise<void>;
}

export async function startDaemon(
  configPath: string | undefined,
  clock: StampClock = stampClock,
): Promise<DaemonHandle> {
  const { config, log } = await checkedConfig(configPath);
  const metrics = createMetrics();
  const agent = await openAgent({
    config,
    clock,
    log: componentLogger(log, config.hostName, 'agent'),
    observer: metrics,
  });
  metrics.attach(agent);
  const { socket, peer } = await buildServers(agent, metrics, config, log);
  const peerPort = await listen(socket, peer, config);
  log.info(
    {
      category: 'hq.lease',
      event: 'agent-started',
      version: VERSION,
      socket: config.socketPath,
      peerPort,
      arbiterUrl: config.arbiterUrl,
      heartbeatCron: config.heartbeatCron,
    },
    'agent started',
  );
  await checkTokenWithArbiter(agent, socket, peer, config);
  agent.link.start();
  const members = await registerMembers(agent, config, log, peerPort);
  let stopping: Promise<void> | null = null;
  return {
    agent,
    peerPort,
    stop(opts = {}) {
      stopping ??= stopDaemon(agent, config, log, [socket, peer], members, opts.handover === true);
      return stopping;
    },
  };
}

/**
 * The config with its network resolved, checked as far as it can be before anything starts: the
 * state directory and the token file (a configuration that can never work stops here with the
 * fix, exit 2); a hostName that differs from the host file is logged.
 */
async function checkedConfig(configPath: string | undefined): Promise<{ config: ResolvedConfig; log: Logger }> {
  const config = await resolveNetwork(await loadConfigLazily(configPath));
  const log = agentLogger(config.hostName);
  const dirProblem = await ensureDir(config.stateDir, 0o700);
  if (dirProblem !== null) throw new ConfigError('stateDir', `stateDir: ${dirProblem}`);
  const token = await new TokenFile(config.tokenFile).get();
  if (!token.ok) {
    throw new ConfigError(
      'tokenFile',
      `tokenFile: ${token.problem}; ${tokenFileFix(token.problem, config.tokenFile, config.hostName)}`,
    );
  }
  if (config.hostMismatch !== null) {
    log.warn(
      {
        category: 'control',
        event: 'hostname-mismatch',
        hostName: config.hostName,
        hostFile: config.hostMismatch.file,
        hostFileName: config.hostMismatch.name,
        wins: 'config',
      },
      'hostName in the config differs from the host file; the config wins',
    );
  }
  return { config, log };
}

/** The socket's app and the peer listener's, each handed its parts, with standby replication on the peer one when configured. */
async function buildServers(
  agent: AgentParts,
  metrics: AgentMetrics,
  config: ResolvedConfig,
  log: Logger,
): Promise<{ socket: FastifyInstance; peer: FastifyInstance }> {
  const socket = socketApp(agent, metrics);
  const peer = peerApp(agent, metrics);
  if (config.replication !== undefined) {
    // Standby replication only when configured: its receiving side is loaded only then.
    const { registerStandby } = await import('../replication/wire.js');
    await registerStandby(peer, {
      block: config.replication,
      stateDir: config.stateDir,
      peerToken: agent.peerToken,
      seenGeneration: () => agent.store.state.seen,
      learnGeneration: () => agent.link.heartbeat(),
      log: componentLogger(log, config.hostName, 'standby', 'hq.standby'),
    });
  }
  return { socket, peer };
}

/** Listens on the socket, then the peer port (a taken one is CannotStart); answers the peer port bound. */
async function listen(socket: FastifyInstance, peer: FastifyInstance, config: ResolvedConfig): Promise<number> {
  try {
    await listenSocket(socket, config.socketPath, config.stateDir);
  } catch (err) {
    if (err instanceof SocketInUse) throw new CannotStart('socketPath', `socketPath: ${err.message}`);
    throw err;
  }
  try {
    await peer.listen({ host: config.listen.host, port: config.listen.port });
  } catch (err) {
    await socket.close();
    await unlink(config.socketPath).catch(() => undefined);
    throw new CannotStart(
      'listen',
      `listen: cannot listen on ${config.listen.host}:${config.listen.port}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const address = peer.server.address();
  return typeof address === 'object' && address !== null ? address.port : config.listen.port;
}

/**
 * The token against the arbiter, with the first heartbeat: a hostName that is not the token's
 * machine (403) or a token the arbiter does not know (401) can never work, so the agent stops
 * with the fix. An arbiter that cannot be reached now proves nothing (L2: the agent runs on its
 * peers); the check is then the running one.
 */
async function checkTokenWithArbiter(
  agent: AgentParts,
  socket: FastifyInstance,
  peer: FastifyInstance,
  config: ResolvedConfig,
): Promise<void> {
  const first = await agent.link.heartbeat();
  if (first.status !== 401 && first.status !== 403) return;
  await stopAgent(agent);
  await Promise.allSettled([socket.close(), peer.close()]);
  await unlink(config.socketPath).catch(() => undefined);
  if (first.status === 403) {
    throw new ConfigError(
      'hostName',
      `hostName: the arbiter refuses "${config.hostName}" with the member token in ${config.tokenFile} (${first.problem ?? 'HTTP 403'}); set hostName to the token's machine, or issue a token for ${config.hostName}`,
    );
  }
  throw new ConfigError(
    'tokenFile',
    `tokenFile: the arbiter does not accept the token in ${config.tokenFile} (${first.problem ?? 'HTTP 401'}); issue one with "hq-arbiter token issue ${config.hostName} --scope member"`,
  );
}

/**
 * The machine registers itself in the arbiter's registry with its load and duties, and beside
 * it this agent as an instance: where other hosts reach its peer listener. With several arbiters
 * (arbiterUrls) the registry's calls move to the next on failure too.
 */
async function registerMembers(
  agent: AgentParts,
  config: ResolvedConfig,
  log: Logger,
  peerPort: number,
): Promise<Member[]> {
  const { Member, instanceId } = await import('../registry-client/member.js');
  const registryRequest = new ArbiterEndpoints(config.arbiterUrls ?? [config.arbiterUrl]).asRequester();
  const token = async (): Promise<string | null> => {
    const t = await agent.token.get();
    return t.ok ? t.token : null;
  };
  const member = new Member({
    arbiterUrl: config.arbiterUrl,
    request: registryRequest,
    machine: config.hostName,
    token,
    duties: () => agent.fence.duties(),
    requestTimeoutMs: config.requestTimeoutSeconds * 1000,
    log: componentLogger(log, config.hostName, 'registry', 'control'),
  });
  member.start();
  const endpoint = advertisedUrl(config, peerPort);
  if (endpoint === null) {
    log.warn(
      { category: 'control', event: 'endpoint-unknown', listen: config.listen.host, peerPort },
      'the instance resource has no endpoint: set advertiseUrl (the agent listens on every address and has no tailnet name)',
    );
  }
  const instance = new Member({
    arbiterUrl: config.arbiterUrl,
    request: registryRequest,
    machine: config.hostName,
    id: instanceId(config.hostName),
    kind: 'instance',
    attrs: () => ({ service: 'hq-agent', endpoint, version: VERSION }),
    token,
    requestTimeoutMs: config.requestTimeoutSeconds * 1000,
    log: componentLogger(log, config.hostName, 'registry', 'control'),
  });
  instance.start();
  return [member, instance];
}

/** The stop: with `handover` and `handoverOnStop`, the lease handed over first; then the timers, the listeners, the socket file. */
async function stopDaemon(
  agent: AgentParts,
  config: ResolvedConfig,
  log: Logger,
  servers: readonly FastifyInstance[],
  members: readonly Member[],
  handover: boolean,
): Promise<void> {
  if (handover && config.handoverOnStop) {
    const to = await agent.stepDowns.handOverOnStop().catch((err: unknown) => {
      log.error({ err, category: 'hq.lease', event: 'handover-failed' }, 'handover on stop failed');
      return null;
    });
    log.info({ category: 'hq.lease', event: 'handover-on-stop', to }, 'handover on stop');
  }
  await Promise.allSettled([stopAgent(agent), ...members.map((m) => m.stop())]);
  await Promise.allSettled(servers.map((s) => s.close()));
  await unlink(config.socketPath).catch(() => undefined);
  log.info({ category: 'hq.lease', event: 'agent-stopped' }, 'agent stopped');
  log.flush();
}

export interface MainOptions {
  /** Called once the daemon is up (listening, the first heartbeat answered, its timers set). */
  readonly onStarted?: () => void;
}

/** Runs the daemon until a signal stops it; the command line was read by daemon-spec.ts. */
export async function main(configPath: string | undefined, opts: MainOptions = {}): Promise<number> {
  // Signals are caught from the first moment: one arriving during start-up stops the daemon
  // cleanly as soon as it is up (never a half-started process killed with its socket left).
  let handle: DaemonHandle | null = null;
  let signalled = false;
  let exit: ((code: number) => void) | null = null;
  const onSignal = (): void => {
    if (signalled) return;
    signalled = true;
    if (handle !== null) void handle.stop({ handover: true }).then(() => exit?.(0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    handle = await startDaemon(configPath);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof CannotStart) {
      process.stderr.write(`hq-agent: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`hq-agent: cannot start: ${(err as Error).message}\n`);
    return 1;
  }
  const started = handle;
  opts.onStarted?.();
  return new Promise<number>((done) => {
    exit = done;
    if (signalled) void started.stop({ handover: true }).then(() => done(0));
  });
}
