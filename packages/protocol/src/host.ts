/**
 * Host names: `^[a-z0-9][a-z0-9-]{0,31}$`, never `constructor` or `prototype`.
 * Names are compared exactly — no trimming, no case folding — and are never used as keys of
 * plain objects anywhere in hq (maps only), so a hostile name cannot reach a prototype. Every
 * schema and every check of a host, on every side, uses the rule from here.
 */
export type Host = string;

/** What a host name looks like, without its anchors. */
const NAME = '[a-z0-9][a-z0-9-]{0,31}';

/** The two names a host may never have: they reach a prototype when used as a plain key. */
export const RESERVED_NAMES: readonly string[] = Object.freeze(['constructor', 'prototype']);

/** The pattern alone (the reserved names pass it; `isHost` refuses them). */
export const HOST_PATTERN = new RegExp(`^${NAME}$`);

/** The whole rule as one JSON-schema pattern: the reserved names are refused by a lookahead. */
export const HOST_SCHEMA_PATTERN = `^(?!(?:${RESERVED_NAMES.join('|')})$)${NAME}$`;

/** The longest host name. */
export const HOST_MAX_LENGTH = 32;

export function isHost(value: unknown): value is Host {
  return typeof value === 'string' && HOST_PATTERN.test(value) && !RESERVED_NAMES.includes(value);
}

/** Explains why `value` is not a host, or returns null when it is one. */
export function hostProblem(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (RESERVED_NAMES.includes(value)) return `"${value}" is a reserved name`;
  if (!HOST_PATTERN.test(value)) return `must match ${HOST_PATTERN.source}`;
  return null;
}
