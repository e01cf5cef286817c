// Issue 46 (17), the console's leftovers, in real Chromium: the upload form names the plate
// column (the docs said it could; the form had no field); the batch list shows when each batch
// was created, what it cost, and finds batches by id or name on the server (`?q=`); a long name
// stays on one line at 1280 px (it wrapped onto five); every time shown names its zone
// (VQ_TIME_ZONE, issue 46, 12). Screenshots go to out/test/browser/list-*.png.
import { mkdir } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { listenApi } from '../helpers/http.js';

const ADMIN = 'admin-token-0123456789abcdef';
const ZONE = 'America/Sao_Paulo';
/** A file name as operators name them: long, with spaces and accents. */
const LONG_NAME = 'Planilha da frota da Região Sudeste - novembro de 2026 - lote final revisado pela operação.csv';

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let browser: Browser;

async function signedIn(width: number): Promise<Page> {
  const context = await browser.newContext({ locale: 'pt-BR', viewport: { width, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${base}/sign-in`);
  await page.fill('#token', ADMIN);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
  return page;
}

/** Chooses `csv` in the upload form (the fields already filled) and sends it; the estimate page's text. */
async function sendUpload(page: Page, name: string, csv: string): Promise<string> {
  await page.setInputFiles('#file', { name, mimeType: 'text/csv', buffer: Buffer.from(csv) });
  await Promise.all([page.waitForNavigation(), page.click('form[enctype="multipart/form-data"] button[type=submit]')]);
  return (await page.evaluate('document.body.innerText')) as string;
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  h = await harness.start({
    label: 'console-list',
    config: {
      VQ_API_TOKENS: ADMIN,
      VQ_RATE_LIMIT: '400/s',
      VQ_PRICE_PER_QUERY: '0.35',
      VQ_CURRENCY: 'BRL',
      VQ_TIME_ZONE: ZONE,
    },
  });
  ({ app, base } = await listenApi(h));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe('the console list and upload (issue 46, 17)', () => {
  it('the upload form names the plate column; the estimate counts that column’s plates; its deadline names the zone', async () => {
    const page = await signedIn(1280);
    // "placa" is the column vqb would pick by its header; the operator's plates are in "placa nova".
    const old = makePlates(5, 100);
    const fresh = makePlates(5, 200);
    const csv = `placa;placa nova\r\n${old.map((p, i) => `${i < 2 ? p : 'X'};${fresh[i]}`).join('\r\n')}\r\n`;
    await page.goto(`${base}/upload`);
    await page.fill('#column', 'placa nova');
    await page.fill('#deadline', '2h');
    const estimate = await sendUpload(page, 'colunas.csv', csv);
    await screenshot(page, 'list-upload-column.png');
    expect(await page.textContent('[data-estimate="plates"]')).toBe('5');
    expect(await page.textContent('[data-estimate="rejected"]')).toBe('0');
    expect(estimate).toContain(ZONE);
    // Without the field, the header decides: the old column, 2 plates and 3 rejected.
    await page.goto(`${base}/upload`);
    await sendUpload(page, 'colunas-sem-nome.csv', csv);
    expect(await page.textContent('[data-estimate="plates"]')).toBe('2');
    await page.context().close();
  });

  it('at 1280 px: created date with its zone, cost, a long name on one line; a search by name or id on the server', async () => {
    const page = await signedIn(1280);
    await page.goto(`${base}/upload`);
    await sendUpload(page, LONG_NAME, `placa\r\n${makePlates(3, 300).join('\r\n')}\r\n`);
    await Promise.all([page.waitForNavigation(), page.click('form[action$="/confirm"] button')]);
    const longId = decodeURIComponent(page.url().split('/batches/')[1]!);
    await h.waitForBatch(longId);
    await h.enqueue('outro-lote-de-placas', makePlates(2, 400));
    await h.waitForBatch('outro-lote-de-placas');

    await page.goto(`${base}/`);
    await screenshot(page, 'list-1280.png');
    const row = page.locator(`tr[data-batch="${longId}"]`);
    // One line: the name's box is under two lines' height (it was five lines tall).
    const box = (selector: string) =>
      page.evaluate(
        `(() => { const el = document.querySelector(${JSON.stringify(selector)}); ` +
          'return { height: el.getBoundingClientRect().height, font: parseFloat(getComputedStyle(el).fontSize), ' +
          'title: el.title }; })()',
      ) as Promise<{ height: number; font: number; title: string }>;
    const name = await box(`tr[data-batch="${longId}"] [data-name]`);
    expect(name.height).toBeLessThan(name.font * 2);
    expect(name.title).toBe(LONG_NAME);
    const cell = await box(`tr[data-batch="${longId}"] th`);
    expect(cell.height).toBeLessThan(cell.font * 5); // the name's line and the id's, with padding
    expect(await page.evaluate('document.documentElement.scrollWidth <= document.documentElement.clientWidth')).toBe(
      true,
    );
    // The list keeps within the page's column (the created date and the cost made it wider).
    const overflow = await page.evaluate(
      "document.querySelector('table.batches').getBoundingClientRect().right - document.querySelector('main').getBoundingClientRect().right",
    );
    expect(overflow).toBeLessThanOrEqual(0);
    // Created: a date and the zone it is on; the cost at the account's price.
    expect(await row.locator('[data-created]').textContent()).toMatch(
      new RegExp(`^\\d\\d/\\d\\d/\\d{4},? \\d\\d:\\d\\d ${ZONE}$`),
    );
    expect(await row.locator('[data-field="spent"]').textContent()).toMatch(/^R\$\s?1,05$/);
    expect(await page.locator('th[scope=col]', { hasText: 'Criado em' }).count()).toBe(1);
    expect(await page.locator('th[scope=col]', { hasText: 'Custo' }).count()).toBe(1);

    // The search: accents and case aside, by name; then by a piece of the other batch's id.
    await page.fill('#q', 'regiao sudeste');
    await Promise.all([page.waitForURL(/\?q=regiao\+sudeste$/), page.press('#q', 'Enter')]);
    await screenshot(page, 'list-search.png');
    expect(
      await page.locator('tbody tr[data-batch]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-batch'))),
    ).toEqual([longId]);
    expect(await page.textContent('[data-found]')).toContain('1 lote corresponde a “regiao sudeste”.');
    expect(await page.getAttribute('table.batches', 'data-live')).toBe('/events?q=regiao%20sudeste');
    await page.goto(`${base}/?q=OUTRO-LOTE`);
    expect(
      await page.locator('tbody tr[data-batch]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-batch'))),
    ).toEqual(['outro-lote-de-placas']);
    await page.goto(`${base}/?q=nada-assim`);
    expect(await page.textContent('[data-found]')).toContain('Nenhum lote corresponde a “nada-assim”.');
    expect(await page.locator('table.batches').count()).toBe(0);
    await page.context().close();
  });
});
