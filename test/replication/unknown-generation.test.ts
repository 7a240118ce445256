/**
 * A standby accepts a push's lease generation only when it knows of it from the arbiter or its
 * peers (the agent's seen generation): a push that claims a higher one is refused and never
 * raises the accepted mark, so the real holder's next push is still taken. The mutant without
 * the check (a standby that takes any claim) is shown to lock the real holder out.
 */
import t from 'tap';
import Fastify from 'fastify';
import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildSnapshot } from '../../apps/agent/src/replication/snapshot.js';
import { pushGeneration } from '../../apps/agent/src/replication/push.js';
import { replicationPeerRoutes } from '../../apps/agent/src/replication/routes.js';
import { standbyPeerOptions } from '../../apps/agent/src/replication/wire.js';
import { TokenFile } from '../../apps/agent/src/tokens.js';
import { answerRefusals, config, peer, tmp, TOKEN, write } from './helpers.js';

const T0 = Date.parse('2026-12-01T07:00:00.000Z');
const BOGUS = 9_007_199_254_740_990;

async function setup(
  t: Parameters<Parameters<typeof t.test>[1]>[0],
  known: () => number,
  seen: () => number,
  learn?: () => Promise<unknown>,
) {
  const base = tmp(t);
  const cfg = config(base, { plan: { files: [{ path: 'a.txt' }] } });
  write(cfg.stateDir, 'a.txt', 'alpha\n');
  const standbyDir = join(base, 'standby');
  let url: string;
  if (learn === undefined && known !== seen) {
    url = (await peer(t, standbyDir, undefined, seen, known)).url;
  } else {
    const tokenFile = write(base, 'peer-token', `${TOKEN}\n`);
    chmodSync(tokenFile, 0o600);
    const app = answerRefusals(Fastify({ logger: false }));
    await app.register(
      replicationPeerRoutes,
      await standbyPeerOptions({
        replication: { ...cfg, standbyDir },
        peerToken: new TokenFile(tokenFile),
        seenGeneration: seen,
        ...(learn === undefined ? {} : { learnGeneration: learn }),
      }),
    );
    url = await app.listen({ host: '127.0.0.1', port: 0 });
    t.teardown(() => app.close());
  }
  let clock = T0;
  const push = async (generation: number, holder = 'mbp') => {
    clock += 1000;
    const now = clock;
    const g = await buildSnapshot({
      cfg,
      tier: 'core',
      host: holder,
      lease: { generation, holder },
      now: () => now,
      stableMs: 0,
    });
    const r = await pushGeneration({ dir: g.dir, baseUrl: url, token: TOKEN, timeoutSeconds: 5, chunkBytes: 65536 });
    return r.ok ? 'accepted' : r.error;
  };
  const mark = () => readFileSync(join(standbyDir, 'accepted-generation'), 'utf8').trim();
  return { push, mark };
}

t.test(
  'a push claiming a generation the standby never heard of is refused and the real holder keeps pushing',
  async (t) => {
    const seen = () => 3;
    const s = await setup(t, seen, seen);
    t.equal(await s.push(3), 'accepted', 'the holder of generation 3 pushes');
    t.equal(await s.push(BOGUS, 'node-c'), 'HQ_ERR_UNKNOWN_GENERATION', 'a push claiming 9007199254740990 is refused');
    t.equal(s.mark(), '3', 'the accepted mark stays 3');
    t.equal(await s.push(3), 'accepted', "the real holder's next push is still taken");
  },
);

t.test('the mutant without the check is caught: the claim locks the real holder out', async (t) => {
  const s = await setup(
    t,
    () => Infinity,
    () => 3,
  );
  t.equal(await s.push(3), 'accepted', 'the holder of generation 3 pushes');
  t.equal(await s.push(BOGUS, 'node-c'), 'accepted', 'the mutant takes the claim');
  t.equal(s.mark(), String(BOGUS), 'and raises its mark to it');
  t.equal(
    await s.push(3),
    'HQ_ERR_STALE_GENERATION',
    "from then on it refuses the real holder's pushes: the check matters",
  );
});

t.test('a push from a holder granted since the last refresh is taken once the standby asked the arbiter', async (t) => {
  let seen = 3;
  let asked = 0;
  const s = await setup(
    t,
    () => seen,
    () => seen,
    async () => {
      asked++;
      seen = 4; // the heartbeat's answer: the arbiter granted generation 4
    },
  );
  t.equal(await s.push(4, 'node-c'), 'accepted', 'the push at 4 is accepted');
  t.equal(asked, 1, 'after asking the arbiter once');
  t.equal(
    await s.push(BOGUS, 'node-c'),
    'HQ_ERR_UNKNOWN_GENERATION',
    'a claim the arbiter does not confirm is still refused',
  );
  t.equal(asked, 2, 'having asked once more');
  t.equal(s.mark(), '4', 'the mark is the real generation');
});
