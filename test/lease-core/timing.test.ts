import t from 'tap';
import {
  checkCadence,
  checkLeaseTiming,
  checkTiming,
  crossTiming,
  describeFailover,
  failover,
  humanSeconds,
  lockDelaySeconds,
  refreshEverySeconds,
  renewEverySeconds,
  MAX_DRIFT_RATE,
  RENEWALS_PER_VALIDITY,
} from '../../packages/lease-core/src/index.js';
import type { Cadence, LeaseTiming } from '../../packages/lease-core/src/index.js';

// Each side's defaults, owned by that side (S6).
const ARBITER: LeaseTiming = {
  ttlSeconds: 1500,
  safetyMarginSeconds: 30,
  checkSeconds: 600,
  viewFreshSeconds: 1500,
  promoteAfterChecks: 2,
  probeTimeoutSeconds: 5,
};
const AGENT: Cadence = { heartbeatSeconds: 600, refreshSeconds: 60, probeTimeoutSeconds: 5, requestTimeoutSeconds: 5 };
// L1's fast test settings, each given only to its owner.
const FAST_ARBITER: LeaseTiming = {
  ttlSeconds: 6,
  safetyMarginSeconds: 1,
  checkSeconds: 1,
  viewFreshSeconds: 6,
  promoteAfterChecks: 2,
  probeTimeoutSeconds: 0.5,
};
const FAST_AGENT: Cadence = {
  heartbeatSeconds: 1,
  refreshSeconds: 1,
  probeTimeoutSeconds: 0.5,
  requestTimeoutSeconds: 1,
};

t.test('the S6 constants', async (t) => {
  t.equal(MAX_DRIFT_RATE, 0.01, '1 % clock-rate drift');
  t.equal(RENEWALS_PER_VALIDITY, 3, 'the holder renews three times per validity');
});

t.test('each side checks only its own keys: defaults and fast settings pass on both sides', async (t) => {
  t.same(checkLeaseTiming(ARBITER), { ok: true }, 'arbiter defaults');
  t.same(checkLeaseTiming(FAST_ARBITER), { ok: true }, 'arbiter fast settings');
  t.same(checkCadence(AGENT), { ok: true }, 'agent defaults');
  t.same(checkCadence(FAST_AGENT), { ok: true }, 'agent fast settings');
  // The issue: each side refused the other's settings against a default it assumed.
  t.same(
    checkLeaseTiming({ ...FAST_ARBITER }),
    { ok: true },
    'an arbiter with ttl 6 no longer compares it with a heartbeat it does not own',
  );
  t.same(
    checkCadence({ ...FAST_AGENT }),
    { ok: true },
    'an agent no longer compares a margin it does not own with a TTL it does not own',
  );
  t.same(crossTiming('cloud-vm', ARBITER, 'mbp', AGENT), [], 'the defaults across the sides: no problem');
  t.same(
    crossTiming('cloud-vm', FAST_ARBITER, 'mbp', FAST_AGENT),
    [],
    'the fast settings across the sides: no problem',
  );
  t.same(
    checkTiming({ ...FAST_ARBITER, ...FAST_AGENT, probeTimeoutSeconds: 0.5 }),
    { ok: true },
    'both sides together',
  );
});

// [name, timing patch, key, message pattern]
const arbiterRefusals: ReadonlyArray<readonly [string, Partial<LeaseTiming>, string, RegExp]> = [
  ['a zero ttl', { ttlSeconds: 0 }, 'ttlSeconds', /ttlSeconds must be a positive number of seconds \(got 0\)/],
  ['a negative margin', { safetyMarginSeconds: -1 }, 'safetyMarginSeconds', /must be ≥ 0 \(got -1\)/],
  ['a fractional promoteAfterChecks', { promoteAfterChecks: 1.5 }, 'promoteAfterChecks', /an integer ≥ 1 \(got 1.5\)/],
  [
    'a probe as long as the check interval',
    { probeTimeoutSeconds: 600 },
    'probeTimeoutSeconds',
    /probeTimeoutSeconds \(600\) must be shorter than the check interval of checkCron \(600\)/,
  ],
  [
    'a margin below 1 % of the ttl',
    { safetyMarginSeconds: 14 },
    'safetyMarginSeconds',
    /must cover 1% clock-rate drift of ttlSeconds \(1500 × 0.01 = 15\)/,
  ],
  [
    'a margin of half the ttl',
    { safetyMarginSeconds: 750 },
    'safetyMarginSeconds',
    /less than half of ttlSeconds \(1500\)/,
  ],
];
for (const [name, patch, key, message] of arbiterRefusals) {
  t.test(`the arbiter refuses ${name}`, async (t) => {
    const got = checkLeaseTiming({ ...ARBITER, ...patch });
    t.equal(got.ok, false, 'refused');
    if (!got.ok) {
      t.equal(got.key, key, 'names the key');
      t.match(got.message, message, 'with the numbers');
    }
  });
}

const agentRefusals: ReadonlyArray<readonly [string, Partial<Cadence>, string, RegExp]> = [
  ['a zero refresh', { refreshSeconds: 0 }, 'refreshSeconds', /positive number/],
  ['a NaN request timeout', { requestTimeoutSeconds: Number.NaN }, 'requestTimeoutSeconds', /positive number/],
  [
    'a probe as long as the heartbeat interval',
    { heartbeatSeconds: 5 },
    'probeTimeoutSeconds',
    /probeTimeoutSeconds \(5\) must be shorter than the heartbeat interval of heartbeatCron \(5\)/,
  ],
];
for (const [name, patch, key, message] of agentRefusals) {
  t.test(`an agent refuses ${name}`, async (t) => {
    const got = checkCadence({ ...AGENT, ...patch });
    t.equal(got.ok, false, 'refused');
    if (!got.ok) {
      t.equal(got.key, key, 'names the key');
      t.match(got.message, message, 'with the numbers');
    }
  });
}

t.test('the relations across the sides name both keys, both hosts and the numbers (S6)', async (t) => {
  const slow = crossTiming(
    'cloud-vm',
    { ...ARBITER, ttlSeconds: 10, safetyMarginSeconds: 1, viewFreshSeconds: 10 },
    'mbp',
    { heartbeatSeconds: 20, refreshSeconds: 60, requestTimeoutSeconds: 12 },
  );
  t.same(
    slow.map((p) => [p.host, p.arbiterKey, p.agentKey]),
    [
      ['mbp', 'viewFreshSeconds', 'heartbeatCron'],
      ['mbp', 'ttlSeconds', 'refreshSeconds'],
      ['mbp', 'ttlSeconds', 'requestTimeoutSeconds'],
    ],
    'three problems, each a pair of keys',
  );
  t.match(
    slow[0]?.message,
    /viewFreshSeconds \(10 s, arbiter cloud-vm\) must cover the heartbeat interval of heartbeatCron on mbp \(20 s\)/,
    'view freshness',
  );
  t.match(
    slow[1]?.message,
    /refreshSeconds \(60 s on mbp\) must be shorter than ttlSeconds \(10 s, arbiter cloud-vm\)/,
    'refresh',
  );
  t.match(
    slow[2]?.message,
    /requestTimeoutSeconds \(12 s on mbp\) must be shorter than the validity ttlSeconds − safetyMarginSeconds \(10 − 1 = 9 s, arbiter cloud-vm\)/,
    'request timeout',
  );
  t.same(
    crossTiming('cloud-vm', ARBITER, 'mbp', {}),
    [],
    'a report without a cadence (an older agent) breaks nothing it did not state',
  );
  const both = checkTiming({ ...ARBITER, ...AGENT, viewFreshSeconds: 300 });
  t.same(both.ok ? null : both.key, 'heartbeatCron', 'checkTiming reports the first cross problem by its agent key');
  t.same(checkTiming({ ...ARBITER, ...AGENT, ttlSeconds: 0 }).ok, false, 'and the arbiter side first');
  t.same(checkTiming({ ...ARBITER, ...AGENT, refreshSeconds: 0 }).ok, false, 'then the agent side');
});

t.test('the worst-case failover is one function (the issue: 2400 s on one page, 31 min on another)', async (t) => {
  const f = failover(ARBITER, 600);
  t.same(
    { seconds: f.seconds, promotion: f.promotionSeconds, lockDelay: f.lockDelaySeconds },
    { seconds: 1800, promotion: 2 * 600 + 600, lockDelay: 1530 },
    'defaults: the later of 2 checks × 10 min + one heartbeat 10 min = 30 min, and the lock-delay 25.5 min',
  );
  t.equal(
    describeFailover(f),
    '30 min worst case: the later of 2 checks × 10 min + one heartbeat 10 min = 30 min, and lock-delay 25.5 min',
    'the sentence adds up',
  );
  const fast = failover(FAST_ARBITER, 1);
  t.equal(fast.seconds, 7, 'fast: lock-delay 6 + 1 beats 2 × 1 + 1');
  t.ok(fast.seconds < 15, 'L1 bound');
  const unknown = failover(ARBITER, null);
  t.equal(unknown.seconds, 1530, 'no standby reported yet: the heartbeat term counts 0');
  t.match(describeFailover(unknown), /one standby heartbeat \(not reported yet\)/, 'and says so');
  const yearly = failover({ ...ARBITER, checkSeconds: 366 * 86_400 }, 600);
  t.match(describeFailover(yearly), /^732 d worst case/, 'a check once a year says about two years (two checks)');
  t.equal(lockDelaySeconds({ ttlSeconds: 6, safetyMarginSeconds: 1 }), 7, 'lock-delay is ttl + margin');
});

t.test('humanSeconds reads as a person would', async (t) => {
  t.same(
    [humanSeconds(7), humanSeconds(600), humanSeconds(1530), humanSeconds(7200), humanSeconds(3 * 86_400)],
    ['7 s', '10 min', '25.5 min', '2 h', '3 d'],
    'units',
  );
});

t.test('the holder renews on the TTL it holds, whatever its cron says (S6)', async (t) => {
  t.equal(renewEverySeconds(1500, 30, 600), 490, 'defaults: every (1500 − 30) / 3 = 490 s, sooner than the 600 s cron');
  t.equal(renewEverySeconds(6, 1, 1), 1, 'fast: the 1 s cron is sooner');
  t.equal(renewEverySeconds(10, 1, 20), 3, 'the issue: a 20 s cron in front of a 10 s TTL renews every 3 s');
});

t.test(
  'an agent that knows of no holder reads the lease every 2 s; one that knows a holder every refreshSeconds',
  async (t) => {
    t.equal(refreshEverySeconds(null, 60), 2, 'nothing learned yet: 2 s, not the 60 s default');
    t.equal(refreshEverySeconds({ holder: null, released: false }, 60), 2, 'a record without a holder: 2 s');
    t.equal(
      refreshEverySeconds({ holder: 'mbp', released: true }, 60),
      2,
      'a released record: 2 s (an acquire brings HQ back)',
    );
    t.equal(refreshEverySeconds({ holder: 'mbp', released: false }, 60), 60, 'a holder known: refreshSeconds');
    t.equal(refreshEverySeconds(null, 1), 1, 'never slower than refreshSeconds');
  },
);
