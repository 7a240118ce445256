import t from 'tap';
import { checkTiming, failoverSeconds, lockDelaySeconds, MAX_DRIFT_RATE, RENEW_FACTOR } from '../../packages/lease-core/src/index.js';
import type { Timing } from '../../packages/lease-core/src/index.js';

const DEFAULTS: Timing = {
  ttlSeconds: 1500,
  heartbeatSeconds: 600,
  checkSeconds: 600,
  viewFreshSeconds: 1500,
  probeTimeoutSeconds: 5,
  refreshSeconds: 60,
  safetyMarginSeconds: 30,
  promoteAfterChecks: 2,
};

// L1's fast test settings.
const FAST: Timing = {
  ttlSeconds: 6,
  heartbeatSeconds: 1,
  checkSeconds: 1,
  viewFreshSeconds: 1,
  probeTimeoutSeconds: 0.5,
  refreshSeconds: 1,
  safetyMarginSeconds: 1,
  promoteAfterChecks: 2,
};

t.test('the S6 constants are the ones SPEC names', async (t) => {
  t.equal(RENEW_FACTOR, 1.2, 'heartbeat interval × 1.2 < ttl');
  t.equal(MAX_DRIFT_RATE, 0.01, '1 % clock-rate drift');
});

t.test('the defaults pass with a failover of 1860 s and a lock-delay of 1530 s', async (t) => {
  t.same(checkTiming(DEFAULTS), { ok: true, failoverSeconds: 1860, lockDelaySeconds: 1530 }, 'defaults accepted');
});

t.test('the fast test settings pass and fail over well under 15 s (L1)', async (t) => {
  const got = checkTiming(FAST);
  t.same(got, { ok: true, failoverSeconds: 8, lockDelaySeconds: 7 }, 'fast settings accepted');
  t.ok(got.ok && got.failoverSeconds < 15, 'L1 bound');
  t.ok(checkTiming({ ...FAST, viewFreshSeconds: 6 }).ok, 'a longer viewFresh passes too');
});

const failovers: ReadonlyArray<readonly [string, Partial<Timing>, number]> = [
  ['the promotion path wins when checks are slow', { checkSeconds: 1000, probeTimeoutSeconds: 5 }, 2 * 1000 + 600 + 60],
  ['the lock-delay wins when checks are fast', { checkSeconds: 60, heartbeatSeconds: 60, viewFreshSeconds: 60 }, 1530 + 60],
  ['the heartbeat bounds the refresh term when it is shorter', { heartbeatSeconds: 30, refreshSeconds: 60, viewFreshSeconds: 30 }, Math.max(2 * 600 + 30, 1530) + 30],
  ['more checks before promotion lengthen failover', { promoteAfterChecks: 5 }, 5 * 600 + 600 + 60],
];

for (const [name, patch, expected] of failovers) {
  t.test(name, async (t) => {
    const timing = { ...DEFAULTS, ...patch };
    t.equal(failoverSeconds(timing), expected, 'failoverSeconds');
    const got = checkTiming(timing);
    t.ok(got.ok, 'the settings pass');
    if (got.ok) t.equal(got.failoverSeconds, expected, 'checkTiming reports the same failover');
  });
}

t.test('lockDelaySeconds is ttl plus one margin', async (t) => {
  t.equal(lockDelaySeconds({ ttlSeconds: 6, safetyMarginSeconds: 1 }), 7, 'fast');
  t.equal(lockDelaySeconds({ ttlSeconds: 1500, safetyMarginSeconds: 0 }), 1500, 'no margin');
});

// [name, change, key, message pattern (names the numbers)]
const refusals: ReadonlyArray<readonly [string, Partial<Timing>, string, RegExp]> = [
  ['a zero ttl is refused', { ttlSeconds: 0 }, 'ttlSeconds', /^ttlSeconds must be a positive number of seconds \(got 0\)$/],
  ['a negative heartbeat interval is refused under its cron key', { heartbeatSeconds: -1 }, 'heartbeatCron', /heartbeatCron must be a positive number of seconds \(got -1\)/],
  ['a NaN check interval is refused under its cron key', { checkSeconds: Number.NaN }, 'checkCron', /checkCron .*\(got NaN\)/],
  ['an infinite viewFresh is refused', { viewFreshSeconds: Infinity }, 'viewFreshSeconds', /viewFreshSeconds .*\(got Infinity\)/],
  ['a zero probe timeout is refused', { probeTimeoutSeconds: 0 }, 'probeTimeoutSeconds', /probeTimeoutSeconds must be a positive/],
  ['a zero refresh is refused', { refreshSeconds: 0 }, 'refreshSeconds', /refreshSeconds must be a positive/],
  ['a negative margin is refused', { safetyMarginSeconds: -0.5 }, 'safetyMarginSeconds', /safetyMarginSeconds must be ≥ 0 \(got -0.5\)/],
  ['a NaN margin is refused', { safetyMarginSeconds: Number.NaN }, 'safetyMarginSeconds', /safetyMarginSeconds must be ≥ 0 \(got NaN\)/],
  ['zero promoteAfterChecks is refused', { promoteAfterChecks: 0 }, 'promoteAfterChecks', /promoteAfterChecks must be an integer ≥ 1 \(got 0\)/],
  ['a fractional promoteAfterChecks is refused', { promoteAfterChecks: 1.5 }, 'promoteAfterChecks', /\(got 1.5\)/],
  [
    'a heartbeat of exactly ttl / 1.2 is refused with the product',
    { heartbeatSeconds: 1250 },
    'ttlSeconds',
    /ttlSeconds \(1500\) must exceed the heartbeat interval × 1.2 \(1250 × 1.2 = 1500\)/,
  ],
  ['a heartbeat longer than the ttl is refused', { ttlSeconds: 500, viewFreshSeconds: 1500 }, 'ttlSeconds', /ttlSeconds \(500\).*600 × 1.2 = 720/],
  ['a viewFresh shorter than one heartbeat is refused', { viewFreshSeconds: 599 }, 'viewFreshSeconds', /viewFreshSeconds \(599\) must cover at least one heartbeat interval \(600\)/],
  ['a probe timeout equal to the check interval is refused', { probeTimeoutSeconds: 600 }, 'probeTimeoutSeconds', /probeTimeoutSeconds \(600\) must be shorter than the check interval \(600\)/],
  ['a refresh as long as the ttl is refused', { refreshSeconds: 1500 }, 'refreshSeconds', /refreshSeconds \(1500\) must be shorter than ttlSeconds \(1500\)/],
  ['a margin below 1 % of the ttl is refused', { safetyMarginSeconds: 14.9 }, 'safetyMarginSeconds', /safetyMarginSeconds \(14.9\) must cover 1% clock-rate drift of ttlSeconds \(1500 × 0.01 = 15\)/],
  ['a zero margin is refused by the drift rule', { safetyMarginSeconds: 0 }, 'safetyMarginSeconds', /must cover 1% clock-rate drift/],
  ['a margin of half the ttl is refused', { safetyMarginSeconds: 750 }, 'safetyMarginSeconds', /safetyMarginSeconds \(750\) must be less than half of ttlSeconds \(1500\)/],
  ['the fast settings with a 3 s margin are refused (half of 6)', { ...FAST, safetyMarginSeconds: 3 }, 'safetyMarginSeconds', /\(3\) must be less than half of ttlSeconds \(6\)/],
  ['numbers in messages are rounded to milliseconds', { ...FAST, heartbeatSeconds: 1 / 3, viewFreshSeconds: 0.1 }, 'viewFreshSeconds', /\(0.1\).*\(0.333\)/],
];

for (const [name, patch, key, pattern] of refusals) {
  t.test(name, async (t) => {
    const got = checkTiming({ ...DEFAULTS, ...patch });
    t.equal(got.ok, false, 'refused');
    if (!got.ok) {
      t.equal(got.key, key, 'names the key');
      t.match(got.message, pattern, 'the message names the key and the numbers');
      t.ok(got.message.startsWith(key), 'the one line starts with the key');
      t.notMatch(got.message, /\n/, 'one line');
    }
  });
}
