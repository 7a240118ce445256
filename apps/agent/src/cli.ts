#!/usr/bin/env node
import { exitWhenDone } from './cli/args.js';
import { main } from './cli/main.js';

exitWhenDone(main(process.argv.slice(2)));
