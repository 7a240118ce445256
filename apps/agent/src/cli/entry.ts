#!/usr/bin/env node
import { exitWhenDone } from './args.js';
import { main } from './main.js';

exitWhenDone(main(process.argv.slice(2)));
