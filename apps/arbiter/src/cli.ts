#!/usr/bin/env node
/** The `hq-arbiter` bin: runs one command line (see commands.ts) and sets the exit code. */
import { main } from './commands.js';

const code = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});
if (code >= 0) process.exitCode = code;
