// Preloaded into a daemon by bench/agent-memory.ts (`node --import bench/heap-report.mjs …`):
// on SIGUSR2 the process writes its memory to $HQ_BENCH_HEAP_REPORT as JSON (MiB): VmRSS and its
// anonymous and file-backed parts from /proc/self/status, process.memoryUsage(), and each V8
// heap space's physical size, and the CommonJS modules loaded so far (`require.cache`: Fastify,
// ajv, undici, prom-client are CommonJS). No timer, nothing else: an idle daemon stays idle.
// test/agent/footprint.test.ts reads it too.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { getHeapSpaceStatistics } from 'node:v8';

const out = process.env['HQ_BENCH_HEAP_REPORT'];
const mib = (n) => n / 2 ** 20;
if (out) {
  process.on('SIGUSR2', () => {
    const st = readFileSync('/proc/self/status', 'utf8');
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB$`, 'm').exec(st)?.[1] ?? NaN) / 1024;
    const mu = process.memoryUsage();
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, mib(s.physical_space_size)]));
    writeFileSync(
      out,
      JSON.stringify({
        vmrss: kb('VmRSS'),
        anon: kb('RssAnon'),
        file: kb('RssFile'),
        rss: mib(mu.rss),
        heapUsed: mib(mu.heapUsed),
        heapTotal: mib(mu.heapTotal),
        external: mib(mu.external),
        spaces,
        commonjs: Object.keys(createRequire(import.meta.url).cache),
      }),
    );
  });
}
