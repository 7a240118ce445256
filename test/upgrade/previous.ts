/**
 * The previous released hq, built from this repository's history: `git archive` of its tag in
 * a temp dir, this checkout's third-party node_modules linked in (the same lock file; the
 * `@hq/*` workspace links point into the tree itself), then `tsc -b` there. The build is kept
 * in the temp dir under a name made of the release, this checkout's path and the TypeScript
 * version, and later runs reuse it. Its daemons and CLI are then run as real processes beside
 * this checkout's.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../system/harness.js';

/** The release before this one (protocol 1: it sends no hq-protocol header). */
export const PREVIOUS_TAG = 'v0.1.0';
/**
 * The commit that release was cut from ("CHANGELOG: 0.1.0 dated"). Tags do not travel with
 * every clone (a submission, a mirror, `git clone --no-tags`), commits do: the tag is used where
 * it exists and must name this commit; otherwise the commit itself.
 */
export const PREVIOUS_COMMIT = 'd822c095f85a29835794dc43907fc7eed5af01de';

export interface PreviousBuild {
  /** The tree: `apps/arbiter/dist/cli.js`, `apps/agent/dist/daemon-cli.js`, `apps/agent/dist/cli.js` (0.1.0's CLI entry; `cli/entry.js` since 0.2.0) under it. */
  readonly root: string;
  readonly commit: string;
  /** Releases it (nothing to do: the build is kept for the next run). */
  remove(): void;
}

export type Previous =
  | { readonly ok: true; readonly build: PreviousBuild }
  | { readonly ok: false; readonly missing: string };

function git(args: readonly string[], cwd = ROOT): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** The commit of `tag`: the tag where this clone has it, else the recorded commit of the previous release. */
function resolveRelease(tag: string): string {
  let tagged: string | undefined;
  try {
    tagged = git(['rev-parse', '--verify', '--quiet', `${tag}^{commit}`]);
  } catch {
    tagged = undefined; // no such tag in this clone
  }
  if (tag !== PREVIOUS_TAG) {
    if (tagged === undefined) throw new Error(`no tag ${tag} in this clone`);
    return tagged;
  }
  if (tagged !== undefined && tagged !== PREVIOUS_COMMIT)
    throw new Error(
      `tag ${tag} names ${tagged}, but the previous release is ${PREVIOUS_COMMIT}: move the tag or PREVIOUS_COMMIT`,
    );
  try {
    return git(['rev-parse', '--verify', `${PREVIOUS_COMMIT}^{commit}`]);
  } catch {
    throw new Error(
      `commit ${PREVIOUS_COMMIT} (${tag}) is not in this clone: a shallow clone cannot build the previous release; fetch the full history`,
    );
  }
}

/**
 * Builds `tag` (default the previous release); `{ok: false}` only when git itself is missing.
 * `HQ_PREVIOUS_BUILD=DIR` reuses a tree built so before (while working on the test; it is left alone).
 */
export async function buildPrevious(tag = PREVIOUS_TAG): Promise<Previous> {
  const reuse = process.env['HQ_PREVIOUS_BUILD'];
  if (reuse !== undefined && reuse !== '')
    return { ok: true, build: { root: reuse, commit: git(['rev-parse', 'HEAD'], reuse), remove: () => undefined } };
  try {
    git(['--version']);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      return { ok: false, missing: 'git is not installed: the previous release cannot be built from history' };
    throw err;
  }
  const commit = resolveRelease(tag);
  const modules = join(ROOT, 'node_modules');
  // One build per release, checkout and compiler, kept for later runs: the release never changes,
  // and its tree links this checkout's node_modules.
  const tsc = (JSON.parse(readFileSync(join(modules, 'typescript', 'package.json'), 'utf8')) as { version: string })
    .version;
  const key = createHash('sha256').update(`${commit}\n${ROOT}\n${tsc}`).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), `hq-prev-${commit.slice(0, 12)}-${key}`);
  if (existsSync(join(dir, '.built'))) return { ok: true, build: { root: dir, commit, remove: () => undefined } };
  // Built aside and renamed into place: two runs starting together never share a half build.
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    execFileSync('sh', ['-c', `git -C '${ROOT}' archive ${commit} | tar -x -C '${tmp}'`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    mkdirSync(join(tmp, 'node_modules', '@hq'), { recursive: true });
    for (const name of readdirSync(modules)) {
      if (name === '@hq') continue;
      symlinkSync(join(modules, name), join(tmp, 'node_modules', name));
    }
    // Relative links (../../apps/agent …): the same text inside the tree points at its own packages.
    for (const name of readdirSync(join(modules, '@hq')))
      symlinkSync(readlinkSync(join(modules, '@hq', name)), join(tmp, 'node_modules', '@hq', name));
    await promisify(execFile)(process.execPath, [join(modules, 'typescript', 'bin', 'tsc'), '-b'], {
      cwd: tmp,
      timeout: 600_000,
    });
    writeFileSync(join(tmp, '.built'), `${commit}\n`);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const e = err as { stdout?: Buffer | string; message: string };
    throw new Error(
      `building ${tag} failed: ${e.message}${e.stdout === undefined ? '' : `\n${String(e.stdout).slice(-2000)}`}`,
    );
  }
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another run finished first
  }
  return { ok: true, build: { root: dir, commit, remove: () => undefined } };
}
