// Imports the packages named on the command line, waits 2 s, and prints its own memory as JSON
// {rss, anon, file} in MiB (from /proc/self/status). bench/agent.ts runs it to show what each
// library of the daemons costs on top of a bare node.
import { readFileSync } from 'node:fs';

for (const m of process.argv.slice(2)) await import(m);
setTimeout(() => {
  const st = readFileSync('/proc/self/status', 'utf8');
  const mib = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB$`, 'm').exec(st)?.[1] ?? NaN) / 1024;
  process.stdout.write(`${JSON.stringify({ rss: mib('VmRSS'), anon: mib('RssAnon'), file: mib('RssFile') })}\n`);
}, 2000);
