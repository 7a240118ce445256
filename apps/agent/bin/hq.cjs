#!/usr/bin/env node
'use strict';
// The npm bin shim: it exists in the repository so that `npm install` on a fresh clone links it
// (npm skips bins whose file is missing, and dist/ is only built by `prepare`, after linking).
// `hq fence check|run` go straight to their own entry (no command table: a faster start for
// cron jobs and fenced scripts); everything else to the full CLI. The shim is CommonJS so that
// the fence path runs without Node's ES module loader (about 2 MiB and 20–40 ms per process):
// it loads the one-file bundle dist/cli/fence-main.cjs (scripts/bundle-fence.mjs) unless that
// is missing or older than one of the modules it was built from — then the ES modules themselves.
// An installed tree's bundle is never stale (`prepare` and `npm run package` write it after tsc);
// a working tree rebuilt with `tsc -b` alone is, and its real-process tests run this shim.
const [a, b] = process.argv.slice(2);
if (a === 'fence' && (b === 'check' || b === 'run')) {
  const bundled = freshBundle();
  if (bundled !== null) bundled.fenceMain(process.argv.slice(2));
  else import('../dist/cli/fence-entry.js');
} else import('../dist/cli/entry.js');

/** The bundle's exports, or null when it is missing or stale. */
function freshBundle() {
  const { join } = require('node:path');
  const { statSync } = require('node:fs');
  const file = join(__dirname, '../dist/cli/fence-main.cjs');
  const own = statSync(file, { throwIfNoEntry: false });
  if (own === undefined) return null;
  const bundle = require(file);
  // Inputs are relative to the bundle; one that is absent (an installed package lays out the
  // internal packages elsewhere, with the tarball's fixed times) cannot be newer.
  for (const input of bundle.inputs) {
    const s = statSync(join(file, '..', input), { throwIfNoEntry: false });
    if (s !== undefined && s.mtimeMs > own.mtimeMs) return null;
  }
  return bundle;
}
