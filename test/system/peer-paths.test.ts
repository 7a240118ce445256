/**
 * The confirmation path between candidates, seen from the arbiter, with real processes: each
 * agent probes its peer after a heartbeat the arbiter answers and reports what it found with its
 * next heartbeat — at once when a finding changed, so even at the default cadence (a heartbeat
 * every ten minutes) the arbiter's status page, `/v1/status`, `hq_peer_path_ok`, its events and
 * `hq lease status` show peer tokens that differ within seconds of the agents' start, and show
 * the paths working when the tokens are the same.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster } from './harness.js';

interface PathRow {
  host: string;
  peer: string;
  ok: boolean;
  problem: string | null;
  text: string;
}

async function status(c: Cluster): Promise<{ phase: { name: string; text: string }; peerPaths: PathRow[] }> {
  return (await (await fetch(`${c.arbiterUrl()}/v1/status`)).json()) as never;
}

async function text(c: Cluster, path: string): Promise<string> {
  return (await fetch(`${c.arbiterUrl()}${path}`)).text();
}

t.test(
  'peer tokens that differ: the arbiter shows both broken paths within seconds, at the default cadence',
  async (t) => {
    const c = await Cluster.create({ settings: 'defaults' });
    t.teardown(() => c.stopAll());
    writeFileSync(join(c.stateDir('node-b'), 'peer-token'), `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
    await c.startArbiter();
    await Promise.all([c.startAgent('mbp'), c.startAgent('node-b')]);
    // The heartbeat at the start carries no finding yet; the one the first probe's change asks for
    // does (a peer not started yet is probed again at each lease read until it answers).
    const differ = (p: PathRow): boolean => !p.ok && /the peer tokens differ/.test(p.problem ?? '');
    const waited = await c.waitFor(
      async () => (await status(c)).peerPaths.filter(differ).length === 2,
      60_000,
      'the arbiter shows both paths broken',
    );
    t.comment(`the arbiter knew both broken paths ${waited.toFixed(1)} s after the agents answered`);
    const s = await status(c);
    for (const [host, peer] of [
      ['mbp', 'node-b'],
      ['node-b', 'mbp'],
    ] as const) {
      t.match(
        s.peerPaths.find((p) => p.host === host && p.peer === peer),
        {
          ok: false,
          problem: /HTTP 401\): the peer tokens differ/,
          text: new RegExp(
            `^${host} → ${peer} broken for .*: ${peer} could not confirm ${host} if the arbiter went down: .*the peer tokens differ`,
          ),
        },
        `${host} → ${peer}: both hosts and the cause`,
      );
    }
    // No lease yet: the phase says "no host may run" first; the phase line is tested in status-page.inject.test.ts.
    const html = await text(c, '/');
    t.match(
      html,
      /<li class="bad" data-host="mbp" data-peer="node-b">mbp → node-b broken for [^<]*the peer tokens differ[^<]*<\/li>/,
      'the page lists it in red',
    );
    const metrics = await text(c, '/metrics');
    t.match(metrics, /^hq_peer_path_ok\{host="mbp",peer="node-b"\} 0$/m, 'hq_peer_path_ok is 0 for mbp → node-b');
    t.match(metrics, /^hq_peer_path_ok\{host="node-b",peer="mbp"\} 0$/m, 'and for node-b → mbp');
    const events = (
      (await (await fetch(`${c.arbiterUrl()}/v1/events?after=0&limit=1000`)).json()) as {
        events: Array<{ event: string; host: string; data: { problem?: string } }>;
      }
    ).events;
    t.same(
      events
        .filter((e) => e.event === 'peer-path-broken' && /the peer tokens differ/.test(e.data.problem ?? ''))
        .map((e) => e.host)
        .sort(),
      ['mbp', 'node-b'],
      'one event per broken path and cause, not one per heartbeat',
    );
    const st = await c.hq('mbp', ['lease', 'status']);
    t.match(
      st.stdout,
      /^peer path {4}PROBLEM: (mbp → node-b|node-b → mbp) broken for /m,
      `hq lease status names it (${st.stderr.trim()})`,
    );
  },
);

t.test('the same peer token on both: the arbiter shows both paths working', async (t) => {
  const c = await Cluster.create();
  t.teardown(() => c.stopAll());
  await c.startArbiter();
  await c.startAgent('mbp');
  await c.startAgent('node-b');
  await c.waitFor(
    async () => (await status(c)).peerPaths.filter((p) => p.ok).length === 2,
    60_000,
    'the arbiter shows both paths working',
  );
  const s = await status(c);
  t.same(
    s.peerPaths.filter((p) => !p.ok),
    [],
    'no broken path',
  );
  t.not(s.phase.name, 'peer-path-broken', 'the phase does not say broken');
  const metrics = await text(c, '/metrics');
  t.match(metrics, /^hq_peer_path_ok\{host="mbp",peer="node-b"\} 1$/m, 'hq_peer_path_ok is 1 for mbp → node-b');
  t.match(metrics, /^hq_peer_path_ok\{host="node-b",peer="mbp"\} 1$/m, 'and for node-b → mbp');
});
