/**
 * `hq port run`. This module stays light — the command table may import it for its
 * spec — and loads the config, undici and the supervisor only when the command runs.
 *
 * Wiring in cli/main.ts is one entry of COMMANDS: `PORT_RUN_COMMAND`.
 */
import { RESOURCE_ID_PATTERN, isResourceId } from '@hq/protocol';
import { CONFIG_FLAG, CliError, flagNumber, flagString, runCommand, type CommandSpec, type Parsed } from './args.js';
import { wallClockMs } from '@hq/runtime/clock';
import { writeCliLine } from './log-line.js';

/** Default lease TTL: a crashed `hq port run` frees its port within two minutes. */
export const DEFAULT_TTL_SECONDS = 120;
/** Shorter leases leave less than a second between renewals. */
export const MIN_TTL_SECONDS = 3;

export const PORT_RUN_SPEC: CommandSpec = {
  name: 'port run',
  summary:
    "Leases a free port of the arbiter's test band for this host, checks that it can be bound here (asking for another one when it cannot), and runs CMD with HQ_PORT set to it. CMD is executed directly (no shell) in its own process group; TERM, INT, HUP and QUIT are forwarded to it. The lease is renewed in the background; if it is lost (the arbiter refuses the renewal, or no renewal succeeds before the TTL minus a margin ends) CMD gets SIGTERM, then SIGKILL after the grace. The lease is released when CMD ends.",
  flags: [
    CONFIG_FLAG,
    {
      name: 'purpose',
      kind: 'string',
      value: 'P',
      help: `What the port is for, ${RESOURCE_ID_PATTERN.source} (shown in the arbiter's lease list). Required.`,
      required: true,
    },
    {
      name: 'ttl',
      kind: 'number',
      value: 'S',
      help: `The lease TTL in seconds (at least ${MIN_TTL_SECONDS}; the arbiter clamps it to 24 h). Renewals go out every 30 s, or sooner for short TTLs. Default: ${DEFAULT_TTL_SECONDS}.`,
    },
    {
      name: 'grace',
      kind: 'number',
      value: 'G',
      help: 'Seconds between SIGTERM and SIGKILL when the lease is lost. Default: 5.',
    },
  ],
  rest: {
    name: 'CMD…',
    help: 'The command and its arguments, executed directly without a shell, with HQ_PORT (and HQ_PORT_LEASE_ID) in its environment.',
  },
  exits:
    "CMD's own exit code (a signal n gives 128+n); 75 when the lease was lost and CMD was stopped; 1 the arbiter refused the lease (band full, wrong host) or no leased port could be bound; 2 usage or config error; 3 arbiter unreachable; 127 CMD not found.",
};

function logLine(event: string, data: { [k: string]: unknown }): void {
  writeCliLine(wallClockMs, 'control', event, data, event === 'lost' || event === 'killed' ? 'warn' : 'info');
}

export async function portRun(p: Parsed): Promise<number> {
  const purpose = flagString(p, 'purpose') as string;
  if (!isResourceId(purpose))
    throw new CliError(2, `--purpose must match ${RESOURCE_ID_PATTERN.source} (got ${JSON.stringify(purpose)})`);
  const ttl = flagNumber(p, 'ttl') ?? DEFAULT_TTL_SECONDS;
  if (ttl < MIN_TTL_SECONDS) throw new CliError(2, `--ttl must be at least ${MIN_TTL_SECONDS} seconds`);
  const grace = flagNumber(p, 'grace') ?? 5;
  const { network, memberToken } = await import('./context.js');
  const { runWithPort } = await import('../registry-client/port-run.js');
  const c = await network(p);
  const token = await memberToken(c);
  const { ArbiterEndpoints } = await import('@hq/runtime/http');
  const r = await runWithPort({
    arbiterUrl: c.arbiterUrl,
    request: new ArbiterEndpoints(c.arbiterUrls ?? [c.arbiterUrl]).asRequester(),
    token,
    machine: c.hostName,
    purpose,
    ttlMs: Math.round(ttl * 1000),
    graceMs: Math.round(grace * 1000),
    argv: p.rest,
    requestTimeoutMs: c.requestTimeoutSeconds * 1000,
    log: logLine,
    // For hosts (and tests) where CMD binds loopback only: probe there instead of every interface.
    ...(process.env['HQ_PORT_PROBE_HOST'] ? { probeHost: process.env['HQ_PORT_PROBE_HOST'] } : {}),
  });
  if (typeof r === 'number') return r;
  process.stderr.write(`hq: ${r.line}\n`);
  return r.code;
}

/** The COMMANDS entry for cli/main.ts. */
export const PORT_RUN_COMMAND = {
  spec: PORT_RUN_SPEC,
  load: async (): Promise<(p: Parsed) => Promise<number>> => portRun,
};

/**
 * `hq port run ARGS…` without the command table (argv after "port run"): parses, prints help,
 * maps usage/config errors to exit 2 like cli/main.ts does.
 */
export async function portCommand(argv: readonly string[]): Promise<number> {
  return runCommand(PORT_RUN_SPEC, async () => portRun, argv);
}
