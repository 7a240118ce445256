/**
 * Loads TypeBox's checker for config.ts (`typebox/schema`), for the modules that load configs
 * synchronously (the CLI's commands, the standby's replication config). The daemon does not
 * import it: it loads the checker only when its config needs it (config.ts `loadConfigLazily`).
 */
import Schema from 'typebox/schema';
import { useSchemaChecker } from './config.js';

useSchemaChecker(Schema);
