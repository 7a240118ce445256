/**
 * Where the daemons under test come from. By default the checkout's own `apps/<name>/dist`. A long
 * run should not test a build that other work rewrites under it, so `pinBuild()` exports the
 * committed tree (`git archive HEAD`, read-only) to `/tmp/hqf-build-<commit>`, links the
 * checkout's node_modules (with the @hq packages pointing into the export) and builds it there once; the
 * harness then runs that build (HQF_ROOT).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const CHECKOUT = resolve(import.meta.dirname, '../..');

/** The tree whose dist the harness runs: $HQF_ROOT, else the checkout. */
export function buildRoot(): string {
  return process.env.HQF_ROOT ?? CHECKOUT;
}

/** Exports and builds HEAD once; sets HQF_ROOT; returns the commit. */
export function pinBuild(log: (s: string) => void = () => undefined): string {
  const commit = execFileSync('git', ['-C', CHECKOUT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  const dir = `/tmp/hqf-build-${commit.slice(0, 12)}`;
  if (!existsSync(join(dir, '.built'))) {
    // Built aside and renamed into place: two runs starting together never share a half build.
    const tmp = `${dir}.tmp-${process.pid}`;
    log(`building ${commit.slice(0, 12)} in ${dir}`);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    execFileSync('sh', [
      '-c',
      `git -C '${CHECKOUT}' archive HEAD apps packages tsconfig.base.json tsconfig.json package.json | tar -x -C '${tmp}'`,
    ]);
    const nm = join(tmp, 'node_modules');
    mkdirSync(join(nm, '@hq'), { recursive: true });
    for (const e of readdirSync(join(CHECKOUT, 'node_modules'))) {
      if (e !== '@hq') symlinkSync(join(CHECKOUT, 'node_modules', e), join(nm, e));
    }
    for (const [name, path] of [
      ['protocol', 'packages/protocol'],
      ['lease-core', 'packages/lease-core'],
      ['runtime', 'packages/runtime'],
      ['arbiter', 'apps/arbiter'],
      ['agent', 'apps/agent'],
    ] as const) {
      symlinkSync(join('..', '..', path), join(nm, '@hq', name));
    }
    execFileSync(process.execPath, [join(CHECKOUT, 'node_modules/typescript/bin/tsc'), '-b', tmp], {
      stdio: 'inherit',
    });
    writeFileSync(join(tmp, '.built'), `${commit}\n`);
    try {
      renameSync(tmp, dir);
    } catch {
      rmSync(tmp, { recursive: true, force: true }); // another run finished first
    }
  }
  process.env.HQF_ROOT = dir;
  return commit;
}
