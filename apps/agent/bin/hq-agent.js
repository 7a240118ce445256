#!/usr/bin/env node
// The npm bin shim (see hq.js): links on a fresh clone before `prepare` has built dist/.
import '../dist/daemon-cli.js';
