import t from 'tap';
import {
  AGENT_UNREACHABLE,
  FENCE_REASONS,
  FENCE_WAIT_MAX_SECONDS,
  GENERATION_CHANGED,
  GUARD_REASONS,
  fenceWaitPath,
  isFenceDecision,
  isFenceReason,
} from '../../packages/protocol/src/fence.js';
import * as root from '../../packages/protocol/src/index.js';

t.test('the reasons are the documented ones and the CLI mints two of its own', async (t) => {
  t.same(
    [...FENCE_REASONS],
    [
      'holder',
      'quorum-standby',
      'within-ttl',
      'lock-delay',
      'not-holder',
      'stale-generation',
      'no-quorum-expired',
      'no-lease',
      'no-lease-after-seen',
      'fail-open',
    ],
    'the agent decides one of these, in the documented order',
  );
  t.equal(AGENT_UNREACHABLE, 'agent-unreachable', 'hq fence check|run and hq guard when the agent does not answer');
  t.equal(GENERATION_CHANGED, 'generation-changed', 'hq fence run when a re-check names another tenure');
  for (const r of [AGENT_UNREACHABLE, GENERATION_CHANGED, ...GUARD_REASONS])
    t.notOk(isFenceReason(r), `${r} is the CLI's, never the agent's`);
  t.ok(Object.isFrozen(FENCE_REASONS) && Object.isFrozen(GUARD_REASONS), 'frozen');
  t.equal(root.isFenceDecision, isFenceDecision, 'the package root exports the fence subpath as is');
});

const answer = { run: true, reason: 'holder', generation: 3, holder: 'mbp', role: 'cron', validForSeconds: 4.5 };
const cases: ReadonlyArray<readonly [string, unknown, boolean]> = [
  ['a decision of the agent', answer, true],
  [
    'a refusal without holder and validity',
    { ...answer, run: false, reason: 'no-lease', holder: null, validForSeconds: null },
    true,
  ],
  ['null', null, false],
  ['a string', 'run', false],
  ['run as a string', { ...answer, run: 'true' }, false],
  ['a reason the protocol does not know', { ...answer, reason: 'because' }, false],
  ['the CLI reason from an agent', { ...answer, reason: AGENT_UNREACHABLE }, false],
  ['a generation as a string', { ...answer, generation: '3' }, false],
  ['a holder as a number', { ...answer, holder: 7 }, false],
  ['no role', { ...answer, role: undefined }, false],
  ['a validity as a string', { ...answer, validForSeconds: '4' }, false],
];

for (const [name, v, ok] of cases) {
  t.test(`isFenceDecision: ${name}`, async (t) => {
    t.equal(isFenceDecision(v), ok, ok ? 'accepted' : 'refused');
  });
}

t.test('fenceWaitPath names the role, the decision last seen and the wait, clamped to 0…300 s', async (t) => {
  const seen = { run: true, reason: 'holder', generation: 7 };
  t.equal(
    fenceWaitPath('cron', seen, 30),
    '/v1/fence?role=cron&wait=30&run=true&reason=holder&generation=7',
    'every key of the long poll',
  );
  t.equal(
    fenceWaitPath('a b', { ...seen, run: false, reason: 'not-holder' }, 1.23456),
    '/v1/fence?role=a%20b&wait=1.235&run=false&reason=not-holder&generation=7',
    'escaped role, the wait to milliseconds',
  );
  t.match(fenceWaitPath('cron', seen, 1000), /&wait=300&/, `above ${FENCE_WAIT_MAX_SECONDS} s: clamped`);
  t.match(fenceWaitPath('cron', seen, -5), /&wait=0&/, 'below 0: clamped');
});
