// The fenced workload of the fault harness: run under `hq fence run --role cron`, it appends
// `{src, host, pid, seq, generation, t, kind}` lines to the history file given as argv[2] —
// `start`, a `tick` at once and every 50 ms, and `end` on SIGTERM — one writeSync per line.
// `t` is CLOCK_MONOTONIC in seconds (process.hrtime), the clock every process here shares.
import { openSync, writeSync } from 'node:fs';

const file = process.argv[2];
const host = process.env.HQF_HOST ?? 'unknown';
const g = Number(process.env.HQ_GENERATION);
const generation = Number.isSafeInteger(g) && g > 0 ? g : null;
const fd = openSync(file, 'a');
let seq = 0;
const now = () => Number(process.hrtime.bigint()) / 1e9;
const line = (kind) => writeSync(fd, JSON.stringify({ src: 'worker', host, pid: process.pid, seq: seq++, generation, t: now(), kind }) + '\n');

line('start');
line('tick');
// Bounded: a worker never outlives 10 minutes even if nobody stops it.
const timer = setInterval(() => line('tick'), 50);
const stopAt = setTimeout(() => stop(), 600_000);
function stop() {
  clearInterval(timer);
  clearTimeout(stopAt);
  line('end');
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
