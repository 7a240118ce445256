/**
 * `hq import elanous`: the parsers of the old files (tables), and the command through the built
 * bin against a home in the old layout: what it writes, what it only prints, and that a bad old
 * file or existing hq state changes nothing.
 */
import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  crontabReplacements,
  ELANOUS_PLAN,
  ELANOUS_POLLERS,
  parseOldConfig,
  parseOldHost,
  parseOldLocal,
  parseOldSeen,
} from '../../apps/agent/src/cli/import-elanous.js';
import { ROOT } from '../arbiter/child.js';
import { writeOldLayout } from './elanous-layout.js';
import { hq, shortDir } from './helpers.js';

t.test('the host file: a host name with no line end or one plain newline', async (t) => {
  t.same(parseOldHost('mbp'), { ok: true, value: 'mbp' }, 'no trailing newline (as elanous wrote it)');
  t.same(parseOldHost('node-b\n'), { ok: true, value: 'node-b' }, 'one newline');
  const crlf = parseOldHost('mbp\r\n');
  t.match(crlf, { ok: false, problem: /CR LF/ }, 'CR LF is refused, naming it');
  t.match(parseOldHost('MBP'), { ok: false, problem: /^holds "MBP", which / }, 'not a host');
  t.match(parseOldHost('mbp\n\n'), { ok: false }, 'two line ends');
});

t.test('the seen-generation marker: an integer ≥ 0', async (t) => {
  t.same(parseOldSeen('7'), { ok: true, value: 7 }, 'bare');
  t.same(parseOldSeen('7\n'), { ok: true, value: 7 }, 'with a newline');
  t.same(parseOldSeen('0\n'), { ok: true, value: 0 }, 'never seen');
  t.match(
    parseOldSeen('281474976710657'),
    { ok: false, problem: 'holds 281474976710657: a generation is an integer from 0 to 281474976710656' },
    'above the ceiling no real history reaches',
  );
  t.match(
    parseOldSeen('-3\n'),
    { ok: false, problem: 'holds -3: a generation is an integer from 0 to 281474976710656' },
    'negative',
  );
  t.match(parseOldSeen('7\r\n'), { ok: false, problem: /CR LF/ }, 'CR LF');
  t.match(parseOldSeen('seven'), { ok: false, problem: /not a generation/ }, 'not a number');
  t.match(parseOldSeen(''), { ok: false }, 'empty');
  t.match(parseOldSeen('99999999999999999'), { ok: false }, 'beyond a safe integer');
});

t.test('local.json: {holder, generation, confirmedAt, ttlSeconds}', async (t) => {
  t.same(
    parseOldLocal('{"holder":"mbp","generation":7,"confirmedAt":1800000000,"ttlSeconds":1500}'),
    { ok: true, value: { holder: 'mbp', generation: 7, ttlSeconds: 1500 } },
    'the old cache',
  );
  t.same(
    parseOldLocal('{"generation":0}'),
    { ok: true, value: { holder: null, generation: 0, ttlSeconds: null } },
    'a fresh one',
  );
  const bad: [string, RegExp][] = [
    ['{"holder":"mbp","generation":7', /^is not complete JSON \(truncated\?\)$/],
    ['{"holder":"mbp","generation":-1}', /^generation must be an integer from 0 to 281474976710656 \(got -1\)$/],
    ['{"holder":"Mbp","generation":1}', /^holder "Mbp" /],
    ['{"generation":1,"confirmedAt":true}', /^confirmedAt must be a time/],
    ['{"generation":1,"ttlSeconds":-5}', /^ttlSeconds must be a number ≥ 0/],
    ['"mbp"', /^is not a JSON object$/],
    ['{"generation":1,}', /^is not valid JSON: .* at line 1, column 17$/],
  ];
  for (const [text, problem] of bad) t.match(parseOldLocal(text), { ok: false, problem }, `${text} is refused`);
});

t.test('config.json: only the hq block is read, its types checked', async (t) => {
  const ok = parseOldConfig(
    '{"telegram":{"enabled":true},"hq":{"arbiter":"cloud-vm","standby":"node-b","ttlSeconds":1500,"healthUrls":{"mbp":"http://mbp:8471/v1/health"},"colour":"red"}}',
  );
  t.match(
    ok,
    { ok: true, value: { hq: { arbiter: 'cloud-vm', standby: 'node-b' }, unknown: ['colour'] } },
    'a key hq has no place for is named',
  );
  t.same(parseOldConfig('{"telegram":{}}'), { ok: true, value: { hq: {}, unknown: [] } }, 'no hq block');
  const bad: [string, RegExp][] = [
    ['{"hq":{"arbiter":"cloud-vm"', /truncated/],
    ['{"hq":[]}', /^hq must be a JSON object$/],
    ['{"hq":{"standby":"Node B"}}', /^hq\.standby "Node B" /],
    ['{"hq":{"ttlSeconds":"1500"}}', /^hq\.ttlSeconds must be a positive number/],
    ['{"hq":{"probeTimeoutSeconds":0}}', /^hq\.probeTimeoutSeconds must be a positive number/],
    ['{"hq":{"failOpenRoles":"cron"}}', /^hq\.failOpenRoles must be a list/],
    ['{"hq":{"healthUrls":["x"]}}', /^hq\.healthUrls must map/],
    ['{"hq":{"tailscaleBin":false}}', /^hq\.tailscaleBin must be a string/],
  ];
  for (const [text, problem] of bad) t.match(parseOldConfig(text), { ok: false, problem }, `${text} is refused`);
});

t.test('crontab lines: the heartbeat and the check go, a fenced job becomes hq fence run', async (t) => {
  const tab = [
    'MAILTO=me',
    '# */5 * * * * elanous hq fence --role cron old.sh',
    '*/10 * * * * /usr/local/bin/elanous hq heartbeat >> /tmp/hb.log 2>&1',
    '*/10 * * * * elanous hq arbiter-check',
    '*/5 * * * * elanous hq fence --role cron /home/me/job.sh --all  "two  spaces"',
    '0 3 * * * cd /srv && elanous hq fence --role=release-run -- npm run release',
    '@reboot elanous hq fence --verbose --role telegram-poller node bot.js',
    '*/30 * * * * elanous hq status',
    '*/30 * * * * elanous hq fence /x.sh',
    '*/30 * * * * run-elanous hq heartbeat',
    '*/30 * * * * /bin/other-job',
  ].join('\n');
  const r = crontabReplacements(tab);
  t.same(
    r.map((l) => [l.action, l.replacement]),
    [
      ['remove', null],
      ['remove', null],
      ['replace', '*/5 * * * * hq fence run --role cron -- /home/me/job.sh --all  "two  spaces"'],
      ['replace', '0 3 * * * cd /srv && hq fence run --role release-run -- npm run release'],
      ['replace', '@reboot hq fence run --role telegram-poller --verbose -- node bot.js'],
      ['review', null],
      ['review', null],
    ],
    'each elanous hq line with its replacement; comments, other programs and other lines left out',
  );
  t.match(r[5]?.why, /hq lease status/, 'a line with no direct replacement names the nearest hq command');
  t.same(
    r.flatMap((l) => (l.role === undefined ? [] : [l.role])),
    ['cron', 'release-run', 'telegram-poller'],
    'the roles the fenced jobs use',
  );
});

t.test("the plan written for the old system is deploy/replication/example-plan.json's", async (t) => {
  const example = JSON.parse(readFileSync(join(ROOT, 'deploy/replication/example-plan.json'), 'utf8')) as {
    replication: { plan: unknown; pollersOff: unknown };
  };
  t.same(ELANOUS_PLAN, example.replication.plan, 'the same plan');
  t.same(ELANOUS_POLLERS, example.replication.pollersOff, 'the same pollers');
});

const CRONTAB = '*/10 * * * * elanous hq heartbeat\n*/5 * * * * elanous hq fence --role cron /home/me/job.sh\n';

function home(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const dir = shortDir(t);
  writeOldLayout(dir, { host: 'mbp', seen: 7 });
  writeFileSync(join(dir, 'crontab'), CRONTAB);
  return dir;
}

const importIn = (dir: string, extra: string[] = []) =>
  hq(['import', 'elanous', '--crontab', join(dir, 'crontab'), ...extra], { env: { HOME: dir } });

t.test('import: a dry run shows everything and writes nothing; the import writes the agent state', async (t) => {
  const dir = home(t);
  const dry = await importIn(dir, ['--dry-run']);
  t.equal(dry.code, 0, 'a dry run exits 0');
  t.match(dry.stdout, /dry run: nothing written/, 'says it wrote nothing');
  t.match(dry.stdout, /seen generation: 7 /, 'the seen generation');
  t.match(
    dry.stdout,
    /for the arbiter's config \(arbiter\.json on cloud-vm\): \{"standby":"node-b","ttlSeconds":1500/,
    "prints the arbiter's keys",
  );
  t.match(
    dry.stdout,
    /→ \*\/5 \* \* \* \* hq fence run --role cron -- \/home\/me\/job\.sh/,
    'the fenced job’s replacement',
  );
  t.match(dry.stdout, /elanous hq heartbeat\n\s+→ remove: hq-agent heartbeats by itself/, 'the heartbeat line goes');
  t.notOk(existsSync(join(dir, '.hq')), 'nothing written');

  const r = await importIn(dir, ['--json']);
  t.equal(r.code, 0, 'the import exits 0');
  const out = JSON.parse(r.stdout) as {
    seenGeneration: { carried: number };
    arbiter: Record<string, unknown>;
    notCarried: string[];
  };
  t.equal(out.seenGeneration.carried, 7, 'generation 7 carried');
  t.same(out.notCarried, ['seenGenerationFile'], 'the marker path is said, not silently dropped');
  const hqDir = join(dir, '.hq');
  t.equal(statSync(hqDir).mode & 0o777, 0o700, 'state dir 0700');
  for (const f of readdirSync(hqDir)) t.equal(statSync(join(hqDir, f)).mode & 0o777, 0o600, `${f} is 0600`);
  t.equal(readFileSync(join(hqDir, 'seen-generation'), 'utf8'), '7\n', 'seen-generation 7');
  t.equal(readFileSync(join(hqDir, 'host'), 'utf8'), 'mbp\n', 'the host file');
  t.match(
    JSON.parse(readFileSync(join(hqDir, 'local.json'), 'utf8')),
    { holder: null, generation: 7, lockDelayPending: true, ttlSeconds: 1500 },
    'the start guard waits the old TTL',
  );
  const cfg = JSON.parse(readFileSync(join(hqDir, 'agent.json'), 'utf8')) as Record<string, unknown>;
  t.notOk(
    'standby' in cfg || 'ttlSeconds' in cfg || 'seenGenerationFile' in cfg,
    "no key of the arbiter's, nor the old marker's path",
  );
  t.match(
    cfg,
    { arbiter: 'cloud-vm', failOpenRoles: ['cron'], hostName: 'mbp', tailscaleBin: '', probeTimeoutSeconds: 2 },
    "the agent's keys",
  );
  t.ok(
    (cfg['roles'] as string[]).includes('seat-loop') && (cfg['roles'] as string[]).includes('conatus'),
    'roles include seat-loop and conatus',
  );
  t.match(
    cfg['replication'],
    { stateDir: join(dir, '.elanous'), pollersOff: ['telegram', 'discord'] },
    'a replication block that turns the old pollers off',
  );
  const seen = await hq(['seen'], { env: { HOME: dir } });
  t.match(seen, { code: 0, stdout: 'seen: generation 7\n' }, 'hq reads the written config and state');
});

t.test('existing hq state is refused without --force; with it the seen generation never goes down', async (t) => {
  const dir = home(t);
  t.equal((await importIn(dir)).code, 0, 'first import');
  writeFileSync(join(dir, '.hq', 'seen-generation'), '12\n', { mode: 0o600 });
  const again = await importIn(dir);
  t.equal(again.code, 1, 'refused');
  t.match(
    again.stderr,
    /^hq import elanous: hq is already set up here \(~\/\.hq\/agent\.json, .*\): --force replaces it .*; nothing changed\n$/,
    'one line',
  );
  t.equal(readFileSync(join(dir, '.hq', 'seen-generation'), 'utf8'), '12\n', 'unchanged');
  const forced = await importIn(dir, ['--force']);
  t.equal(forced.code, 0, '--force imports');
  t.equal(readFileSync(join(dir, '.hq', 'seen-generation'), 'utf8'), '12\n', 'the higher hq generation stays');
});

t.test('bad old files: one clear line each, exit 1, nothing written', async (t) => {
  const cases: [string, (dir: string) => void, RegExp][] = [
    [
      'truncated local.json',
      (d) => writeFileSync(join(d, '.elanous', 'hq', 'local.json'), '{"holder":"mbp","generation":7,"confi'),
      /local\.json is not complete JSON \(truncated\?\); nothing changed/,
    ],
    [
      'truncated config.json',
      (d) => writeFileSync(join(d, '.elanous', 'config.json'), '{"hq":{"arbiter":"cloud-vm",'),
      /config\.json is not complete JSON \(truncated\?\); nothing changed/,
    ],
    [
      'a host file with CR LF',
      (d) => writeFileSync(join(d, '.elanous-hq', 'host'), 'mbp\r\n'),
      /host has a CR LF \(Windows\) line end: .*; nothing changed/,
    ],
    [
      'a negative generation',
      (d) => writeFileSync(join(d, '.elanous-hq', 'seen-generation'), '-3\n'),
      /seen-generation holds -3: a generation is an integer from 0 to 281474976710656; nothing changed/,
    ],
    [
      'a negative generation in local.json',
      (d) => writeFileSync(join(d, '.elanous', 'hq', 'local.json'), '{"generation":-1}'),
      /local\.json generation must be an integer from 0 to 281474976710656 \(got -1\); nothing changed/,
    ],
    [
      'hostName against the host file',
      (d) => writeFileSync(join(d, '.elanous-hq', 'host'), 'node-b'),
      /the host file names node-b but hq\.hostName in config\.json names mbp/,
    ],
    [
      'an hq block hq refuses',
      (d) => writeOldLayout(d, { host: 'mbp', hq: { failOpenRoles: ['ledger-cli'] } }),
      /the old hq block does not make a valid agent config: .*ledger-cli.*; nothing changed/,
    ],
  ];
  for (const [name, spoil, line] of cases) {
    const dir = home(t);
    spoil(dir);
    const r = await importIn(dir);
    t.equal(r.code, 1, `${name}: exit 1`);
    t.match(r.stderr, line, `${name}: ${r.stderr.trim()}`);
    t.equal(r.stderr.split('\n').length, 2, `${name}: one line`);
    t.notOk(existsSync(join(dir, '.hq')), `${name}: nothing written`);
  }
  const empty = shortDir(t);
  const none = await hq(['import', 'elanous', '--crontab', '/dev/null'], { env: { HOME: empty } });
  t.match(none, { code: 1, stderr: /no elanous HQ files under ~/ }, 'nothing to import is said');
  const usage = await hq(['import', 'elanous', '--bogus'], { env: { HOME: empty } });
  t.equal(usage.code, 2, 'a usage error exits 2');
});
