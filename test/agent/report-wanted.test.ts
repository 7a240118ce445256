/**
 * The agent's refresh (`GET /v1/lease`) reads the record's `wait`: when it names this host among
 * the candidates whose report the arbiter's start wait still needs, the agent heartbeats at once
 * instead of at its next cron tick (a day away here). Without that wait it does not.
 */
import t from 'tap';
import { stampClock, type Timers } from '../../packages/runtime/src/clock.js';
import { resolveConfig } from '../../apps/agent/src/config.js';
import { openAgent, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { agentSetup, shortDir } from './helpers.js';
import { eventually, FakeTime } from '../registry/fake-time.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

/** The heartbeats the fake arbiter got by the end of `refreshes` refreshes (one a second, on the link's timers). */
async function heartbeatsAfter(
  t: Parameters<Parameters<typeof t.test>[1]>[0],
  wait: unknown,
  refreshes: number,
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
  const time = new FakeTime();
  // The extra heartbeats the link arms (a timer at 0), counted as they are armed.
  let extra = 0;
  const timers: Timers = {
    set: (fn, ms) => {
      if (ms === 0) extra++;
      return time.set(fn, ms);
    },
    clear: (h) => time.clear(h),
  };
  let answered = 0;
  const agent = await openAgent({
    config: daily,
    clock: stampClock,
    log: silent,
    linkTimers: timers,
    observer: { heartbeat: () => answered++ },
  });
  t.teardown(() => stopAgent(agent));
  agent.link.start();
  // Each exchange ends by arming the next refresh, a second away; the loopback I/O is real.
  const refreshArmed = (): boolean => time.pending().includes(1000);
  await eventually('the start-up heartbeat', () => answered === 1 && refreshArmed());
  for (let i = 1; i <= refreshes; i++) {
    await time.advance(1000);
    await eventually(`refresh ${i}`, refreshArmed);
    await time.advance(0);
    await eventually(`the heartbeats armed by refresh ${i}`, () => answered === 1 + extra);
  }
  return arb.heartbeats.length;
}

t.test('a record whose wait names this host among the unreported brings its heartbeat forward', async (t) => {
  const asked = await heartbeatsAfter(
    t,
    {
      kind: 'start-wait',
      until: Date.now() / 1000 + 100,
      host: null,
      unreported: ['mbp'],
      text: 'the arbiter’s start wait',
    },
    3,
  );
  t.equal(asked, 4, 'the start-up heartbeat and one after each of 3 refreshes');
});

t.test('without it the standby heartbeats at start only (its cron is daily)', async (t) => {
  const quiet = await heartbeatsAfter(t, null, 3);
  t.equal(quiet, 1, 'the start-up heartbeat alone, after 3 refreshes');
});
