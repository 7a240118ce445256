/**
 * The daemon checks its config and its routes with plain JSON schemas (schemas/generated.ts), not
 * with TypeBox's builder: generated.ts must be what scripts/gen-schemas.mjs writes from the
 * TypeBox definitions (schemas/source.ts) now, schema for schema the same JSON Schema; and the
 * quick check that lets a valid config through without TypeBox (@hq/runtime/quick-check) says
 * "valid" exactly when TypeBox's Check does, on generated configs near and far from valid.
 */
import t from 'tap';
import fc from 'fast-check';
import Schema from 'typebox/schema';
import { join } from 'node:path';
import * as generated from '../../apps/agent/src/schemas/generated.js';
import * as source from '../../apps/agent/src/schemas/source.js';
import { surelyValid } from '../../packages/runtime/src/quick-check.js';
import { ROOT } from './helpers.js';
import { generatedIsCurrent, walkImports } from '../schemas.js';

t.test(
  'generated.ts is what scripts/gen-schemas.mjs writes from source.ts (regenerate: npx tsc -b && node scripts/gen-schemas.mjs)',
  (t) => generatedIsCurrent(t, 'agent', source, generated),
);

t.test(
  "the daemon's modules do not import TypeBox's builder, its checker or @hq/protocol/schemas (standby replication aside)",
  async (t) => {
    const src = join(ROOT, 'apps/agent/src');
    // What the daemon always loads at start with `import()` (the registry member) is followed;
    // replication/wire.js is loaded only with a replication block.
    const { seen, externals } = walkImports(join(src, 'daemon-cli.ts'), 'awaited', (spec) =>
      spec.includes('replication/'),
    );
    t.ok(
      seen.has(join(src, 'daemon/servers.ts')) &&
        seen.has(join(src, 'config.ts')) &&
        seen.has(join(src, 'registry-client/member.ts')),
      'the walk reaches the listeners, the config and the registry member',
    );
    t.equal(externals.get('typebox'), undefined, 'no module imports typebox');
    t.equal(externals.get('@hq/protocol/schemas'), undefined, 'nor @hq/protocol/schemas');
    t.equal(
      externals.get('typebox/schema'),
      undefined,
      'nor typebox/schema: the daemon loads it only for a config the quick check cannot pass',
    );
  },
);

/** Values for a config key: of every JSON type, near the schema's bounds and patterns. */
const anyValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(
      '',
      'mbp',
      'node-b',
      'Cloud',
      '-x',
      'constructor',
      'a'.repeat(33),
      'http://x:1',
      'https://h',
      'ftp://h',
      '*/10 * * * *',
      'tailnet.ts.net',
      'bad domain',
      '~/x',
      '\u00e9',
      '\ud800',
    ),
    fc.string({ maxLength: 6 }),
    fc.constantFrom(0, -1, 1, 0.5, 65535, 65536, 8470, 1e-9, -0, 2 ** 53),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 9 }),
    fc.dictionary(
      fc.constantFrom('mbp', 'node-b', 'Bad', 'host', 'port', 'x', '__proto__', 'constructor'),
      tie('value'),
      { maxKeys: 3 },
    ),
  ),
})).value;

const schemaKeys = Object.keys(generated.AgentConfigSchema.properties);
const config = fc.dictionary(
  fc.oneof(fc.constantFrom(...schemaKeys), fc.constantFrom('ttlSeconds', 'bogus', '__proto__')),
  anyValue,
  { maxKeys: 6 },
);

t.test(
  "the quick check says valid exactly when TypeBox does (configs of the schema's keys, values of every kind)",
  async (t) => {
    let valid = 0;
    fc.assert(
      fc.property(config, (c) => {
        const input = JSON.parse(JSON.stringify(c)) as unknown; // as a config file parses
        const quick = surelyValid(generated.AgentConfigSchema, input);
        const typebox = Schema.Check(generated.AgentConfigSchema, input);
        if (typebox) valid++;
        // Never valid for the quick check and invalid for TypeBox; and not unsure of a valid config
        // either (for this schema it knows every keyword), save an own __proto__ key.
        return quick
          ? typebox
          : !typebox || Object.hasOwn(input as object, '__proto__') || JSON.stringify(input).includes('"__proto__"');
      }),
      { numRuns: 3000 },
    );
    t.ok(valid > 100, `the generator reaches valid configs too (${valid} of 3000)`);
    t.ok(
      surelyValid(generated.AgentConfigSchema, {
        hostName: 'mbp',
        roles: ['cron', 'backup'],
        listen: { host: '127.0.0.1', port: 0 },
        peers: { 'node-b': 'http://node-b:8471' },
        replication: { any: 1 },
      }),
      'a typical config passes',
    );
    t.notOk(surelyValid({ type: 'string', format: 'uri' }, 'x'), 'a keyword it does not know: unsure');
    t.notOk(surelyValid({ type: 'string', minLength: 2 }, 'x'), 'a string below its minLength: not sure');
  },
);
