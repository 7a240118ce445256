/** `hq-arbiter serve` (the daemon) and `hq-arbiter check` (one check, for a system cron). */
import { usage } from '@hq/runtime/cli';
import { deferOptimizingCompiler, letYoungGenerationGrow } from '@hq/runtime/v8-footprint';
import { config, noWords, refuseUnnamedDatabase, type Invocation } from './context.js';

export async function serveCommand({ p, words }: Invocation): Promise<number> {
  noWords('serve', words);
  const cfg = await config(p);
  // The daemon's modules and its start-up run without TurboFan; it is back once the daemon listens.
  // Once it listens, its young generation may grow under load again (heartbeats in flight
  // survive scavenges; a small one costs 1.5x the CPU per heartbeat, docs/BENCH.md).
  const optimize = deferOptimizingCompiler();
  const started = (): void => {
    optimize();
    letYoungGenerationGrow();
  };
  try {
    const { serve } = await import('../server/server.js');
    await serve(cfg, { exitWithParent: p.flags.has('exit-with-parent'), onStarted: started });
  } catch (err) {
    optimize();
    throw err;
  }
  return -1; // keep running
}

async function stderrLog() {
  const { default: pino } = await import('pino');
  return pino({ name: 'hq-arbiter', base: { pid: process.pid } }, pino.destination(2));
}

export async function checkCommand({ p, words, io }: Invocation): Promise<number> {
  noWords('check', words);
  const cfg = await config(p);
  if (cfg.store.kind === 'etcd') {
    throw usage(
      'check: with store "etcd" only the elected arbiter checks (it needs the election): ask it with "curl -X POST -H \'authorization: Bearer $ADMIN\' http://ARBITER:8470/v1/check" (any arbiter forwards it)',
    );
  }
  refuseUnnamedDatabase(cfg);
  const { createRuntime } = await import('../server/runtime.js');
  const rt = await createRuntime({ config: cfg, log: await stderrLog(), processMetrics: false });
  try {
    const r = await rt.checker.run(true);
    if (r.ran) {
      io.out(`${JSON.stringify(r.answer)}\n`);
      return 0;
    }
    const l = r.state.lease;
    io.out(
      `${JSON.stringify({ promoted: false, streak: l.dualUnreachableStreak, holder: l.holder, generation: l.generation, skipped: r.reason })}\n`,
    );
    return 1;
  } finally {
    await rt.close();
  }
}
