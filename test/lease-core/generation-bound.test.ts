import t from 'tap';
import { GENERATION_CEILING } from '../../packages/protocol/src/index.js';
import {
  acceptGeneration,
  boundRefusal,
  emptyLease,
  GENERATION_LIMITS,
  MAX_REPORT_JUMP,
  newBoot,
  parseRecord,
  refusalLine,
  reportLimit,
  toRecord,
  type ArbiterState,
  type Context,
} from '../../packages/lease-core/src/index.js';

const state = (generation: number, floor: number): ArbiterState => ({
  lease: { ...emptyLease(6, 1), generation, holder: generation > 0 ? 'mbp' : null },
  observers: new Map(),
  floor,
});
const raised = (s: ArbiterState, floor: number, generation = s.lease.generation): ArbiterState => ({
  ...s,
  floor,
  lease: { ...s.lease, generation },
});
const ctx: Context = {
  now: 100,
  boot: newBoot(0),
  settings: {
    arbiter: 'cloud-vm',
    candidates: ['mbp', 'node-b'],
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    promoteAfterChecks: 2,
    viewFreshSeconds: 6,
  },
};

t.test('boundRefusal', async (t) => {
  const cases: ReadonlyArray<readonly [string, ArbiterState, ArbiterState, string | null]> = [
    ['a report up to the bound above the record is taken', state(5, 3), raised(state(5, 3), 5 + MAX_REPORT_JUMP), null],
    ['one more is refused', state(5, 3), raised(state(5, 3), 6 + MAX_REPORT_JUMP), 'report-jump'],
    [
      'the bound counts from the stored floor when it is higher',
      state(5, 900),
      raised(state(5, 900), 900 + MAX_REPORT_JUMP),
      null,
    ],
    ['a lost database (nothing known) takes a real history', state(0, 0), raised(state(0, 0), 57), null],
    [
      'a lost database refuses a report past the bound',
      state(0, 0),
      raised(state(0, 0), MAX_REPORT_JUMP + 1),
      'report-jump',
    ],
    ['a report near 2^53 is refused', state(1, 0), raised(state(1, 0), 9_007_199_254_740_990), 'report-jump'],
    [
      'no report passes the ceiling, even within the bound',
      state(GENERATION_CEILING - 1, 0),
      raised(state(GENERATION_CEILING - 1, 0), GENERATION_CEILING + 1),
      'report-jump',
    ],
    ['a floor that does not rise is never refused', state(1, 9_000_000), raised(state(1, 9_000_000), 9_000_000), null],
    [
      'a grant at the ceiling is written',
      state(GENERATION_CEILING - 1, 0),
      raised(state(GENERATION_CEILING - 1, 0), 0, GENERATION_CEILING),
      null,
    ],
    [
      'a record already above the ceiling (written before the bound) is not refused for staying there',
      state(GENERATION_CEILING + 5, 0),
      state(GENERATION_CEILING + 5, 0),
      null,
    ],
    [
      'a grant above the ceiling is refused',
      state(GENERATION_CEILING, 0),
      raised(state(GENERATION_CEILING, 0), 0, GENERATION_CEILING + 1),
      'ceiling',
    ],
  ];
  for (const [name, before, next, want] of cases) {
    t.equal(boundRefusal(before, next, GENERATION_LIMITS)?.kind ?? null, want, name);
  }
  t.equal(reportLimit(state(10, 0), GENERATION_LIMITS), 10 + MAX_REPORT_JUMP, 'the limit is known + the jump');
});

t.test('acceptGeneration raises the floor, never lowers it, and never to the ceiling', async (t) => {
  const s = state(3, 3);
  const up = acceptGeneration(s, ctx, { generation: 5_000_000, by: 'cloud-vm' });
  t.same([up.answer, up.next.floor], [{ ok: true, floor: 5_000_000, was: 3 }, 5_000_000], 'raised');
  t.same(
    up.events.map((e) => [e.event, e.data['to']]),
    [['generation-accepted', 5_000_000]],
    'an event',
  );
  const down = acceptGeneration(up.next, ctx, { generation: 4, by: 'cloud-vm' });
  t.same(
    [down.answer, down.next.floor, down.events],
    [{ ok: true, floor: 5_000_000, was: 5_000_000 }, 5_000_000, []],
    'never lowered',
  );
  const top = acceptGeneration(s, ctx, { generation: GENERATION_CEILING, by: 'cloud-vm' });
  t.same(
    [top.answer, top.next.floor],
    [{ ok: false, reason: 'above-ceiling', ceiling: GENERATION_CEILING }, 3],
    'refused at the ceiling',
  );
});

t.test('refusalLine says what was refused in one line, and how an admin accepts a real report', async (t) => {
  const jump = { kind: 'report-jump', reported: 9_007_199_254_740_990, known: 1, limit: 1 + MAX_REPORT_JUMP } as const;
  t.equal(
    refusalLine(jump, 'mbp'),
    `mbp's report of generation 9007199254740990 is refused: it is more than ${MAX_REPORT_JUMP} above 1, the highest generation this arbiter granted or learned, which no real history produces; if it is real, an admin accepts it with "hq lease accept 9007199254740990"`,
    'a report names its host, the numbers and the command',
  );
  t.match(refusalLine(jump, null), /^a report of generation 9007199254740990 /, 'without a host: "a report"');
  t.match(
    refusalLine({ kind: 'ceiling', generation: GENERATION_CEILING + 1, ceiling: GENERATION_CEILING }, 'node-b'),
    /^nothing was granted: the next generation would be 281474976710657, above the ceiling 281474976710656/,
    'a grant names the ceiling',
  );
  for (const line of [refusalLine(jump, 'mbp'), refusalLine({ kind: 'ceiling', generation: 2, ceiling: 1 }, null)])
    t.notMatch(line, /\n/, 'one line');
});

t.test('parseRecord refuses a record above the ceiling and takes one at it', async (t) => {
  const at = (generation: number) =>
    toRecord({ ...emptyLease(6, 1), holder: 'mbp', generation, expiresAt: 10 }, new Map(), 1);
  t.same(
    parseRecord(at(GENERATION_CEILING + 1)),
    {
      ok: false,
      problem: `record.generation ${GENERATION_CEILING + 1} is above the generation ceiling ${GENERATION_CEILING}`,
    },
    'refused, naming both numbers',
  );
  t.ok(parseRecord(at(GENERATION_CEILING)).ok, 'the ceiling itself is a record');
});
