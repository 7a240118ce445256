/**
 * The entry of `hq fence check` and `hq fence run` (bin/hq.js comes here for them): the same
 * specs, parsing, help, error mapping and exit as `hq` through entry.ts and main.ts, without
 * loading the command table. Cron jobs and fenced scripts run these often, so every module
 * not loaded is start-up time saved (see docs/BENCH.md, the fence path).
 */
import { exitWhenDone, runCommand } from './args.js';
import { FENCE_CHECK_COMMAND, FENCE_RUN_COMMAND } from './fence.js';

const argv = process.argv.slice(2);
const cmd = argv[1] === 'run' ? FENCE_RUN_COMMAND : FENCE_CHECK_COMMAND;

exitWhenDone(runCommand(cmd.spec, cmd.load, argv.slice(2)));
