#!/usr/bin/env node
// Reads a V8 .cpuprofile (node --cpu-prof) and prints the top functions by self time and the
// top packages/files by self time: `node bench/profile-summary.mjs FILE.cpuprofile [N]`.
import { readFileSync } from 'node:fs';

const [file, nArg] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: node bench/profile-summary.mjs FILE.cpuprofile [N]\n');
  process.exit(2);
}
const n = Number(nArg ?? 25);
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((node) => [node.id, node]));
const self = new Map();
const dt = prof.timeDeltas;
for (let i = 0; i < prof.samples.length; i++) {
  const id = prof.samples[i];
  self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fnTime = new Map();
const fileTime = new Map();
for (const [id, us] of self) {
  const cf = byId.get(id).callFrame;
  const url = cf.url.replace(/^file:\/\//, '');
  const where =
    url === ''
      ? '(native)'
      : url.includes('node_modules/')
        ? url
            .slice(url.lastIndexOf('node_modules/') + 13)
            .split('/')
            .slice(0, url.includes('node_modules/@') ? 2 : 1)
            .join('/')
        : url.startsWith('node:')
          ? url
          : url.split('/').slice(-3).join('/');
  const fn = `${cf.functionName || '(anonymous)'}  ${where}:${cf.lineNumber + 1}`;
  fnTime.set(fn, (fnTime.get(fn) ?? 0) + us);
  fileTime.set(where, (fileTime.get(where) ?? 0) + us);
}
const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
process.stdout.write(`total sampled ${(total / 1e6).toFixed(2)} s\n\nby function (self):\n`);
for (const [k, v] of [...fnTime].sort((a, b) => b[1] - a[1]).slice(0, n)) process.stdout.write(`${pct(v)}  ${k}\n`);
process.stdout.write('\nby package / file (self):\n');
for (const [k, v] of [...fileTime].sort((a, b) => b[1] - a[1]).slice(0, n)) process.stdout.write(`${pct(v)}  ${k}\n`);
