#!/usr/bin/env node
// The young generation is kept small and V8's optimizing compiler waits until the daemon is up
// (@hq/runtime/v8-footprint), both from before the daemon's modules load: main.js is imported
// after them.
import { deferOptimizingCompiler, keepYoungGenerationSmall } from '@hq/runtime/v8-footprint';

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
