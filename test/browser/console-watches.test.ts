// The console's watch lists in real Chromium, at a phone's width (390 px) and a laptop's (1280 px),
// in pt-BR and en: no horizontal scroll, no word broken mid-word, no English on the pt-BR page;
// pause works from the page; the last round's changes download. A token of another account sees
// none of it. Screenshots: out/test/browser/watches-<locale>-<width>.png.
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { Watches } from '../../src/watch/watches.js';
import { launchChromium, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';

const A = 'frota-token-0123456789abcdef';
const B = 'seguros-token-0123456789abcd';
const ENGLISH = (
  'the and of with to from by in on at is are was not all none paused pause resume running round rounds changed ' +
  'changes plates watch list lists schedule every budget month only next waiting held window fields recorded first ' +
  'account state last'
).split(' ');
const ALLOWED = new Set(['vqb', 'csv', 'utc', 'cron', 'api', 'post']);

const harness = useHarness('all');
let h: Harness;
let base: string;
let browser: Browser;
let close: () => Promise<void>;

const BROKEN_WORDS = `(() => {
  const broken = [];
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest('code, th[scope=row], span.muted, p.muted')) continue;
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

async function signedIn(locale: string, width: number, token = A): Promise<Page> {
  const context = await browser.newContext({ locale, viewport: { width, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${base}/sign-in`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
  return page;
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  h = await harness.start({
    label: 'console-watches',
    accounts: [
      { id: 'frota', tokens: [A] },
      { id: 'seguros', tokens: [B] },
    ],
    sim: { completionMs: [20, 60] },
    config: { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms', VQ_RATE_LIMIT: '200/s' },
  });
  for (const id of ['frota', 'seguros'])
    await h.services.answers.learn(id, { id: '/body/queryId', status: '/body/status' }, Date.now());
  h.startWorker();
  const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  browser = await launchChromium();
  const watches = new Watches(h.services, h.logs.logger);
  close = async () => {
    await watches.close();
    await app.close();
  };
  // Two rounds compared (the second with changes), and a second list held at its budget.
  const plates = makePlates(10);
  const ref = { account: 'frota', name: 'frota-sul-operacao-novembro' };
  await watches.add({ name: ref.name, account: 'frota', every: '1h', window: '00:00-23:59' }, plates, ['frota']);
  const compared = (n: number) => async () => (await watches.store.round(ref, n))?.closedAt !== undefined;
  await waitFor(compared(1), 30_000, 'round 1');
  await fetch(`${h.sim.url}/__admin/changes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ plates: plates.slice(0, 2) }),
  });
  await watches.rounds.fire(ref, 'console-2');
  await waitFor(compared(2), 30_000, 'round 2');
  await watches.add({ name: 'seguradora', account: 'frota', cron: '0 3 * * 1', perMonth: 0 }, plates, ['frota']);
  await watches.rounds.fire({ account: 'frota', name: 'seguradora' }, 'console-held');
});

afterAll(async () => {
  await browser?.close();
  await close?.();
});

describe('the console page of watch lists', () => {
  it('at 390 and 1280 px, in pt-BR and en: fits, no word broken, no English in pt-BR', async () => {
    const findings: string[] = [];
    for (const locale of ['pt-BR', 'en-US'])
      for (const width of [390, 1280]) {
        const page = await signedIn(locale, width);
        await page.goto(`${base}/watches`);
        await screenshot(page, `watches-${locale}-${width}.png`);
        expect(await page.locator('tr[data-watch]').count()).toBe(2);
        const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
        if (scroll > width) findings.push(`${locale} at ${width} px is ${scroll} px wide`);
        const broken = (await page.evaluate(BROKEN_WORDS)) as string[];
        if (broken.length > 0) findings.push(`${locale} ${width}: broken words ${broken.join(', ')}`);
        const text = (await page.evaluate('document.body.innerText')) as string;
        if (locale === 'pt-BR') {
          const words = text.toLowerCase().match(/[a-zà-ú_]+/g) ?? [];
          const english = [...new Set(words.filter((w) => ENGLISH.includes(w) && !ALLOWED.has(w)))];
          if (english.length > 0) findings.push(`pt-BR ${width}: English words ${english.join(', ')}`);
          expect(text).toContain('rodada 2: 2 placas mudaram');
          expect(text).toContain('parada no orçamento do mês');
        } else {
          expect(text).toContain('round 2: 2 plates changed');
          expect(text).toContain('held at its month budget');
        }
        await page.context().close();
      }
    expect(findings).toEqual([]);
  }, 85_000);

  it('pause from the page; the changes download; another account sees no watch', async () => {
    const page = await signedIn('pt-BR', 1280);
    await page.goto(`${base}/watches`);
    const csv = await (await page.request.get(`${base}/watches/frota/frota-sul-operacao-novembro/changes/2`)).text();
    expect(csv.trim().split('\r\n')).toHaveLength(3);
    await Promise.all([
      page.waitForNavigation(),
      page.click('tr[data-watch="frota-sul-operacao-novembro"] button[type=submit]'),
    ]);
    expect(await page.getAttribute('tr[data-watch="frota-sul-operacao-novembro"]', 'data-state')).toBe('paused');
    await page.context().close();

    const other = await signedIn('pt-BR', 1280, B);
    await other.goto(`${base}/watches`);
    expect(await other.locator('tr[data-watch]').count()).toBe(0);
    const denied = await other.request.get(`${base}/watches/frota/frota-sul-operacao-novembro/changes/2`);
    expect(denied.status()).toBe(404);
    await other.context().close();
  }, 60_000);
});
