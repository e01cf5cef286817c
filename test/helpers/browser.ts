// Debian's Chromium for the browser tests, started as the machine's probe starts it: headless, no
// sandbox (root), and none of the background traffic a closed network refuses.
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';

export const ROOT = join(import.meta.dirname, '../..');
/** Screenshots of every browser test. */
export const SHOTS = join(ROOT, 'out/test/browser');

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** playwright gives every launch a fresh, throw-away profile (its own --user-data-dir). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
}

/**
 * A whole page's screenshot for the reader of SHOTS (what a test asserts is read off the page, not
 * off the image). Chromium now and then refuses a full-page capture ("Protocol error
 * (Page.captureScreenshot): Unable to capture screenshot", a known Chromium fault; one ended a
 * fresh-clone CI run whose every check had passed): the capture, not the test, is tried once
 * more, and a second refusal fails the test as before.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const take = () => page.screenshot({ path: join(SHOTS, name), fullPage: true });
  try {
    await take();
  } catch (err) {
    if (!/Unable to capture screenshot/.test((err as Error).message)) throw err;
    await take();
  }
}
