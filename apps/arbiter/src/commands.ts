/**
 * hq-arbiter's commands, callable in-process (tests) and from the bin (`cli.ts`). Each command is a
 * spec of the shared command-line kit (@hq/runtime/cli) and the module that runs it, loaded only
 * when it runs; `--help` and docs/REFERENCE.md are made from the specs.
 * Exit codes: 0 ok; 1 the command ran but did not succeed (nothing to revoke, check skipped,
 * start failed); 2 usage or configuration error (one line on stderr).
 */
import { didYouMean } from '@hq/runtime/suggest';
import { VERSION } from '@hq/runtime/version';
import { wallClockMs, type MsClock } from '@hq/runtime/clock';
import { ConfigError } from '@hq/runtime/config-file';
import {
  CliError,
  everyFlag,
  flagBool,
  helpText,
  parseArgs,
  programHelp,
  refuseOtherFlags,
  usage,
  type CommandSpec,
  type FlagSpec,
} from '@hq/runtime/cli';
import type { Invocation, Io } from './commands/context.js';
import { LockError } from './serve-lock.js';

export type { Io } from './commands/context.js';

export interface ArbiterCommand {
  readonly spec: CommandSpec;
  readonly load: () => Promise<(c: Invocation) => Promise<number>>;
}

const CONFIG_FLAG: FlagSpec = {
  name: 'config',
  kind: 'string',
  value: 'PATH',
  help: 'Read the configuration from PATH. Without it, $HQ_ARBITER_CONFIG is used, then ~/.hq/arbiter.json, then /etc/hq/arbiter.json, and when none exists the built-in defaults (listen on 127.0.0.1:8470, database under ./var).',
};

const VERSION_FLAG: FlagSpec = {
  name: 'version',
  kind: 'boolean',
  help: "Print hq's version (the same for hq, hq-agent and hq-arbiter) and exit.",
};

const JSON_FLAG = (help: string): FlagSpec => ({ name: 'json', kind: 'boolean', help });

const MACHINE = {
  name: 'MACHINE',
  help: 'The machine the token is for: a host name (lower case letters, digits and -).',
};

export const COMMANDS: readonly ArbiterCommand[] = [
  {
    spec: {
      name: 'serve',
      summary:
        'Run the daemon (the default when no command is given). It listens on listen.host:listen.port, runs a check on every checkCron tick, and on SIGTERM or SIGINT stops accepting requests, finishes those in flight, closes the database and exits 0. It holds {dataDir}/arbiter.lock for its life, so a second daemon on the same data directory is refused. On first start it writes an admin token to {dataDir}/admin.token (mode 0600).',
      flags: [
        {
          name: 'exit-with-parent',
          kind: 'boolean',
          help: 'Stop, as on SIGTERM, when the process that started the daemon exits (checked every second). npm start uses it, so that killing npm never leaves the arbiter running on its own. Default: off (a supervisor such as systemd is the parent).',
        },
        CONFIG_FLAG,
      ],
      exits:
        '0 stopped by SIGTERM or SIGINT, 1 the start failed, 2 usage or config error (or another daemon holds the data directory).',
    },
    load: async () => (await import('./commands/daemon.js')).serveCommand,
  },
  {
    spec: {
      name: 'token issue',
      summary:
        "Issue a bearer token for a machine and print it once. It is 64 hex characters alone on one line of stdout; only its sha256 is stored, so it cannot be shown again. The new token replaces MACHINE's tokens of the same scope (they fail from the next request on) unless --keep-old is given. A member token is issued only for one of the candidates; an admin or query token only for a name that is not a candidate (the arbiter host, an operator, a dashboard); anything else is refused with exit 2 and nothing written.",
      positionals: [MACHINE],
      flags: [
        {
          name: 'scope',
          kind: 'string',
          value: 'SCOPE',
          help: "The token's scope: member (acts only for MACHINE; the default), admin (every verb, for operators) or query (reads only, for dashboards).",
        },
        {
          name: 'keep-old',
          kind: 'boolean',
          help: 'Keep MACHINE\'s earlier tokens of this scope valid, for a rotation overlap: install the new token, then "token revoke MACHINE --id N" the old one (ids from "token list"). Off by default: issue replaces.',
        },
        CONFIG_FLAG,
      ],
      exits: '0 issued, 2 usage or config error (nothing written).',
    },
    load: async () => (await import('./commands/tokens.js')).tokenIssue,
  },
  {
    spec: {
      name: 'token revoke',
      summary: 'Revoke every token of a machine (or only token N) from the next request on.',
      positionals: [MACHINE],
      flags: [
        {
          name: 'id',
          kind: 'string',
          value: 'N',
          help: 'Revoke only the token with id N, when it belongs to MACHINE. Default: all of them.',
        },
        CONFIG_FLAG,
      ],
      exits: '0 revoked, 1 there was none to revoke, 2 usage or config error.',
    },
    load: async () => (await import('./commands/tokens.js')).tokenRevoke,
  },
  {
    spec: {
      name: 'token list',
      summary: 'List tokens without their secrets: id, machine, scope, created and revoked.',
      flags: [JSON_FLAG('Print the list as one JSON array instead of a table. Default: off.'), CONFIG_FLAG],
      exits: '0 listed, 2 usage or config error.',
    },
    load: async () => (await import('./commands/tokens.js')).tokenList,
  },
  {
    spec: {
      name: 'init',
      summary:
        "Write a config (when none exists) and the fleet's secrets into the data directory. When the config file (--config, else $HQ_ARBITER_CONFIG, else ~/.hq/arbiter.json) does not exist, it is written from the flags (atomic, mode 0600); an existing one is kept as it is and the flags are refused. Then the data directory is created (0700) and, when missing, the fleet's peer token (peer-token, 0600: the shared secret of agent-to-agent calls, handed to each agent by its join) and the arbiter's identity key (identity.key, 0600: joining hosts check its fingerprint). Run it as the daemon's user. It prints what it wrote and what to run next. The database and the admin token are created by the daemon's first start.",
      flags: [
        {
          name: 'candidates',
          kind: 'string',
          value: 'LIST',
          help: "The candidates in promotion order, comma-separated; each NAME or NAME=URL, URL being that host's peer listener (http://ADDRESS:8471), whose /v1/health the arbiter probes and the other agents call. Default: mbp,node-b.",
        },
        {
          name: 'arbiter',
          kind: 'string',
          value: 'NAME',
          help: "This arbiter's host name (never a candidate). Default: cloud-vm.",
        },
        {
          name: 'listen',
          kind: 'string',
          value: 'HOST:PORT',
          help: 'Where the daemon listens. Default: 127.0.0.1:8470.',
        },
        {
          name: 'data-dir',
          kind: 'string',
          value: 'DIR',
          help: 'The data directory (made absolute). Default: ~/.hq/arbiter next to the config.',
        },
        {
          name: 'tailnet-domain',
          kind: 'string',
          value: 'DOMAIN',
          help: 'The MagicDNS suffix (lower case, like example-tailnet.ts.net): candidates without a URL are found as NAME.DOMAIN:8471. Default: none.',
        },
        {
          name: 'tailscale-bin',
          kind: 'string',
          value: 'PATH',
          mayBeEmpty: true,
          help: 'The tailscale CLI the probes run; --tailscale-bin= (empty) turns ping off for the whole fleet (health alone decides; joins pass it on to the agents). Default: tailscale.',
        },
        CONFIG_FLAG,
      ],
      exits: '0 done, 2 usage or config error (nothing written).',
    },
    load: async () => (await import('./commands/setup.js')).initCommand,
  },
  {
    spec: {
      name: 'join',
      summary:
        "Print, once, the command that joins a candidate: hq join BUNDLE. It is one line to run on candidate HOST. The bundle is single use, expires after T, joins HOST only, and lets HOST check it talks to this arbiter (it carries the sha256 of this arbiter's identity key). Redeeming it (POST /v1/join on the running daemon) issues HOST's member token (replacing any earlier one) and hands HOST its config: the arbiter URL, its peers and their health URLs, and the fleet's peer token. Only a hash of the bundle's secret is kept, in {dataDir}/joins; a newer bundle for HOST replaces an unused older one. Run it as the daemon's user (sudo -u hq …), on the arbiter's host: the daemon reads what it writes.",
      positionals: [{ name: 'HOST', help: 'The candidate to join.' }],
      flags: [
        {
          name: 'ttl',
          kind: 'string',
          value: 'T',
          help: 'How long the bundle can be redeemed: seconds, or with s, m or h (at most 24h). Default: 15m.',
        },
        {
          name: 'url',
          kind: 'string',
          value: 'URL',
          help: "The arbiter's URL as HOST reaches it. Default: http://ARBITER.TAILNETDOMAIN:PORT with tailnetDomain, else http://LISTENHOST:PORT.",
        },
        CONFIG_FLAG,
      ],
      exits: '0 printed, 2 usage or config error.',
    },
    load: async () => (await import('./commands/setup.js')).joinCommand,
  },
  {
    spec: {
      name: 'check',
      summary:
        "Run one check against the database (for a system cron) and print its result as one JSON line. The check probes the holder, records the arbiter's view, counts the streak and maybe promotes. It waits for a check already running in a daemon on the same database (bounded), so two checks never overlap.",
      flags: [
        {
          name: 'json',
          kind: 'boolean',
          help: 'Taken for scripts that pass it to every command: the result is always one JSON line.',
        },
        CONFIG_FLAG,
      ],
      exits:
        '0 the check ran, 1 it was skipped (another check kept running, or the holder changed during the probe), 2 usage or config error.',
    },
    load: async () => (await import('./commands/daemon.js')).checkCommand,
  },
  {
    spec: {
      name: 'backup',
      summary:
        'Write an online backup of the database to a file. It is a consistent copy (mode 0600) made with SQLite\'s online backup while the daemon keeps serving. With store "etcd": every key under the prefix, read at one revision, as one JSON document (the election\'s keys left out).',
      flags: [
        {
          name: 'to',
          kind: 'string',
          value: 'FILE',
          required: true,
          help: 'The file to write. Required; an existing file is replaced.',
        },
        CONFIG_FLAG,
      ],
      exits: '0 written, 2 usage or config error.',
    },
    load: async () => (await import('./commands/store.js')).backupCommand,
  },
  {
    spec: {
      name: 'migrate',
      summary:
        'Copy a SQLite installation\'s state into a new etcd prefix (store "etcd"). Everything a SQLite arbiter keeps — the lease record, the generation floor, the views, every token hash, the events, the registry\'s live resources and port leases — goes into PREFIX on an etcd cluster, where arbiters with store {"kind": "etcd"} find it. PATH is the arbiter\'s dataDir (or its hq.db). The database is read through SQLite\'s online backup, so the daemon may keep serving; the copy is one instant of it. PREFIX must be empty (nothing is written otherwise); the state is written last, so a migration cut short leaves no store, only keys to delete. The floor is written as max(floor, generation): no etcd arbiter grants below a generation the SQLite arbiter granted. Then: stop the SQLite arbiter, start the etcd arbiters, point the agents\' arbiterUrls at them. Never run both: two stores would decide apart.',
      flags: [
        {
          name: 'from',
          kind: 'string',
          value: 'sqlite:PATH',
          required: true,
          help: 'The SQLite installation: its dataDir or its hq.db. Required.',
        },
        {
          name: 'to',
          kind: 'string',
          value: 'etcd:URL[,URL…]',
          required: true,
          help: "The etcd members' client URLs, http://host:port, comma-separated. Required.",
        },
        {
          name: 'prefix',
          kind: 'string',
          value: 'PREFIX',
          help: 'The etcd prefix to write (like /hq or /site/hq). Default: /hq.',
        },
        JSON_FLAG('Print the report as one JSON line instead of a sentence. Default: off.'),
        CONFIG_FLAG,
      ],
      exits: '0 copied, 1 the prefix is not empty (nothing written), 2 usage error.',
    },
    load: async () => (await import('./commands/store.js')).migrateCommand,
  },
  {
    spec: {
      name: 'import elanous',
      summary:
        'Take over from elanous HQ: its lease record\'s generation becomes the floor. On a new installation it reads the old lease record FILE (elanous kept it in ~/.elanous-hq/lease.json on this host) and raises the generation floor to its generation, so the first hq generation is above every elanous one. When the old record names a holder whose lease has not ended, that holder keeps HQ: it is granted the next generation at once, and may run only once the old lease\'s validity is over (its expiresAt, or now + its ttlSeconds for a renewal that raced the import, plus safetyMarginSeconds), so a job still running under the old lease never overlaps the first hq one. With no live old holder only the floor is set, and "hq lease acquire" on the host that should be HQ takes the first lease. Stop elanous\'s arbiter check on this host first: from here on elanous must not promote (deploy/README.md, "Moving from elanous").',
      flags: [
        {
          name: 'lease',
          kind: 'string',
          value: 'FILE',
          required: true,
          help: 'The old lease record (JSON: generation, holder, expiresAt or renewedAt, ttlSeconds, released; times in epoch seconds or ISO). Required.',
        },
        { name: 'dry-run', kind: 'boolean', help: 'Print what the import would do and write nothing. Default: off.' },
        JSON_FLAG('Print the result as one JSON line instead of a sentence. Default: off.'),
        CONFIG_FLAG,
      ],
      exits:
        '0 imported, 1 refused with one line and nothing written (a malformed FILE, an installation that has already granted a generation, a live old holder that is not one of the candidates), 2 usage or config error.',
    },
    load: async () => (await import('./commands/store.js')).importElanousCommand,
  },
];

/** What a first word that needs a second says when the second is missing or unknown. */
const GROUPS: Record<
  string,
  { readonly missing: string; readonly unknown: (word: string, known: readonly string[]) => string }
> = {
  token: {
    missing: 'token needs issue, revoke or list',
    unknown: (w, known) => `unknown token command "${w}"${didYouMean(w, known)}`,
  },
  import: {
    missing: 'import needs the system to import from: import elanous --lease FILE',
    unknown: (w) => `import: unknown system "${w}" (only elanous)`,
  },
};

const SPECS = COMMANDS.map((c) => c.spec);

/**
 * The command line before its command is known: every flag of every command, and --version. Each
 * command checks its own words and required flags, with its own line.
 */
const PROGRAM: CommandSpec = { name: '', summary: '', flags: [...everyFlag(SPECS), VERSION_FLAG], exits: '' };

export const MAIN_HELP = programHelp({
  usage: 'hq-arbiter [COMMAND] [--config PATH]',
  about:
    'The arbiter daemon of hq: it owns the lease record (in SQLite, or in etcd for several arbiters) and serves the HTTP API.',
  commands: SPECS,
  flags: [CONFIG_FLAG, VERSION_FLAG],
  footer:
    'Run "hq-arbiter COMMAND --help" for a command\'s flags. Exit codes: 0 ok, 1 not done, 2 usage or config error.',
});

const firstWord = (c: ArbiterCommand): string => c.spec.name.split(' ')[0] as string;

/** The help of `topic`: one command, the commands under one first word, or the program's. */
function helpOf(words: readonly string[]): string {
  const two = COMMANDS.find((c) => c.spec.name === words.slice(0, 2).join(' ') && words.length >= 2);
  if (two !== undefined) return helpText(two.spec, 'hq-arbiter');
  const group = COMMANDS.filter((c) => firstWord(c) === words[0]);
  return group.length === 0
    ? MAIN_HELP
    : helpText(
        group.map((c) => c.spec),
        'hq-arbiter',
      );
}

/** The command the words name, and the words after its name. */
function commandOf(words: readonly string[]): { readonly command: ArbiterCommand; readonly words: readonly string[] } {
  const [first = 'serve', ...after] = words;
  const group = COMMANDS.filter((c) => firstWord(c) === first);
  const one = group.find((c) => c.spec.name === first);
  if (one !== undefined) return { command: one, words: after };
  const rule = GROUPS[first];
  if (group.length === 0 || rule === undefined) {
    throw usage(
      `unknown command "${first}"${didYouMean(first, [...new Set([...COMMANDS.map(firstWord), 'help'])]) || ' (try --help)'}`,
    );
  }
  const [verb, ...rest] = after;
  if (verb === undefined) throw usage(rule.missing);
  const named = group.find((c) => c.spec.name === `${first} ${verb}`);
  if (named === undefined)
    throw usage(
      rule.unknown(
        verb,
        group.map((c) => c.spec.name.split(' ')[1] as string),
      ),
    );
  return { command: named, words: rest };
}

async function run(argv: readonly string[], io: Io, clock: MsClock): Promise<number> {
  const p = parseArgs(PROGRAM, argv, { program: 'hq-arbiter', freeWords: true, refuseEmpty: true });
  if (flagBool(p, 'version')) {
    io.out(`${VERSION}\n`);
    return 0;
  }
  if (p.positionals[0] === 'help') {
    io.out(helpOf(p.positionals.slice(1)));
    return 0;
  }
  if (p.help) {
    io.out(p.positionals.length === 0 ? MAIN_HELP : helpOf(p.positionals));
    return 0;
  }
  const { command, words } = commandOf(p.positionals);
  refuseOtherFlags(command.spec, p);
  return (await command.load())({ p, words, io, clock });
}

/**
 * Runs one command line. Returns the exit code, or -1 for `serve` (the daemon keeps running
 * and exits through its signal handlers). Usage and config errors are one line, exit 2.
 * `clock` (epoch ms, the wall: token and migration times are read by other processes) stamps
 * what a command writes.
 */
export async function main(argv: readonly string[], io: Io, clock: MsClock = wallClockMs): Promise<number> {
  try {
    return await run(argv, io, clock);
  } catch (err) {
    if (err instanceof CliError || err instanceof ConfigError || err instanceof LockError) {
      io.err(`hq-arbiter: ${err.message}\n`);
      return err instanceof CliError ? err.exitCode : 2;
    }
    const e = err as Error;
    io.err(`hq-arbiter: ${(e?.message ?? String(err)).replace(/\s+/g, ' ')}\n`);
    return 1;
  }
}
