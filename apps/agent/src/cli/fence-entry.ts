/**
 * The ES-module entry of `hq fence check` and `hq fence run` (fence-main.ts): bin/hq.cjs comes
 * here when the CommonJS bundle of fence-main is missing or older than the modules it was built
 * from (a tree built with `tsc -b` alone).
 */
import { fenceMain } from './fence-main.js';

fenceMain(process.argv.slice(2));
