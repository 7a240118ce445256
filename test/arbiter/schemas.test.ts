/**
 * The arbiter checks its config and its routes with plain JSON schemas (schemas/generated.ts),
 * not with TypeBox's builder (TypeBox's 680-odd modules were the largest part of an
 * idle arbiter's memory): generated.ts must be what scripts/gen-schemas.mjs writes from the
 * TypeBox definitions (schemas/source.ts) now; no module the daemon loads imports TypeBox; and
 * the quick check that lets a valid config through without TypeBox (@hq/runtime/quick-check)
 * says "valid" only when TypeBox's compiled checker (what config.ts falls back to) does, on
 * generated configs near and far from valid.
 */
import t from 'tap';
import fc from 'fast-check';
import { Compile } from 'typebox/compile';
import { join } from 'node:path';
import * as generated from '../../apps/arbiter/src/schemas/generated.js';
import * as source from '../../apps/arbiter/src/schemas/source.js';
import { surelyValid } from '../../packages/runtime/src/quick-check.js';
import { ROOT, generatedIsCurrent, walkImports } from '../schemas.js';

t.test(
  'generated.ts is what scripts/gen-schemas.mjs writes from source.ts (regenerate: npx tsc -b && node scripts/gen-schemas.mjs)',
  (t) => generatedIsCurrent(t, 'arbiter', source, generated),
);

t.test(
  "the daemon's modules do not import TypeBox or @hq/protocol/schemas (the config checker and the survival copies' manifest reader load them when needed)",
  async (t) => {
    const src = join(ROOT, 'apps/arbiter/src');
    // Every relative `import()` is followed (what the daemon may load); a package imported with
    // `import()` is loaded only when needed and not counted.
    const { seen, externals } = walkImports(join(src, 'cli.ts'), 'all');
    for (const part of [
      'server/server.ts',
      'config.ts',
      'routes/lease.ts',
      'routes/survival.ts',
      'registry/routes.ts',
      'server/openapi.ts',
      'store/etcd/lease.ts',
    ]) {
      t.ok(seen.has(join(src, part)), `the walk reaches ${part}`);
    }
    t.notOk(
      seen.has(join(src, 'schemas/source.ts')) || seen.has(join(src, 'config-checker.ts')),
      "nor the schemas' TypeBox source, nor the eager config checker",
    );
    for (const mod of ['typebox', 'typebox/compile', 'typebox/schema', 'typebox/value', '@hq/protocol/schemas']) {
      t.equal(externals.get(mod), undefined, `no module imports ${mod}`);
    }
  },
);

/** Values of every JSON type, near the config's bounds and patterns. */
const anyValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(
      '',
      'mbp',
      'node-b',
      'cloud-vm',
      'Cloud',
      '-x',
      'constructor',
      'a'.repeat(256),
      'sqlite',
      'etcd',
      'http://127.0.0.1:2379',
      '*/10 * * * *',
      'tailnet.ts.net',
      'bad domain',
      '/x',
      '\u00e9',
      '\ud800',
      '\u{1F600}',
    ),
    fc.string({ maxLength: 6 }),
    fc.constantFrom(0, -1, 1, 0.5, 2, 100, 1000, 1001, 65535, 65536, 8470, 1e-9, -0, 31_536_000, 31_536_001, 2 ** 53),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom('mbp', 'kind', 'host', 'port', 'x', '__proto__'), tie('value'), { maxKeys: 3 }),
  ),
})).value;

type Json = { readonly [k: string]: unknown };

/** Values shaped by a schema (its keys, its constants, its bounds), mixed with any value. */
function near(schema: Json, depth = 0): fc.Arbitrary<unknown> {
  const shaped: fc.Arbitrary<unknown>[] = [];
  if (Array.isArray(schema['anyOf']))
    shaped.push(fc.oneof(...(schema['anyOf'] as Json[]).map((b) => near(b, depth + 1))));
  if (schema['const'] !== undefined) shaped.push(fc.constant(schema['const']));
  const props = schema['properties'] as { [k: string]: Json } | undefined;
  if (schema['type'] === 'object' && props !== undefined && depth < 4) {
    const keys = Object.keys(props);
    shaped.push(
      fc
        .dictionary(
          fc.oneof(
            { weight: 9, arbitrary: fc.constantFrom(...keys) },
            { weight: 1, arbitrary: fc.constantFrom('bogus', 'refreshSeconds', '__proto__') },
          ),
          fc.constant(null),
          { maxKeys: Math.min(keys.length, 5) },
        )
        .chain((d) =>
          fc.record(
            Object.fromEntries(
              Object.keys(d).map((k) => [k, props[k] === undefined ? anyValue : near(props[k], depth + 1)]),
            ),
          ),
        ),
    );
  }
  if (schema['type'] === 'array' && schema['items'] !== undefined && depth < 4) {
    shaped.push(fc.array(near(schema['items'] as Json, depth + 1), { maxLength: 3 }));
  }
  for (const k of ['minimum', 'maximum', 'exclusiveMinimum']) {
    if (typeof schema[k] === 'number')
      shaped.push(fc.constantFrom(schema[k] as number, (schema[k] as number) - 1, (schema[k] as number) + 1));
  }
  return shaped.length === 0
    ? anyValue
    : fc.oneof({ weight: 4, arbitrary: fc.oneof(...shaped) }, { weight: 1, arbitrary: anyValue });
}

t.test(
  "the quick check says valid only when TypeBox's compiled checker does, and knows every keyword of the config schema",
  async (t) => {
    const schema = generated.ConfigSchema as unknown as Json;
    const typebox = Compile(generated.ConfigSchema);
    let valid = 0;
    fc.assert(
      fc.property(near(schema), (c) => {
        const input = JSON.parse(JSON.stringify(c ?? null)) as unknown; // as a config file parses
        const quick = surelyValid(schema, input);
        const sure = typebox.Check(input);
        if (sure) valid++;
        // Never valid for the quick check and invalid for TypeBox; and not unsure of a valid config
        // either (it knows every keyword of this schema), save an own __proto__ key and strings
        // whose two lengths straddle a bound.
        return quick
          ? sure
          : !sure || JSON.stringify(input).includes('"__proto__"') || /[\ud800-\udfff]/.test(JSON.stringify(input));
      }),
      { numRuns: 3000 },
    );
    t.ok(valid > 300, `the generator reaches valid configs too (${valid} of 3000)`);
    const typical = {
      arbiter: 'cloud-vm',
      candidates: ['mbp', 'node-b'],
      dataDir: '/var/lib/hq-arbiter',
      listen: { host: '100.64.0.1', port: 8470 },
      store: { kind: 'etcd', endpoints: ['http://127.0.0.1:2379'], prefix: '/hq' },
      healthUrls: { mbp: 'http://mbp:8471/health' },
      portBands: { reserved: [8470], test: { from: 20000, to: 20999 } },
    };
    t.ok(surelyValid(schema, typical), 'a typical config passes');
    t.ok(typebox.Check(typical), 'and TypeBox agrees');
    t.notOk(surelyValid(schema, { ...typical, store: { kind: 'consul' } }), 'a store kind of neither branch: not sure');
    t.notOk(surelyValid(schema, { ...typical, dataDir: 'x'.repeat(4097) }), 'a string above maxLength: not sure');
  },
);

t.test(
  'the quick check on the keywords the arbiter added: const, anyOf, minLength and maxLength counted both ways',
  async (t) => {
    t.ok(surelyValid({ type: 'string', minLength: 2 }, 'xyz'), 'minLength 2, three characters');
    t.notOk(
      surelyValid({ type: 'string', minLength: 2 }, '\u{1F600}'),
      'one code point in two UTF-16 units: unsure of a minLength 2',
    );
    t.notOk(surelyValid({ type: 'string', maxLength: 1 }, '\u{1F600}'), 'nor of a maxLength 1');
    t.ok(surelyValid({ type: 'string', maxLength: 2 }, '\u{1F600}'), 'within both counts');
    t.ok(surelyValid({ anyOf: [{ const: 'a' }, { const: 'b' }] }, 'b'), 'the second branch');
    t.notOk(surelyValid({ anyOf: [{ const: 'a' }, { const: 'b' }] }, 'c'), 'no branch');
    t.notOk(surelyValid({ anyOf: 'x' }, 'x'), 'an anyOf that is no list: unsure');
    t.notOk(surelyValid({ const: { a: 1 } }, { a: 1 }), 'a const object: unsure (not compared)');
    t.ok(surelyValid({ const: 3 }, 3), 'a number const');
    t.notOk(surelyValid({ const: 3 }, '3'), 'of another type');
  },
);
