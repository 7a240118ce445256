/**
 * What the schema tests of both daemons share (test/agent/schemas.test.ts,
 * test/arbiter/schemas.test.ts): that a daemon's schemas/generated.ts is what
 * scripts/gen-schemas.mjs writes from its TypeBox source now, and a walk of the modules a daemon
 * loads, to say which packages they import.
 */
import type { Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** `generated` is what the script writes from `source` now, schema for schema the same JSON Schema. */
export async function generatedIsCurrent(
  t: Test,
  daemon: 'agent' | 'arbiter',
  source: object,
  generated: object,
): Promise<void> {
  const script = pathToFileURL(join(ROOT, 'scripts/gen-schemas.mjs')).href;
  const { renderSchemas, TARGETS } = (await import(script)) as {
    renderSchemas: (m: object) => string;
    TARGETS: { [d: string]: { generated: string } };
  };
  t.equal(
    readFileSync((TARGETS[daemon] as { generated: string }).generated, 'utf8'),
    renderSchemas(source),
    'the file is up to date',
  );
  t.same(Object.keys(generated).sort(), Object.keys(source).sort(), 'the same schemas');
  for (const [name, schema] of Object.entries(source)) {
    t.same(
      (generated as { [k: string]: unknown })[name],
      JSON.parse(JSON.stringify(schema)),
      `${name}: the same JSON Schema as its TypeBox definition`,
    );
  }
}

export interface Walk {
  /** Every module file reached. */
  readonly seen: ReadonlySet<string>;
  /** Each package imported, with the first file (relative to the root) that imports it. */
  readonly externals: ReadonlyMap<string, string>;
}

/**
 * The modules reached from `entry` by static imports (type imports vanish) and by relative
 * `import()`: every one (`lazy: 'all'`), or only the awaited ones a daemon makes at start
 * (`lazy: 'awaited'`); `skip` leaves out relative specifiers the daemon loads only when needed.
 */
export function walkImports(
  entry: string,
  lazy: 'all' | 'awaited',
  skip: (spec: string) => boolean = () => false,
): Walk {
  const seen = new Set<string>();
  const externals = new Map<string, string>();
  const dynamic = lazy === 'all' ? String.raw`import\('(\.[^']+)'\)` : String.raw`await import\('(\.[^']+)'\)`;
  const pattern = new RegExp(
    String.raw`^import\s+(?!type\b)[^'"]*?from\s+'([^']+)'|^import\s+'([^']+)'|${dynamic}`,
    'gm',
  );
  const walk = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const m of readFileSync(file, 'utf8').matchAll(pattern)) {
      const spec = (m[1] ?? m[2] ?? m[3]) as string;
      if (spec.startsWith('.')) {
        if (!skip(spec)) walk(join(file, '..', spec.replace(/\.js$/, '.ts')));
      } else if (!externals.has(spec)) externals.set(spec, file.slice(ROOT.length));
    }
  };
  walk(entry);
  return { seen, externals };
}
