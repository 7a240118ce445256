import t from 'tap';
import { AGENT_ONLY_KEYS, ARBITER_ONLY_KEYS, wrongDaemon } from '../../packages/lease-core/src/index.js';

t.test("a key in the wrong daemon's file is named with its owner (S6: one owner per setting)", async (t) => {
  t.match(
    wrongDaemon('heartbeatCron', 'hq-arbiter'),
    /is a key of hq-agent's config, not of hq-arbiter's.*learns each agent's cadence from its heartbeats/,
    'heartbeatCron in the arbiter',
  );
  t.match(
    wrongDaemon('requestTimeoutSeconds', 'hq-arbiter'),
    /hq-agent's config/,
    'requestTimeoutSeconds in the arbiter',
  );
  t.match(
    wrongDaemon('ttlSeconds', 'hq-agent'),
    /is a key of hq-arbiter's config, not of hq-agent's.*read the lease timing from the record/,
    'ttlSeconds in an agent',
  );
  t.match(wrongDaemon('safetyMarginSeconds', 'hq-agent'), /hq-arbiter's config/, 'safetyMarginSeconds in an agent');
  t.match(wrongDaemon('candidates', 'hq-agent'), /hq-arbiter's config/, 'candidates in an agent');
  t.equal(wrongDaemon('ttlSeconds', 'hq-arbiter'), null, "the owner's own key is not wrong");
  t.equal(wrongDaemon('colour', 'hq-agent'), null, 'a key of neither is simply unknown');
  for (const shared of ['arbiter', 'healthUrls', 'tailnetDomain', 'tailscaleBin', 'probeTimeoutSeconds', 'listen']) {
    t.equal(ARBITER_ONLY_KEYS.includes(shared) || AGENT_ONLY_KEYS.includes(shared), false, `${shared} is read by both`);
  }
});
