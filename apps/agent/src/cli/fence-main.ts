/**
 * `hq fence check` and `hq fence run` from their argv (`fence check|run …`): the same specs,
 * parsing, help, error mapping and exit as `hq` through cli.ts and main.ts, without loading the
 * command table. Cron jobs and fenced scripts run these often, so every module not loaded is
 * start-up time and memory saved (see docs/BENCH.md, the fence path).
 *
 * Two ways in, the same code: fence-entry.ts (ESM, dist/cli/fence-entry.js), and the CommonJS
 * bundle of this module that `npm run build` writes (scripts/bundle-fence.mjs →
 * dist/cli/fence-main.cjs), which bin/hq.cjs loads when it is not older than what it was built
 * from: one file instead of thirteen ES modules, and no ES module loader in the process.
 */
import { exitWhenDone, runCommand } from './args.js';
import { FENCE_CHECK_COMMAND, FENCE_RUN_COMMAND } from './fence.js';

/** Runs `hq fence check|run` (argv without node and the script) and exits with its code. */
export function fenceMain(argv: readonly string[]): void {
  const cmd = argv[1] === 'run' ? FENCE_RUN_COMMAND : FENCE_CHECK_COMMAND;
  exitWhenDone(runCommand(cmd.spec, cmd.load, argv.slice(2)));
}
