#!/usr/bin/env node
// The young generation is kept small (daemon/young-gen.ts) and V8's optimizing compiler waits
// until the daemon is up (daemon/jit.ts), both from before the daemon's modules load: main.js
// is imported after them.
import { deferOptimizingCompiler } from './daemon/jit.js';
import { keepYoungGenerationSmall } from './daemon/young-gen.js';

keepYoungGenerationSmall();
const optimize = deferOptimizingCompiler();
const { main } = await import('./daemon/main.js');

main(process.argv.slice(2), { onStarted: optimize }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`hq-agent: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
