/**
 * A test that cannot run here says so: a skip with the reason, never a pass. Under CI=true a
 * missing tool is a failure (.ci/run installs every tool the tests need).
 */
export function missingTool(t: object, why: string): void {
  const tap = t as { skip(message: string): void; fail(message: string): void };
  if (process.env['CI'] === 'true') tap.fail(`${why} (CI must provide it: see .ci/run)`);
  else tap.skip(why);
}
