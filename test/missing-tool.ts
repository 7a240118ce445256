/**
 * A test that cannot run here says so: a skip with the reason, never a pass. Under CI=true a
 * missing tool is a failure (.ci/run installs every tool the tests need).
 */
import type { Test } from 'tap';

export function missingTool(t: Pick<Test, 'skip' | 'fail'>, why: string): void {
  if (process.env['CI'] === 'true') t.fail(`${why} (CI must provide it: see .ci/run)`);
  else t.skip(why);
}
