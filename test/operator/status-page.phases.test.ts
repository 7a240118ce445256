/**
 * The status page through the phases an operator must tell apart at a glance, in a real
 * headless Chromium (./browser.ts) on a real arbiter app listening on 127.0.0.1. Agents are
 * played by heartbeats over HTTP, the arbiter's checks by `POST /v1/check` with a fake prober,
 * time by the arbiter's manual clock; the page's own clock is fixed (`page.clock`), so its
 * countdowns and therefore the screenshots are the same on every run.
 *
 *   healthy            mbp holds and renews, node-b stands by
 *   holder-silent      mbp's agent is dead: its validity counts down in red, the streak is said
 *   promotion-pending  node-b was promoted and waits out lock-delay
 *   failed-over        node-b runs; mbp is silent; node-b's row is no problem of its own
 *   timing-problem     node-b reports a refreshSeconds the arbiter's ttlSeconds cannot work with
 *
 * Each phase is asserted (the phase line's name, text and colour, the cells a person reads) and
 * screenshotted: into docs/status-page/<phase>.png (the README shows them) when
 * HQ_UPDATE_SCREENSHOTS=1, else into a temporary folder, so a test run leaves the tree as it was.
 */
import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { registryLoad } from '../../apps/arbiter/src/routes/status-page/load.js';
import { openPage } from './browser.js';
import { operatorHarness } from './helper.js';
import { VERSION } from '../../packages/runtime/src/version.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const SHOTS =
  process.env.HQ_UPDATE_SCREENSHOTS === '1'
    ? join(ROOT, 'docs', 'status-page')
    : mkdtempSync(join(tmpdir(), 'hq-status-shots-'));

const UP = { ping: true, health: true };
const DOWN = { ping: false, health: false };

t.test(
  'the status page makes each phase obvious: healthy, holder silent, promotion pending, failed over, timing problem',
  { timeout: 180_000 },
  async (t) => {
    // A phone's width, tall enough for the phase, the lease, the hosts and the newest events.
    const browser = await openPage(t, { width: 390, height: 1500, scale: 1 });
    if (browser === null) return;
    const { page, errors } = browser;
    const h = await operatorHarness(
      t,
      {},
      {
        harness: { registry: true },
        status: {
          refreshSeconds: 0.5,
          load: registryLoad(
            () => h.rt.registry?.listResources({ kind: 'machine' }, h.clock.now() * 1000) ?? [],
            () => h.clock.now() * 1000,
          ),
        },
      },
    );
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
    const send = async (path: string, body: unknown, token: string): Promise<number> => {
      const r = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'hq-protocol': '2' },
        body: body === undefined ? null : JSON.stringify(body),
      });
      await r.arrayBuffer();
      return r.status;
    };
    const view = (target: string, up: boolean) => ({ target, reachable: up, ...(up ? UP : DOWN) });
    // Agents of this release: protocol 2, naming their release (the version column shows it).
    const mbp = (body: Record<string, unknown>) =>
      send('/v1/heartbeat', { host: 'mbp', heartbeatSeconds: 1, version: VERSION, ...body }, h.tokens.mbp);
    const nodeb = (body: Record<string, unknown>) =>
      send('/v1/heartbeat', { host: 'node-b', heartbeatSeconds: 1, version: VERSION, ...body }, h.tokens.nodeb);
    const check = () => send('/v1/check', undefined, h.tokens.admin);
    const machine = (host: string, token: string, attrs: Record<string, unknown>) =>
      send(
        '/v1/resources/register',
        { id: host, name: host, kind: 'machine', machine: host, attrs, observedAt: 1, ttlMs: 600_000 },
        token,
      );

    // Healthy: both agents report, mbp holds, the arbiter's check reaches it.
    await h.settle();
    t.equal(
      await machine('mbp', h.tokens.mbp, { loadAvg: [0.42, 0.3, 0.2], cpuCount: 8, freeMem: 4e9, totalMem: 16e9 }),
      200,
      'mbp registers its machine load',
    );
    t.equal(
      await machine('node-b', h.tokens.nodeb, { loadAvg: [1.5, 1.2, 1], cpuCount: 4, freeMem: 2e9, totalMem: 8e9 }),
      200,
      'node-b registers its machine load',
    );
    t.equal(
      await send('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp),
      200,
      'mbp acquires generation 1',
    );
    h.clock.advance(1);
    t.equal(await mbp({ generation: 1, seenGeneration: 1, view: view('node-b', true) }), 200, 'mbp renews');
    t.equal(await nodeb({ seenGeneration: 1, view: view('mbp', true) }), 200, 'node-b reports mbp reachable');
    h.prober.answers.set('mbp', UP);
    t.equal(await check(), 200, 'the check reaches mbp');

    await page.clock.setFixedTime(new Date('2027-01-15T08:00:00Z'));
    t.equal((await page.goto(`${base}/`, { waitUntil: 'load' }))?.status(), 200, 'the page loads');
    await shows(page, 'healthy');
    t.match(
      await phase(page),
      { name: 'healthy', cls: /phase-ok/, text: 'mbp holds the lease and runs; node-b stands by' },
      'healthy: one green line says who runs',
    );
    t.match(
      await cell(page, '#validity'),
      { text: /^\d(\.\d)? s left$/, cls: 'ok' },
      'the validity counts down in green',
    );
    t.match(
      await row(page, 'mbp'),
      {
        heartbeat: { cls: /^c-heartbeat$/ },
        view: { text: 'it is the holder', cls: /muted/ },
        load: { text: 'load 0.42 0.30 0.20, 8 cpu, mem 75%' },
      },
      "the holder's row: fresh, no view of itself, its load",
    );
    t.match(
      await row(page, 'node-b'),
      { view: { text: /^mbp reachable \(ping ok, health ok\)/, cls: /\bok\b/ }, load: { text: /^load 1\.50/ } },
      "the standby's view of the holder in green",
    );
    await shot(t, page, 'healthy');

    // Holder silent: mbp's agent is dead (no heartbeat for 3 s); node-b and the arbiter cannot reach it.
    h.prober.answers.set('mbp', DOWN);
    for (let i = 0; i < 3; i++) {
      h.clock.advance(1);
      await nodeb({ seenGeneration: 1, view: view('mbp', false) });
    }
    t.equal(await check(), 200, 'one check finds mbp unreachable (streak 1 of 2)');
    await shows(page, 'holder-silent');
    t.match(
      await phase(page),
      {
        cls: /phase-bad/,
        text: 'mbp, the holder, is silent: no heartbeat for 3.0 s; unreachable in 1 of the 2 checks that promote a standby',
      },
      'the phase line says the holder is silent and how far the streak is, in red',
    );
    const validity = await cell(page, '#validity');
    t.equal(validity.text, '3.0 s left, not renewed for 3.0 s', 'the validity says it is not renewed');
    t.not(validity.cls, 'ok', 'the validity of a silent holder is not green');
    t.equal(validity.cls, 'bad', 'it is red');
    t.equal(
      (await cell(page, '#streak')).text,
      'holder unreachable: check 1 of 2 before a promotion',
      'the streak is said in words',
    );
    const silentRow = await row(page, 'mbp');
    t.match(
      silentRow,
      { cls: /\bproblem\b/, heartbeat: { text: /^3\.0 s ago \(silent: it reports every 1\.0 s\)$/, cls: /\bbad\b/ } },
      "the dead host's last heartbeat is marked, not plain text",
    );
    t.match(
      await row(page, 'node-b'),
      { view: { text: /^mbp unreachable/, cls: /\bbad\b/ } },
      "the standby's view of the holder is red: that is the holder's problem, said on the standby's row",
    );
    t.match(
      await eventText(page, 'agent-silent'),
      /lastHeartbeatAt=08:00:03\.5Z \(-3\.0 s\)/,
      'the agent-silent event gives the last heartbeat as a time, not an epoch',
    );
    await shot(t, page, 'holder-silent');

    // Promotion pending: the second check promotes node-b behind mbp's lock-delay.
    h.clock.advance(1);
    await nodeb({ seenGeneration: 1, view: view('mbp', false) });
    t.equal(await check(), 200, 'the second check promotes node-b');
    t.equal((await h.rt.store.read()).lease.holder, 'node-b', 'node-b holds generation 2');
    await shows(page, 'lock-delay');
    t.equal(await page.textContent('#holder'), 'node-b', 'the page shows the new holder');
    t.match(
      await phase(page),
      {
        cls: /phase-warn/,
        text: /^node-b was promoted from mbp and may not run yet: lock-delay until \S+Z: it waits out mbp's last possible validity; it ends at once when mbp's agent acknowledges its step-down from generation 1$/,
      },
      'the phase line says the new holder may not run yet, which wait holds it and what ends it sooner',
    );
    t.match(
      await cell(page, '#lockdelay'),
      { text: 'lock-delay: may run in 3.0 s', cls: 'warn' },
      'the lock-delay counts down, marked',
    );
    t.equal((await cell(page, '#validity')).cls, 'warn', 'the validity of a holder that may not run yet is not green');
    t.match(
      (await cell(page, '#validity')).text,
      /^may run in 3\.0 s, then for 6\.0 s \(until [0-9:. -]+Z\)$/,
      "the page's own countdown: when it may run, then for the TTL, never the TTL plus the wait",
    );
    t.match(
      await row(page, 'mbp'),
      { heartbeat: { cls: /\bbad\b/ }, view: { text: /\(from before node-b held the lease\)$/, cls: /muted/ } },
      "the old holder's view (of node-b, from its own tenure) is grey, not green",
    );
    const promoted = await eventText(page, 'promoted');
    t.match(
      promoted,
      /notBefore=08:00:10\.5Z \(\+3\.0 s\)/,
      'the promotion gives notBefore as a time and how far ahead',
    );
    t.notMatch(promoted, /\d{9,}/, 'no raw epoch in the promotion event');
    await shot(t, page, 'promotion-pending');

    // Failed over: past lock-delay node-b renews as the holder; mbp stays silent.
    h.prober.answers.set('node-b', UP);
    for (let i = 0; i < 4; i++) {
      h.clock.advance(1);
      t.equal(
        await nodeb({ generation: 2, seenGeneration: 2, view: view('mbp', false) }),
        200,
        `node-b renews (${i + 1})`,
      );
    }
    t.equal(await check(), 200, 'the check reaches node-b');
    await shows(page, 'failed-over');
    t.match(
      await phase(page),
      {
        cls: /phase-warn/,
        text: 'node-b took over from mbp (generation 2) and runs; mbp is silent, so there is no standby until it is back',
      },
      'the phase line says who took over and that there is no standby',
    );
    t.match(await cell(page, '#validity'), { cls: 'ok' }, "the new holder's validity is green");
    t.equal((await cell(page, '#lockdelay')).text, '', 'the lock-delay is over');
    const holderRow = await row(page, 'node-b');
    t.match(
      holderRow,
      { view: { text: 'it is the holder', cls: /muted/ }, heartbeat: { cls: /^c-heartbeat$/ } },
      "the healthy holder's row has no problem of its own",
    );
    t.notMatch(holderRow.view.text, /unreachable/, "the holder's row does not read 'mbp unreachable'");
    t.notMatch(holderRow.cls, /problem/, "the holder's row is not marked");
    t.match(
      await row(page, 'mbp'),
      { cls: /\bproblem\b/, heartbeat: { text: /^8\.0 s ago \(silent/, cls: /\bbad\b/ } },
      'the old holder is the marked row',
    );
    t.match(
      await row(page, 'cloud-vm'),
      { view: { text: /^node-b reachable/, cls: /\bok\b/ } },
      "the arbiter's own view is of the new holder",
    );
    await shot(t, page, 'failed-over');

    // Timing problem: mbp is back, but node-b reports a refresh the arbiter's TTL cannot work with.
    h.clock.advance(1);
    t.equal(await mbp({ seenGeneration: 2, view: view('node-b', true) }), 200, 'mbp is back, as the standby');
    t.equal(
      await nodeb({ generation: 2, seenGeneration: 2, refreshSeconds: 10, view: view('mbp', true) }),
      200,
      'node-b reports refreshSeconds 10 (ttlSeconds is 6)',
    );
    await shows(page, 'timing-problem');
    t.match(
      await phase(page),
      {
        cls: /phase-bad/,
        text: /^timing problem: refreshSeconds \(10 s on node-b\) must be shorter than ttlSeconds \(6 s, arbiter cloud-vm\)/,
      },
      'the phase line names both keys, both hosts and the numbers, in red',
    );
    t.match(
      (await page.textContent('#timing')) ?? '',
      /refreshSeconds \(10 s on node-b\)/,
      'the timing problem is listed under failover',
    );
    t.match(
      await row(page, 'mbp'),
      { heartbeat: { cls: /^c-heartbeat$/ }, view: { text: /^node-b reachable/, cls: /\bok\b/ } },
      'mbp reports again and sees the holder',
    );
    await shot(t, page, 'timing-problem');

    t.same(errors, [], 'the page logged no errors (CSP, script)');
  },
);

/** Waits for two refreshes after a change (one in flight may predate it), then for the phase. */
async function shows(page: Page, name: string): Promise<void> {
  const n = Number((await page.getAttribute('html', 'data-refreshed')) ?? 0);
  await page.waitForFunction((n) => Number(document.documentElement.getAttribute('data-refreshed')) >= n + 2, n);
  await page
    .waitForFunction((name) => document.getElementById('phase')?.getAttribute('data-phase') === name, name, {
      timeout: 5_000,
    })
    .catch(() => undefined);
}

async function phase(page: Page): Promise<{ name: string | null; cls: string; text: string }> {
  return page.evaluate(() => {
    const p = document.getElementById('phase') as HTMLElement;
    return { name: p.getAttribute('data-phase'), cls: p.className, text: p.textContent ?? '' };
  });
}

async function cell(page: Page, selector: string): Promise<{ text: string; cls: string }> {
  return page.$eval(selector, (e) => ({ text: e.textContent ?? '', cls: e.className }));
}

type Cell = { text: string; cls: string };

async function row(page: Page, host: string): Promise<{ cls: string; heartbeat: Cell; view: Cell; load: Cell }> {
  // No named function inside: the page would lack the loader's __name helper.
  const [tr, heartbeat, view, load] = await page.$eval(`#hosts-body tr[data-host="${host}"]`, (e) =>
    [e, e.querySelector('.c-heartbeat'), e.querySelector('.c-view'), e.querySelector('.c-load')].map((x) => ({
      text: x?.textContent ?? '',
      cls: x?.className ?? '',
    })),
  );
  return { cls: tr?.cls ?? '', heartbeat: heartbeat as Cell, view: view as Cell, load: load as Cell };
}

/** The newest event of that name, as the timeline prints it. */
async function eventText(page: Page, name: string): Promise<string> {
  return page.evaluate((name) => {
    for (const li of document.querySelectorAll('#events li'))
      if (li.querySelector('.ev-name')?.textContent === name) return li.textContent ?? '';
    return '';
  }, name);
}

async function shot(t: Test, page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path });
  t.ok(statSync(path).size > 10_000, `${name}.png is written`);
}
