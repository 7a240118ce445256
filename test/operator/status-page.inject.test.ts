/**
 * The status page without a browser: what the server renders, what `/v1/status` answers, that
 * every printed value is escaped, that the inline script is the one the CSP allows, and that the
 * routes honour `auth.openReads` like the other GETs.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pino from 'pino';
import t from 'tap';
import { issueToken } from '../../apps/arbiter/src/auth.js';
import { manualClock } from '../../packages/runtime/src/clock.js';
import { createRuntime } from '../../apps/arbiter/src/server/runtime.js';
import { FakeProber, fastConfig } from '../arbiter/helper.js';
import { eventKind, fmtSeconds, tailEvents } from '../../apps/arbiter/src/routes/status-page/model.js';
import { esc, STATUS_CSP } from '../../apps/arbiter/src/routes/status-page/render.js';
import { registryLoad } from '../../apps/arbiter/src/routes/status-page/load.js';
import type { EventRow } from '../../apps/arbiter/src/store/store.js';
import { PREFIX, operatorHarness } from './helper.js';

const HOSTILE = '<img src=x onerror="alert(1)">&\'`';

t.test('the page renders the holder, generation, hosts, failover and events', async (t) => {
  const h = await operatorHarness(
    t,
    {},
    {
      status: {
        load: (host) =>
          host === 'mbp'
            ? { loadAvg: [0.5, 0.25, 0.1], cpuCount: 8, freeMem: 4e9, totalMem: 16e9, observedAt: h.clock.now() }
            : null,
      },
    },
  );
  await h.settle();
  const a = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(a.statusCode, 200, 'mbp acquires');
  // The instance under PREFIX has the test's load function (app.ts may wire another).
  const res = await h.get(`${PREFIX}/`);
  t.equal(res.statusCode, 200, 'the page is served without a token while openReads is true');
  t.match(res.headers['content-type'], /^text\/html; charset=utf-8/, 'the page is HTML');
  t.equal(res.headers['cache-control'], 'no-store', 'the page is never cached');
  const html = res.body;
  t.match(html, /<div id="holder" class="big">mbp<\/div>/, 'the holder is printed large');
  t.match(html, /<div id="generation" class="big">1<\/div>/, 'the generation is printed large');
  t.match(html, /<div id="validity" class="ok">\d+(\.\d)? s left<\/div>/, 'the validity left is printed');
  t.match(html, /<tr data-host="mbp" class="role-holder">/, 'mbp has a holder row');
  t.match(html, /<tr data-host="node-b" class="role-standby">/, 'node-b has a standby row');
  t.match(html, /<tr data-host="cloud-vm" class="role-arbiter">/, 'the arbiter has a row');
  t.match(html, /load 0\.50 0\.25 0\.10, 8 cpu, mem 75%/, 'the registry load is shown for mbp');
  t.match(html, /id="failover">[^<]*worst case/, 'the worst-case failover is printed');
  t.match(html, /<li data-id="\d+" class="ev ev-plain">.*acquired/, 'the acquire is in the timeline');
  t.match(
    html,
    /<section id="phase" class="card phase phase-ok" data-phase="healthy" aria-label="state"><span id="phase-text">mbp holds the lease and runs; node-b stands by<\/span>/,
    'the phase line is rendered, green',
  );
  t.match(
    html,
    /<td data-label="view of holder" class="c-view muted">it is the holder<\/td>/,
    'the holder row has no view of itself',
  );
  t.match(html, /notBefore=\d\d:\d\d:\d\d(\.\d)?Z \(\+0\.0 s\)/, "the acquire's notBefore is a time, not an epoch");
  t.notMatch(html, /notBefore=1\d{9}/, 'no raw epoch in the timeline');
  t.match(html, /<div id="banner" hidden/, 'the maintenance banner is hidden while maintenance is off');
  t.notMatch(html, /src=["']?https?:/, 'nothing is loaded from another origin');
  t.notMatch(html, /<link rel="stylesheet"/, 'no external stylesheet');
  t.match(html, /<link rel="icon" href="data:,">/, 'the icon is inline (no favicon request)');
});

t.test('the inline script is the one script the Content-Security-Policy allows', async (t) => {
  const h = await operatorHarness(t);
  const res = await h.get('/');
  const csp = String(res.headers['content-security-policy']);
  t.equal(csp, STATUS_CSP, 'the page sends the CSP');
  t.match(csp, /default-src 'none'/, 'everything not named is refused');
  t.match(csp, /connect-src 'self'/, 'fetches go only to the arbiter');
  const scripts = [...res.body.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1] as string);
  t.equal(scripts.length, 1, 'there is exactly one executable inline script');
  const hash = createHash('sha256')
    .update(scripts[0] as string, 'utf8')
    .digest('base64');
  t.ok(csp.includes(`'sha256-${hash}'`), 'the CSP allows that script by its hash');
  t.notMatch(
    scripts[0] as string,
    /innerHTML|outerHTML|insertAdjacentHTML|document\.write/,
    'the script never parses data as HTML',
  );
  const file = readFileSync(new URL('../../apps/arbiter/src/routes/status-page/browser.js', import.meta.url), 'utf8');
  t.equal(
    scripts[0],
    file,
    'the inline script is browser.js as it is on disk (its hash computed when the module loaded)',
  );
  t.equal(res.headers['x-content-type-options'], 'nosniff', 'nosniff is set');
});

t.test('every value the page prints is escaped, also inside the inline JSON', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  const m = await h.rt.app().then((app) =>
    app.inject({
      method: 'PUT',
      url: '/v1/maintenance',
      headers: { authorization: `Bearer ${h.tokens.admin}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ enabled: true, reason: HOSTILE }),
    }),
  );
  t.equal(m.statusCode, 200, 'maintenance is turned on with a hostile reason');
  h.rt.arbiter.note([
    {
      at: h.clock.now(),
      category: 'control',
      event: '</script><script>alert(1)</script>',
      host: null,
      data: { note: HOSTILE },
    },
  ]);
  const res = await h.get('/');
  const html = res.body;
  t.notOk(html.includes(HOSTILE), 'the hostile string never appears raw');
  t.notOk(html.includes('<img'), 'no injected element');
  t.equal(
    (html.match(/<script/g) ?? []).length,
    2,
    'only the page’s own two script elements exist (JSON data and code)',
  );
  t.ok(html.includes(esc(HOSTILE)), 'the reason is shown escaped');
  t.match(html, /<div id="banner" role="status">/, 'the maintenance banner is visible');
  const json = /<script type="application\/json" id="hq-initial">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
  t.notOk(/[<>]/.test(json), 'the inline JSON holds no < or >');
  t.doesNotThrow(() => JSON.parse(json), 'the inline JSON parses');
  const status = (await h.get('/v1/status')).json() as { maintenance: { enabled: boolean; reason: string } };
  t.same(
    status.maintenance,
    { enabled: true, reason: HOSTILE },
    '/v1/status returns the reason as data (the script prints it with textContent)',
  );
});

t.test('the page and /v1/status need a token when openReads is false', async (t) => {
  const h = await operatorHarness(t, { auth: { openReads: false } });
  t.equal((await h.get('/')).statusCode, 401, 'the page without a token is 401');
  t.equal((await h.get('/v1/status')).statusCode, 401, '/v1/status without a token is 401');
  t.equal((await h.get('/', h.tokens.query)).statusCode, 200, 'a query token reads the page');
  t.equal((await h.get('/v1/status', h.tokens.query)).statusCode, 200, 'a query token reads /v1/status');
});

t.test('/v1/status reports heartbeat age, the view of the holder and its age per host', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  h.clock.advance(0.5);
  await h.post(
    '/v1/heartbeat',
    { host: 'node-b', view: { target: 'mbp', reachable: true, ping: false, health: true } },
    h.tokens.nodeb,
  );
  h.clock.advance(2);
  const s = (await h.get('/v1/status')).json() as {
    hosts: Array<{
      host: string;
      role: string;
      lastHeartbeatAgeSeconds: number | null;
      view: { target: string; reachable: boolean; ageSeconds: number } | null;
    }>;
  };
  const nodeb = s.hosts.find((x) => x.host === 'node-b');
  t.equal(nodeb?.role, 'standby', 'node-b is a standby');
  t.equal(nodeb?.lastHeartbeatAgeSeconds, 2, 'node-b heartbeat age is 2 s');
  t.same(
    nodeb?.view && { target: nodeb.view.target, reachable: nodeb.view.reachable, ageSeconds: nodeb.view.ageSeconds },
    { target: 'mbp', reachable: true, ageSeconds: 2 },
    "node-b's view of mbp and its age",
  );
  t.same(
    s.hosts.map((x) => x.host),
    ['mbp', 'node-b', 'cloud-vm'],
    'candidates in priority order, then the arbiter',
  );
});

t.test('helpers: seconds, event kinds, escaping and the event tail', async (t) => {
  t.equal(fmtSeconds(4.25), '4.3 s', 'short durations keep a decimal');
  t.equal(fmtSeconds(90), '90 s', 'under two minutes in seconds');
  t.equal(fmtSeconds(1500), '25.0 min', 'minutes');
  t.equal(fmtSeconds(null), '—', 'unknown is a dash');
  t.equal(eventKind('promoted'), 'promotion', 'promotions are highlighted');
  t.equal(eventKind('renew-refused'), 'refusal', 'refusals are highlighted');
  t.equal(eventKind('renewed'), 'plain', 'other events are plain');
  t.equal(eventKind('agent-silent'), 'refusal', 'a silent agent is highlighted like a refusal');
  t.equal(eventKind('timing-problem'), 'refusal', 'so is a timing problem');
  t.equal(
    esc(`<a href="x">'&\``),
    '&#60;a href=&#34;x&#34;&#62;&#39;&#38;&#96;',
    'all five dangerous characters are escaped',
  );
  const rows: EventRow[] = Array.from({ length: 2345 }, (_, i) => ({
    id: i + 1,
    at: i,
    category: 'hq.lease',
    event: 'renewed',
    host: 'mbp',
    data: {},
  }));
  const tail = await tailEvents((after, limit) => rows.filter((r) => r.id > after).slice(0, limit), 50);
  t.equal(tail.length, 50, 'the tail has 50 rows');
  t.equal(tail[0]?.id, 2296, 'the tail starts 50 from the end');
  t.equal(tail[49]?.id, 2345, 'the tail ends with the newest');
});

t.test('registryLoad picks the newest machine resource of the host and ignores junk', async (t) => {
  let calls = 0;
  const rows = [
    {
      kind: 'machine',
      machine: 'mbp',
      attrs: new Map<string, unknown>([
        ['loadAvg', [1, 2, 3]],
        ['cpuCount', 4],
      ]),
      renewedAt: 1_000_000,
    },
    {
      kind: 'machine',
      machine: 'mbp',
      attrs: new Map<string, unknown>([
        ['loadAvg', [0.5, 'x', 0.1]],
        ['cpuCount', 8],
        ['freeMem', 'lots'],
        ['totalMem', 16],
      ]),
      renewedAt: 2_000_000,
    },
    { kind: 'instance', machine: 'node-b', attrs: new Map<string, unknown>([['cpuCount', 2]]), renewedAt: 3_000_000 },
  ];
  const load = registryLoad(
    () => {
      calls++;
      return rows;
    },
    () => 5_000_000,
  );
  t.same(
    load('mbp'),
    { loadAvg: [0.5, 0.1], cpuCount: 8, freeMem: undefined, totalMem: 16, observedAt: 2000 },
    'the newest row wins, non-numbers are dropped, renewedAt is seconds',
  );
  t.equal(load('node-b'), null, 'an instance resource is not a machine load');
  t.equal(load('other'), null, 'an unknown host has no load');
  t.equal(calls, 1, 'the registry is read once per render');
});

t.test('a silent host and a refused token are problems on the host row', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0, heartbeatSeconds: 1 }, h.tokens.mbp);
  await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0, heartbeatSeconds: 1 }, h.tokens.nodeb);
  let s = (await h.get('/v1/status')).json() as {
    hosts: Array<{ host: string; heartbeatText: string; heartbeatProblem: boolean }>;
  };
  t.match(
    s.hosts.find((x) => x.host === 'node-b'),
    { heartbeatText: /^0 s ago$|^\d+(\.\d)? s ago$/, heartbeatProblem: false },
    'a fresh heartbeat is no problem',
  );
  h.clock.advance(5);
  await h.post('/v1/heartbeat', { host: 'mbp', seenGeneration: 0, heartbeatSeconds: 1 }, h.tokens.mbp);
  s = (await h.get('/v1/status')).json() as typeof s;
  t.match(
    s.hosts.find((x) => x.host === 'node-b'),
    { heartbeatText: /ago \(silent: it reports every 1(\.0)? s\)$/, heartbeatProblem: true },
    'past 2 × its interval the row says silent',
  );
  // node-b's agent now uses mbp's member token (a rotation gone wrong): 403, and the row says so.
  const wrong = await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0 }, h.tokens.mbp);
  t.equal(wrong.statusCode, 403, 'the arbiter refuses it');
  s = (await h.get('/v1/status')).json() as typeof s;
  t.match(
    s.hosts.find((x) => x.host === 'node-b'),
    {
      heartbeatText: /^refused 0(\.0)? s ago: this member token belongs to "mbp", not "node-b"$/,
      heartbeatProblem: true,
    },
    'the refusal is on its row',
  );
  const html = (await h.get(`${PREFIX}/`)).body;
  t.match(
    html,
    /<td data-label="heartbeat" class="c-heartbeat bad">refused 0(\.0)? s ago: this member token belongs to &#34;mbp&#34;, not &#34;node-b&#34;<\/td>/,
    'and on the page, in red',
  );
  const ok = await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0, heartbeatSeconds: 1 }, h.tokens.nodeb);
  t.equal(ok.statusCode, 200, 'the right token again');
  s = (await h.get('/v1/status')).json() as typeof s;
  t.match(
    s.hosts.find((x) => x.host === 'node-b'),
    { heartbeatProblem: false },
    'a good heartbeat after it clears the row',
  );
});

t.test('the daemon fills the load column from the machines the agents register', async (t) => {
  const clock = manualClock();
  const rt = await createRuntime({
    config: fastConfig(t.testdir()),
    clock,
    log: pino({ level: 'silent' }),
    prober: new FakeProber(),
    processMetrics: false,
    registry: true,
    operator: true,
  });
  t.teardown(() => rt.close());
  const app = await rt.app();
  const token = await issueToken(rt.store, 'mbp', 'member', clock.now());
  const reg = await app.inject({
    method: 'POST',
    url: '/v1/resources/register',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    payload: JSON.stringify({
      id: 'mbp',
      name: 'mbp',
      kind: 'machine',
      machine: 'mbp',
      attrs: { loadAvg: [0.5, 0.25, 0.1], cpuCount: 8, freeMem: 4e9, totalMem: 16e9 },
      observedAt: 1,
      ttlMs: 90_000,
    }),
  });
  t.equal(reg.statusCode, 200, 'mbp registers its machine');
  const s = (await app.inject({ method: 'GET', url: '/v1/status' })).json() as {
    hosts: Array<{ host: string; loadText: string }>;
  };
  t.equal(
    s.hosts.find((h) => h.host === 'mbp')?.loadText,
    'load 0.50 0.25 0.10, 8 cpu, mem 75%',
    "mbp's row shows its load",
  );
  t.equal(s.hosts.find((h) => h.host === 'node-b')?.loadText, '—', 'node-b, not registered, shows a dash');
  const html = (await app.inject({ method: 'GET', url: '/' })).body;
  t.match(
    html,
    /<td data-label="load" class="c-load">load 0\.50 0\.25 0\.10, 8 cpu, mem 75%<\/td>/,
    'and so does the page',
  );
});

t.test(
  'the server renders a silent holder: the phase line and the validity in red, the lock-delay marked',
  async (t) => {
    const h = await operatorHarness(t);
    await h.settle();
    await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
    await h.post('/v1/heartbeat', { host: 'mbp', generation: 1, seenGeneration: 1, heartbeatSeconds: 1 }, h.tokens.mbp);
    h.clock.advance(3);
    await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 1, heartbeatSeconds: 1 }, h.tokens.nodeb);
    let html = (await h.get('/')).body;
    t.match(html, /data-phase="holder-silent"/, 'the phase is holder-silent');
    t.match(
      html,
      /<div id="validity" class="bad">3\.0 s left, not renewed for 3\.0 s<\/div>/,
      "the silent holder's validity is red and says since when",
    );
    t.match(html, /<tr data-host="mbp" class="role-holder problem">/, "the holder's row is marked");
    const x = await h.post('/v1/lease/transfer', { to: 'node-b' });
    t.equal(x.statusCode, 200, 'a forced transfer promotes node-b behind lock-delay');
    html = (await h.get('/')).body;
    t.match(html, /data-phase="lock-delay"/, 'the phase is lock-delay');
    t.match(
      html,
      /<div id="validity" class="warn">may run in \d+(\.\d)? s, then for 6\.0 s \(until [0-9:. -]+Z\)<\/div>/,
      'the validity of a holder that may not run yet is amber: when it may run, for the TTL, until when',
    );
    const r = (await h.get('/v1/lease')).json() as { expiresAt: number; now: number; ttlSeconds: number };
    t.ok(
      r.expiresAt - r.now > r.ttlSeconds,
      'while the record\'s expiresAt is more than one TTL away (so "left" would have said more than the TTL)',
    );
    t.match(
      html,
      /<div id="lockdelay" class="warn">lock-delay: may run in \d+(\.\d)? s<\/div>/,
      'the lock-delay is marked',
    );
  },
);

t.test(
  "a candidate's broken peer path is loud on the page, in /v1/status, the metric and the log once per change",
  async (t) => {
    const h = await operatorHarness(t);
    await h.settle();
    await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
    const problem = "http://127.0.0.1:8471 refuses this host's peer token (HTTP 401): the peer tokens differ";
    const broken = {
      host: 'mbp',
      generation: 1,
      seenGeneration: 1,
      peerPaths: [{ peer: 'node-b', ok: false, problem, ageSeconds: 2 }],
    };
    const v2 = { 'hq-protocol': '2' };
    t.equal(
      (await h.post('/v1/heartbeat', broken, h.tokens.mbp)).statusCode,
      400,
      'a protocol 1 heartbeat may not carry peerPaths',
    );
    t.equal(
      (await h.post('/v1/heartbeat', broken, h.tokens.mbp, v2)).statusCode,
      200,
      'a protocol 2 heartbeat with peerPaths is accepted',
    );
    h.clock.advance(1);
    await h.post('/v1/heartbeat', broken, h.tokens.mbp, v2);
    const s = (await h.get('/v1/status')).json() as {
      phase: { name: string; level: string; text: string };
      peerPaths: Array<{ host: string; peer: string; ok: boolean; text: string }>;
    };
    t.match(
      s.peerPaths,
      [
        {
          host: 'mbp',
          peer: 'node-b',
          ok: false,
          text: /^mbp → node-b broken for 3(\.0)? s: node-b could not confirm mbp if the arbiter went down: .*the peer tokens differ/,
        },
      ],
      'the path, both hosts, the cause and since when',
    );
    t.match(
      s.phase,
      { name: 'peer-path-broken', level: 'bad', text: /^peer path broken: mbp → node-b/ },
      'the phase line says it',
    );
    const html = (await h.get('/')).body;
    t.match(
      html,
      /<li class="bad" data-host="mbp" data-peer="node-b">mbp → node-b broken for [^<]*the peer tokens differ<\/li>/,
      'the page shows it in red',
    );
    t.match((await h.get('/metrics')).body, /^hq_peer_path_ok\{host="mbp",peer="node-b"\} 0$/m, 'the metric is 0');
    const events = (await h.get('/v1/events?after=0&limit=100')).json() as {
      events: Array<{ event: string; host: string; data: { peer?: string } }>;
    };
    t.equal(
      events.events.filter((e) => e.event === 'peer-path-broken').length,
      1,
      'one event for two heartbeats saying the same',
    );
    t.match(
      events.events.find((e) => e.event === 'peer-path-broken'),
      { host: 'mbp', data: { peer: 'node-b', problem } },
      'naming both hosts and the cause',
    );
    await h.post(
      '/v1/heartbeat',
      { ...broken, peerPaths: [{ peer: 'node-b', ok: true, problem: null, ageSeconds: 0 }] },
      h.tokens.mbp,
      v2,
    );
    const after = (await h.get('/v1/status')).json() as typeof s;
    t.match(
      after.peerPaths,
      [{ host: 'mbp', peer: 'node-b', ok: true, text: /^mbp → node-b works/ }],
      'mended: the path works',
    );
    t.not(after.phase.name, 'peer-path-broken', 'and the phase no longer says broken');
    t.match((await h.get('/metrics')).body, /^hq_peer_path_ok\{host="mbp",peer="node-b"\} 1$/m, 'the metric is 1');
    const again = (await h.get('/v1/events?after=0&limit=100')).json() as typeof events;
    t.equal(again.events.filter((e) => e.event === 'peer-path-ok').length, 1, 'the mend is one event');
  },
);

t.test('a heartbeat without peerPaths (an agent of hq 0.1, or before its first probe) shows no path', async (t) => {
  const h = await operatorHarness(t);
  await h.settle();
  await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: 0 }, h.tokens.nodeb);
  const s = (await h.get('/v1/status')).json() as { peerPaths: unknown[] };
  t.same(s.peerPaths, [], 'none');
  t.notMatch((await h.get('/metrics')).body, /^hq_peer_path_ok\{/m, 'no metric series');
});
