/**
 * Two V8 settings a daemon makes before its modules load, so that start-up's work does not stay
 * in its idle memory (docs/BENCH.md "Where the idle agent's memory goes"); both daemons use them.
 *
 * The young generation is not grown. Start-up loads the daemon's modules and builds its apps at
 * once, and nearly all of it survives: V8 takes that for a busy program and doubles the young
 * generation up to 16 MiB per semi-space — which the idle daemon then keeps until a collection
 * comes while it allocates a little, possibly never: 15–24 MiB of VmRSS for nothing. So V8
 * never grows it (`--semi-space-growth-factor=1`, a heuristic V8 reads at each growth decision;
 * its `--max-semi-space-size` is read only when the process starts): it stays at its initial
 * size, about 4 MiB (test/agent/footprint.test.ts, test/arbiter/footprint.test.ts). It costs the fence socket under load
 * nothing measurable (docs/BENCH.md).
 *
 * V8's optimizing compiler (TurboFan) is off while the daemon starts, and back on once it is up.
 * Start-up runs its libraries' set-up code once (Fastify's, pino's, prom-client's, the config
 * check), hot enough in places for V8 to optimize it — work that is never run again, whose
 * compiler zones and machine code, and the compiler's own pages of the `node` binary, the idle
 * daemon then keeps: about 7 MiB of VmRSS for nothing. V8 reads the flag at each tiering
 * decision, so once the daemon listens what runs hot — the fence socket, heartbeats under load —
 * is optimized as before (test/runtime/v8-footprint.test.ts asks V8).
 */
import { setFlagsFromString } from 'node:v8';

/** Called by a daemon's bin before its modules load. */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
}

/**
 * Called by a daemon once it listens, if its load is requests that each leave garbage while
 * dozens are in flight (the arbiter's heartbeats): V8's own growth rule again (factor 2, its
 * default). The young generation then grows only while much survives each scavenge — a load,
 * not an idle daemon, which keeps the size start-up left (test/arbiter/footprint.test.ts) —
 * and V8's memory reducer gives it back once the load is gone: less CPU per heartbeat under load
 * (figures in docs/BENCH.md).
 */
export function letYoungGenerationGrow(): void {
  setFlagsFromString('--semi-space-growth-factor=2');
}

/** Called by a daemon's bin before its modules load; returns what turns it back on (once it is up). */
export function deferOptimizingCompiler(): () => void {
  setFlagsFromString('--no-turbofan');
  return () => setFlagsFromString('--turbofan');
}
