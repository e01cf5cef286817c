// Debian's Chromium for the browser tests, started as the machine's probe starts it: headless, no
// sandbox (root), and none of the background traffic a closed network refuses.
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';

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
