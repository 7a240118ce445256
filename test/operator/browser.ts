/**
 * Headless Chromium for the status page tests: Debian's `chromium` (or $HQ_CHROMIUM) driven by
 * playwright-core, a fresh profile in a testdir, a phone-sized viewport; no browser is ever
 * downloaded. Where Chromium is missing the test is skipped and says so (a failure under CI).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import type { Test } from 'tap';
import { missingTool } from '../missing-tool.js';

export const CHROMIUM = process.env['HQ_CHROMIUM'] ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export interface Browser {
  readonly page: Page;
  /** Page errors and console errors (a CSP refusal is one). */
  readonly errors: string[];
}

/** A page in a fresh Chromium, closed at teardown; null (and a skip) where there is no Chromium. */
export async function openPage(
  t: Test,
  screen: { width: number; height: number; scale: number } = { width: 390, height: 844, scale: 2 },
): Promise<Browser | null> {
  if (!existsSync(CHROMIUM)) {
    missingTool(t, `no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set HQ_CHROMIUM)`);
    return null;
  }
  const { chromium } = await import('playwright-core');
  // A fresh profile outside tap's fixtures: Chromium may still write into it while it exits.
  const profile = mkdtempSync(join(tmpdir(), 'hq-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: screen.width, height: screen.height },
    deviceScaleFactor: screen.scale,
    timeout: 30_000,
  });
  t.teardown(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(15_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  return { page, errors };
}
