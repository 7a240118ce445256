// Imports the modules named on the command line one after another in this fresh process and,
// after each (and once before the first: `bare node`), prints one JSON line of its memory:
// {step, rss, vmrss, anon, file, heapUsed} in MiB — `rss` from process.memoryUsage(), the others
// from /proc/self/status. With --expose-gc a full collection runs before each reading, so what
// is counted is what the module keeps, not the garbage of compiling it. bench/agent-memory.ts
// runs it. Specifiers resolve from the repository root (bare names: its node_modules; paths:
// relative to the root). An argument starting with `+` is an action instead of an import (what
// running the library costs, beyond loading it): see ACTIONS.
import { readFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const mib = (n) => n / 2 ** 20;
function reading(step) {
  globalThis.gc?.();
  globalThis.gc?.();
  const st = readFileSync('/proc/self/status', 'utf8');
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB$`, 'm').exec(st)?.[1] ?? NaN) / 1024;
  const mu = process.memoryUsage();
  const newSpace = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.physical_space_size ?? NaN;
  process.stdout.write(
    `${JSON.stringify({ step, rss: mib(mu.rss), vmrss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), heapUsed: mib(mu.heapUsed), heapTotal: mib(mu.heapTotal), newSpace: mib(newSpace) })}\n`,
  );
}
const settle = () => new Promise((r) => setTimeout(r, 200));

/** A node:http server on a free loopback port answering `{}` (for the client actions). */
async function server() {
  const http = await import('node:http');
  const srv = http.createServer((_req, res) => res.end('{}'));
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${srv.address().port}/`, close: () => new Promise((r) => srv.close(r)) };
}

const ACTIONS = {
  /** node-cron schedules `*​/10 * * * *` and computes its next run (as the daemons' crons). */
  async '+cron-schedule'() {
    const cron = (await import('node-cron')).default;
    const task = cron.schedule('*/10 * * * *', () => {}, { noOverlap: true, name: 'probe' });
    await new Promise((r) => setTimeout(r, 1200));
    await task.stop();
    await task.destroy();
  },
  /** hq's wall-clock schedule of the same expression (packages/runtime: node-cron's rules on Date). */
  async '+hq-schedule'() {
    const { wallClockSchedule } = await import(pathToFileURL(resolve(root, 'packages/runtime/dist/schedule.js')).href);
    const task = wallClockSchedule('*/10 * * * *', () => {});
    await new Promise((r) => setTimeout(r, 1200));
    task.stop();
  },
  /** One Intl.DateTimeFormat formatToParts (what node-cron does for each tick). */
  async '+intl'() {
    new Intl.DateTimeFormat('en-US', {
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      weekday: 'short',
      hour12: false,
    }).formatToParts(new Date());
  },
  /** A node:http server, then one undici `request` to it. */
  async '+undici-request'() {
    const s = await server();
    const { request } = await import('undici');
    await (await request(s.url)).body.text();
    await s.close();
  },
  /** A node:http server, then one node:http request to it. */
  async '+http-request'() {
    const s = await server();
    const http = await import('node:http');
    await new Promise((done, fail) => http.get(s.url, (res) => res.resume().on('end', done)).on('error', fail));
    await s.close();
  },
};

await settle();
reading('bare node');
for (const m of process.argv.slice(2)) {
  if (m.startsWith('+')) await ACTIONS[m]();
  else await import(m.startsWith('.') ? pathToFileURL(resolve(root, m)).href : m);
  await settle();
  reading(m);
}
