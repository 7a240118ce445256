/**
 * Importing this module compiles the config schema with TypeBox at once, so `validateConfig` and
 * `loadConfig` can name the problem of any file synchronously (tests, tools). The daemon does not
 * import it: `loadConfigLazily` loads TypeBox only for a file the quick check cannot pass.
 */
import { Compile } from 'typebox/compile';
import { useConfigCompiler } from './config.js';

useConfigCompiler(Compile);
