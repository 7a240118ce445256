/**
 * One version source: VERSION in @hq/runtime/version, which every package.json repeats, CHANGELOG.md
 * names, and the three bins print with --version (through their built entries).
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { VERSION } from '../../packages/runtime/src/version.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PACKAGES = ['.', 'packages/protocol', 'packages/lease-core', 'packages/runtime', 'apps/arbiter', 'apps/agent'];

t.test('every package.json carries VERSION and CHANGELOG.md has its entry', async (t) => {
  t.match(VERSION, /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/, 'VERSION is semver');
  for (const dir of PACKAGES) {
    const pkg = JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as {
      version: string;
      license?: string;
    };
    t.equal(pkg.version, VERSION, `${dir}/package.json has version ${VERSION}`);
    if (pkg.license !== undefined) t.equal(pkg.license, 'MIT', `${dir}/package.json says MIT`);
  }
  t.match(
    readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8'),
    new RegExp(`^## ${VERSION.replaceAll('.', '\\.')}\\b`, 'm'),
    'CHANGELOG.md has a section for VERSION',
  );
  t.match(
    readFileSync(join(ROOT, 'LICENSE'), 'utf8'),
    /^MIT License/,
    'LICENSE is the MIT licence the package.json files name',
  );
});

t.test('hq, hq-agent and hq-arbiter --version print VERSION and exit 0', async (t) => {
  const bins: [string, string[]][] = [
    ['hq', [join(ROOT, 'apps/agent/bin/hq.cjs'), '--version']],
    ['hq-agent', [join(ROOT, 'apps/agent/bin/hq-agent.js'), '--version']],
    ['hq-arbiter', [join(ROOT, 'apps/arbiter/bin/hq-arbiter.js'), '--version']],
    ['hq-arbiter token', [join(ROOT, 'apps/arbiter/bin/hq-arbiter.js'), 'token', '--version']],
  ];
  for (const [name, args] of bins) {
    if (
      !existsSync(join(ROOT, 'apps/agent/dist/cli/entry.js')) ||
      !existsSync(join(ROOT, 'apps/arbiter/dist/cli.js'))
    ) {
      t.fail('dist/ is missing: run npx tsc -b');
      return;
    }
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    t.equal(r.status, 0, `${name} --version exits 0 (${r.stderr.trim()})`);
    t.equal(r.stdout, `${VERSION}\n`, `${name} --version prints ${VERSION}`);
    t.equal(r.stderr, '', `${name} --version writes nothing on stderr`);
  }
});
