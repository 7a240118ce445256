// Each mechanism of S2 matters: the simulator, given a decision set with one mechanism
// removed, must find a violation within a bounded number of seeded schedules. The step-down
// acknowledgement's three: persist first, children gone before it, bound to the
// generation (and the revision: either binding alone refuses every replay the schedules make, so
// that mutant drops both).
import t from 'tap';
import { MUTANTS, noStandbyWait } from './sim/mutants.js';
import type { FaultKind } from './sim/schedule.js';
import { runSchedule } from './sim/schedule.js';

const BUDGET = 4000;

const cases = [
  ...MUTANTS,
  ["no wait of the standby's own after a confirmation (the arbiter may hear of it too late)", noStandbyWait] as const,
];

// The fault kinds each search draws from: every kind, or the ones that can expose the missing
// mechanism (the search stays random within them; it only gets there sooner).
const focus = new Map<string, readonly FaultKind[]>([
  ['validity from the receive time', ['delay', 'cut', 'sleep', 'pause-arbiter']],
  ['monotonic-only elapsed', ['sleep', 'cut']],
  ['wall-only elapsed', ['jump', 'sleep', 'cut']],
  ['no standby-confirmation term in lock-delay', ['cut', 'cut-one-way', 'sleep']],
  ['no generation floor', ['wipe-arbiter', 'crash-agent', 'sleep', 'cut']],
  [cases[cases.length - 1]?.[0] as string, ['wipe-arbiter', 'cut', 'sleep']],
  ['the step-down acknowledged before it is persisted', ['transfer', 'crash-step-down', 'replay-ack']],
  ['the step-down acknowledged before the children are gone', ['transfer', 'crash-step-down', 'replay-ack']],
  ['an acknowledgement accepted for another generation', ['replay-ack']],
]);

for (const [name, decisions] of cases) {
  t.test(`the mutant with ${name} is caught`, async (t) => {
    let caught: ReturnType<typeof runSchedule> | null = null;
    let seed = 1;
    for (; seed <= BUDGET && caught === null; seed++) {
      const kinds = focus.get(name);
      const r = runSchedule(seed, {
        decisions,
        stopEarly: true,
        skipL1: true,
        ...(kinds === undefined ? {} : { kinds }),
      });
      if (r.violations.length > 0) caught = r;
    }
    t.ok(caught !== null, `a violation is found within ${BUDGET} schedules`);
    if (caught !== null) {
      const v = caught.violations[0];
      t.ok(
        v !== undefined && (v.property === 'S1' || v.property === 'S2'),
        `it is a safety violation (${JSON.stringify(v)})`,
      );
      t.comment(`${name}: seed ${caught.seed}, faults ${caught.faults.map((f) => f.kind).join(',')}: ${v?.detail}`);
      const again = runSchedule(caught.seed, {
        stopEarly: true,
        skipL1: true,
        ...(kinds(name) === undefined ? {} : { kinds: kinds(name) }),
      });
      t.same(again.violations, [], `the real decision set passes that same schedule (seed ${caught.seed})`);
    }
  });
}

function kinds(name: string): readonly FaultKind[] | undefined {
  return focus.get(name);
}
