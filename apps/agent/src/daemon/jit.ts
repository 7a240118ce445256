/**
 * V8's optimizing compiler (TurboFan) is off while the daemon starts, and back on once it is up.
 * Start-up runs its libraries' set-up code once (Fastify's, pino's, prom-client's, the config
 * check), hot enough in places for V8 to optimize it — work that is never run again, whose
 * compiler zones and machine code, and the compiler's own pages of the `node` binary, the idle
 * agent then keeps: about 7 MiB of VmRSS for nothing (docs/BENCH.md "Where the idle agent's
 * memory goes"). V8 reads the flag at each tiering decision, so once the daemon listens what
 * runs hot — the fence socket under load — is optimized as before (test/agent/footprint.test.ts
 * checks the flag is back on).
 */
import { setFlagsFromString } from 'node:v8';

/** Called by daemon-cli.ts before the daemon's modules load; returns what turns it back on. */
export function deferOptimizingCompiler(): () => void {
  setFlagsFromString('--no-turbofan');
  return () => setFlagsFromString('--turbofan');
}
