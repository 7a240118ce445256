/**
 * The daemon checks its config and its routes with plain JSON schemas (schemas/generated.ts), not
 * with TypeBox's builder: generated.ts must be what scripts/gen-agent-schemas.mjs writes from the
 * TypeBox definitions (schemas/source.ts) now, schema for schema the same JSON Schema.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as generated from '../../apps/agent/src/schemas/generated.js';
import * as source from '../../apps/agent/src/schemas/source.js';
import { ROOT } from './helpers.js';

t.test('generated.ts is what scripts/gen-agent-schemas.mjs writes from source.ts (regenerate: npx tsc -b && node scripts/gen-agent-schemas.mjs)', async (t) => {
  const script = pathToFileURL(join(ROOT, 'scripts/gen-agent-schemas.mjs')).href;
  const { renderSchemas, GENERATED } = (await import(script)) as { renderSchemas: (m: object) => string; GENERATED: string };
  t.equal(readFileSync(GENERATED, 'utf8'), renderSchemas(source), 'the file is up to date');
  t.same(Object.keys(generated).sort(), Object.keys(source).sort(), 'the same schemas');
  for (const [name, schema] of Object.entries(source)) {
    t.same((generated as { [k: string]: unknown })[name], JSON.parse(JSON.stringify(schema)), `${name}: the same JSON Schema as its TypeBox definition`);
  }
});

t.test("the daemon's modules do not import TypeBox's builder or @hq/protocol/schemas (standby replication aside)", async (t) => {
  const src = join(ROOT, 'apps/agent/src');
  const seen = new Set<string>();
  const externals = new Map<string, string>();
  const walk = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    // Static imports only (type imports vanish), and what the daemon always loads at start with
    // `import()` (the registry member); replication/wire.js is loaded only with a replication block.
    for (const m of text.matchAll(/^import\s+(?!type\b)[^'"]*?from\s+'([^']+)'|^import\s+'([^']+)'|await import\('(\.[^']+)'\)/gm)) {
      const spec = (m[1] ?? m[2] ?? m[3]) as string;
      if (spec.startsWith('.')) {
        if (!spec.includes('replication/')) walk(join(file, '..', spec.replace(/\.js$/, '.ts')));
      } else if (!externals.has(spec)) externals.set(spec, file.slice(ROOT.length + 1));
    }
  };
  walk(join(src, 'daemon-cli.ts'));
  t.ok(seen.has(join(src, 'daemon/servers.ts')) && seen.has(join(src, 'config.ts')) && seen.has(join(src, 'registry/member.ts')), 'the walk reaches the listeners, the config and the registry member');
  t.equal(externals.get('typebox'), undefined, 'no module imports typebox');
  t.equal(externals.get('@hq/protocol/schemas'), undefined, 'nor @hq/protocol/schemas');
  t.ok(externals.has('typebox/schema'), 'typebox/schema checks the config');
});
