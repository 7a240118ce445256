/**
 * What every schema of the contract is built from: hosts, generations, the error body, closed
 * lists as unions of literals, and `Same`, the compile-time check that a schema's static type
 * is the contract's type (so neither can change without the other).
 */
import Type, { type TLiteral, type TUnion } from 'typebox';
import { HOST_MAX_LENGTH, HOST_SCHEMA_PATTERN } from '../host.js';

export const Host = Type.String({ pattern: HOST_SCHEMA_PATTERN, maxLength: HOST_MAX_LENGTH });
/** A seen generation: 0 = never seen anything. */
export const Generation = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
/** A generation named in a request is a grant's fencing token: ≥ 1 (0 was never granted). */
export const GrantedGeneration = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
/** A cadence or timing figure an agent reports (seconds, up to a year). */
export const CadenceSeconds = Type.Number({ exclusiveMinimum: 0, maximum: 31_536_000 });
export const Time = Type.Number();
export const NullableTime = Type.Union([Type.Number(), Type.Null()]);

/**
 * A `title` names a schema that the arbiter's OpenAPI document shares as
 * `components.schemas[title]`; validation and serialization ignore it.
 */
export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() }, { title: 'Error' });

type LiteralsOf<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };

/** A closed list of the contract (outcomes, reasons, tiers) as a union of literals, typed as the list. */
export function Literals<const T extends readonly string[]>(values: T): TUnion<LiteralsOf<T>> {
  return Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<LiteralsOf<T>>;
}

type Plain<T> = T extends readonly (infer U)[]
  ? Plain<U>[]
  : T extends object
    ? { -readonly [K in keyof T]: Plain<T[K]> }
    : T;
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;

/** `true` when A and B have the same shape, readonly aside (optional fields and unions must agree). */
export type Same<A, B> = Equal<Plain<A>, Plain<B>>;
/** Fails to compile unless T is `true`. */
export type Assert<T extends true> = T;
