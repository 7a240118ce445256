import t from 'tap';
import { VERSION } from '../../packages/runtime/src/version.js';
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, buildDist, childEnv, startArbiter, writeConfig } from './child.js';
import { arbiterCommand } from './helper.js';
import { COMMANDS } from '../../apps/arbiter/src/commands.js';

/** In-process: the same `main` the bin runs, with stdout and stderr captured. */
/** Through the built bin, as an operator runs it. */
function spawnRun(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  buildDist();
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv(), timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

t.test('the built bin prints help, refuses a usage error with one line and exit 2, and runs a check', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const [help, usage, check] = await Promise.all([
    spawnRun(['--help']),
    spawnRun(['frobnicate']),
    spawnRun(['check', '--config', config]),
  ]);
  t.equal(help.code, 0, '--help exits 0');
  t.match(help.stdout, /^Usage: hq-arbiter/, 'usage text');
  t.equal(usage.code, 2, 'a usage error exits 2');
  t.equal(usage.stderr, 'hq-arbiter: unknown command "frobnicate" (try --help)\n', 'one line naming the problem');
  t.equal(check.code, 0, 'check exits 0');
  t.match(JSON.parse(check.stdout), { promoted: false, holder: null }, 'check prints its result');
});

t.test('--help for every command prints full-sentence help and exits 0', async (t) => {
  const all = [['--help'], ['serve', '--help'], ['token', '--help'], ['check', '--help'], ['backup', '--help']];
  const results = await Promise.all(all.map((args) => arbiterCommand(args)));
  for (const [i, args] of all.entries()) {
    const r = results[i]!;
    t.equal(r.code, 0, `${args.join(' ')} exits 0`);
    t.match(r.stdout, /^Usage: hq-arbiter/, `${args.join(' ')} starts with usage`);
    t.match(
      r.stdout,
      /--config PATH\s+Read the configuration from PATH\./,
      `${args.join(' ')} explains --config in a sentence`,
    );
  }
});

t.test(
  "each command's --help is made from its spec: every flag, a group's commands together, 80 columns",
  async (t) => {
    for (const { spec } of COMMANDS) {
      const r = await arbiterCommand([...spec.name.split(' '), '--help']);
      t.equal(r.code, 0, `${spec.name} --help exits 0`);
      t.match(r.stdout, `Usage: hq-arbiter ${spec.name}`, `${spec.name} --help has its usage line`);
      for (const f of spec.flags)
        t.match(r.stdout, new RegExp(`\\n  --${f.name}\\b`), `${spec.name} --help explains --${f.name}`);
      t.same(
        r.stdout.split('\n').filter((l) => [...l].length > 80),
        [],
        `${spec.name} --help fits 80 columns`,
      );
    }
    const group = await arbiterCommand(['token', '--help']);
    t.match(
      group.stdout,
      /^Usage: hq-arbiter token issue [^\n]*\n(.*\n)? {7}hq-arbiter token revoke [^\n]*\n {7}hq-arbiter token list /,
      'token --help: the three token commands',
    );
    const top = await arbiterCommand(['--help']);
    for (const { spec } of COMMANDS) t.match(top.stdout, `\n  ${spec.name} `, `hq-arbiter --help lists ${spec.name}`);
    t.same(
      top.stdout.split('\n').filter((l) => [...l].length > 80),
      [],
      'hq-arbiter --help fits 80 columns',
    );
  },
);

t.test('an unknown flag or command names the nearest known one', async (t) => {
  const cases: [string[], string][] = [
    [['--confg', 'x'], 'hq-arbiter: unknown flag --confg (did you mean --config?)\n'],
    [['chek'], 'hq-arbiter: unknown command "chek" (did you mean check?)\n'],
    [['token', 'isue', 'mbp'], 'hq-arbiter: unknown token command "isue" (did you mean issue?)\n'],
    [['frobnicate'], 'hq-arbiter: unknown command "frobnicate" (try --help)\n'],
  ];
  for (const [args, line] of cases) {
    const r = await arbiterCommand(args);
    t.equal(r.code, 2, `${args.join(' ')} exits 2`);
    t.equal(r.stderr, line, `${args.join(' ')}: ${line.trim()}`);
  }
  const v = await arbiterCommand(['--version']);
  t.same(v, { code: 0, stdout: `${VERSION}\n`, stderr: '' }, '--version prints the version alone');
});

t.test('usage errors print one line and exit 2', async (t) => {
  const all = [
    ['frobnicate'],
    ['--nope'],
    ['token', 'issue', 'Bad_Name'],
    ['token', 'issue', 'mbp', '--scope', 'root'],
    ['backup'],
    ['check', '--to', 'x'],
  ];
  const results = await Promise.all(all.map((args) => arbiterCommand(args)));
  for (const [i, args] of all.entries()) {
    const r = results[i]!;
    t.equal(r.code, 2, `${args.join(' ')} exits 2`);
    t.equal(r.stderr.trimEnd().split('\n').length, 1, `${args.join(' ')} prints one line`);
    t.match(r.stderr, /^hq-arbiter: /, `${args.join(' ')} names the program`);
  }
});

t.test('token issue prints the token alone once, list shows no secrets, revoke disables', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const issued = await arbiterCommand(['token', 'issue', 'mbp', '--scope', 'member', '--config', config]);
  t.equal(issued.code, 0, 'issue exits 0');
  t.match(issued.stdout, /^[0-9a-f]{64}\n$/, 'the token alone on one line');
  const token = issued.stdout.trim();
  const admin = await arbiterCommand(['token', 'issue', 'ops', '--scope', 'admin', '--config', config]);
  t.not(admin.stdout.trim(), token, 'every token is new');
  t.equal(statSync(join(dir, 'var', 'hq.db')).mode & 0o777, 0o600, 'the database is 0600');
  t.equal(statSync(join(dir, 'var')).mode & 0o777, 0o700, 'the data directory is 0700');
  const list = await arbiterCommand(['token', 'list', '--json', '--config', config]);
  t.equal(list.code, 0, 'list exits 0');
  const rows = JSON.parse(list.stdout);
  t.same(
    rows.map((r: { machine: string; scope: string }) => [r.machine, r.scope]),
    [
      ['mbp', 'member'],
      ['ops', 'admin'],
    ],
    'machines and scopes',
  );
  t.notOk(list.stdout.includes(token), 'no token in the list');
  const db = new Database(join(dir, 'var', 'hq.db'), { readonly: true });
  const stored = db.prepare('SELECT sha256 FROM tokens').all() as Array<{ sha256: string }>;
  db.close();
  t.ok(
    stored.every((r) => /^[0-9a-f]{64}$/.test(r.sha256) && r.sha256 !== token),
    'only hashes are stored',
  );
  const revoked = await arbiterCommand(['token', 'revoke', 'mbp', '--config', config]);
  t.equal(revoked.code, 0, 'revoke exits 0');
  const again = await arbiterCommand(['token', 'revoke', 'mbp', '--config', config]);
  t.equal(again.code, 1, 'revoking a machine without active tokens exits 1');
  const table = await arbiterCommand(['token', 'list', '--config', config]);
  t.match(table.stdout, /^ID\tMACHINE\tSCOPE/, 'a table by default');
  t.match(table.stdout, /\n1\tmbp\tmember\t\S+\t\d{4}-/, 'the revocation time is listed');
});

t.test(
  "token issue replaces the machine's token of that scope unless --keep-old; revoke --id ends an overlap",
  async (t) => {
    const dir = t.testdir();
    const config = writeConfig(dir);
    const { authenticate } = await import('../../apps/arbiter/src/auth.js');
    const { SqliteStore } = await import('../../apps/arbiter/src/store/sqlite/lease.js');
    const valid = (token: string): boolean => {
      const store = new SqliteStore({ dataDir: join(dir, 'var'), ttlSeconds: 1500 });
      try {
        // SQLite answers at once (the seam's Awaitable is a plain value here)
        return (authenticate(store, ['Authorization', `Bearer ${token}`]) as { ok: boolean }).ok;
      } finally {
        store.close();
      }
    };
    const first = await arbiterCommand(['token', 'issue', 'mbp', '--config', config]);
    t.equal(first.code, 0, 'the first issue exits 0');
    t.equal(first.stderr, '', 'nothing replaced, nothing said');
    const old = first.stdout.trim();
    const ops = (await arbiterCommand(['token', 'issue', 'ops', '--scope', 'admin', '--config', config])).stdout.trim();
    const second = await arbiterCommand(['token', 'issue', 'mbp', '--config', config]);
    t.equal(second.code, 0, 'reissue exits 0');
    t.match(second.stdout, /^[0-9a-f]{64}\n$/, 'the new token alone on stdout');
    t.equal(
      second.stderr,
      'hq-arbiter: replaced 1 earlier member token(s) of mbp; they fail from the next request on\n',
      'stderr says what was replaced',
    );
    t.notOk(valid(old), 'the old token fails from the next request on');
    t.ok(valid(second.stdout.trim()), 'the new token works');
    t.ok(valid(ops), "another machine's token is untouched");
    const overlap = await arbiterCommand(['token', 'issue', 'mbp', '--keep-old', '--config', config]);
    t.equal(overlap.code, 0, '--keep-old exits 0');
    t.equal(overlap.stderr, '', '--keep-old replaces nothing');
    t.ok(
      valid(second.stdout.trim()) && valid(overlap.stdout.trim()),
      'with --keep-old both tokens are valid (a rotation overlap)',
    );
    const rows = JSON.parse((await arbiterCommand(['token', 'list', '--json', '--config', config])).stdout) as Array<{
      id: number;
      machine: string;
      revoked: number | null;
    }>;
    const secondId = rows.filter((r) => r.machine === 'mbp' && r.revoked === null)[0]!.id;
    const one = await arbiterCommand(['token', 'revoke', 'mbp', '--id', String(secondId), '--config', config]);
    t.equal(one.code, 0, 'revoke --id exits 0');
    t.equal(one.stdout, `revoked 1 token(s) of mbp with id ${secondId}\n`, 'revoke --id says what it did');
    t.notOk(valid(second.stdout.trim()), 'the revoked id fails');
    t.ok(valid(overlap.stdout.trim()), 'the other token of mbp stays valid');
    const none = await arbiterCommand(['token', 'revoke', 'node-b', '--id', String(secondId), '--config', config]);
    t.equal(none.code, 1, "an id of another machine's token revokes nothing (exit 1)");
    const badId = await arbiterCommand(['token', 'revoke', 'mbp', '--id', 'x1', '--config', config]);
    t.equal(badId.code, 2, 'a bad --id exits 2');
    t.equal(
      badId.stderr,
      'hq-arbiter: --id must be a token id from "token list" (a positive integer)\n',
      'and says what to fix',
    );
  },
);

t.test('token issue refuses a name the scope cannot belong to: one line, exit 2, nothing written', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const cases: Array<[string, string[], RegExp]> = [
    [
      'a member token for a host that is not a candidate',
      ['laptop'],
      /^hq-arbiter: token issue: "laptop" is not a candidate \(candidates: mbp, node-b\); a member token acts for a candidate only/,
    ],
    ['a member token for the arbiter host', ['cloud-vm', '--scope', 'member'], /"cloud-vm" is not a candidate/],
    [
      'an admin token named after a candidate',
      ['mbp', '--scope', 'admin'],
      /^hq-arbiter: token issue: "mbp" is a candidate, whose token is member scope; name an admin token after its user \(the arbiter "cloud-vm"/,
    ],
    [
      'a query token named after a candidate',
      ['node-b', '--scope', 'query'],
      /"node-b" is a candidate.*name a query token/,
    ],
  ];
  for (const [name, args, msg] of cases) {
    const r = await arbiterCommand(['token', 'issue', ...args, '--config', config]);
    t.equal(r.code, 2, `${name} exits 2`);
    t.equal(r.stdout, '', `${name} prints no token`);
    t.equal(r.stderr.split('\n').length, 2, `${name} is one line`);
    t.match(r.stderr, msg, `${name} says why and what to do`);
  }
  t.notOk(existsSync(join(dir, 'var', 'hq.db')), 'nothing was written (not even the database)');
  const arb = await arbiterCommand(['token', 'issue', 'cloud-vm', '--scope', 'admin', '--config', config]);
  t.equal(arb.code, 0, 'an admin token for the arbiter host is issued');
  const dash = await arbiterCommand(['token', 'issue', 'grafana', '--scope', 'query', '--config', config]);
  t.equal(dash.code, 0, 'a query token for a dashboard is issued');
});

t.test('check runs one check against the database and backup writes an intact copy', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const c = await arbiterCommand(['check', '--config', config]);
  t.equal(c.code, 0, 'check exits 0');
  t.same(
    JSON.parse(c.stdout),
    { promoted: false, streak: 0, holder: null, generation: 0, ping: false, health: false, promotee: null },
    'the check result as JSON',
  );
  const to = join(dir, 'backup.db');
  const b = await arbiterCommand(['backup', '--to', to, '--config', config]);
  t.equal(b.code, 0, 'backup exits 0');
  t.equal(statSync(to).mode & 0o777, 0o600, 'the backup is 0600');
  const db = new Database(to, { readonly: true });
  t.equal(db.pragma('integrity_check', { simple: true }), 'ok', 'the backup is intact');
  const events = db.prepare("SELECT count(*) AS n FROM events WHERE event = 'arbiter-check'").get() as { n: number };
  t.equal(events.n, 1, 'the check left its event in the database');
  db.close();
});

t.test("the first start's admin-token line says how to install the token for the CLI", async (t) => {
  const dir = t.testdir();
  const a = await startArbiter(t, writeConfig(dir));
  const path = join(dir, 'var', 'admin.token');
  const line = a.lines.find((l) => l['msg'] === 'admin token written');
  t.equal(line?.['path'], path, 'the line names {dataDir}/admin.token');
  t.equal(
    line?.['install'],
    `install -m 0600 ${path} ~/.hq/admin-token (the agent's {stateDir}/admin-token), or export HQ_ADMIN_TOKEN="$(cat ${path})", for hq maintenance and hq failover`,
    'and where hq maintenance and hq failover look for it',
  );
  a.proc.kill('SIGTERM');
  t.match(await a.exited, { code: 0 }, 'the arbiter stops on SIGTERM');
});
