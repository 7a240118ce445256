/**
 * model/hq.pml, checked by spin (docs/SAFETY.md, "The model check"). Each
 * small configuration is searched exhaustively with no error, in the order of states SAFETY.md
 * records, and each of its mutants — the model with one mechanism removed by one -D switch —
 * gives a counterexample with a trail. `npm run model` runs the big configurations. Every run
 * builds pan in its own temporary directory (spin writes its files into the working one).
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { CONFIGS, check, toolsPresent } from '../../scripts/model.mjs';

interface Config {
  readonly name: string;
  readonly small?: boolean;
  readonly states: number;
  readonly mutants: readonly string[];
}

interface Result {
  readonly errors: number | null;
  readonly states: number | null;
  readonly depth: number | null;
  readonly complete: boolean;
  readonly violated: string | null;
  readonly trail: boolean;
  readonly flags: string;
  readonly output: string;
}

const runCheck = check as (
  config: Config,
  mutant?: string | null,
  options?: { optimize?: string; memoryMb?: number },
) => Result;
const small = (CONFIGS as readonly Config[]).filter((c) => c.small === true);
/** Small runs build pan with -O1: most of -O2's speed for a fraction of its compile time. */
const OPTIONS = { optimize: '-O1', memoryMb: 2000 };

if (!toolsPresent()) {
  t.test('the model check needs spin and a C compiler', async (t) => {
    missingTool(t, 'spin or cc is not installed (Debian packages spin and gcc)');
  });
} else {
  t.ok(small.length >= 4, 'there are small configurations to run');
  for (const config of small) {
    t.test(`${config.name}: the exhaustive search finds no violation of S1, S2 or S2w`, async (t) => {
      const r = runCheck(config, null, OPTIONS);
      t.equal(r.errors, 0, `errors: 0 (${r.flags})`);
      t.ok(
        r.complete,
        `the search was complete: no depth or memory bound was hit${r.complete ? '' : `\n${r.output.slice(-1500)}`}`,
      );
      const states = r.states ?? 0;
      t.ok(
        states >= config.states / 3 && states <= config.states * 3,
        `${states} states stored, within a factor of 3 of the ${config.states} SAFETY.md records`,
      );
    });
    for (const mutant of config.mutants) {
      t.test(`${config.name}: -D${mutant} gives a counterexample`, async (t) => {
        const r = runCheck(config, mutant, OPTIONS);
        t.ok((r.errors ?? 0) >= 1, `errors: ${r.errors} (${r.flags})`);
        t.ok(r.trail, 'spin wrote a trail of it');
        t.ok(
          r.violated !== null && /^S1|^S2/.test(r.violated),
          `the violation is of a safety property (${r.violated}, depth ${r.depth})`,
        );
      });
    }
  }
}
