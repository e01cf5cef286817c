// Issue 22, the console as an operator in Brazil meets it, in real Chromium: every page at a
// phone's width (390 px) and a laptop's (1280 px) has no horizontal scroll, "100 %" stays on one
// line, no word is broken mid-word (issue 36), and the pt-BR pages carry no English phrase (checked
// against a word list, not by eye).
// Screenshots of each page at both widths go to out/test/browser/pages-<page>-<width>.png.
import { mkdir, readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_PAUSE_REASON } from '../../src/presenters/waits.js';
import { createHttpApi } from '../../src/server.js';
import { launchChromium, ROOT, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const WIDTHS = [390, 1280] as const;

/**
 * English words that have no place on a pt-BR page (whole words, any case). Left out on purpose:
 * words Portuguese shares or borrows ("no", "a", "for", "token", "e", "online").
 */
const ENGLISH = (
  'the and of with to from by in on at is are was not yes all none paused pause resume running failed done finished queued ' +
  'waiting wait waits batch batches plate plates retry found error errors account accounts upload uploads download downloads ' +
  'created creates polls rate limit learned configured announced sign back rows rejected duplicates estimate confirm cancel ' +
  'file files time left progress state why reading archived dashboard queue until since unreachable connection refused ' +
  'because please results rejects failure key expired valid nothing already open details something went wrong refresh ' +
  'live counts reused charged sent delivered pending attempts event operator switch skip content'
).split(' ');
/** Names that are the same in any language. */
const ALLOWED = new Set([
  'english',
  'vqb',
  'csv',
  'xlsx',
  'jsonl',
  'api',
  'redis',
  'bullmq',
  'http',
  'https',
  'url',
  'id',
  'vq_http_body_limit',
  'vq_http_max_plates',
]);

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let browser: Browser;
/** Every response any page got that was a 404 for something other than a page (an icon, a script). */
const missing: string[] = [];

async function signedIn(locale: string, width: number): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ locale, viewport: { width, height: 800 } });
  context.on('response', (response) => {
    if (response.status() === 404 && response.request().resourceType() !== 'document') missing.push(response.url());
  });
  const page = await context.newPage();
  await page.goto(`${base}/sign-in`);
  await page.fill('#token', ADMIN);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
  return { context, page };
}

/** Uploads `csv` from the form; returns the estimate page's URL. */
async function upload(page: Page, name: string, csv: string): Promise<string> {
  await page.goto(`${base}/upload`);
  await page.setInputFiles('#file', { name, mimeType: 'text/csv', buffer: Buffer.from(csv) });
  await Promise.all([page.waitForNavigation(), page.click('form[enctype="multipart/form-data"] button[type=submit]')]);
  return page.url();
}

/** English words in the page's visible text (closed <details> are not visible). */
async function englishOn(page: Page): Promise<string[]> {
  const text = (await page.evaluate('document.body.innerText')) as string;
  const words = text.toLowerCase().match(/[a-zà-ú_]+/g) ?? [];
  return [...new Set(words.filter((w) => ENGLISH.includes(w) && !ALLOWED.has(w)))];
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  h = await harness.start({
    label: 'pages',
    sim: { failPlates: ['FAL1A00'] },
    config: { VQ_API_TOKENS: ADMIN, VQ_RATE_LIMIT: '400/s' },
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

describe('console pages on a phone and a laptop, in pt-BR (issue 22)', () => {
  it('every page: no horizontal scroll at 390 and 1280 px, "100 %" on one line, no English on the pt-BR pages', async () => {
    // A finished batch with rejects and a failed plate, then the account paused in the console
    // with a second batch waiting behind the pause.
    const sample = await readFile(join(ROOT, 'samples/plates.csv'), 'utf8');
    const rows = sample.trimEnd().split(/\r?\n/).slice(0, 40).join('\r\n');
    const setup = await signedIn('pt-BR', 1280);
    const estimateUrl = await upload(
      setup.page,
      'frota-sul-placas-da-operacao-de-novembro.csv',
      `${rows}\r\nFAL1A00;Falha;x\r\n`,
    );
    await Promise.all([setup.page.waitForNavigation(), setup.page.click('form[action$="/confirm"] button')]);
    const batchUrl = setup.page.url();
    const batchId = decodeURIComponent(batchUrl.split('/batches/')[1]!);
    await h.waitForBatch(batchId);
    await setup.context.close();
    await h.line.pauseByOperator(CONSOLE_PAUSE_REASON);
    await h.enqueue('lote-em-espera', makePlates(3));

    const pages: { name: string; open: (page: Page) => Promise<void> }[] = [
      { name: 'list', open: async (page) => void (await page.goto(`${base}/`)) },
      { name: 'batch', open: async (page) => void (await page.goto(batchUrl)) },
      { name: 'waiting-batch', open: async (page) => void (await page.goto(`${base}/batches/lote-em-espera`)) },
      { name: 'upload', open: async (page) => void (await page.goto(`${base}/upload`)) },
      { name: 'upload-error', open: async (page) => void (await upload(page, 'vazio.csv', '\r\n')) },
      {
        name: 'estimate',
        open: async (page) =>
          void (await upload(page, 'novas.csv', `placa\r\n${makePlates(4, 500).join('\r\n')}\r\nruim\r\n`)),
      },
      {
        name: 'estimate-done',
        open: async (page) =>
          void (await upload(page, 'frota-sul-placas-da-operacao-de-novembro.csv', `${rows}\r\nFAL1A00;Falha;x\r\n`)),
      },
      {
        name: 'estimate-nothing',
        open: async (page) => void (await upload(page, 'ruins.csv', 'placa\r\nruim\r\n12\r\n')),
      },
      { name: 'not-found', open: async (page) => void (await page.goto(`${base}/batches/nao-existe`)) },
    ];
    expect(estimateUrl).toMatch(/\/upload\/[0-9a-f]{32}$/);

    const findings: string[] = [];
    for (const locale of ['pt-BR', 'en-US']) {
      for (const width of WIDTHS) {
        const { context, page } = await signedIn(locale, width);
        for (const p of [{ name: 'sign-in', open: async () => undefined }, ...pages]) {
          if (p.name === 'sign-in') {
            const anonymous = await browser.newContext({ locale, viewport: { width, height: 800 } });
            const signIn = await anonymous.newPage();
            await signIn.goto(`${base}/sign-in`);
            await check(signIn, p.name, locale, width, findings);
            await anonymous.close();
            continue;
          }
          await p.open(page);
          await check(page, p.name, locale, width, findings);
        }
        await context.close();
      }
    }
    expect(findings).toEqual([]);
    expect(missing).toEqual([]);
  }, 180_000);

  it('an estimate of a finished file offers the batch, not "confirm"; a file without a valid plate offers nothing to confirm', async () => {
    const { context, page } = await signedIn('pt-BR', 1280);
    await upload(page, 'tudo-ruim.csv', 'placa\r\nruim\r\n');
    expect(await page.locator('[data-estimate-nothing]').textContent()).toContain('nada a confirmar');
    expect(await page.locator('form[action$="/confirm"]').count()).toBe(0);
    const plates = makePlates(2, 900);
    await upload(page, 'duas.csv', `placa\r\n${plates.join('\r\n')}\r\n`);
    await h.line.resume();
    await Promise.all([page.waitForNavigation(), page.click('form[action$="/confirm"] button')]);
    const id = decodeURIComponent(page.url().split('/batches/')[1]!);
    await h.waitForBatch(id);
    await upload(page, 'duas.csv', `placa\r\n${plates.join('\r\n')}\r\n`);
    expect(await page.locator('[data-estimate-done]').textContent()).toContain('já foram concluídas');
    expect(await page.locator('form[action$="/confirm"]').count()).toBe(0);
    expect(await page.getAttribute('a.button:not(.secondary)', 'href')).toBe(`/batches/${encodeURIComponent(id)}`);
    await context.close();
  });

  it('the rejected rows download in the page’s language', async () => {
    const { context, page } = await signedIn('pt-BR', 1280);
    await upload(page, 'rejeitos.csv', 'placa\r\nABC1D23\r\nXY\r\n');
    await Promise.all([page.waitForNavigation(), page.click('form[action$="/confirm"] button')]);
    const id = decodeURIComponent(page.url().split('/batches/')[1]!);
    const pt = await (await page.request.get(`${base}/batches/${encodeURIComponent(id)}/rejects`)).text();
    expect(pt).toContain('placas têm 7 caracteres; esta tem 2');
    const en = await (
      await page.request.get(`${base}/batches/${encodeURIComponent(id)}/rejects`, {
        headers: { 'accept-language': 'en' },
      })
    ).text();
    expect(en).toContain('BAD_LENGTH');
    await context.close();
  });
});

/**
 * Issue 36 (12): the words of the page that a line break cuts in two ("Cont/a", "concluí/do"), each
 * a run of letters whose pieces sit on different lines. Identifiers may wrap anywhere and are left
 * out: batch names and ids (the row's header, the muted id lines), codes, the callback URL; so is
 * the head of a phone's stacked table, which only a screen reader reads.
 */
const BROKEN_WORDS = `(() => {
  const broken = [];
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest('code, th[scope=row], span.muted, p.muted, [data-callback]')) continue;
    // A phone's stacked table keeps its head for screen readers only, in a 1 px box.
    if ((parent.closest('thead')?.getBoundingClientRect().width ?? 2) < 2) continue;
    for (const word of node.data.matchAll(/\\p{L}+/gu)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(word[0]);
    }
  }
  return broken;
})()`;

async function check(page: Page, name: string, locale: string, width: number, findings: string[]): Promise<void> {
  await screenshot(page, `pages-${locale}-${name}-${width}.png`);
  const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
  if (scroll > width) findings.push(`${locale} ${name} at ${width} px is ${scroll} px wide`);
  const splitPercents = (await page.evaluate(
    `[...document.querySelectorAll('[data-field=percent]')].filter((e) => e.getClientRects().length > 1 || e.getBoundingClientRect().height > parseFloat(getComputedStyle(e).lineHeight) * 1.5).length`,
  )) as number;
  if (splitPercents > 0) findings.push(`${locale} ${name} at ${width} px: a percentage wraps`);
  const broken = (await page.evaluate(BROKEN_WORDS)) as string[];
  if (broken.length > 0) findings.push(`${locale} ${name} at ${width} px: words broken mid-word: ${broken.join(', ')}`);
  if (locale === 'pt-BR') {
    const english = await englishOn(page);
    if (english.length > 0) findings.push(`${locale} ${name}: English words ${english.join(', ')}`);
  }
}
