#!/usr/bin/env node
/**
 * `npm run package [-- --out DIR]`: the installable tarballs, as they would be published.
 *
 *   DIR/hq-agent-VERSION.tgz     bins hq-agent and hq
 *   DIR/hq-arbiter-VERSION.tgz   bin hq-arbiter
 *
 * (each also holds deploy/: the units, the launchd plist and the example configs).
 * Each app's internal packages (@hq/protocol, @hq/lease-core, @hq/runtime) travel inside its tarball as
 * bundleDependencies, so `npm install -g ./hq-agent-VERSION.tgz` takes hq's own code from the
 * tarball and only the third-party dependencies from the registry. `npm pack` in a workspace
 * cannot do this itself: the internal packages are symlinks in the root node_modules, which it
 * does not bundle (the E404 on @hq/lease-core). So each app is staged in a temp directory with
 * real copies of its internal packages under node_modules/, and packed from there.
 *
 * Every third-party dependency of a bundled package must also be a dependency of the app (it is
 * installed beside the bundle, where Node's resolution finds it); the script refuses otherwise.
 * Default DIR: ./release. Prints the tarballs' paths, one a line.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const APPS = ['apps/agent', 'apps/arbiter'];
/** The internal packages by name → their directory in the repository. */
const INTERNAL = {
  '@hq/protocol': 'packages/protocol',
  '@hq/lease-core': 'packages/lease-core',
  '@hq/runtime': 'packages/runtime',
};

function fail(message) {
  process.stderr.write(`pack: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let out = join(root, 'release');
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--out' && args[i + 1] !== undefined) out = resolve(args[++i]);
  else if (args[i]?.startsWith('--out=')) out = resolve(args[i].slice('--out='.length));
  else fail(`unknown argument ${JSON.stringify(args[i])} (the only option is --out DIR)`);
}

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

// The tarballs hold dist/, so build first (a no-op when nothing changed), the fence bundle too.
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b'], { cwd: root, stdio: 'inherit' });
execFileSync(process.execPath, [join(root, 'scripts/bundle-fence.mjs')], { cwd: root, stdio: 'inherit' });
mkdirSync(out, { recursive: true });

for (const app of APPS) {
  const pkg = readJson(join(root, app, 'package.json'));
  const stage = mkdtempSync(join(tmpdir(), 'hq-pack-'));
  try {
    // The app's internal dependencies, transitively.
    const bundled = [];
    const visit = (deps) => {
      for (const name of Object.keys(deps ?? {})) {
        if (!(name in INTERNAL) || bundled.includes(name)) continue;
        bundled.push(name);
        visit(readJson(join(root, INTERNAL[name], 'package.json')).dependencies);
      }
    };
    visit(pkg.dependencies);
    for (const name of bundled) {
      const dir = join(root, INTERNAL[name]);
      const inner = readJson(join(dir, 'package.json'));
      for (const [dep, range] of Object.entries(inner.dependencies ?? {})) {
        if (dep in INTERNAL) continue;
        if (pkg.dependencies?.[dep] === undefined)
          fail(
            `${name} needs ${dep}, which ${pkg.name} does not depend on: add "${dep}": "${range}" to ${app}/package.json`,
          );
      }
      const to = join(stage, 'node_modules', name);
      mkdirSync(to, { recursive: true });
      // Only the internal dependencies stay declared: npm counts every declared dependency of a
      // bundled package as part of the bundle, and would leave a third-party one (node-cron) an
      // empty directory instead of installing it from the registry beside the app.
      const internalOnly = Object.fromEntries(Object.entries(inner.dependencies ?? {}).filter(([d]) => d in INTERNAL));
      writeFileSync(join(to, 'package.json'), `${JSON.stringify({ ...inner, dependencies: internalOnly }, null, 2)}\n`);
      for (const f of inner.files ?? ['dist'])
        cpSync(join(dir, f), join(to, f), { recursive: true, dereference: true });
      cpSync(join(root, 'LICENSE'), join(to, 'LICENSE'));
    }
    for (const f of pkg.files ?? []) cpSync(join(root, app, f), join(stage, f), { recursive: true, dereference: true });
    for (const f of ['README.md']) if (existsSync(join(root, app, f))) cpSync(join(root, app, f), join(stage, f));
    cpSync(join(root, 'LICENSE'), join(stage, 'LICENSE'));
    cpSync(join(root, 'CHANGELOG.md'), join(stage, 'CHANGELOG.md'));
    // The units, the plist and the example configs travel along: deploy/README.md installs from
    // `$(npm root -g)/@hq/…/deploy`, so a host needs no clone.
    cpSync(join(root, 'deploy'), join(stage, 'deploy'), { recursive: true });
    const files = [...(pkg.files ?? []), 'CHANGELOG.md', 'deploy'];
    // `private` guards the workspace against an accidental `npm publish`; the tarball is the
    // thing that would be published, so it goes without.
    const { private: _private, ...published } = pkg;
    writeFileSync(
      join(stage, 'package.json'),
      `${JSON.stringify({ ...published, files, bundleDependencies: bundled }, null, 2)}\n`,
    );
    const name = execFileSync(npm, ['pack', '--silent', '--pack-destination', out], { cwd: stage, encoding: 'utf8' })
      .trim()
      .split('\n')
      .pop();
    process.stdout.write(`${join(out, name)}\n`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}
