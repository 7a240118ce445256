/**
 * `hq`'s side of the command-line kit (@hq/runtime/cli): its error line, the flags most commands
 * share, and running one command with its exit code.
 */
import { CliError, helpText, parseArgs, type CommandSpec, type FlagSpec, type Parsed } from '@hq/runtime/cli';
import { ConfigError } from '@hq/runtime/config-file';

export * from '@hq/runtime/cli';

/**
 * One error line of `hq COMMAND`: `hq COMMAND: message`. The command is named once: a message
 * that already starts with `hq …:` or `hq:` (thrown deeper down) keeps only its own text.
 */
export function errorLine(command: string, message: string): string {
  const own = message.replace(new RegExp(`^hq(?: ${command.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')})?: `), '');
  return `hq ${command}: ${own.replace(/\s*\n\s*/g, ' ')}\n`;
}

export const CONFIG_FLAG: FlagSpec = {
  name: 'config',
  kind: 'string',
  value: 'PATH',
  help: "The agent's JSON config file. Default: $HQ_CONFIG, else ~/.hq/agent.json, else /etc/hq/agent.json, else every default.",
};

export const JSON_FLAG: FlagSpec = {
  name: 'json',
  kind: 'boolean',
  help: 'Prints the answer as one JSON document on stdout instead of text. Default: off.',
};

/**
 * One command from its argv (after the command's name): parses it, prints the help or loads and
 * runs the command, and maps errors to exit codes — a CliError its own, a ConfigError 2,
 * anything else 1 — with one line on stderr and never a stack trace.
 */
export async function runCommand(
  spec: CommandSpec,
  load: () => Promise<(p: Parsed) => Promise<number>>,
  argv: readonly string[],
): Promise<number> {
  try {
    const parsed = parseArgs(spec, argv);
    if (parsed.help) {
      process.stdout.write(helpText(spec));
      return 0;
    }
    const run = await load();
    return await run(parsed);
  } catch (err) {
    const code = err instanceof CliError ? err.exitCode : err instanceof ConfigError ? 2 : 1;
    const message = (err as { message?: string }).message ?? String(err);
    process.stderr.write(errorLine(spec.name, message));
    // A script that asked for --json reads the error as JSON on stdout too.
    if (argv.includes('--json'))
      process.stdout.write(
        `${JSON.stringify({ ok: false, error: err instanceof ConfigError ? 'config' : code === 2 ? 'usage' : 'failed', message, exitCode: code })}\n`,
      );
    return code;
  }
}

/**
 * The end of every `hq` entry: exit with the command's code once stdout is flushed (even if a
 * keep-alive socket lingers); an unexpected rejection is one line on stderr and exit 1.
 */
export function exitWhenDone(run: Promise<number>): void {
  run.then(
    (code) => {
      process.exitCode = code;
      process.stdout.write('', () => process.exit(code));
    },
    (err: unknown) => {
      process.stderr.write(`hq: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
