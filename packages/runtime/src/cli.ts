/**
 * The command-line kit of every hq program (`hq`, `hq-arbiter`): a command is a spec (its name,
 * words, flags, help and exit codes), and the parser, `--help` and docs/REFERENCE.md are made from
 * the specs. No third-party dependency: the fence path loads it. Every flag has a full-sentence
 * help that states its default; an unknown flag, a missing value or a bad number is a usage error
 * (exit 2, one line), with the nearest known flag when the unknown one looks like a typo.
 */
import { didYouMean } from './suggest.js';

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
  /** `--name=` (an empty value) means something; where the parser refuses empty values, it is taken. */
  readonly mayBeEmpty?: boolean;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly flags: readonly FlagSpec[];
  readonly positionals?: readonly {
    readonly name: string;
    readonly help: string;
    readonly choices?: readonly string[];
  }[];
  /** Takes `-- CMD…`. */
  readonly rest?: { readonly name: string; readonly help: string };
  readonly exits: string;
}

export interface Parsed {
  readonly flags: ReadonlyMap<string, string | number | boolean>;
  readonly positionals: readonly string[];
  readonly rest: readonly string[];
  readonly help: boolean;
}

export interface ParseOptions {
  /** The program, as error hints write it. Default: hq. */
  readonly program?: string;
  /**
   * The words are the program's to check (it finds its command among them, and checks each
   * command's own): they are collected as they come, after `--` too, and `-x` is an unknown flag.
   */
  readonly freeWords?: boolean;
  /** `--name=` is "needs a value" unless the flag says `mayBeEmpty`. */
  readonly refuseEmpty?: boolean;
}

export function parseArgs(spec: CommandSpec, argv: readonly string[], options: ParseOptions = {}): Parsed {
  const program = options.program ?? 'hq';
  const flags = new Map<string, string | number | boolean>();
  const positionals: string[] = [];
  let rest: string[] = [];
  let help = false;
  const byName = new Map(spec.flags.map((f) => [f.name, f] as const));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      if (options.freeWords === true) {
        positionals.push(...argv.slice(i + 1));
        break;
      }
      if (spec.rest === undefined) throw usage('takes no command after --');
      rest = argv.slice(i + 1) as string[];
      break;
    }
    if (a === '--help' || a === '-h') {
      help = true;
      continue;
    }
    if (a.startsWith('--')) {
      i += readFlag(spec, byName, a, argv[i + 1], options, flags);
      continue;
    }
    if (options.freeWords === true) {
      if (a.startsWith('-') && a !== '-') throw usage(`unknown flag ${a}`);
      positionals.push(a);
      continue;
    }
    // A command that takes `-- CMD…` and got a word it has no place for: the CMD without its
    // `--` (`hq fence run --role cron echo hi`). Say where the -- goes, before a flag of CMD's
    // (`ls --all`) is taken for one of ours.
    if (spec.rest !== undefined && positionals.length >= (spec.positionals ?? []).length) {
      const fixed = [...argv.slice(0, i), '--', ...argv.slice(i)].map(shellWord).join(' ');
      throw usage(
        `unexpected argument ${JSON.stringify(a)}: put the command after -- (${program} ${spec.name} ${fixed})`,
      );
    }
    positionals.push(a);
  }
  if (!help && options.freeWords !== true) checkComplete(spec, flags, positionals, rest);
  return { flags, positionals, rest, help };
}

/**
 * One `--name[=value]` into `flags`; `next` is the word after it, the value of `--name value`.
 * Returns how many words after this one it used (0 or 1).
 */
function readFlag(
  spec: CommandSpec,
  byName: ReadonlyMap<string, FlagSpec>,
  a: string,
  next: string | undefined,
  options: ParseOptions,
  flags: Map<string, string | number | boolean>,
): number {
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
    return 0;
  }
  const v = eq !== -1 ? a.slice(eq + 1) : next;
  if (v === undefined || (v === '' && options.refuseEmpty === true && f.mayBeEmpty !== true))
    throw usage(`--${name} needs a value`);
  if (f.kind === 'number') {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0)
      throw usage(`--${name} must be a number ≥ 0 (got ${JSON.stringify(v)})`);
    flags.set(name, n);
  } else flags.set(name, v);
  return eq === -1 ? 1 : 0;
}

/** After the words: every required flag and positional given, positionals from their choices, the `-- CMD`. */
function checkComplete(
  spec: CommandSpec,
  flags: ReadonlyMap<string, unknown>,
  positionals: readonly string[],
  rest: readonly string[],
): void {
  for (const f of spec.flags)
    if (f.required === true && !flags.has(f.name)) throw usage(`--${f.name} is required (see --help)`);
  const want = spec.positionals ?? [];
  if (positionals.length > want.length) throw usage(`unexpected argument ${JSON.stringify(positionals[want.length])}`);
  want.forEach((p, idx) => {
    const v = positionals[idx];
    if (v === undefined) throw usage(`${p.name} is required (see --help)`);
    if (p.choices !== undefined && !p.choices.includes(v))
      throw usage(
        `${p.name} must be one of ${p.choices.join(', ')} (got ${JSON.stringify(v)})${didYouMean(v, p.choices)}`,
      );
  });
  if (spec.rest !== undefined && rest.length === 0) throw usage('give the command after -- (see --help)');
}

/**
 * The flags of a whole program, for parsing its command line before the command is known. One
 * name has one kind in every command that takes it.
 */
export function everyFlag(specs: readonly CommandSpec[]): FlagSpec[] {
  const byName = new Map<string, FlagSpec>();
  for (const f of specs.flatMap((s) => s.flags)) {
    const seen = byName.get(f.name);
    if (seen !== undefined && seen.kind !== f.kind)
      throw new Error(`--${f.name} is a ${seen.kind} flag in one command and a ${f.kind} flag in another`);
    if (seen === undefined || f.mayBeEmpty === true) byName.set(f.name, f);
  }
  return [...byName.values()];
}

/** A flag the program knows given to a command that does not take it. */
export function refuseOtherFlags(spec: CommandSpec, p: Parsed): void {
  for (const name of p.flags.keys()) {
    if (!spec.flags.some((f) => f.name === name)) throw usage(`--${name} does not apply here`);
  }
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

/** `NAME --flag V [--other]…`, a command's usage line after the program. */
function usageLine(spec: CommandSpec, program: string): string {
  // A program of one command (hq-agent) names none.
  const parts = [spec.name === '' ? program : `${program} ${spec.name}`];
  for (const p of spec.positionals ?? []) parts.push(p.choices !== undefined ? p.choices.join('|') : p.name);
  for (const f of spec.flags) {
    const one = f.kind === 'boolean' ? `--${f.name}` : `--${f.name} ${f.value ?? 'V'}`;
    parts.push(f.required === true ? one : `[${one}]`);
  }
  if (spec.rest !== undefined) parts.push(`-- ${spec.rest.name}`);
  return wrap(parts.join(' '), 7);
}

/** Rows of an Options table, padded to one column. */
function optionRows(rows: readonly (readonly [string, string])[]): string[] {
  const w = Math.max(...rows.map((r) => r[0].length)) + 2;
  return rows.map(([k, v]) => `  ${k.padEnd(w)}${wrap(v, w + 2)}`);
}

/** The `--help` of one command, or of a group of commands (`token issue|revoke|list`) as one text. */
export function helpText(specs: CommandSpec | readonly CommandSpec[], program = 'hq'): string {
  const all: readonly CommandSpec[] = Array.isArray(specs) ? specs : [specs as CommandSpec];
  const out = [`Usage: ${all.map((s) => usageLine(s, program)).join('\n       ')}`, ''];
  for (const s of all) out.push(wrap(all.length > 1 ? `${s.name}: ${s.summary}` : s.summary, 0), '');
  const rows: [string, string][] = [];
  const row = (k: string, v: string): void => {
    if (!rows.some((r) => r[0] === k)) rows.push([k, v]);
  };
  for (const spec of all) {
    for (const p of spec.positionals ?? []) row(p.choices !== undefined ? p.choices.join('|') : p.name, p.help);
    if (spec.rest !== undefined) row(`-- ${spec.rest.name}`, spec.rest.help);
    for (const f of spec.flags) row(f.kind === 'boolean' ? `--${f.name}` : `--${f.name} ${f.value ?? 'V'}`, f.help);
  }
  row('--help', 'Prints this help and exits 0.');
  out.push('Options:', ...optionRows(rows));
  const exits = [...new Set(all.map((s) => s.exits))];
  const exitLine =
    exits.length === 1 ? `Exit codes: ${exits[0]}` : `Exit codes: ${all.map((s) => `${s.name}: ${s.exits}`).join(' ')}`;
  out.push('', wrap(exitLine, 2), '');
  return out.join('\n');
}

/** A program's own help: what it is, one line per command (the first sentence of its summary), its common flags. */
export function programHelp(program: {
  readonly usage: string;
  readonly about: string;
  readonly commands: readonly CommandSpec[];
  readonly flags: readonly FlagSpec[];
  readonly footer: string;
}): string {
  const first = (s: string): string => s.split(/(?<=\.)\s/)[0] as string;
  const width = Math.max(...program.commands.map((c) => c.name.length)) + 4;
  return [
    `Usage: ${program.usage}`,
    '',
    wrap(program.about, 0),
    '',
    'Commands:',
    ...program.commands.map((c) => `  ${c.name.padEnd(width)}${wrap(first(c.summary), width + 2)}`),
    '',
    'Options:',
    ...optionRows([
      ...program.flags.map(
        (f) => [f.kind === 'boolean' ? `--${f.name}` : `--${f.name} ${f.value ?? 'V'}`, f.help] as const,
      ),
      ['--help', 'Prints this help and exits 0.'],
    ]),
    '',
    wrap(program.footer, 0),
    '',
  ].join('\n');
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
