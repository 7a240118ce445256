/**
 * The young generation of the agent's V8 heap is not grown. Start-up loads the daemon's
 * modules and builds its apps at once, and nearly all of it survives: V8 takes that for a busy
 * program and doubles the young generation up to 16 MiB per semi-space — which the idle
 * agent then keeps until a collection comes while it allocates a little, possibly never: 15–24
 * MiB of VmRSS for nothing (docs/BENCH.md "Where the idle agent's memory goes"). So V8 never
 * grows it (`--semi-space-growth-factor=1`, a heuristic V8 reads at each growth decision; its
 * `--max-semi-space-size` is read only when the process starts): it stays at its initial size,
 * about 4 MiB (test/agent/footprint.test.ts). The fence socket under 32 clients answered as
 * fast with it as without (within the noise of the shared machine, issue 20).
 */
import { setFlagsFromString } from 'node:v8';

/** Called by daemon-cli.ts before the daemon's modules load. */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
}
