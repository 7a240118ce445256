/**
 * docs/REFERENCE.md is generated from the code (scripts/reference.mjs): the command specs `--help`
 * prints (of `hq` and `hq-arbiter`) and the config schemas the daemons validate with. A key or
 * flag added without updating the reference fails here.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

t.test('docs/REFERENCE.md is what scripts/reference.mjs makes of the current code', async (t) => {
  let problem = '';
  try {
    execFileSync(process.execPath, [join(ROOT, 'scripts/reference.mjs'), '--check'], {
      stdio: 'pipe',
      encoding: 'utf8',
    });
  } catch (err) {
    problem = String((err as { stderr?: string }).stderr ?? err);
  }
  t.equal(problem, '', 'up to date (else: node scripts/reference.mjs)');
});

t.test('the reference names every key with its owner, and every hq command', async (t) => {
  const text = readFileSync(join(ROOT, 'docs/REFERENCE.md'), 'utf8');
  for (const [key, owner] of [
    ['ttlSeconds', 'hq-arbiter'],
    ['heartbeatCron', 'hq-agent'],
    ['requestTimeoutSeconds', 'hq-agent'],
    ['probeTimeoutSeconds', 'both'],
  ] as const) {
    t.match(text, new RegExp(`\\| \`${key}\` \\| ${owner}`), `${key} is owned by ${owner}`);
  }
  for (const cmd of ['hq lease status', 'hq fence run', 'hq guard', 'hq doctor', 'hq standby snapshot', 'hq port run'])
    t.match(text, `### \`${cmd}`, `${cmd} has a section`);
  for (const cmd of [
    'serve',
    'token issue',
    'token revoke',
    'token list',
    'init',
    'join',
    'check',
    'backup',
    'migrate',
    'import elanous',
  ])
    t.match(text, `### \`hq-arbiter ${cmd}`, `hq-arbiter ${cmd} has a section`);
  t.match(text, '### `hq-agent`\n', 'hq-agent has a section, from its spec');
  t.match(text, "| `--config PATH` | The agent's JSON config file.", 'with its flags');
  t.notMatch(text, /\.\.\/shared/, 'no pointer outside the repository');
});
