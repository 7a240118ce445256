/**
 * @hq/runtime/v8-footprint: V8's optimizing compiler is off from deferOptimizingCompiler() until the
 * function it returns is called, and optimizes hot code again after it (each daemon calls it
 * once it is up: the agent's daemon-cli.ts → main's onStarted, the arbiter's serve → its
 * onStarted). A child node with V8's natives syntax asks V8 whether a hot function was optimized, before and after (compilation on the main thread, so
 * the answer does not depend on the machine's load). And the young generation: kept at its size under a
 * load until letYoungGenerationGrow() (the arbiter calls it once it listens), grown after it.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const CHILD = `
const { deferOptimizingCompiler } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'packages/runtime/dist/v8-footprint.js')).href)});
const optimized = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
function hot(x) { let s = 0; for (let i = 0; i < 100; i++) s += (x * i) % 7; return s; }
const release = deferOptimizingCompiler();
for (let i = 0; i < 200000; i++) hot(i);
const before = optimized(hot);
release();
for (let i = 0; i < 200000; i++) hot(i);
console.log(JSON.stringify({ before, after: optimized(hot) }));
`;

t.test('the optimizing compiler waits for the release, then optimizes hot code', async (t) => {
  const r = spawnSync(
    process.execPath,
    ['--allow-natives-syntax', '--no-concurrent-recompilation', '--input-type=module', '-e', CHILD],
    {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );
  t.equal(r.status, 0, `the child ran ${r.stderr}`);
  const seen = JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null') as { before: boolean; after: boolean };
  t.equal(seen.before, false, 'a hot function is not optimized before the release');
  t.equal(seen.after, true, 'and is after it');
});

// A load like requests in flight: each object lives while the next 4,096 are made, so much
// survives every scavenge — what makes V8 grow the young generation, when it may.
const GROW_CHILD = `
import { getHeapSpaceStatistics } from 'node:v8';
const { keepYoungGenerationSmall, letYoungGenerationGrow } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'packages/runtime/dist/v8-footprint.js')).href)});
const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
const load = () => { const ring = new Array(4096); for (let i = 0; i < 400000; i++) ring[i % 4096] = { i, s: 'x'.repeat(64) + i, a: [i, i + 1] }; return ring.length; };
keepYoungGenerationSmall();
load();
const kept = young();
letYoungGenerationGrow();
load();
console.log(JSON.stringify({ kept, grown: young() }));
`;

t.test('the young generation stays small under load until letYoungGenerationGrow, then grows', async (t) => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', GROW_CHILD], {
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  t.equal(r.status, 0, `the child ran ${r.stderr}`);
  const seen = JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null') as { kept: number; grown: number };
  t.ok(seen.kept <= 8 * 2 ** 20, `kept near its start size under the load: ${seen.kept} bytes`);
  t.ok(seen.grown >= 3 * seen.kept, `grown under the same load once allowed: ${seen.grown} bytes`);
});
