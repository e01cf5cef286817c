// Issue 47, 6: a running batch's page draws its progress, its account's rate against its limit and
// its outcomes as plain SVG, in real Chromium at a phone's width (390 px) and a laptop's (1280 px),
// in both languages. The progress chart's last point is the batch's counts as GET /v1 gives them;
// the numbers are in text too (role="img" + aria-label, a caption, a table); the CSP is the same.
// Screenshots go to out/test/browser/charts-<locale>-<width>.png.
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { launchChromium, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const WIDTHS = [390, 1280] as const;
/** The console's policy as it stood before the charts: they must not need a new source. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let browser: Browser;

interface ApiCounts {
  done: number;
  failed: number;
  enqueued: number;
}

async function apiCounts(id: string): Promise<ApiCounts & { finished: boolean }> {
  const res = await fetch(`${base}/v1/batches/${id}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const body = (await res.json()) as { counts: ApiCounts; finished: boolean };
  return { ...body.counts, finished: body.finished };
}

async function signedIn(locale: string, width: number) {
  const context = await browser.newContext({ locale, viewport: { width, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${base}/sign-in`);
  await page.fill('#token', ADMIN);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
  return { context, page };
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  h = await harness.start({
    label: 'charts',
    sim: { failPlates: ['FAL1A00'], completionMs: [200, 400] },
    config: { VQ_API_TOKENS: ADMIN, VQ_RATE_LIMIT: '4/s' },
  });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe('a running batch’s charts (issue 47, 6)', () => {
  it('at 390 and 1280 px, in pt-BR and en: the last plotted point is the batch’s counts from /v1; CSP unchanged', async () => {
    await h.enqueue('grafico', ['FAL1A00', ...makePlates(60)]);
    const { context, page } = await signedIn('pt-BR', 1280);
    // A page open while the batch runs takes a sample at most every 5 s: three looks, three samples.
    for (let i = 0; i < 3; i++) {
      await page.goto(`${base}/batches/grafico`);
      await sleep(5_100);
    }
    await context.close();
    // The batch stops where it is (its workers go), unfinished: the page and /v1 must agree.
    await Promise.all(h.workers.map((w) => w.close()));
    const api = await apiCounts('grafico');
    expect(api.finished).toBe(false);
    expect(api.done).toBeGreaterThan(0);
    expect(api.failed).toBe(1);

    for (const locale of ['pt-BR', 'en-US']) {
      for (const width of WIDTHS) {
        const { context, page } = await signedIn(locale, width);
        const response = await page.goto(`${base}/batches/grafico`);
        expect(response?.headers()['content-security-policy']).toBe(CSP);
        const progress = page.locator('figure[data-chart="progress"] svg[role="img"]');
        // Drawn by the server: there on load, so read at once. An expect.poll here failed a CI run
        // on a loaded machine: its 1 s bound ran out before Chromium answered the count at all
        // ("function didn't resolve in time"), not on a missing chart. Should one be missing, the
        // failure says what the page showed instead.
        const drawn = await progress.count();
        if (drawn !== 1) {
          const shown = ((await page.locator('main').textContent()) ?? '').replace(/\s+/g, ' ').slice(0, 1_500);
          expect(drawn, `${locale} ${width}px: ${response?.status()} ${page.url()}: ${shown}`).toBe(1);
        }
        const points = page.locator('figure[data-chart="progress"] circle[data-done]');
        expect(await points.count()).toBeGreaterThanOrEqual(3);
        const last = points.last();
        expect(Number(await last.getAttribute('data-done'))).toBe(api.done);
        expect(Number(await last.getAttribute('data-failed'))).toBe(api.failed);
        // The points go forward in time and never back in counts.
        const series = await points.evaluateAll((all) =>
          all.map((c) => [Number(c.getAttribute('data-at')), Number(c.getAttribute('data-done'))]),
        );
        for (let i = 1; i < series.length; i++) {
          expect(series[i]![0]).toBeGreaterThan(series[i - 1]![0]!);
          expect(series[i]![1]).toBeGreaterThanOrEqual(series[i - 1]![1]!);
        }
        // The same numbers in words: the SVG's label and the caption.
        const label = (await progress.getAttribute('aria-label')) ?? '';
        expect(label).toContain(String(api.done));
        expect(await page.locator('figure[data-chart="progress"] figcaption').textContent()).toContain(
          String(api.done),
        );
        expect(await page.locator('figure[data-chart="progress"] details table tbody tr').count()).toBeGreaterThan(0);
        // The account's rate against its limit (4/s), and the outcomes bar with the failed plate's code.
        const rates = page.locator('figure[data-chart="rate"] circle[data-rate]');
        expect(await rates.count()).toBeGreaterThanOrEqual(2);
        expect(Number(await rates.last().getAttribute('data-limit'))).toBe(4);
        const bar = page.locator('figure[data-chart="outcomes"] rect[data-count]');
        const parts = await bar.evaluateAll((all) =>
          all.map((r) => [r.getAttribute('data-part'), Number(r.getAttribute('data-count'))] as const),
        );
        expect(parts.reduce((sum, [, n]) => sum + n, 0)).toBe(api.enqueued);
        expect(parts.find(([, n]) => n === api.done)).toBeDefined();
        expect(await page.locator('figure[data-chart="outcomes"] svg').getAttribute('aria-label')).toContain(
          locale === 'pt-BR' ? 'concluídas' : 'done',
        );
        // Readable at a phone's width: no horizontal scroll, the chart as wide as its box.
        const scroll = (await page.evaluate(
          '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
        )) as [number, number];
        expect(scroll[0]).toBeLessThanOrEqual(scroll[1]);
        const box = await progress.boundingBox();
        expect(box?.width).toBeGreaterThan(width === 390 ? 250 : 300);
        await screenshot(page, `charts-${locale}-${width}.png`);

        // The home's accounts section: the account's use of its limit over the last hour.
        const home = await page.goto(`${base}/`);
        expect(home?.headers()['content-security-policy']).toBe(CSP);
        const use = page.locator('figure[data-chart="use"][data-account="default"] svg[role="img"]');
        expect(await use.count()).toBe(1);
        expect(
          await page.locator('figure[data-chart="use"][data-account="default"] circle[data-limit]').count(),
        ).toBeGreaterThanOrEqual(1);
        await screenshot(page, `charts-home-${locale}-${width}.png`);
        await context.close();
      }
    }
  }, 120_000);
});
