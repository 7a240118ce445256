/**
 * Fence roles: the names a fenced job asks about (`GET /v1/fence?role=R`, `hq fence
 * check --role R`). The agent's `roles` key lists the known ones; any other role is a 400
 * (`HQ_ERR_UNKNOWN_ROLE`) and exit 2.
 */

/** The role that is never fail-open: the ledger CLI writes only with a live validity. */
export const NEVER_FAIL_OPEN = 'ledger-cli';

/**
 * The roles an agent knows when its config names none: generic ones. Jobs of a particular
 * installation add theirs in the config (`hq import elanous` writes the old system's).
 */
export const DEFAULT_ROLES: readonly string[] = Object.freeze([
  'telegram-poller',
  'cron',
  'release-run',
  'git-push',
  NEVER_FAIL_OPEN,
]);

/** What a role name looks like (lower case, digits and dashes: nothing to percent-encode in a query). */
export const ROLE_SCHEMA_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$';
