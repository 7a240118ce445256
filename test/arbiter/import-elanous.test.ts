import t from 'tap';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseOldLease } from '../../apps/arbiter/src/import-elanous.js';
import { SqliteStore } from '../../apps/arbiter/src/store/sqlite/lease.js';
import { writeConfig } from './child.js';
import { arbiterCommand } from './helper.js';

t.test('parseOldLease reads the old record and refuses what is not one, with one reason', async (t) => {
  const ok = parseOldLease('{"holder":"mbp","generation":7,"expiresAt":1800000100,"ttlSeconds":1500,"views":{}}', 600);
  t.same(
    ok,
    { ok: true, value: { holder: 'mbp', generation: 7, expiresAt: 1800000100, ttlSeconds: 1500, released: false } },
    'the fields it uses; the rest ignored',
  );
  const iso = parseOldLease('{"holder":"mbp","generation":7,"renewedAt":"2027-01-15T08:00:00Z"}', 600);
  t.same(
    iso.ok && iso.value.expiresAt,
    Date.parse('2027-01-15T08:00:00Z') / 1000 + 600,
    'an ISO renewedAt + the TTL when expiresAt is absent; the config TTL stands in',
  );
  t.same(
    parseOldLease('{"holder":null,"generation":0}', 600),
    { ok: true, value: { holder: null, generation: 0, expiresAt: null, ttlSeconds: 600, released: false } },
    'a record that never granted',
  );
  const bad: [string, RegExp][] = [
    ['{"holder":"mbp","generation":7', /^is not complete JSON \(truncated\?\)$/],
    ['{"holder":"mbp" "generation":7}', /^is not valid JSON: .* at line 1, column 17$/],
    ['[7]', /^is not a JSON object$/],
    ['{"holder":"mbp","generation":-3}', /^generation must be an integer from 0 to 281474976710656 \(got -3\)$/],
    ['{"holder":"mbp"}', /^generation must be an integer from 0 to 281474976710656 \(got nothing\)$/],
    [
      '{"holder":"mbp","generation":281474976710657}',
      /^generation must be an integer from 0 to 281474976710656 \(got 281474976710657\)$/,
    ],
    ['{"holder":"mbp","generation":"7"}', /^generation must be an integer from 0 to 281474976710656 \(got "7"\)$/],
    ['{"holder":"MBP\\r","generation":7}', /^holder "MBP\\r" /],
    ['{"holder":"mbp","generation":7,"ttlSeconds":0}', /^ttlSeconds must be a positive number/],
    ['{"holder":"mbp","generation":7,"released":"yes"}', /^released must be true or false/],
    ['{"holder":"mbp","generation":7,"expiresAt":"soon"}', /^expiresAt must be epoch seconds or an ISO time/],
    ['{"holder":"mbp","generation":7,"renewedAt":-1}', /^renewedAt must be epoch seconds or an ISO time/],
  ];
  for (const [text, problem] of bad) {
    const r = parseOldLease(text, 600);
    t.equal(r.ok, false, `${text} is refused`);
    if (!r.ok) t.match(r.problem, problem, `${text}: ${r.problem}`);
  }
});

const NOW_MS = 1_800_000_000_000;
const clock = { now: () => NOW_MS };
async function run(args: string[]) {
  const { main } = await import('../../apps/arbiter/src/commands.js');
  let stdout = '';
  let stderr = '';
  const code = await main(args, { out: (s) => (stdout += s), err: (s) => (stderr += s) }, clock);
  return { code, stdout, stderr };
}

t.test('import elanous: the live old holder keeps HQ above the old generation, behind the old validity', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const lease = join(dir, 'lease.json');
  writeFileSync(lease, JSON.stringify({ holder: 'mbp', generation: 7, expiresAt: 1_800_000_030, ttlSeconds: 60 }));
  const dry = await run(['import', 'elanous', '--lease', lease, '--dry-run', '--config', config]);
  t.equal(dry.code, 0, 'a dry run exits 0');
  t.match(
    dry.stdout,
    /^would import elanous lease \(holder mbp, generation 7\): floor 7; mbp keeps HQ at generation 8, .*; nothing written\n$/,
    'says what it would do',
  );
  t.notOk(existsSync(join(dir, 'var', 'hq.db')), 'a dry run creates no database');
  const r = await run(['import', 'elanous', '--lease', lease, '--json', '--config', config]);
  t.equal(r.code, 0, 'the import exits 0');
  const out = JSON.parse(r.stdout) as {
    ok: boolean;
    floor: number;
    granted: { holder: string; generation: number; notBefore: number };
  };
  t.match(out, { ok: true, floor: 7, granted: { holder: 'mbp', generation: 8 } }, 'floor 7, mbp granted 8');
  t.ok(out.granted.notBefore >= 1_800_000_000 + 60, 'not before the old TTL from the import has passed');
  t.match(r.stderr, /retire the elanous arbiter-check line/, 'reminds to stop the old arbiter check');
  const store = new SqliteStore({ dataDir: join(dir, 'var'), ttlSeconds: 6 });
  const s = store.read();
  store.close();
  t.equal(s.floor, 7, 'the floor is stored');
  t.match(s.lease, { holder: 'mbp', generation: 8 }, 'the grant is stored');
  const again = await run(['import', 'elanous', '--lease', lease, '--config', config]);
  t.equal(again.code, 1, 'a second import is refused');
  t.equal(
    again.stderr,
    'hq-arbiter: import elanous: this installation has already granted generation 8 (holder mbp): the import is for a new installation; nothing changed\n',
    'one line',
  );
});

t.test('import elanous: an expired old lease sets the floor only', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const lease = join(dir, 'lease.json');
  writeFileSync(lease, JSON.stringify({ holder: 'mbp', generation: 12, expiresAt: 1_799_999_000 }));
  const r = await run(['import', 'elanous', '--lease', lease, '--config', config]);
  t.equal(r.code, 0, 'exit 0');
  t.match(
    r.stdout,
    /floor 12; no live old holder: run "hq lease acquire" on the host that should be HQ \(it gets generation 13 or more\)/,
    'says to acquire',
  );
  const store = new SqliteStore({ dataDir: join(dir, 'var'), ttlSeconds: 6 });
  const s = store.read();
  store.close();
  t.match(
    { floor: s.floor, holder: s.lease.holder, generation: s.lease.generation },
    { floor: 12, holder: null, generation: 0 },
    'nothing granted, floor 12',
  );
});

t.test('import elanous refuses bad files and usage with one line, writing nothing', async (t) => {
  const dir = t.testdir();
  const config = writeConfig(dir);
  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const cases: [string[], number, RegExp][] = [
    [
      ['--lease', write('trunc.json', '{"holder":"mbp","generation":7')],
      1,
      /^hq-arbiter: import elanous: .*trunc\.json: is not complete JSON \(truncated\?\); nothing changed\n$/,
    ],
    [
      ['--lease', write('neg.json', '{"holder":"mbp","generation":-1}')],
      1,
      /^hq-arbiter: import elanous: .*neg\.json: generation must be an integer from 0 to 281474976710656 \(got -1\); nothing changed\n$/,
    ],
    [
      ['--lease', join(dir, 'absent.json')],
      1,
      /^hq-arbiter: import elanous: cannot read .*absent\.json \(ENOENT\); nothing changed\n$/,
    ],
    [
      [
        '--lease',
        write('stranger.json', JSON.stringify({ holder: 'laptop', generation: 3, expiresAt: 1_800_000_100 })),
      ],
      1,
      /^hq-arbiter: import elanous: the old holder laptop is not one of the candidates: .*; nothing changed\n$/,
    ],
    [[], 2, /^hq-arbiter: import elanous needs --lease FILE/],
  ];
  for (const [extra, code, line] of cases) {
    const r = await run(['import', 'elanous', ...extra, '--config', config]);
    t.equal(r.code, code, `${extra.join(' ') || 'no --lease'}: exit ${code}`);
    t.match(r.stderr, line, r.stderr.trim());
    t.equal(r.stderr.split('\n').length, 2, 'one line');
  }
  const other = await run(['import', 'consul', '--lease', 'x', '--config', config]);
  t.match(
    other,
    { code: 2, stderr: 'hq-arbiter: import: unknown system "consul" (only elanous)\n' },
    'only elanous is known',
  );
  const store = new SqliteStore({ dataDir: join(dir, 'var'), ttlSeconds: 6 });
  const s = store.read();
  store.close();
  t.match({ floor: s.floor, generation: s.lease.generation }, { floor: 0, generation: 0 }, 'nothing was imported');
  const help = await arbiterCommand(['import', '--help']);
  t.match(help, { code: 0, stdout: /^Usage: hq-arbiter import elanous --lease FILE/ }, 'help');
  t.ok(readFileSync(config, 'utf8').length > 0, 'the config is untouched');
});
