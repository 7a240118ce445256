/**
 * SPEC §1 host pattern for JSON schemas, with the two reserved names refused in the schema
 * itself. Its own module so that schema modules can import it without a cycle through config.
 */
export const HOST_SCHEMA_PATTERN = '^(?!(?:constructor|prototype)$)[a-z0-9][a-z0-9-]{0,31}$';
