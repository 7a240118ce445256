/**
 * A JSON Schema check that answers only when it is sure a value is valid: `true` means the value
 * satisfies the schema exactly as `typebox/schema`'s `Check` would decide; `false` means it may
 * not (it is invalid, or the schema uses a keyword or a value this check does not know), and
 * then TypeBox decides and says why. So a valid config is accepted without loading TypeBox
 * (about 5 MiB of an idle agent's VmRSS, docs/BENCH.md), and every refusal is still TypeBox's
 * own message. Known keywords, with TypeBox's semantics (regular expressions with the `u`
 * flag, `number` finite): type (object, array, string, number, integer, boolean), properties,
 * patternProperties, additionalProperties false, required, items (one schema), minItems,
 * maxItems, minLength and maxLength (a string passes only when both its UTF-16 length and its
 * count of code points are within the bounds, so either way of counting agrees), pattern,
 * minimum, maximum, exclusiveMinimum (a number), const (a string, number or boolean) and anyOf
 * (sure when one branch is). Both daemons check their config with it (the agent's and the
 * arbiter's config.ts); test/agent/schemas.test.ts and test/arbiter/schemas.test.ts compare it
 * with TypeBox on generated configs.
 */
type Json = { readonly [k: string]: unknown };

const KNOWN: ReadonlySet<string> = new Set([
  'type',
  'properties',
  'patternProperties',
  'additionalProperties',
  'required',
  'items',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'const',
  'anyOf',
]);

const compiled = new Map<string, RegExp>();
function regexp(pattern: string): RegExp {
  let r = compiled.get(pattern);
  if (r === undefined) {
    r = new RegExp(pattern, 'u');
    compiled.set(pattern, r);
  }
  return r;
}

const isSchema = (s: unknown): s is Json => typeof s === 'object' && s !== null && !Array.isArray(s);
const num = (s: Json, k: string): number | null | undefined =>
  s[k] === undefined ? undefined : typeof s[k] === 'number' ? (s[k] as number) : null;

function typeMatches(type: unknown, value: unknown): boolean {
  switch (type) {
    case undefined:
      return true;
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
      return Number.isFinite(value);
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    default:
      return false;
  }
}

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** True only when `value` surely satisfies `schema` (see the module's comment). */
export function surelyValid(schema: unknown, value: unknown): boolean {
  if (!isSchema(schema)) return false;
  for (const k of Object.keys(schema)) if (!KNOWN.has(k)) return false;
  if (!typeMatches(schema['type'], value)) return false;
  if (schema['const'] !== undefined) {
    const c = schema['const'];
    if (!(typeof c === 'string' || typeof c === 'boolean' || Number.isFinite(c)) || c !== value) return false;
  }
  if (schema['anyOf'] !== undefined) {
    const branches = schema['anyOf'];
    if (!Array.isArray(branches) || !branches.some((b) => surelyValid(b, value))) return false;
  }
  if (typeof value === 'string') {
    const min = num(schema, 'minLength');
    const max = num(schema, 'maxLength');
    if (min === null || max === null) return false;
    if (min !== undefined || max !== undefined) {
      const points = codePoints(value);
      if (min !== undefined && !(Math.min(value.length, points) >= min)) return false;
      if (max !== undefined && !(Math.max(value.length, points) <= max)) return false;
    }
    const p = schema['pattern'];
    if (p !== undefined && (typeof p !== 'string' || !regexp(p).test(value))) return false;
  }
  if (typeof value === 'number') {
    const min = num(schema, 'minimum');
    const max = num(schema, 'maximum');
    const above = num(schema, 'exclusiveMinimum');
    if (min === null || max === null || above === null) return false;
    if (
      (min !== undefined && !(value >= min)) ||
      (max !== undefined && !(value <= max)) ||
      (above !== undefined && !(value > above))
    )
      return false;
  }
  if (Array.isArray(value)) {
    const min = num(schema, 'minItems');
    const max = num(schema, 'maxItems');
    if (min === null || max === null) return false;
    if ((min !== undefined && value.length < min) || (max !== undefined && value.length > max)) return false;
    const items = schema['items'];
    if (items !== undefined && !value.every((v) => surelyValid(items, v))) return false;
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const o = value as Json;
    const props = schema['properties'];
    const patterns = schema['patternProperties'];
    const additional = schema['additionalProperties'];
    const required = schema['required'];
    if ((props !== undefined && !isSchema(props)) || (patterns !== undefined && !isSchema(patterns))) return false;
    if (additional !== undefined && additional !== false) return false;
    if (
      required !== undefined &&
      (!Array.isArray(required) || !required.every((k) => typeof k === 'string' && Object.hasOwn(o, k)))
    )
      return false;
    for (const k of Object.keys(o)) {
      let matched = false;
      if (props !== undefined && Object.hasOwn(props, k)) {
        matched = true;
        if (!surelyValid(props[k], o[k])) return false;
      }
      for (const [p, s] of Object.entries(patterns ?? {})) {
        if (regexp(p).test(k)) {
          matched = true;
          if (!surelyValid(s, o[k])) return false;
        }
      }
      if (!matched && additional === false) return false;
    }
  }
  return true;
}
