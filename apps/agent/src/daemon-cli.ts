#!/usr/bin/env node
// The young generation is kept small and V8's optimizing compiler waits until the daemon is up
// (@hq/runtime/v8-footprint), both from before the daemon's modules load: the command line is
// read (daemon-spec.js, the command-line kit) and main.js imported after them.
import { deferOptimizingCompiler, keepYoungGenerationSmall } from '@hq/runtime/v8-footprint';

keepYoungGenerationSmall();
const optimize = deferOptimizingCompiler();
const { agentArgs } = await import('./daemon-spec.js');
const args = agentArgs(process.argv.slice(2));
if (args.kind === 'print') {
  process.stdout.write(args.text);
  process.exit(0);
}
if (args.kind === 'usage') {
  process.stderr.write(args.line);
  process.exit(2);
}
const { main } = await import('./daemon/main.js');

main(args.configPath, { onStarted: optimize }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`hq-agent: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
