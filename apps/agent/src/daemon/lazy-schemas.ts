/**
 * Fastify's own schema compilers (ajv through @fastify/ajv-compiler for requests,
 * fast-json-stringify for answers), loaded and run only when a route's schema is first used:
 * an idle agent answers the fence on its fast path and the health check, which have none, and
 * so never loads ajv or fast-json-stringify, nor keeps a compiled validator for every route
 * (docs/BENCH.md "Where the idle agent's memory goes"). Each route's validator or serializer is
 * compiled at its first request, by the same compiler with the same options, then kept.
 *
 * The one difference from Fastify's default: a schema the compiler refuses would fail that
 * route's first request (a 500) instead of the start — the agent's schemas are fixed, and every
 * route is exercised by test/agent/servers.test.ts.
 */
import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
type BuildValidator = NonNullable<CompilersFactory['buildValidator']>;
type BuildSerializer = NonNullable<CompilersFactory['buildSerializer']>;
type Validate = ((...args: unknown[]) => unknown) & { errors?: unknown; schemaEnv?: unknown };

/** Fastify's dependencies, resolved from Fastify itself (where npm put them for it). */
const fromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));

/** Counts what was compiled, for the test that checks the laziness. */
export const compiled = { validators: 0, serializers: 0 };

/** A function that builds `make()`'s function at its first call (or first look at ajv's `schemaEnv`). */
function lazyValidator(make: () => Validate): Validate {
  let real: Validate | null = null;
  const get = (): Validate => {
    if (real === null) {
      compiled.validators++;
      real = make();
    }
    return real;
  };
  const v = ((...args: unknown[]) => get()(...args)) as Validate;
  // Fastify reads both from the function it was given: ajv's root-data hook and the last errors.
  Object.defineProperty(v, 'schemaEnv', { get: () => get().schemaEnv });
  Object.defineProperty(v, 'errors', { get: () => real?.errors });
  return v;
}

/** Fastify's default compilers, each route's built on first use. */
export function lazyCompilers(): CompilersFactory {
  const buildValidator: BuildValidator = (externalSchemas, options) => {
    let compiler: ReturnType<BuildValidator> | null = null;
    const compile = (): ReturnType<BuildValidator> =>
      (compiler ??= (fromFastify('@fastify/ajv-compiler') as () => BuildValidator)()(externalSchemas, options));
    return (route) => lazyValidator(() => compile()(route) as Validate) as ReturnType<ReturnType<BuildValidator>>;
  };
  const buildSerializer: BuildSerializer = (externalSchemas, options) => {
    let compiler: ReturnType<BuildSerializer> | null = null;
    const compile = (): ReturnType<BuildSerializer> =>
      (compiler ??= (fromFastify('@fastify/fast-json-stringify-compiler') as () => BuildSerializer)()(
        externalSchemas,
        options,
      ));
    return (route) => {
      let real: ((data: unknown) => string) | null = null;
      return (data: unknown) => {
        if (real === null) {
          compiled.serializers++;
          real = compile()(route);
        }
        return real(data);
      };
    };
  };
  return { buildValidator, buildSerializer };
}
