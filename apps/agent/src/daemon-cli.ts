#!/usr/bin/env node
// The young generation is kept small (daemon/young-gen.ts) from before the daemon's modules
// load: main.js is imported after it.
import { keepYoungGenerationSmall } from './daemon/young-gen.js';

keepYoungGenerationSmall();
const { main } = await import('./daemon/main.js');

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`hq-agent: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
