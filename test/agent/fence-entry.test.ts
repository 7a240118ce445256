/**
 * bin/hq.cjs sends `hq fence check|run` to cli/fence-main (no command table) — the CommonJS
 * bundle dist/cli/fence-main.cjs while it is fresh, else the ES modules through fence-entry.js:
 * every answer — exit code, stdout, stderr — is the one the full CLI (dist/cli/entry.js → main.ts)
 * gives, either way, for runs, skips, unknown roles, usage errors, help, a missing agent and a
 * bad config; the bundle is what scripts/bundle-fence.mjs writes from the current build; and the
 * entry's static imports stay seven light modules.
 */
import t from 'tap';
import { copyFileSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FakeAgent, HQ_CLI, ROOT, run, shortDir, writeConfig } from './helpers.js';

const BIN = join(ROOT, 'apps/agent/bin/hq.cjs');
const BUNDLE = join(ROOT, 'apps/agent/dist/cli/fence-main.cjs');

/**
 * A copy of the shim beside a dist/ of its own whose fence-entry.js loads the real one and
 * whose fence-main.cjs is the real bundle: with `stale`, one of the bundle's inputs (args.js)
 * there is newer than it, so the shim must take the ES modules.
 */
function shimCopy(dir: string, stale: boolean): string {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'dist/cli'), { recursive: true });
  copyFileSync(BIN, join(dir, 'bin/hq.cjs'));
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
  const entry = pathToFileURL(join(ROOT, 'apps/agent/dist/cli/fence-entry.js')).href;
  writeFileSync(
    join(dir, 'dist/cli/fence-entry.js'),
    `process.env.HQ_TEST_PATH = 'esm';\nawait import(${JSON.stringify(entry)});\n`,
  );
  copyFileSync(BUNDLE, join(dir, 'dist/cli/fence-main.cjs'));
  const past = new Date(Date.now() - 60_000);
  utimesSync(join(dir, 'dist/cli/fence-main.cjs'), past, past);
  if (stale) writeFileSync(join(dir, 'dist/cli/args.js'), '// newer than the bundle\n');
  return join(dir, 'bin/hq.cjs');
}

/**
 * Writes, at exit, which way the shim went (the copy's fence-entry.js marks the ES modules) and
 * which CommonJS files were loaded. (Whether Node's ES module loader was loaded cannot be told
 * here: tap's process-info hook preloads an ES module into every child.)
 */
const PRELOAD = `process.on('exit', () => require('node:fs').writeSync(2, '\\nLOADED ' + JSON.stringify({ way: process.env.HQ_TEST_PATH ?? 'bundle', cjs: Object.keys(require.cache) }) + '\\n'));\n`;

/** Times, pids and validity vary between two runs; nothing else may. */
const normal = (s: string): string =>
  s
    .replace(/"time":\d+/g, '"time":X')
    .replace(/"pid":\d+/g, '"pid":X')
    .replace(/"validForSeconds":[0-9.e-]+/g, '"validForSeconds":X');

t.test('bin/hq.cjs answers fence check and fence run exactly as the full CLI does, bundled or not', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  t.teardown(() => agent.close());
  const down = writeConfig(shortDir(t));
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ socketPath: join(dir, 'none.sock'), bogusKey: 1 }));
  const cases: [string, string[], NodeJS.ProcessEnv?][] = [
    ['a run', ['fence', 'check', '--role', 'cron', '--config', config]],
    ['a run as JSON', ['fence', 'check', '--role', 'cron', '--json', '--config', config]],
    ['$HQ_CONFIG', ['fence', 'check', '--role', 'cron'], { HQ_CONFIG: config }],
    ['an unknown role', ['fence', 'check', '--role', 'nope', '--config', config]],
    ['a missing --role', ['fence', 'check', '--config', config]],
    ['an unknown flag', ['fence', 'check', '--role', 'cron', '--bogus', '--config', config]],
    ['help', ['fence', 'check', '--help']],
    ['a missing config file', ['fence', 'check', '--role', 'cron', '--config', join(dir, 'missing.json')]],
    ['no agent', ['fence', 'check', '--role', 'cron', '--json', '--config', down]],
    ['no agent and an unknown role', ['fence', 'check', '--role', 'nope', '--config', down]],
    ['no agent and a bad config', ['fence', 'check', '--role', 'cron', '--config', bad]],
    [
      'fence run of a command',
      [
        'fence',
        'run',
        '--role',
        'cron',
        '--config',
        config,
        '--',
        'sh',
        '-c',
        'echo "$HQ_ROLE $HQ_HOLDER $HQ_GENERATION"; exit 7',
      ],
    ],
    ['fence run without a command', ['fence', 'run', '--role', 'cron', '--config', config]],
    ['fence run of an unknown role', ['fence', 'run', '--role', 'nope', '--config', config, '--', 'true']],
    [
      'fence run without the agent',
      ['fence', 'run', '--role', 'cron', '--skip-exit', '9', '--config', down, '--', 'true'],
    ],
    [
      'fence run of a missing command',
      ['fence', 'run', '--role', 'cron', '--config', config, '--', join(dir, 'no-such-cmd')],
    ],
    ['fence run help', ['fence', 'run', '--help']],
  ];
  const esm = shimCopy(join(shortDir(t), 'stale'), true);
  for (const [name, args, env] of cases) {
    const full = await run([HQ_CLI, ...args], { env: env ?? {} });
    for (const [way, bin] of [
      ['bundled', BIN],
      ['ES modules', esm],
    ] as const) {
      const fast = await run([bin, ...args], { env: env ?? {} });
      t.equal(fast.code, full.code, `${name} (${way}): the same exit code (${full.code})`);
      t.equal(normal(fast.stdout), normal(full.stdout), `${name} (${way}): the same stdout`);
      t.equal(normal(fast.stderr), normal(full.stderr), `${name} (${way}): the same stderr`);
    }
  }
  agent.answer = { run: false, reason: 'not-holder', generation: 3, holder: 'node-b', validForSeconds: null };
  const skip = await run([BIN, 'fence', 'check', '--role', 'cron', '--config', config]);
  t.equal(skip.code, 1, 'a skip exits 1 through bin/hq.cjs');
  const full = await run([HQ_CLI, 'fence', 'check', '--role', 'cron', '--config', config]);
  t.equal(skip.stdout, full.stdout, 'with the same line as the full CLI');
  const other = await run([BIN, 'fence', '--help']);
  t.match(other.stdout, /hq fence check \| hq fence run/, 'other fence words still reach the command table');
});

t.test(
  'the fence entry loads only args, fence, the light config reader, the socket client and the log line',
  async (t) => {
    const src = join(ROOT, 'apps/agent/src');
    const runtime = join(ROOT, 'packages/runtime/src');
    const local = new Set<string>();
    const externals = new Set<string>();
    const walk = (file: string): void => {
      if (local.has(file)) return;
      local.add(file);
      const text = readFileSync(file, 'utf8');
      // Static imports only (type imports vanish; `import()` is lazy).
      for (const m of text.matchAll(/^import\s+(?!type\b)[^'"]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm)) {
        const spec = (m[1] ?? m[2]) as string;
        if (spec.startsWith('.')) walk(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
        // The shell library's subpaths are followed: what they load counts too.
        else if (spec.startsWith('@hq/runtime/')) walk(join(runtime, `${spec.slice('@hq/runtime/'.length)}.ts`));
        else externals.add(spec);
      }
    };
    walk(join(src, 'cli/fence-entry.ts'));
    const names = [...local].map((f) => f.slice(ROOT.length + 1)).sort();
    t.same(
      names,
      [
        'apps/agent/src/cli/args.ts',
        'apps/agent/src/cli/fence-entry.ts',
        'apps/agent/src/cli/fence-main.ts',
        'apps/agent/src/cli/fence.ts',
        'apps/agent/src/cli/local.ts',
        'apps/agent/src/cli/log-line.ts',
        'packages/runtime/src/cli.ts',
        'packages/runtime/src/config-file.ts',
        'packages/runtime/src/suggest.ts',
      ],
      "nine modules (the command-line kit, the config reader and the suggester are the shell library's), no command table, no supervisor",
    );
    // @hq/protocol/fence is the fence answer and its reasons, one file of the contract that does
    // not load the rest of it; likewise @hq/protocol/version, the header every socket request carries.
    t.same(
      [...externals].filter((e) => !e.startsWith('node:')).sort(),
      ['@hq/protocol/fence', '@hq/protocol/version'],
      'and node built-ins only, besides the fence contract and the protocol version',
    );
    for (const name of ['fence', 'version']) {
      const text = readFileSync(join(ROOT, `packages/protocol/src/${name}.ts`), 'utf8');
      t.same([...text.matchAll(/^import\s+(?!type\b)/gm)], [], `@hq/protocol/${name} imports nothing`);
    }
  },
);

t.test(
  'the fence bundle is what scripts/bundle-fence.mjs writes from the current build (run npm run build)',
  async (t) => {
    const script = pathToFileURL(join(ROOT, 'scripts/bundle-fence.mjs')).href;
    const { bundleFence } = (await import(script)) as { bundleFence: () => Promise<string> };
    t.equal(readFileSync(BUNDLE, 'utf8'), await bundleFence(), 'dist/cli/fence-main.cjs is up to date with dist/');
  },
);

t.test('bin/hq.cjs runs the fresh bundle, and the ES modules when the bundle is stale', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  t.teardown(() => agent.close());
  const preload = join(dir, 'loaded.cjs');
  writeFileSync(preload, PRELOAD);
  const loaded = (stderr: string): { way: string; cjs: string[] } =>
    JSON.parse(/\nLOADED (.*)\n/.exec(stderr)?.[1] ?? 'null') as { way: string; cjs: string[] };
  const env = { NODE_OPTIONS: `--require ${preload}` };
  const fast = await run([BIN, 'fence', 'run', '--role', 'cron', '--config', config, '--', 'true'], { env });
  t.equal(fast.code, 0, `the run succeeds ${fast.stderr}`);
  t.ok(loaded(fast.stderr).cjs.includes(BUNDLE), 'through the bundle');
  const fresh = await run(
    [shimCopy(join(dir, 'fresh'), false), 'fence', 'check', '--role', 'cron', '--config', config],
    { env },
  );
  t.equal(fresh.code, 0, 'a copy of the shim beside a bundle that none of its inputs is newer than answers');
  t.equal(loaded(fresh.stderr).way, 'bundle', 'through the bundle');
  const stale = await run(
    [shimCopy(join(dir, 'stale'), true), 'fence', 'check', '--role', 'cron', '--config', config],
    { env },
  );
  t.equal(stale.code, 0, 'beside a bundle with an input newer than it, it answers too');
  t.equal(loaded(stale.stderr).way, 'esm', 'through the ES modules');
});
