#!/usr/bin/env node
// The npm bin shim: it exists in the repository so that `npm install` on a fresh clone links it
// (npm skips bins whose file is missing, and dist/ is only built by `prepare`, after linking).
// `hq fence check|run` go straight to their own entry (no command table: a faster start for
// cron jobs and fenced scripts); everything else to the full CLI.
const [a, b] = process.argv.slice(2);
if (a === 'fence' && (b === 'check' || b === 'run')) await import('../dist/cli/fence-entry.js');
else await import('../dist/cli/entry.js');
