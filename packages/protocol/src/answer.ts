/**
 * Reading an answer that was not checked whole: its fields, each `unknown` until a guard says
 * what it is, so a reader takes what is well formed and never trusts a shape it did not test.
 * No dependencies: a light command can load it alone (`@hq/protocol/answer`).
 */

/** The fields of an answer's body. */
export type Fields = { readonly [key: string]: unknown };

const NONE: Fields = Object.freeze({});

/** The body's fields; a body that is not an object (null, an array, a scalar) has none. */
export function fieldsOf(body: unknown): Fields {
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Fields) : NONE;
}

/** The field when it is a string, else null. */
export function stringField(body: unknown, key: string): string | null {
  const v = fieldsOf(body)[key];
  return typeof v === 'string' ? v : null;
}

/** A generation as it crosses a process boundary: a safe integer, 0 = none seen. */
export function isGeneration(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** The field when it is a generation, else null. */
export function generationField(body: unknown, key: string): number | null {
  const v = fieldsOf(body)[key];
  return isGeneration(v) ? v : null;
}
