/**
 * A small, strict argument parser for `hq` (no third-party dependency: the fence path must stay light).
 * Every flag has a full-sentence help that states its default; an unknown flag, a missing
 * value or a bad number is a usage error (exit 2, one line: `hq COMMAND: problem`), with the
 * nearest known flag when the unknown one looks like a typo.
 */
import { didYouMean } from '@hq/runtime/suggest';
import { ConfigError } from '@hq/runtime/config-file';

export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A word as a POSIX shell would need it written (for the commands an error suggests). */
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/**
 * One error line of `hq COMMAND`: `hq COMMAND: message`. The command is named once: a message
 * that already starts with `hq …:` or `hq:` (thrown deeper down) keeps only its own text.
 */
export function errorLine(command: string, message: string): string {
  const own = message.replace(new RegExp(`^hq(?: ${command.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')})?: `), '');
  return `hq ${command}: ${own.replace(/\s*\n\s*/g, ' ')}\n`;
}

export function usage(message: string): CliError {
  return new CliError(2, message);
}

export interface FlagSpec {
  readonly name: string;
  readonly kind: 'string' | 'number' | 'boolean';
  /** Placeholder in the usage line, e.g. `R`. */
  readonly value?: string;
  readonly help: string;
  readonly required?: boolean;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly flags: readonly FlagSpec[];
  readonly positionals?: readonly { readonly name: string; readonly help: string; readonly choices?: readonly string[] }[];
  /** Takes `-- CMD…`. */
  readonly rest?: { readonly name: string; readonly help: string };
  readonly exits: string;
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

export interface Parsed {
  readonly flags: ReadonlyMap<string, string | number | boolean>;
  readonly positionals: readonly string[];
  readonly rest: readonly string[];
  readonly help: boolean;
}

export function parseArgs(spec: CommandSpec, argv: readonly string[]): Parsed {
  const flags = new Map<string, string | number | boolean>();
  const positionals: string[] = [];
  let rest: string[] = [];
  let help = false;
  const byName = new Map(spec.flags.map((f) => [f.name, f] as const));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      if (spec.rest === undefined) throw usage('takes no command after --');
      rest = argv.slice(i + 1) as string[];
      break;
    }
    if (a === '--help' || a === '-h') {
      help = true;
      continue;
    }
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq === -1 ? a.slice(2) : a.slice(2, eq);
      const f = byName.get(name);
      if (f === undefined) {
        const hint = didYouMean(name, [...spec.flags.map((x) => x.name), 'help'], (n) => `--${n}`);
        throw usage(`unknown flag --${name}${hint === '' ? ' (see --help)' : hint}`);
      }
      if (f.kind === 'boolean') {
        if (eq !== -1) throw usage(`--${name} takes no value`);
        flags.set(name, true);
        continue;
      }
      let v: string | undefined;
      if (eq !== -1) v = a.slice(eq + 1);
      else {
        v = argv[i + 1];
        i++;
      }
      if (v === undefined) throw usage(`--${name} needs a value`);
      if (f.kind === 'number') {
        const n = Number(v);
        if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw usage(`--${name} must be a number ≥ 0 (got ${JSON.stringify(v)})`);
        flags.set(name, n);
      } else flags.set(name, v);
      continue;
    }
    // A command that takes `-- CMD…` and got a word it has no place for: the CMD without its
    // `--` (`hq fence run --role cron echo hi`). Say where the -- goes, before a flag of CMD's
    // (`ls --all`) is taken for one of ours.
    if (spec.rest !== undefined && positionals.length >= (spec.positionals ?? []).length) {
      const fixed = [...argv.slice(0, i), '--', ...argv.slice(i)].map(shellWord).join(' ');
      throw usage(`unexpected argument ${JSON.stringify(a)}: put the command after -- (hq ${spec.name} ${fixed})`);
    }
    positionals.push(a);
  }
  if (!help) {
    for (const f of spec.flags) if (f.required === true && !flags.has(f.name)) throw usage(`--${f.name} is required (see --help)`);
    const want = spec.positionals ?? [];
    if (positionals.length > want.length) throw usage(`unexpected argument ${JSON.stringify(positionals[want.length])}`);
    want.forEach((p, idx) => {
      const v = positionals[idx];
      if (v === undefined) throw usage(`${p.name} is required (see --help)`);
      if (p.choices !== undefined && !p.choices.includes(v)) throw usage(`${p.name} must be one of ${p.choices.join(', ')} (got ${JSON.stringify(v)})${didYouMean(v, p.choices)}`);
    });
    if (spec.rest !== undefined && rest.length === 0) throw usage('give the command after -- (see --help)');
  }
  return { flags, positionals, rest, help };
}

/** Help is wrapped to 80 columns: the continuation lines start at `indent`. */
export function wrap(text: string, indent: number, width = 80): string {
  const words = text.split(/\s+/);
  const lines: string[] = [];
  let line = '';
  for (const w of words) {
    if (line.length + w.length + 1 > width - indent && line !== '') {
      lines.push(line);
      line = w;
    } else line = line === '' ? w : `${line} ${w}`;
  }
  if (line !== '') lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

export function helpText(spec: CommandSpec): string {
  const parts = [`hq ${spec.name}`];
  for (const p of spec.positionals ?? []) parts.push(p.choices !== undefined ? p.choices.join('|') : p.name);
  for (const f of spec.flags) {
    const one = f.kind === 'boolean' ? `--${f.name}` : `--${f.name} ${f.value ?? 'V'}`;
    parts.push(f.required === true ? one : `[${one}]`);
  }
  if (spec.rest !== undefined) parts.push(`-- ${spec.rest.name}`);
  const out = [`Usage: ${wrap(parts.join(' '), 7)}`, '', wrap(spec.summary, 0), ''];
  const rows: [string, string][] = [];
  for (const p of spec.positionals ?? []) rows.push([p.choices !== undefined ? p.choices.join('|') : p.name, p.help]);
  if (spec.rest !== undefined) rows.push([`-- ${spec.rest.name}`, spec.rest.help]);
  for (const f of spec.flags) rows.push([f.kind === 'boolean' ? `--${f.name}` : `--${f.name} ${f.value ?? 'V'}`, f.help]);
  rows.push(['--help', 'Prints this help and exits 0.']);
  const w = Math.max(...rows.map((r) => r[0].length)) + 2;
  out.push('Options:');
  for (const [k, v] of rows) out.push(`  ${k.padEnd(w)}${wrap(v, w + 2)}`);
  out.push('', wrap(`Exit codes: ${spec.exits}`, 2), '');
  return out.join('\n');
}

export function flagString(p: Parsed, name: string): string | undefined {
  const v = p.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}

export function flagNumber(p: Parsed, name: string): number | undefined {
  const v = p.flags.get(name);
  return typeof v === 'number' ? v : undefined;
}

export function flagBool(p: Parsed, name: string): boolean {
  return p.flags.get(name) === true;
}

/**
 * One command from its argv (after the command's name): parses it, prints the help or loads and
 * runs the command, and maps errors to exit codes — a CliError its own, a ConfigError 2,
 * anything else 1 — with one line on stderr and never a stack trace.
 */
export async function runCommand(spec: CommandSpec, load: () => Promise<(p: Parsed) => Promise<number>>, argv: readonly string[]): Promise<number> {
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
    if (argv.includes('--json')) process.stdout.write(`${JSON.stringify({ ok: false, error: err instanceof ConfigError ? 'config' : code === 2 ? 'usage' : 'failed', message, exitCode: code })}\n`);
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
