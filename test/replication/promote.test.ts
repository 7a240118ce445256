import t from 'tap';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { buildSnapshot } from '../../apps/agent/src/replication/snapshot.js';
import { pushGeneration } from '../../apps/agent/src/replication/push.js';
import { formatPromote, promote, PromoteError } from '../../apps/agent/src/replication/promote.js';
import { config, peer, ROOT, tmp, TOKEN, write } from './helpers.js';

const T0 = Date.parse('2026-12-01T07:00:00.000Z');
/** The pollers the shipped example (the old system's configuration) turns off. */
const EXAMPLE = JSON.parse(readFileSync(join(ROOT, 'deploy/replication/example-plan.json'), 'utf8')) as {
  replication: { pollersOff: string[] };
};
const POLLERS_OFF = EXAMPLE.replication.pollersOff;

/** A standby folder with verified core and big generations, pushed once over a real peer server. */
async function template(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const base = tmp(t);
  const cfg = config(base, {
    smallBytes: 100_000,
    plan: {
      files: [{ path: 'config.json' }, { path: 'ledger.txt' }, { path: 'huge.bin' }],
      dirs: [{ path: 'decisions' }],
    },
  });
  write(
    cfg.stateDir,
    'config.json',
    JSON.stringify({ hq: { hostName: 'mbp' }, telegram: { enabled: true, token: 'x' }, keep: 1 }),
  );
  write(cfg.stateDir, 'ledger.txt', 'ledger\n');
  write(cfg.stateDir, 'decisions/d1/one.md', 'one\n');
  write(cfg.stateDir, 'huge.bin', Buffer.alloc(200_000, 3));
  const standbyDir = join(base, 'standby-b');
  const p = await peer(t, standbyDir);
  const gens: Record<string, string> = {};
  for (const [i, tier] of (['core', 'big'] as const).entries()) {
    const g = await buildSnapshot({
      cfg,
      tier,
      host: 'mbp',
      lease: { generation: 3, holder: 'mbp' },
      now: () => T0 + i * 1000,
    });
    const r = await pushGeneration({
      dir: g.dir,
      baseUrl: p.url,
      token: TOKEN,
      timeoutSeconds: 10,
      chunkBytes: 1 << 20,
    });
    if (!r.ok) throw new Error(`push failed: ${r.message}`);
    gens[tier] = g.manifest.generation;
  }
  await p.app.close();
  return { standbyDir, gens };
}

let made: Promise<{ standbyDir: string; gens: Record<string, string> }> | null = null;

/** A private copy of the template standby (links kept as links), with an hq config beside it. */
async function standby(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  made ??= template(tap);
  const tpl = await made;
  const base = tmp(t);
  const standbyDir = join(base, 'standby-b');
  cpSync(tpl.standbyDir, standbyDir, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  const hqDir = join(base, 'hqcfg');
  write(hqDir, 'config.json', JSON.stringify({ hq: { hostName: 'node-b', arbiter: 'cloud-vm' } }));
  return { base, standbyDir, gens: tpl.gens, hqConfig: join(hqDir, 'config.json'), to: join(base, 'promoted') };
}
const tap = t;

t.test(
  "promote copies the verified tiers with modes and times, turns the example's pollers off and injects the host hq block",
  async (t) => {
    const s = await standby(t);
    const core = join(s.standbyDir, 'core', s.gens['core'] as string);
    chmodSync(join(core, 'ledger.txt'), 0o640);
    utimesSync(join(core, 'ledger.txt'), new Date('2026-01-02T03:04:05Z'), new Date('2026-01-02T03:04:05Z'));
    t.same(POLLERS_OFF, ['telegram', 'discord'], "the example lists the old system's pollers");
    const summary = await promote({
      standbyDir: s.standbyDir,
      to: s.to,
      tiers: ['core', 'big'],
      hqConfig: s.hqConfig,
      pollersOff: POLLERS_OFF,
    });
    t.equal(readFileSync(join(s.to, 'ledger.txt'), 'utf8'), 'ledger\n', 'a core file is promoted');
    t.equal(readFileSync(join(s.to, 'huge.bin')).length, 200_000, 'a big file is promoted');
    t.equal(
      readFileSync(join(s.to, 'decisions/d1/one.md'), 'utf8'),
      'one\n',
      'a file of a planned directory is promoted',
    );
    t.equal(statSync(join(s.to, 'ledger.txt')).mode & 0o777, 0o640, 'the file mode is kept');
    t.equal(
      statSync(join(s.to, 'ledger.txt')).mtime.toISOString(),
      '2026-01-02T03:04:05.000Z',
      'the file time is kept',
    );
    t.equal(statSync(s.to).mode & 0o777, 0o700, 'DIR is 0700');
    const cfg = JSON.parse(readFileSync(join(s.to, 'config.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    t.same(cfg['telegram'], { enabled: false, token: 'x' }, 'telegram is turned off, its other keys kept');
    t.same(cfg['discord'], { enabled: false }, 'discord is turned off even when absent');
    t.same(cfg['hq'], { hostName: 'node-b', arbiter: 'cloud-vm' }, "the host's hq block is injected");
    t.same(
      Object.keys(cfg).sort(),
      ['discord', 'hq', 'keep', 'telegram'],
      'exactly those keys are written, nothing else',
    );
    t.equal(cfg['keep'] as unknown, 1, 'the other keys are as received');
    t.same(summary.pollersOff, ['telegram', 'discord'], 'the summary names the keys turned off');
    const pre = JSON.parse(readFileSync(join(s.to, 'config.json.pre-promote'), 'utf8')) as Record<string, unknown>;
    t.same(pre['telegram'], { enabled: true, token: 'x' }, 'config.json.pre-promote keeps the copy as received');
    t.notOk('hq' in pre, 'the received copy never had the old host hq block');
    t.equal(summary.files, 4, 'the summary counts the files');
    t.equal(summary.hq, 'node-b', 'the summary names the host');
    t.match(
      formatPromote(summary),
      new RegExp(
        `^promoted ${s.to} core=${s.gens['core']} big=${s.gens['big']} files=4 pollers-off=telegram,discord hq=node-b [0-9.]+s$`,
      ),
      "the one-line summary is the seeds' shape",
    );
    t.notOk(existsSync(join(s.to, 'MANIFEST.json')), 'index files are not part of the promoted state');
  },
);

t.test('with no pollersOff configured, promotion turns nothing off, writes no poller key and says so', async (t) => {
  const s = await standby(t);
  const received = readFileSync(join(s.standbyDir, 'core', s.gens['core'] as string, 'config.json'), 'utf8');
  const summary = await promote({ standbyDir: s.standbyDir, to: s.to, tiers: ['core', 'big'] });
  t.equal(readFileSync(join(s.to, 'config.json'), 'utf8'), received, 'config.json is byte for byte the received copy');
  t.notOk(existsSync(join(s.to, 'config.json.pre-promote')), 'no pre-promote copy: nothing changed');
  t.same(summary.pollersOff, [], 'the summary lists no key turned off');
  t.match(formatPromote(summary), / pollers-off=none hq=- /, 'the one line says no poller was turned off');
  const withHq = await promote({
    standbyDir: s.standbyDir,
    to: `${s.to}-hq`,
    tiers: ['core'],
    hqConfig: s.hqConfig,
    pollersOff: [],
  });
  const cfg = JSON.parse(readFileSync(join(`${s.to}-hq`, 'config.json'), 'utf8')) as Record<string, unknown>;
  t.same(
    cfg['telegram'],
    { enabled: true, token: 'x' },
    'with only the hq block injected, the poller stays as received',
  );
  t.notOk('discord' in cfg, 'and no poller key is added');
  t.match(formatPromote(withHq), / pollers-off=none hq=node-b /, 'the line says so');
});

t.test('pollersOff key paths: nested objects, booleans and absent keys; a bad path refuses', async (t) => {
  const s = await standby(t);
  const summary = await promote({
    standbyDir: s.standbyDir,
    to: s.to,
    tiers: ['core'],
    pollersOff: ['bots.slack', 'telegram.enabled'],
  });
  const cfg = JSON.parse(readFileSync(join(s.to, 'config.json'), 'utf8')) as Record<string, unknown>;
  t.same(cfg['bots'], { slack: { enabled: false } }, 'an absent nested key becomes {enabled: false}');
  t.same(cfg['telegram'], { enabled: false, token: 'x' }, 'a boolean at the path becomes false');
  t.same(summary.pollersOff, ['bots.slack', 'telegram.enabled'], 'the summary names them');
  await t.rejects(
    promote({ standbyDir: s.standbyDir, to: `${s.to}-2`, tiers: ['core'], pollersOff: ['keep.x'] }),
    { name: 'PromoteError', message: /config.json keep is not an object \(pollersOff keep.x\)/ },
    'a path through a non-object refuses',
  );
  t.notOk(existsSync(`${s.to}-2`), 'and creates nothing');
  await t.rejects(
    promote({ standbyDir: s.standbyDir, to: `${s.to}-3`, tiers: ['core'], pollersOff: ['__proto__.x'] }),
    { name: 'PromoteError', message: /not a key path/ },
    'a prototype path refuses',
  );
});

t.test('a dry run verifies and plans but creates nothing', async (t) => {
  const s = await standby(t);
  const summary = await promote({
    standbyDir: s.standbyDir,
    to: s.to,
    tiers: ['core', 'big'],
    hqConfig: s.hqConfig,
    pollersOff: POLLERS_OFF,
    dryRun: true,
  });
  t.equal(summary.dryRun, true, 'the summary says dry run');
  t.notOk(existsSync(s.to), 'DIR is not created');
  t.equal(
    formatPromote(summary),
    `promotion plan ${s.to} core=${s.gens['core']} big=${s.gens['big']} files=4 pollers-off=telegram,discord`,
    'the plan line names the generations and the pollers it would turn off',
  );
});

type Setup = Awaited<ReturnType<typeof standby>>;
const core = (s: Setup) => join(s.standbyDir, 'core', s.gens['core'] as string);
const rewriteSums = (s: Setup, f: (text: string) => string) => {
  const p = join(core(s), 'SHA256SUMS');
  writeFileSync(p, f(readFileSync(p, 'utf8')));
};
const rewriteManifest = (s: Setup, f: (m: Record<string, unknown>) => void) => {
  const p = join(core(s), 'MANIFEST.json');
  const m = JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
  f(m);
  writeFileSync(p, JSON.stringify(m));
};

// biome-ignore lint/suspicious/noConfusingVoidType: a fault either returns nothing or the options the command needs
const catalogue: readonly [string, (s: Setup) => void | { to?: string; hqConfig?: string }, RegExp][] = [
  ['a missing latest', (s) => unlinkSync(join(s.standbyDir, 'core', 'latest')), /latest is missing/],
  [
    'latest pointing out of the tier folder',
    (s) => {
      unlinkSync(join(s.standbyDir, 'core', 'latest'));
      symlinkSync(`../big/${s.gens['big']}`, join(s.standbyDir, 'core', 'latest'));
    },
    /latest points outside/,
  ],
  [
    'latest as an absolute path',
    (s) => {
      unlinkSync(join(s.standbyDir, 'core', 'latest'));
      symlinkSync(core(s), join(s.standbyDir, 'core', 'latest'));
    },
    /latest points outside/,
  ],
  [
    'latest as a plain folder, not a link',
    (s) => {
      unlinkSync(join(s.standbyDir, 'core', 'latest'));
      mkdirSync(join(s.standbyDir, 'core', 'latest'));
    },
    /latest is missing or not a link/,
  ],
  [
    'a generation folder that is a symlink',
    (s) => {
      renameSync(core(s), join(s.base, 'elsewhere'));
      symlinkSync(join(s.base, 'elsewhere'), core(s));
    },
    /is a symlink/,
  ],
  [
    'a tier folder that is a symlink',
    (s) => {
      renameSync(join(s.standbyDir, 'core'), join(s.base, 'core-moved'));
      symlinkSync(join(s.base, 'core-moved'), join(s.standbyDir, 'core'));
    },
    /tier folder is a symlink/,
  ],
  [
    'a file in the generation replaced by a symlink',
    (s) => {
      writeFileSync(join(s.base, 'evil'), 'ledger\n');
      unlinkSync(join(core(s), 'ledger.txt'));
      symlinkSync(join(s.base, 'evil'), join(core(s), 'ledger.txt'));
    },
    /symlink in generation: ledger.txt/,
  ],
  [
    'a subdirectory replaced by a symlink',
    (s) => {
      renameSync(join(core(s), 'decisions'), join(s.base, 'dec'));
      symlinkSync(join(s.base, 'dec'), join(core(s), 'decisions'));
    },
    /symlink in generation: decisions/,
  ],
  [
    'a MANIFEST.json that is a symlink',
    (s) => {
      renameSync(join(core(s), 'MANIFEST.json'), join(s.base, 'm.json'));
      symlinkSync(join(s.base, 'm.json'), join(core(s), 'MANIFEST.json'));
    },
    /MANIFEST.json is a symlink/,
  ],
  [
    'a tampered checksum',
    (s) => writeFileSync(join(core(s), 'ledger.txt'), 'LEDGER\n'),
    /checksum mismatch: ledger.txt/,
  ],
  [
    'a sums line that is not well formed',
    (s) => rewriteSums(s, (x) => x.replace('  ', ' ')),
    /SHA256SUMS line 1 is not/,
  ],
  [
    'an upper-case digest',
    (s) => rewriteSums(s, (x) => x.replace(/^[0-9a-f]{64}/, (h) => h.toUpperCase())),
    /SHA256SUMS line 1 is not/,
  ],
  ['a duplicated sums line', (s) => rewriteSums(s, (x) => `${x + x.split('\n')[0]}\n`), /twice/],
  [
    'a sums path that escapes',
    (s) => rewriteSums(s, (x) => x.replace('  ledger.txt', '  ../../../etc/passwd')),
    /SHA256SUMS line \d+: path may not hold/,
  ],
  [
    'an absolute sums path',
    (s) => rewriteSums(s, (x) => x.replace('  ledger.txt', '  /etc/passwd')),
    /must be relative/,
  ],
  [
    'a sums file without its final newline',
    (s) => rewriteSums(s, (x) => x.slice(0, -1)),
    /does not end with a newline/,
  ],
  [
    'sums and manifest that disagree',
    (s) => rewriteSums(s, (x) => x.split('\n').slice(1).join('\n')),
    /manifest\/checksum list mismatch/,
  ],
  [
    'a manifest naming another generation',
    (s) => rewriteManifest(s, (m) => (m['generation'] = '20200101T000000Z')),
    /manifest names generation 20200101T000000Z/,
  ],
  ['a manifest naming another tier', (s) => rewriteManifest(s, (m) => (m['tier'] = 'big')), /manifest names tier big/],
  [
    'a manifest entry that escapes',
    (s) => rewriteManifest(s, (m) => ((m['entries'] as { path: string }[])[0]!.path = '../x')),
    /invalid manifest/,
  ],
  ['a manifest that is not JSON', (s) => writeFileSync(join(core(s), 'MANIFEST.json'), '{'), /not valid JSON/],
  [
    'a file the manifest does not list',
    (s) => writeFileSync(join(core(s), 'planted.sh'), 'rm -rf /'),
    /file not in the manifest: planted.sh/,
  ],
  ['a listed file that is missing', (s) => unlinkSync(join(core(s), 'ledger.txt')), /missing file: ledger.txt/],
  [
    'a big tier that fails while core is fine',
    (s) => writeFileSync(join(s.standbyDir, 'big', s.gens['big'] as string, 'huge.bin'), 'short'),
    /big: checksum mismatch/,
  ],
  [
    'a DIR that already exists',
    (s) => {
      mkdirSync(s.to);
      return { to: s.to };
    },
    /already exists/,
  ],
  [
    'a DIR inside the standby folder',
    (s) => ({ to: join(s.standbyDir, 'promoted-here') }),
    /outside the standby folder/,
  ],
  [
    'a DIR inside the hq-config folder',
    (s) => ({ to: join(s.base, 'hqcfg', 'state') }),
    /outside the hq-config folder/,
  ],
  [
    'an hq-config without hq.hostName',
    (s) => {
      writeFileSync(s.hqConfig, JSON.stringify({ hq: { arbiter: 'x' } }));
      return {};
    },
    /no hq.hostName/,
  ],
  ['an hq-config that does not exist', (s) => ({ hqConfig: join(s.base, 'nope.json') }), /does not exist/],
  ['a DIR whose parent does not exist', (s) => ({ to: join(s.base, 'no', 'such', 'dir') }), /parent of --to/],
  [
    'a promoted config.json whose poller is not an object',
    (s) => {
      // A consistent generation (sums and manifest rewritten) with a bad poller value.
      const dir = core(s);
      const text = JSON.stringify({ telegram: 'on' });
      writeFileSync(join(dir, 'config.json'), text);
      const sha = require('node:crypto').createHash('sha256').update(text).digest('hex') as string;
      const m = JSON.parse(readFileSync(join(dir, 'MANIFEST.json'), 'utf8')) as {
        entries: { path: string; sha256: string; bytes: number }[];
      };
      for (const e of m.entries) {
        if (e.path !== 'config.json') continue;
        e.sha256 = sha;
        e.bytes = text.length;
      }
      writeFileSync(join(dir, 'MANIFEST.json'), JSON.stringify(m));
      writeFileSync(join(dir, 'SHA256SUMS'), m.entries.map((e) => `${e.sha256}  ${e.path}\n`).join(''));
    },
    /telegram is not an object/,
  ],
];

import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);

for (const [name, tamper, reason] of catalogue) {
  t.test(`promote refuses ${name} and creates nothing`, async (t) => {
    const s = await standby(t);
    const over = tamper(s) ?? {};
    const to = over.to ?? s.to;
    const preExisting = existsSync(to);
    await t.rejects(
      promote({
        standbyDir: s.standbyDir,
        to,
        tiers: ['core', 'big'],
        hqConfig: over.hqConfig ?? s.hqConfig,
        pollersOff: POLLERS_OFF,
      }),
      { name: 'PromoteError', message: reason },
      `the refusal says why (${reason.source})`,
    );
    t.equal(existsSync(to), preExisting, preExisting ? 'the existing DIR is left alone' : 'DIR was never created');
  });
}

t.test('a failure while copying removes DIR again', async (t) => {
  const s = await standby(t);
  const err = await promote({
    standbyDir: s.standbyDir,
    to: s.to,
    tiers: ['core', 'big'],
    hqConfig: s.hqConfig,
    // Every check passed; now the copy changes under promote's feet.
    onVerified: async () => writeFileSync(join(core(s), 'ledger.txt'), 'swapped\n'),
  }).catch((e: unknown) => e);
  t.ok(err instanceof PromoteError, 'promote fails');
  t.match(
    (err as Error).message,
    /checksum mismatch while copying ledger.txt/,
    'because the copied bytes do not match the manifest',
  );
  t.notOk(existsSync(s.to), 'DIR is removed');
  rmSync(join(s.base, 'nothing'), { force: true });
});
