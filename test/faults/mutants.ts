/**
 * Mutants of the built arbiter for the fault harness (store etcd): a copy of a build tree whose
 * `apps/arbiter/dist` has one mechanism removed by a textual patch of the built JS, so the
 * harness can run it exactly like the real build (HQF_ROOT) and show what that mechanism stops.
 *
 * The copy: `apps/arbiter/dist` copied and patched; the rest of `apps/arbiter`, `apps/agent`,
 * `packages` and `node_modules` symlinked to the tree copied from (node resolves the arbiter's imports through
 * them, as in the original). Every patch names an anchor — an exact string of the built file that
 * must occur exactly once; a missing or repeated anchor throws, naming the file and the anchor,
 * so a refactor of the source cannot turn a mutant into the real build and let a test pass.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRoot } from './build.js';

export interface Patch {
  /** Relative to apps/arbiter/dist. */
  readonly file: string;
  /** Exact text that must occur once in the built file. */
  readonly anchor: string;
  readonly replacement: string;
  /** What the anchor is, for the error when it is missing. */
  readonly what: string;
}

export interface Mutant {
  readonly name: string;
  readonly removes: string;
  readonly patches: readonly Patch[];
}

/** store/etcd/lease.ts `writePart`: the election key's compare on every state write (leadership.ts L2, election.ts E4). */
const NO_WRITE_GUARD: Patch = {
  file: 'store/etcd/lease.js',
  anchor: 'const guard = this.guard?.() ?? null;',
  replacement: 'const guard = null; /* hqf mutant: no election guard on the write */',
  what: "EtcdStore.writePart's guard (`const guard = this.guard?.() ?? null;`)",
};
/** arbiter-shell.ts `runOnce`: no decision unless `mayDecide()` (L1). */
const NO_MAY_DECIDE: Patch = {
  file: 'arbiter-shell.js',
  anchor: 'if (this.deps.mayDecide?.() === false)',
  replacement: 'if (false /* hqf mutant: runOnce ignores mayDecide */)',
  what: "Arbiter.runOnce's mayDecide check (`if (this.deps.mayDecide?.() === false)`)",
};
/** election.ts `stillElected` (E2): the term's validity by our own clock. */
const NO_STILL_ELECTED_CLOCK: Patch = {
  file: 'store/etcd/election.js',
  anchor: 'return s?.elected === true && this.live(s);',
  replacement: 'return s?.elected === true && s.ending === null; /* hqf mutant: stillElected without the clock */',
  what: 'Election.stillElected (`return s?.elected === true && this.live(s);`)',
};
/** election.ts `live` (E2/E3): a term found lapsed by our clock ends (without it, only etcd's word ends it). */
const NO_LAPSE: Patch = {
  file: 'store/etcd/election.js',
  anchor: 'if (validFor(s.renewal, this.marginSeconds, this.clock.now()) > 0)\n            return true;',
  replacement: 'if (true /* hqf mutant: a term never lapses by our clock */)\n            return true;',
  what: "Election.live's lapse by our clock (`if (validFor(s.renewal, this.marginSeconds, this.clock.now()) > 0) return true;`)",
};

export const MUTANTS: readonly Mutant[] = [
  { name: 'no-write-guard', removes: "the election compare on the store's writes", patches: [NO_WRITE_GUARD] },
  {
    name: 'no-term-check',
    removes:
      "every check that the term is still ours: the write guard, runOnce's mayDecide, stillElected's and live()'s clock (a woken arbiter decides until etcd tells it its lease is gone)",
    patches: [NO_WRITE_GUARD, NO_MAY_DECIDE, NO_STILL_ELECTED_CLOCK, NO_LAPSE],
  },
];

export function mutant(name: string): Mutant {
  const m = MUTANTS.find((x) => x.name === name);
  if (m === undefined) throw new Error(`no mutant "${name}" (known: ${MUTANTS.map((x) => x.name).join(', ')})`);
  return m;
}

/** Applies the patches to `text` of `file`; throws naming the anchor when one is not found exactly once. */
export function applyPatches(file: string, text: string, patches: readonly Patch[]): string {
  let out = text;
  for (const p of patches) {
    const n = out.split(p.anchor).length - 1;
    if (n !== 1)
      throw new Error(
        `mutant patch anchor ${n === 0 ? 'not found' : `found ${n} times`} in apps/arbiter/dist/${file}: ${p.what} — the source changed; update test/faults/mutants.ts`,
      );
    out = out.replace(p.anchor, () => p.replacement);
  }
  return out;
}

/**
 * Builds the mutant's tree from `from` (default: the harness's build root) in a new temp dir
 * and returns its root (for HQF_ROOT) and a `remove()`.
 */
export function buildMutant(m: Mutant, from: string = buildRoot()): { root: string; remove: () => void } {
  const dist = join(from, 'apps/arbiter/dist');
  if (!existsSync(join(dist, 'cli.js'))) throw new Error(`no built arbiter in ${dist} (run npx tsc -b)`);
  const root = join(tmpdir(), `hqf-mutant-${m.name}-${process.pid}-${Date.now()}`);
  mkdirSync(join(root, 'apps'), { recursive: true });
  try {
    cpSync(dist, join(root, 'apps/arbiter/dist'), { recursive: true });
    // everything else of apps/arbiter as it is (package.json, src: the status page's browser script is read from there)
    for (const e of readdirSync(join(from, 'apps/arbiter'))) {
      if (e !== 'dist') symlinkSync(join(from, 'apps/arbiter', e), join(root, 'apps/arbiter', e));
    }
    const byFile = new Map<string, Patch[]>();
    for (const p of m.patches) byFile.set(p.file, [...(byFile.get(p.file) ?? []), p]);
    for (const [file, patches] of byFile) {
      const path = join(root, 'apps/arbiter/dist', file);
      writeFileSync(path, applyPatches(file, readFileSync(path, 'utf8'), patches));
    }
    symlinkSync(join(from, 'apps/agent'), join(root, 'apps/agent'));
    symlinkSync(join(from, 'packages'), join(root, 'packages'));
    symlinkSync(join(from, 'node_modules'), join(root, 'node_modules'));
  } catch (err) {
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) };
}
