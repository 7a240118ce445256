/**
 * Host names (SPEC §1): `^[a-z0-9][a-z0-9-]{0,31}$`, never `constructor` or `prototype`.
 * Names are compared exactly — no trimming, no case folding — and are never used as keys
 * of plain objects anywhere in hq (maps only), so a hostile name cannot reach a prototype.
 */
export const HOST_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;

const FORBIDDEN = new Set(['constructor', 'prototype']);

export function isHost(value: unknown): value is string {
  return typeof value === 'string' && HOST_PATTERN.test(value) && !FORBIDDEN.has(value);
}

/** Explains why `value` is not a host, or returns null when it is one. */
export function hostProblem(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (FORBIDDEN.has(value)) return `"${value}" is a reserved name`;
  if (!HOST_PATTERN.test(value)) return 'must match ^[a-z0-9][a-z0-9-]{0,31}$';
  return null;
}
