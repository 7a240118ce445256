#!/usr/bin/env node
// The npm bin shim: it exists in the repository so that `npm install` on a fresh clone links it
// (npm skips bins whose file is missing, and dist/ is only built by `prepare`, after linking).
import '../dist/cli.js';
