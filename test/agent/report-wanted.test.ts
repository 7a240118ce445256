/**
 * The agent's refresh (`GET /v1/lease`) reads the record's `wait`: when it names this host among
 * the candidates whose report the arbiter's start wait still needs, the agent heartbeats at once
 * instead of at its next cron tick (a day away here). Without that wait it does not.
 */
import t from 'tap';
import { stampClock } from '../../packages/runtime/src/clock.js';
import { resolveConfig } from '../../apps/agent/src/config.js';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { agentSetup, shortDir, sleep } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

async function heartbeatsIn(
  t: Parameters<Parameters<typeof t.test>[1]>[0],
  wait: unknown,
  ms: number,
): Promise<number> {
  const dir = shortDir(t);
  // node-b holds: this host (mbp) is a standby, which renews nothing and heartbeats on its cron alone.
  const { arb, config } = await agentSetup(t, dir, { holder: 'node-b' });
  const daily = resolveConfig(
    {
      hostName: 'mbp',
      arbiterUrl: arb.url,
      stateDir: config.stateDir,
      socketPath: config.socketPath,
      heartbeatCron: '0 0 * * *',
      refreshSeconds: 1,
      requestTimeoutSeconds: 1,
      tailscaleBin: '',
      peers: {},
    },
    null,
  );
  arb.leaseOver = { wait };
  const agent = await openAgent({ config: daily, clock: stampClock, log: silent });
  t.teardown(() => stopAgent(agent));
  agent.link.start();
  await sleep(ms);
  return arb.heartbeats.length;
}

t.test('a record whose wait names this host among the unreported brings its heartbeat forward', async (t) => {
  const asked = await heartbeatsIn(
    t,
    {
      kind: 'start-wait',
      until: Date.now() / 1000 + 100,
      host: null,
      unreported: ['mbp'],
      text: 'the arbiter’s start wait',
    },
    3500,
  );
  t.ok(asked >= 3, `the start-up heartbeat and one after each refresh (${asked} in 3.5 s)`);
});

t.test('without it the standby heartbeats at start only (its cron is daily)', async (t) => {
  const quiet = await heartbeatsIn(t, null, 3500);
  t.equal(quiet, 1, 'the start-up heartbeat alone');
});
