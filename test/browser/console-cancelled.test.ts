// Issue 46 (2), in real Chromium at a phone's width (390 px) and a laptop's (1280 px): a cancelled
// batch offers no button that buys its plates again and calls them cancelled, and a paid retry
// above VQ_CONFIRM_ABOVE opens a page that states its price before anything is sent.
// Screenshots go to out/test/browser/cancelled-<page>-<width>.png.
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { Retention } from '../../src/retention.js';
import { createHttpApi } from '../../src/server.js';
import { archiveFor } from '../../src/sinks/export.js';
import { launchChromium, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';

const ADMIN = 'admin-token-0123456789abcdef';
const WIDTHS = [390, 1280] as const;
const NOT_FOUND = ['NAO1A23', 'NAO1A24', 'NAO1A25'];

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let browser: Browser;

beforeAll(async () => {
  h = await harness.start({
    label: 'browser-cancelled',
    sim: { failPlates: NOT_FOUND },
    config: { VQ_API_TOKENS: ADMIN, VQ_PRICE_PER_QUERY: '0.35', VQ_CONFIRM_ABOVE: '1' },
  });
  await ingestList(h.services, makePlates(6, 300), { source: 'library', batchId: 'called-off', maxCreates: 0 });
  await waitFor(async () => (await h.services.batchViews.get('called-off')).blocked === 'budget', 20_000, 'held');
  await new Retention(h.services, archiveFor(h.config), { retainMs: 0 }).cancel('called-off');
  await h.enqueue('not-found', NOT_FOUND);
  await h.waitForBatch('not-found');
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, dashboard: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  browser = await launchChromium();
  await mkdir(SHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

async function signedIn(width: number): Promise<Page> {
  const context = await browser.newContext({ locale: 'pt-BR', viewport: { width, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${base}/sign-in`);
  await page.fill('#token', ADMIN);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
  return page;
}

async function noSideScroll(page: Page): Promise<void> {
  const [scroll, inner] = (await page.evaluate(
    '[document.documentElement.scrollWidth, window.innerWidth]',
  )) as number[];
  expect(scroll).toBeLessThanOrEqual(inner!);
}

describe('the console and a cancelled batch (issue 46, 2)', () => {
  for (const width of WIDTHS) {
    it(`at ${width} px: no re-buy of cancelled plates; a paid retry states its price first`, async () => {
      const page = await signedIn(width);
      try {
        await page.goto(`${base}/batches/called-off`);
        await screenshot(page, `cancelled-batch-${width}.png`);
        expect(await page.locator('[data-retry]').count()).toBe(0);
        expect(await page.locator('[data-cancelled]').textContent()).toContain('6 placas canceladas');
        await noSideScroll(page);

        const before = h.sim.stats().creates;
        await page.goto(`${base}/batches/not-found`);
        await Promise.all([page.waitForURL(`${base}/batches/not-found/retry`), page.click('[data-retry="ask"]')]);
        await screenshot(page, `cancelled-confirm-${width}.png`);
        expect(await page.locator('[data-confirm-price]').textContent()).toContain('R$ 1,05');
        expect(await page.locator('[data-retry-confirm]').isVisible()).toBe(true);
        await noSideScroll(page);
        // Going back sends nothing.
        await Promise.all([page.waitForURL(`${base}/batches/not-found`), page.click('[data-confirm-back]')]);
        expect(h.sim.stats().creates).toBe(before);
      } finally {
        await page.context().close();
      }
    });
  }
});
