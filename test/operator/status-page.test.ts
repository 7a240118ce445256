/**
 * The status page in a real headless Chromium (./browser.ts): a real arbiter app listens on
 * 127.0.0.1, the page renders the holder, a forced transfer (a promotion) changes it, and the
 * page updates in place — no reload — within a few refreshes. A screenshot goes to
 * .tap/artifacts/status-page.png (the CI artifact); the screenshots the README shows, one per
 * phase, are status-page.phases.test.ts's.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import t from 'tap';
import { openPage } from './browser.js';
import { operatorHarness } from './helper.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const ARTIFACTS = resolve(ROOT, process.env['HQ_ARTIFACTS'] ?? '.tap/artifacts');

t.test(
  'the status page renders the holder and follows a promotion without a reload',
  { timeout: 120_000 },
  async (t) => {
    const browser = await openPage(t);
    if (browser === null) return;
    const { page, errors } = browser;
    const h = await operatorHarness(t, {}, { status: { refreshSeconds: 1 } });
    await h.settle();
    const a = await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
    t.equal(a.statusCode, 200, 'mbp acquires generation 1');
    h.clock.advance(1);
    await h.post('/v1/heartbeat', { host: 'mbp', generation: 1, seenGeneration: 1, heartbeatSeconds: 1 }, h.tokens.mbp);
    await h.post(
      '/v1/heartbeat',
      {
        host: 'node-b',
        seenGeneration: 1,
        heartbeatSeconds: 1,
        view: { target: 'mbp', reachable: true, ping: true, health: true },
      },
      h.tokens.nodeb,
    );
    h.prober.answers.set('mbp', { ping: true, health: true });
    const c = await h.post('/v1/check', undefined);
    t.equal(c.statusCode, 200, 'one check records the arbiter view');

    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (h.app.server.address() as { port: number }).port;
    const url = `http://127.0.0.1:${port}/`;

    const nav = await page.goto(url, { waitUntil: 'load' });
    t.equal(nav?.status(), 200, 'the page loads');
    t.equal(await page.textContent('#holder'), 'mbp', 'the holder mbp is rendered');
    t.equal(await page.textContent('#generation'), '1', 'generation 1 is rendered');
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-refreshed'), undefined, {
      timeout: 15_000,
    });
    t.pass('the script refreshed the page from the JSON API');
    t.equal(await page.locator('#hosts-body tr').count(), 3, 'one row per host (two candidates and the arbiter)');
    t.match(
      (await page.textContent('tr[data-host="node-b"] .c-view')) ?? '',
      /^mbp reachable/,
      "node-b's view of the holder is shown",
    );

    // Marks this document: a reload would lose the mark.
    await page.evaluate(() => {
      (window as unknown as { hqMark: number }).hqMark = 42;
    });
    const x = await h.post('/v1/lease/transfer', { to: 'node-b' });
    t.equal(x.statusCode, 200, 'a forced transfer promotes node-b');
    await page.waitForFunction(() => document.getElementById('holder')?.textContent === 'node-b', undefined, {
      timeout: 15_000,
    });
    t.equal(await page.textContent('#holder'), 'node-b', 'the page shows the new holder');
    t.equal(await page.textContent('#generation'), '2', 'the page shows generation 2');
    t.equal(
      await page.evaluate(() => (window as unknown as { hqMark?: number }).hqMark),
      42,
      'the page updated in place (no reload)',
    );
    t.equal(
      await page.evaluate(() => performance.getEntriesByType('navigation').length),
      1,
      'there was a single navigation',
    );
    await page.waitForSelector('#events li.ev-promotion', { timeout: 15_000 });
    t.match(
      (await page.textContent('#events li.ev-promotion .ev-name')) ?? '',
      'transferred',
      'the change of holder is highlighted in the timeline, named a transfer (not a promotion)',
    );
    t.match((await page.textContent('tr[data-host="node-b"] .c-role')) ?? '', 'holder', 'node-b is now the holder row');
    t.match(
      (await page.textContent('#lockdelay')) ?? '',
      /lock-delay/,
      'the lock-delay of the promotion is counted down',
    );
    t.same(errors, [], 'the page logged no errors (CSP, script)');

    mkdirSync(ARTIFACTS, { recursive: true });
    const artifact = join(ARTIFACTS, 'status-page.png');
    await page.screenshot({ path: artifact, fullPage: true });
    t.ok(statSync(artifact).size > 10_000, `a screenshot was written to ${artifact}`);
  },
);
