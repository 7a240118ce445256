/**
 * `hq-agent`'s command line on the command-line kit (@hq/runtime/cli): its spec, from which
 * `--help` and docs/REFERENCE.md are made, and the parse the bin runs before the daemon's
 * modules load (so `--help`, `--version` and a typo load nothing else).
 */
import { CliError, flagBool, flagString, helpText, parseArgs, usage, type CommandSpec } from '@hq/runtime/cli';
import { VERSION } from '@hq/runtime/version';

export const AGENT_SPEC: CommandSpec = {
  name: '',
  summary:
    'Runs the hq agent: heartbeats to the arbiter, answers fence queries on the local unix socket, and serves the peer listener, until SIGTERM or SIGINT (with handoverOnStop, the holder first hands the lease to a standby). The word run or serve may be given (earlier service files do); it changes nothing.',
  flags: [
    {
      name: 'config',
      kind: 'string',
      value: 'PATH',
      help: "The agent's JSON config file. Default: $HQ_CONFIG, else ~/.hq/agent.json, else /etc/hq/agent.json, else every default.",
    },
    {
      name: 'version',
      kind: 'boolean',
      help: "Prints hq's version (the same for hq, hq-agent and hq-arbiter) and exits 0. Default: off.",
    },
  ],
  exits:
    '0 stopped by SIGTERM or SIGINT, 1 could not start for another reason (one line says why), 2 usage or config error: an invalid config, a member token missing, insecure or refused by the arbiter for this host, the socket or the peer port taken.',
};

/** The words the agent takes before its flags, for service files of earlier releases. */
const WORDS: readonly string[] = ['run', 'serve'];

export type AgentArgs =
  | { readonly kind: 'run'; readonly configPath: string | undefined }
  | { readonly kind: 'print'; readonly text: string }
  | { readonly kind: 'usage'; readonly line: string };

/** What `hq-agent ARGV` asks for: run the daemon, print the help or version, or a usage error (exit 2). */
export function agentArgs(argv: readonly string[]): AgentArgs {
  try {
    const p = parseArgs(AGENT_SPEC, argv, { program: 'hq-agent', freeWords: true });
    if (p.help) return { kind: 'print', text: helpText(AGENT_SPEC, 'hq-agent') };
    if (flagBool(p, 'version')) return { kind: 'print', text: `${VERSION}\n` };
    const other = p.positionals.find((w) => !WORDS.includes(w));
    if (other !== undefined) throw usage(`unknown argument ${JSON.stringify(other)} (see --help)`);
    return { kind: 'run', configPath: flagString(p, 'config') };
  } catch (err) {
    if (err instanceof CliError) return { kind: 'usage', line: `hq-agent: ${err.message}\n` };
    throw err;
  }
}
