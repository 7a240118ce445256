#!/usr/bin/env node
import { main } from './cli/main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Flush stdout/stderr, then leave even if a keep-alive socket lingers.
    process.stdout.write('', () => process.exit(code));
  },
  (err: unknown) => {
    process.stderr.write(`hq: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
