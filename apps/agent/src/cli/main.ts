/**
 * `hq` — the command table. Each command's code is imported only when it runs, so
 * `hq fence check` loads neither Fastify, pino, undici nor TypeBox.
 */
import { didYouMean } from '@hq/runtime/suggest';
import { HOST_PATTERN } from '@hq/protocol';
import { CONFIG_FLAG, JSON_FLAG, programHelp, runCommand, type CommandSpec, type Parsed } from './args.js';
// Light modules: they import only args.js (fence.js: node built-ins and the light config
// reader) until their command runs; the doctor and standby specs alone.
import { FENCE_CHECK_COMMAND, FENCE_RUN_COMMAND } from './fence.js';
import { PORT_RUN_COMMAND } from './port.js';
import { FLEET_COMMAND } from './fleet.js';
import { DOCTOR_SPEC } from './doctor-spec.js';
import { STANDBY_SPECS } from './standby-specs.js';

export interface Command {
  readonly spec: CommandSpec;
  readonly load: () => Promise<(p: Parsed) => Promise<number>>;
}

const ARBITER_EXITS = '0 ok, 1 refused, 2 usage or config error, 3 arbiter unreachable.';

const WAIT_FLAG = {
  name: 'wait',
  kind: 'number' as const,
  value: 'S',
  help: 'Keeps retrying for up to S seconds until the lease is granted (refusals and an unreachable arbiter are retried once a second). Default: 0, one attempt.',
};

export const COMMANDS: readonly Command[] = [
  {
    spec: {
      name: 'lease status',
      summary:
        "Prints the arbiter's lease record: holder, generation, validity left, each observer's view with its age, the maintenance flag, and the worst-case failover time the settings imply.",
      flags: [CONFIG_FLAG, JSON_FLAG],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-status.js')).leaseStatus,
  },
  {
    spec: {
      name: 'lease acquire',
      summary:
        "Asks the arbiter for the lease for this host, sending the host's seen generation. The first lease is always taken this way; agents never acquire on their own.",
      flags: [CONFIG_FLAG, WAIT_FLAG, JSON_FLAG],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-acquire.js')).leaseAcquire,
  },
  {
    spec: {
      name: 'lease renew',
      summary: 'Renews the lease held by this host at its seen generation, then pokes the local agent to heartbeat.',
      flags: [CONFIG_FLAG, JSON_FLAG],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-acquire.js')).leaseRenew,
  },
  {
    spec: {
      name: 'lease release',
      summary:
        'Steps the local agent down (nothing of this generation runs any more), then releases the lease at the arbiter, or hands it over to another candidate. A refused release resumes the agent.',
      flags: [
        CONFIG_FLAG,
        {
          name: 'handover-to',
          kind: 'string',
          value: 'H',
          help: 'Grants the lease to candidate H at once instead of leaving it free (no lock-delay: this host stepped down first). The arbiter refuses a target not heard from within its heartbeat interval × 1.5 + 5 s. Default: none, the lease is only released.',
        },
        {
          name: 'force',
          kind: 'boolean',
          help: 'With --handover-to: hands over even to a target the arbiter has not heard from recently. Default: off.',
        },
        {
          name: 'wait',
          kind: 'number',
          value: 'S',
          help: "With --handover-to: waits up to S seconds, printing which wait holds H (the arbiter's start wait, a pending floor, H's own confirmation of this host), until when and why, until H may run; exit 1 when S runs out first. Default: 0 (no wait).",
        },
        JSON_FLAG,
      ],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-release.js')).leaseRelease,
  },
  {
    spec: {
      name: 'lease accept',
      summary:
        "Accepts generation G as one an agent really saw (admin token). The arbiter refuses a report more than 1,048,576 above the highest generation it granted or learned (HQ_ERR_GENERATION_JUMP, named by hq doctor and the status page): no real history jumps that far, short of an installation older than a million changes of holder losing its database. Accepting raises the arbiter's floor to G, so that report is taken and every later grant is above G. Refused at or above the generation ceiling, 281474976710656.",
      positionals: [{ name: 'G', help: 'The generation to accept: the one the refused report named.' }],
      flags: [
        CONFIG_FLAG,
        {
          name: 'token-file',
          kind: 'string',
          value: 'F',
          help: 'Reads the admin token from F when $HQ_ADMIN_TOKEN is not set. Default: {stateDir}/admin-token.',
        },
        JSON_FLAG,
      ],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-admin.js')).leaseAcceptGeneration,
  },
  {
    spec: {
      name: 'events',
      summary:
        "Prints the arbiter's event log (oldest first; the arbiter keeps a bounded history, see its events config).",
      flags: [
        CONFIG_FLAG,
        {
          name: 'follow',
          kind: 'boolean',
          help: "Keeps printing new events as they happen, from the arbiter's event stream (Server-Sent Events; from an arbiter without it, by reading once a second), until interrupted. It starts with the newest 20 events unless --after, --tail or --since says otherwise. Default: off, print and exit.",
        },
        {
          name: 'after',
          kind: 'number',
          value: 'ID',
          help: 'Prints only events with an id above ID. Default: 0, from the beginning of the kept history (with --follow: the newest 20).',
        },
        {
          name: 'tail',
          kind: 'number',
          value: 'N',
          help: 'Prints only the newest N events (1 to 1000), then follows with --follow. Default: every kept event (with --follow: 20).',
        },
        {
          name: 'event',
          kind: 'string',
          value: 'NAMES',
          help: 'Prints only these events, comma-separated (promoted,released,acquire-refused). Default: every event.',
        },
        {
          name: 'since',
          kind: 'string',
          value: 'T',
          help: 'Prints only events at or after T: epoch seconds (1764600000) or an ISO time (2026-12-01T10:00:00Z). Default: every kept event.',
        },
        JSON_FLAG,
      ],
      exits: '0 ok, 2 usage or config error, 3 arbiter unreachable.',
    },
    load: async () => (await import('./events.js')).events,
  },
  {
    spec: {
      name: 'maintenance',
      summary:
        'Turns maintenance on or off (admin token): while it is on, arbiter checks record views but never promote.',
      positionals: [{ name: 'on|off', help: 'Whether maintenance is on.', choices: ['on', 'off'] }],
      flags: [
        CONFIG_FLAG,
        {
          name: 'reason',
          kind: 'string',
          value: 'T',
          help: 'A short reason stored with the flag and shown in the events. Default: none.',
        },
        {
          name: 'token-file',
          kind: 'string',
          value: 'F',
          help: 'Reads the admin token from F when $HQ_ADMIN_TOKEN is not set. Default: {stateDir}/admin-token.',
        },
        JSON_FLAG,
      ],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-admin.js')).maintenance,
  },
  {
    spec: {
      name: 'failover',
      summary:
        'Forces a transfer of the lease to candidate H (admin token): H gets the next generation behind the old holder’s lock-delay, which ends as soon as the old holder acknowledges its step-down (its agent ended its fenced children).',
      flags: [
        CONFIG_FLAG,
        {
          name: 'to',
          kind: 'string',
          value: 'H',
          help: 'The candidate that gets the lease; the arbiter refuses one not heard from within its heartbeat interval × 1.5 + 5 s. Required.',
          required: true,
        },
        {
          name: 'force',
          kind: 'boolean',
          help: 'Transfers even to a target the arbiter has not heard from recently. Default: off.',
        },
        {
          name: 'wait',
          kind: 'number',
          value: 'S',
          help: "Waits up to S seconds until H may run, printing which wait holds it (the old holder's lock-delay, the arbiter's start wait, a pending floor, H's own confirmation of the old holder), until when and why, and says whether the old holder acknowledged its step-down or the lock-delay ran out; exit 1 when S runs out first. Default: 0 (no wait).",
        },
        {
          name: 'token-file',
          kind: 'string',
          value: 'F',
          help: 'Reads the admin token from F when $HQ_ADMIN_TOKEN is not set. Default: {stateDir}/admin-token.',
        },
        JSON_FLAG,
      ],
      exits: ARBITER_EXITS,
    },
    load: async () => (await import('./lease-admin.js')).failover,
  },
  {
    spec: {
      name: 'heartbeat',
      summary: 'Makes the local agent send one heartbeat now and prints its outcome.',
      flags: [CONFIG_FLAG, JSON_FLAG],
      exits:
        '0 the arbiter answered, 1 the arbiter refused the heartbeat (the member token, the host name), 2 usage or config error, 3 the agent or the arbiter is unreachable.',
    },
    load: async () => (await import('./local-cmds.js')).heartbeat,
  },
  FENCE_CHECK_COMMAND,
  FENCE_RUN_COMMAND,
  {
    spec: {
      name: 'guard',
      summary:
        'Decides whether a ledger-CLI write may proceed on this host: allowed while this host may run ledger-cli, or before any generation was seen when the arbiter answers that no lease record exists, or when the write root lies physically (symlinks resolved one component at a time) inside a non-operational instance root.',
      flags: [
        CONFIG_FLAG,
        {
          name: 'command',
          kind: 'string',
          value: 'NAME',
          help: 'The ledger command about to write (logged with the decision). Required.',
          required: true,
        },
        {
          name: 'override',
          kind: 'boolean',
          help: 'Allows a refused write, and logs a cli-override event naming the command and the refusal it overrode (reason, holder, generation). Default: off.',
        },
        {
          name: 'write-root',
          kind: 'string',
          value: 'P',
          help: 'The directory the command writes to. Default: none (only the fence and the seen generation decide).',
        },
        {
          name: 'instance-root',
          kind: 'string',
          value: 'I',
          help: 'The root of the instance the command runs in; required with --write-root.',
        },
        {
          name: 'operational-root',
          kind: 'string',
          value: 'O',
          help: 'The root of the operational (live) instance; required with --write-root.',
        },
        JSON_FLAG,
      ],
      exits: '0 allowed, 2 usage or config error, 4 refused.',
    },
    load: async () => (await import('./local-cmds.js')).guard,
  },
  {
    spec: {
      name: 'seen',
      summary:
        'Tells whether this host has ever seen a lease generation (from the agent, else from seen-generation in the state directory).',
      flags: [CONFIG_FLAG, JSON_FLAG],
      exits: '0 seen, 2 usage or config error, 3 never seen.',
    },
    load: async () => (await import('./local-cmds.js')).seen,
  },
  {
    spec: {
      name: 'host set',
      summary:
        'Writes NAME to {stateDir}/host (validated, atomic, mode 0600): the host name the agent uses when hostName is not configured.',
      positionals: [{ name: 'NAME', help: `The host name, ${HOST_PATTERN.source}.` }],
      flags: [CONFIG_FLAG],
      exits: '0 written, 2 invalid name, usage or config error.',
    },
    load: async () => (await import('./local-cmds.js')).hostSet,
  },
  {
    spec: {
      name: 'primary',
      summary:
        "Asks every candidate's agent (/v1/primary, 5 s each; this host's own through its peer listener on 127.0.0.1) who holds the lease and takes the highest generation whose holder is a candidate, never one older than this host's seen generation.",
      flags: [
        CONFIG_FLAG,
        JSON_FLAG,
        {
          name: 'write-join',
          kind: 'string',
          value: 'FILE',
          help: 'Also writes the join file FILE (atomic, mode 0600; a missing directory is created 0700): the holder, its generation and URL, the arbiter URL and the token to use there (queryTokenFile, else {stateDir}/query-token, else the member token). Default: no file is written.',
        },
      ],
      exits:
        '0 known (and FILE written), 2 usage or config error (a URL that is not a bare origin, no usable token), 3 no agent answered with a usable generation.',
    },
    load: async () => (await import('./local-cmds.js')).primary,
  },
  PORT_RUN_COMMAND,
  FLEET_COMMAND,
  {
    spec: {
      name: 'import elanous',
      summary:
        "Makes this candidate of elanous HQ an hq agent, from the old files. It reads the old host file, seen-generation, ~/.elanous/hq/local.json, the hq block of ~/.elanous/config.json and the crontab; writes the agent's config (its own keys, the roles with seat-loop and conatus, a replication block with the old plan and pollersOff telegram and discord), the host file, the seen generation (never lower than one already there) and a local.json whose start guard makes the agent's first start wait the old TTL; prints the keys that belong to the arbiter and each elanous hq crontab line with its replacement. A malformed old file is refused with one line and nothing is written.",
      flags: [
        { ...CONFIG_FLAG, help: 'The agent config to write. Default: $HQ_CONFIG, else ~/.hq/agent.json.' },
        {
          name: 'dry-run',
          kind: 'boolean',
          help: 'Prints everything the import would do and writes nothing. Default: off.',
        },
        {
          name: 'force',
          kind: 'boolean',
          help: 'Replaces an existing agent config and hq state (host, local.json); the seen generation still never goes down. Default: off, existing hq state is refused.',
        },
        {
          name: 'old-home',
          kind: 'string',
          value: 'DIR',
          help: 'The home directory whose .elanous-hq and .elanous are read. Default: $HOME.',
        },
        {
          name: 'crontab',
          kind: 'string',
          value: 'FILE',
          help: 'Reads the crontab from FILE instead of running crontab -l. Default: crontab -l.',
        },
        JSON_FLAG,
      ],
      exits:
        '0 imported (or shown with --dry-run), 1 refused (a malformed old file, existing hq state without --force, nothing to import), 2 usage error.',
    },
    load: async () => (await import('./import-elanous.js')).importElanous,
  },
  {
    spec: {
      name: 'join',
      summary:
        "Makes this host a candidate from the line hq-arbiter join HOST printed: redeems the bundle at the arbiter (once), checks the answer is signed by the arbiter the bundle names, and writes this host's agent config (only its own keys), its member token and the fleet's peer token (0600) in its state directory (0700).",
      positionals: [{ name: 'BUNDLE', help: 'The word after "hq join" that hq-arbiter join printed (hq1.…).' }],
      flags: [
        { ...CONFIG_FLAG, help: 'The agent config file to write. Default: $HQ_CONFIG, else ~/.hq/agent.json.' },
        {
          name: 'state-dir',
          kind: 'string',
          value: 'DIR',
          help: "The agent's state directory, written into the config; the tokens go there. Default: the config file's directory.",
        },
        {
          name: 'socket',
          kind: 'string',
          value: 'PATH',
          help: 'The fence socket (socketPath), for a daemon whose group members must reach it outside the 0700 state directory (systemd: /run/hq-agent/agent.sock). Default: {stateDir}/agent.sock.',
        },
        {
          name: 'dry-run',
          kind: 'boolean',
          help: 'Prints the config and the files it would write, without using the bundle (it still works afterwards). Default: off.',
        },
        {
          name: 'force',
          kind: 'boolean',
          help: 'Replaces an existing config file. Default: off, an existing config is refused (exit 2) before the bundle is used.',
        },
      ],
      exits:
        '0 joined (or the dry run printed), 1 refused (the bundle is used, expired, or the answer is not signed by its arbiter; nothing written), 2 usage or an existing config, 3 the arbiter is unreachable.',
    },
    load: async () => (await import('./join-fleet.js')).joinFleet,
  },
];

/**
 * `hq --help`: one line per command, doctor's and standby's included (their specs are light),
 * made from the specs as every command's own help is.
 */
export const TOP_HELP = programHelp({
  usage: 'hq COMMAND [options]',
  about:
    "The command line of hq on a candidate host: the lease at the arbiter, fenced jobs through this host's agent, standby replication, and this host's checks.",
  commands: [...COMMANDS.map((c) => c.spec), DOCTOR_SPEC, ...Object.values(STANDBY_SPECS)],
  flags: [
    CONFIG_FLAG,
    {
      name: 'version',
      kind: 'boolean',
      help: "Prints hq's version (the same for hq, hq-agent and hq-arbiter) and exits 0. Default: off.",
    },
  ],
  footer: 'Every command accepts --config PATH and --help; run "hq COMMAND --help" for its options and exit codes.',
});

export async function main(argv: readonly string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(TOP_HELP);
    return argv.length === 0 ? 2 : 0;
  }
  if (argv[0] === '--version' || argv[0] === '-V') {
    const { VERSION } = await import('@hq/runtime/version');
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (argv[0] === 'doctor') {
    // `hq doctor` checks this host's side of hq (its module loads the full config).
    const { doctorCommand } = await import('./doctor.js');
    return doctorCommand(argv.slice(1));
  }
  if (argv[0] === 'standby') {
    // `hq standby …` has its own table in standby.ts.
    const { standbyCommand } = await import('./standby.js');
    return standbyCommand(argv.slice(1));
  }
  const two = argv.slice(0, 2).join(' ');
  let cmd = COMMANDS.find((c) => c.spec.name === two);
  let rest = argv.slice(2);
  if (cmd === undefined) {
    cmd = COMMANDS.find((c) => c.spec.name === argv[0]);
    rest = argv.slice(1);
  }
  if (cmd === undefined) {
    const group = COMMANDS.filter((c) => c.spec.name.startsWith(`${argv[0]} `));
    if (group.length > 0) {
      if (argv[1] === undefined || argv[1] === '--help') {
        process.stdout.write(`Usage: ${group.map((g) => `hq ${g.spec.name}`).join(' | ')}\n`);
        return argv[1] === '--help' ? 0 : 2;
      }
      const hint = didYouMean(
        argv[1],
        group.map((g) => g.spec.name.split(' ')[1] as string),
        (w) => `${argv[0]} ${w}`,
      );
      process.stderr.write(
        `hq: unknown command "${argv[0]} ${argv[1]}"${hint || ` (one of: ${group.map((g) => g.spec.name).join(', ')})`}\n`,
      );
      return 2;
    }
    const words = [...new Set([...COMMANDS.map((c) => c.spec.name.split(' ')[0] as string), 'doctor', 'standby'])];
    process.stderr.write(
      `hq: unknown command "${argv[0]}"${didYouMean(argv[0] as string, words) || ' (see hq --help)'}\n`,
    );
    return 2;
  }
  return runCommand(cmd.spec, cmd.load, rest);
}
