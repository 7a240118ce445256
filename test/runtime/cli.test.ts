/**
 * The command-line kit both programs run on (@hq/runtime/cli): a whole program's command line
 * parsed before its command is known, a flag of another command refused as such, empty values,
 * and the help of a group of commands.
 */
import t from 'tap';
import { everyFlag, helpText, parseArgs, refuseOtherFlags, type CommandSpec } from '../../packages/runtime/src/cli.js';

const ISSUE: CommandSpec = {
  name: 'token issue',
  summary: 'Issue a token.',
  positionals: [{ name: 'MACHINE', help: 'The machine.' }],
  flags: [{ name: 'scope', kind: 'string', value: 'SCOPE', help: 'The scope.' }],
  exits: '0 issued, 2 usage.',
};
const INIT: CommandSpec = {
  name: 'init',
  summary: 'Write a config.',
  flags: [
    {
      name: 'tailscale-bin',
      kind: 'string',
      value: 'PATH',
      mayBeEmpty: true,
      help: 'The tailscale CLI; empty turns ping off.',
    },
  ],
  exits: '0 done, 2 usage.',
};
const PROGRAM: CommandSpec = { name: '', summary: '', flags: everyFlag([ISSUE, INIT]), exits: '' };
const WHOLE = { program: 'hq-arbiter', freeWords: true, refuseEmpty: true } as const;

t.test("a program's command line: every word kept for the program, every flag of every command known", async (t) => {
  const p = parseArgs(PROGRAM, ['token', '--scope', 'admin', 'issue', 'mbp', '--', '--odd'], WHOLE);
  t.same(p.positionals, ['token', 'issue', 'mbp', '--odd'], 'the words in order, and after -- as words');
  t.equal(p.flags.get('scope'), 'admin', 'a flag between the words');
  t.throws(
    () => parseArgs(PROGRAM, ['token', '-x'], WHOLE),
    { exitCode: 2, message: 'unknown flag -x' },
    'a single-dash word is no word',
  );
  t.throws(
    () => parseArgs(PROGRAM, ['--scop', 'x'], WHOLE),
    { exitCode: 2, message: 'unknown flag --scop (did you mean --scope?)' },
    'the nearest flag of any command',
  );
  t.throws(
    () => parseArgs(PROGRAM, ['--scope='], WHOLE),
    { exitCode: 2, message: '--scope needs a value' },
    'an empty value is refused',
  );
  t.equal(
    parseArgs(PROGRAM, ['init', '--tailscale-bin='], WHOLE).flags.get('tailscale-bin'),
    '',
    'unless the flag gives empty a meaning',
  );
  t.equal(
    parseArgs(ISSUE, ['mbp', '--scope='], {}).flags.get('scope'),
    '',
    "hq's commands take an empty value as given",
  );
  t.throws(
    () => refuseOtherFlags(INIT, parseArgs(PROGRAM, ['init', '--scope', 'x'], WHOLE)),
    { exitCode: 2, message: '--scope does not apply here' },
    "another command's flag does not apply",
  );
  t.doesNotThrow(
    () => refuseOtherFlags(ISSUE, parseArgs(PROGRAM, ['token', 'issue', 'mbp', '--scope', 'x'], WHOLE)),
    "the command's own flag does",
  );
  t.throws(
    () => everyFlag([ISSUE, { ...INIT, flags: [{ name: 'scope', kind: 'boolean', help: 'x' }] }]),
    /--scope is a string flag in one command and a boolean flag in another/,
    'one name, one kind',
  );
});

t.test('the help of a group of commands: each usage line, each summary named, the exit codes of each', async (t) => {
  const text = helpText(
    [ISSUE, { ...ISSUE, name: 'token revoke', summary: 'Revoke tokens.', exits: '0 revoked, 1 none.' }],
    'hq-arbiter',
  );
  t.match(
    text,
    /^Usage: hq-arbiter token issue MACHINE \[--scope SCOPE\]\n {7}hq-arbiter token revoke MACHINE \[--scope SCOPE\]\n/,
    'both usage lines',
  );
  t.match(text, /token issue: Issue a token\.\n\ntoken revoke: Revoke tokens\./, 'each summary under its name');
  t.equal(text.match(/--scope SCOPE {2}The scope\./g)?.length, 1, 'a shared flag once');
  t.match(
    text,
    /Exit codes: token issue: 0 issued, 2 usage\. token revoke: 0 revoked, 1 none\./,
    'the exit codes of each',
  );
  t.equal(helpText(ISSUE), helpText([ISSUE], 'hq'), 'one command alone is its own help');
});
