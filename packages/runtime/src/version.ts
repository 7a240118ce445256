/**
 * hq's version: the one source that `hq --version`, `hq-agent --version`, `hq-arbiter --version`,
 * `/v1/health` and the OpenAPI document print. Every package.json of the repository carries the
 * same string (test/deploy/version.test.ts holds them together); bump them all at once and
 * add the CHANGELOG.md entry. A subpath of its own (`@hq/runtime/version`), so a CLI prints it
 * without loading anything else.
 */
export const VERSION = '0.2.0-dev';
