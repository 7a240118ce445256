import t from 'tap';
import { createServer, type Server } from 'node:http';
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { harness } from './helper.js';
import { TailnetProber } from '../../apps/arbiter/src/checks.js';
import { PEER_PORT } from '../../packages/runtime/src/probe.js';
import { Metrics } from '../../apps/arbiter/src/metrics.js';
import { fastConfig } from './helper.js';
import pino from 'pino';

/** A fake `tailscale`: `ping … HOST` answers pong when `up-HOST` exists; `status --json` names a MagicDNS suffix. */
function fakeTailscale(dir: string): string {
  const path = join(dir, 'tailscale');
  writeFileSync(
    path,
    `#!/bin/sh
echo "$*" >> "${dir}/calls"
if [ "$1" = "ping" ]; then
  for last; do :; done
  if [ -f "${dir}/up-$last" ]; then echo "pong from $last (100.64.0.2) via DERP(fra) in 12ms"; exit 0; fi
  echo "ping \\"$last\\" timed out"; exit 1
fi
if [ "$1" = "status" ]; then echo '{"MagicDNSSuffix":"tail1234.ts.net."}'; exit 0; fi
exit 2
`,
  );
  chmodSync(path, 0o755);
  return path;
}

interface Health {
  server: Server;
  url: string;
  up: boolean;
  hits: number;
}

async function healthServer(t: Tap, name: string): Promise<Health> {
  const h: Health = { server: createServer(), url: '', up: true, hits: 0 };
  h.server.on('request', (_req, res) => {
    h.hits++;
    res.writeHead(h.up ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: h.up ? 'ok' : 'down', host: name }));
  });
  await new Promise<void>((r) => h.server.listen(0, '127.0.0.1', r));
  h.url = `http://127.0.0.1:${(h.server.address() as AddressInfo).port}/v1/health`;
  t.teardown(() => new Promise<void>((r) => h.server.close(() => r())));
  return h;
}
type Tap = Parameters<Parameters<typeof t.test>[1]>[0];

async function setup(t: Tap, extra: Record<string, unknown> = {}) {
  const dir = t.testdir();
  const bin = fakeTailscale(dir);
  const mbp = await healthServer(t, 'mbp');
  const nodeb = await healthServer(t, 'node-b');
  const h = await harness(
    t,
    { tailscaleBin: bin, healthUrls: { mbp: mbp.url, 'node-b': nodeb.url }, ...extra },
    { dir: join(dir), realProbes: true },
  );
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const up = (host: string, on: boolean) =>
    on ? writeFileSync(join(dir, `up-${host}`), '') : rmSync(join(dir, `up-${host}`), { force: true });
  const standbyView = (reachable: boolean, extraBody: Record<string, unknown> = {}) =>
    h.post(
      '/v1/heartbeat',
      {
        host: 'node-b',
        seenGeneration: 1,
        view: { target: 'mbp', reachable, ping: reachable, health: false },
        ...extraBody,
      },
      h.tokens.nodeb,
    );
  return { dir, h, mbp, nodeb, up, standbyView };
}

t.test('the holder is reachable when either tailscale ping or the health URL answers', async (t) => {
  const { dir, h, mbp, up } = await setup(t);
  up('mbp', true);
  mbp.up = false;
  const a = (await h.post('/v1/check', undefined)).json();
  t.match(a, { promoted: false, streak: 0, holder: 'mbp', ping: true, health: false }, 'ping alone makes it reachable');
  up('mbp', false);
  mbp.up = true;
  const b = (await h.post('/v1/check', undefined)).json();
  t.match(b, { promoted: false, streak: 0, ping: false, health: true }, 'health alone makes it reachable');
  const calls = readFileSync(join(dir, 'calls'), 'utf8');
  t.match(
    calls,
    /^ping -c 1 --timeout 0\.5s mbp$/m,
    'tailscale ping is called with argv, one count and the probe timeout',
  );
  t.ok(mbp.hits >= 2, 'the pinned health URL was fetched');
});

t.test('two dual-unreachable checks with the standby agreeing promote it behind the lock-delay (S5)', async (t) => {
  const { h, mbp, standbyView } = await setup(t);
  mbp.up = false;
  const before = (await h.get('/v1/lease')).json();
  await standbyView(false);
  const c1 = (await h.post('/v1/check', undefined)).json();
  t.same(
    c1,
    { promoted: false, streak: 1, holder: 'mbp', generation: 1, ping: false, health: false, promotee: 'node-b' },
    'first check counts 1',
  );
  h.clock.advance(1);
  const c2 = (await h.post('/v1/check', undefined)).json();
  t.same(
    c2,
    { promoted: true, streak: 2, holder: 'node-b', generation: 2, ping: false, health: false, promotee: 'node-b' },
    'second check promotes',
  );
  const lease = (await h.get('/v1/lease')).json();
  t.equal(lease.holder, 'node-b', 'node-b holds');
  t.equal(lease.generation, 2, 'generation 2');
  t.equal(lease.promotedFrom, 'mbp', 'promoted from mbp');
  t.ok(lease.notBefore >= before.expiresAt + 1, 'not before the old holder validity plus the margin');
  const events = (await h.get('/v1/events?limit=1000')).json().events.map((e: { event: string }) => e.event);
  t.ok(events.includes('promoted'), 'promotion is an event');
  const metrics = (await h.get('/metrics')).body;
  t.match(metrics, /hq_promotions_total 1/, 'promotion counted');
  t.match(metrics, /hq_checks_total\{result="promoted"\} 1/, 'check result counted');
  t.match(metrics, /hq_probe_total\{kind="ping",result="fail"\} 2/, 'ping probes counted');
});

t.test(
  'no promotion while the standby still reaches the holder, recently confirmed it, or maintenance is on',
  async (t) => {
    const { h, mbp, standbyView } = await setup(t);
    mbp.up = false;
    await standbyView(true);
    for (let i = 0; i < 3; i++) (await h.post('/v1/check', undefined)).json();
    t.equal((await h.get('/v1/lease')).json().holder, 'mbp', 'a standby that reaches the holder blocks promotion');
    await standbyView(false, { confirmation: { holder: 'mbp', generation: 1, ageSeconds: 0 } });
    for (let i = 0; i < 3; i++) await h.post('/v1/check', undefined);
    t.equal((await h.get('/v1/lease')).json().holder, 'mbp', 'a fresh confirmation of the holder blocks promotion');
    h.clock.advance(7);
    await h.post('/v1/lease/renew', { host: 'mbp', generation: 1 }, h.tokens.mbp);
    await h.app.inject({
      method: 'PUT',
      url: '/v1/maintenance',
      headers: { authorization: `Bearer ${h.tokens.admin}`, 'content-type': 'application/json' },
      payload: { enabled: true },
    });
    await standbyView(false);
    let last: any;
    for (let i = 0; i < 3; i++) last = (await h.post('/v1/check', undefined)).json();
    t.equal(last.streak, 3, 'maintenance keeps counting the streak');
    t.equal(last.promoted, false, 'but never promotes');
    t.equal((await h.get('/v1/lease')).json().holder, 'mbp', 'mbp still holds');
  },
);

t.test('with tailscaleBin empty nothing calls tailscale and health alone decides', async (t) => {
  const { dir, h, mbp } = await setup(t, {});
  rmSync(join(dir, 'calls'), { force: true });
  const h2dir = t.testdir();
  const h2 = await harness(t, { tailscaleBin: '', healthUrls: { mbp: mbp.url } }, { dir: h2dir, realProbes: true });
  await h2.settle();
  await h2.post('/v1/lease/acquire', { host: 'mbp' }, h2.tokens.mbp);
  const a = (await h2.post('/v1/check', undefined)).json();
  t.match(a, { ping: false, health: true, streak: 0 }, 'health decides');
  t.notOk(existsSync(join(dir, 'calls')), 'tailscale was never called');
  t.ok(h, 'first harness stays up');
});

t.test('the MagicDNS suffix comes from tailscale status when tailnetDomain is unset', async (t) => {
  const dir = t.testdir();
  const bin = fakeTailscale(dir);
  const config = fastConfig(dir, { tailscaleBin: bin });
  const prober = new TailnetProber(config, new Metrics(false), pino({ level: 'silent' }), PEER_PORT);
  t.equal(
    await prober.healthUrl('node-b'),
    'http://node-b.tail1234.ts.net:8471/v1/health',
    'default health URL from the suffix',
  );
  t.equal(await prober.healthUrl('mbp'), 'http://mbp.tail1234.ts.net:8471/v1/health', 'asked once, reused');
  t.equal(
    readFileSync(join(dir, 'calls'), 'utf8').match(/^status --json$/gm)?.length,
    1,
    'tailscale status was called once',
  );
  const pinned = new TailnetProber(
    fastConfig(dir, { tailscaleBin: '', tailnetDomain: 'example.ts.net' }),
    new Metrics(false),
    pino({ level: 'silent' }),
    PEER_PORT,
  );
  t.equal(
    await pinned.healthUrl('mbp'),
    'http://mbp.example.ts.net:8471/v1/health',
    'a configured tailnetDomain is used',
  );
  const none = new TailnetProber(
    fastConfig(dir, { tailscaleBin: '' }),
    new Metrics(false),
    pino({ level: 'silent' }),
    PEER_PORT,
  );
  t.equal(await none.healthUrl('mbp'), null, 'without ping and domain there is no health URL');
  t.equal(await none.health('mbp'), false, 'and the host is unreachable');
});
