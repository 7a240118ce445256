#!/usr/bin/env node
/**
 * The `hq-arbiter` bin: runs one command line (see commands.ts) and sets the exit code. V8's
 * young generation is kept small from before the modules load (@hq/runtime/v8-footprint; `serve`
 * also defers the optimizing compiler until it listens), so commands.js is imported after it.
 */
import { keepYoungGenerationSmall } from '@hq/runtime/v8-footprint';

keepYoungGenerationSmall();
const { main } = await import('./commands.js');

const code = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});
if (code >= 0) process.exitCode = code;
