// The web console in a real browser (Debian's Chromium through playwright-core) against a real
// server: the HTTP API with the console, real Redis, the simulator over HTTP, in-process workers.
// One browser for the file; each step saves a screenshot under out/test/browser/.
import { mkdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import type { FastifyInstance } from 'fastify';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { launchChromium, ROOT, SHOTS, screenshot } from '../helpers/browser.js';
import { type Harness, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const FROTA = 'frota-token-0123456789abcdef';
const SEGUROS = 'seguros-token-0123456789abcd';
const SAMPLE = join(ROOT, 'samples/plates.csv');
/** expect.poll's own 1 s can run out before a loaded machine's Chromium answers at all. */
const LOADED = { timeout: 15_000, interval: 100 };

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let browser: Browser;
/** Every URL any page of the test asked for. */
const requested: string[] = [];
/** The batch the admin uploads (to account seguros). */
let batchId: string;
let sampleRows: Record<string, string>[];

async function newPage(
  options: { locale?: string; javaScriptEnabled?: boolean } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({
    locale: options.locale ?? 'en-US',
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    acceptDownloads: true,
  });
  context.on('request', (request) => requested.push(request.url()));
  return { context, page: await context.newPage() };
}

async function shot(page: Page, name: string): Promise<void> {
  await screenshot(page, `${name}.png`);
}

async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(`${base}/`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
}

async function downloadCsv(page: Page, link: string): Promise<Record<string, string>[]> {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click(link)]);
  const path = await download.path();
  return parse(await readFile(path), {
    bom: true,
    columns: true,
    delimiter: h.config.csvDelimiter,
    skip_empty_lines: true,
  }) as Record<string, string>[];
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  h = await harness.start({
    label: 'console',
    accounts: [
      { id: 'frota', tokens: [FROTA] },
      { id: 'seguros', tokens: [SEGUROS] },
    ],
    config: { VQ_API_TOKENS: ADMIN, VQ_RATE_LIMIT: '400/s', VQ_CONCURRENCY: '32' },
  });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  // playwright gives every launch a fresh, throw-away profile (its own --user-data-dir).
  browser = await launchChromium();
  sampleRows = parse(await readFile(SAMPLE), { bom: true, columns: true, delimiter: ';' }) as Record<string, string>[];
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe('web console in Chromium', () => {
  it('sign in, upload the sample, see the estimate, confirm, watch it reach 100 %, download the CSV; the page switches language', async () => {
    const { context, page } = await newPage({ locale: 'en-US' });
    await page.goto(`${base}/`);
    expect(page.url()).toBe(`${base}/sign-in`);
    expect(await page.getAttribute('html', 'lang')).toBe('en');
    await shot(page, '01-sign-in');

    // A wrong token: the form again, with a message, and no session.
    await page.fill('#token', 'not-a-token-0123456789abcdef');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('[role=alert]'), LOADED).toContain('not valid');

    await signIn(page, ADMIN);
    const cookie = (await context.cookies()).find((c) => c.name === 'vqb_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: false });
    await shot(page, '02-batches-empty');

    await page.click('a[href="/upload"] >> nth=0');
    await page.selectOption('#account', 'seguros');
    // Drag and drop: a file dropped on the zone becomes the form's file.
    await page.dispatchEvent('[data-drop]', 'drop', {
      // A string: the test is compiled without the DOM's types.
      dataTransfer: await page.evaluateHandle(
        "(() => { const t = new DataTransfer(); t.items.add(new File(['placa\\nABC1D23\\n'], 'dropped.csv', { type: 'text/csv' })); return t; })()",
      ),
    });
    expect(await page.textContent('[data-file-name]')).toBe('dropped.csv');
    expect(await page.$eval('#file', (input) => (input as unknown as { files: { length: number } }).files.length)).toBe(
      1,
    );
    await page.setInputFiles('#file', SAMPLE);
    await Promise.all([page.waitForURL(/\/upload\/[0-9a-f]{32}$/), page.click('form[enctype] button[type=submit]')]);
    const estimate = async (field: string) =>
      Number((await page.textContent(`[data-estimate=${field}]`))?.replace(/\D/g, ''));
    expect(await estimate('rows')).toBe(sampleRows.length);
    expect(await estimate('creates')).toBeGreaterThan(0);
    expect(await estimate('creates')).toBe(
      (await estimate('plates')) - (await estimate('reusable')) - (await estimate('alreadyFinished')),
    );
    expect(await estimate('expectedPolls')).toBeGreaterThan(0);
    expect(await page.isVisible('[data-estimate=secondsAtRate]')).toBe(true);
    // Nothing is enqueued before the operator confirms.
    expect((await h.services.batchViews.list(0, 10)).total).toBe(0);
    await shot(page, '03-estimate');

    await Promise.all([page.waitForURL(/\/batches\/.+/), page.click('text=Confirm and start the batch')]);
    batchId = decodeURIComponent(page.url().split('/batches/')[1]!);
    expect((await h.services.batchViews.get(batchId)).account).toBe('seguros');
    await shot(page, '04-batch-running');
    // Live updates (server-sent events) bring the page to 100 % without a reload.
    await expect.poll(() => page.textContent('[data-field=percent]'), { timeout: 60_000, interval: 200 }).toBe('100 %');
    expect(await page.textContent('[data-field=state]')).toBe('finished');
    await shot(page, '05-batch-finished');

    const rows = await downloadCsv(page, 'a[href$="format=csv"]');
    expect(rows).toHaveLength(sampleRows.length);
    expect(rows.map((r) => r.input)).toEqual(sampleRows.map((r) => r.placa));
    expect(rows.map((r) => r.codigo_interno)).toEqual(sampleRows.map((r) => r.codigo_interno));
    const info = await h.services.batchViews.get(batchId);
    expect(rows.filter((r) => r.status === 'done')).toHaveLength(info.counts.done);

    // The language switch: Portuguese, and back.
    await Promise.all([page.waitForURL(/\/batches\//), page.click('[data-lang-switch]')]);
    expect(await page.getAttribute('html', 'lang')).toBe('pt-BR');
    expect(await page.textContent('h2')).toBe('Contagens');
    await shot(page, '06-batch-pt-BR');
    await page.click('[data-lang-switch]');
    expect(await page.getAttribute('html', 'lang')).toBe('en');
    await context.close();
  });

  it("a scoped token does not see another account's batch", async () => {
    const { context, page } = await newPage({ locale: 'pt-BR' });
    // With the keyboard alone: the token field has the focus; Enter sends the form. Chromium
    // applies autofocus after the load event, at its next rendering step: keys typed before that
    // went nowhere on a loaded CI machine, so the test waits for the focus it asserts.
    await page.goto(`${base}/`);
    await page.waitForFunction("document.activeElement?.id === 'token'");
    await page.keyboard.type(FROTA);
    await Promise.all([page.waitForURL(`${base}/`), page.keyboard.press('Enter')]);
    expect(await page.getAttribute('html', 'lang')).toBe('pt-BR');
    expect(await page.textContent('main')).not.toContain(batchId);
    expect(await page.$('a[href="/admin/queues"]')).toBeNull();
    await shot(page, '07-scoped-list');
    for (const path of [
      `/batches/${encodeURIComponent(batchId)}`,
      `/batches/${encodeURIComponent(batchId)}/results?format=csv`,
      '/admin/queues',
    ]) {
      const res = await page.request.get(`${base}${path}`);
      expect(res.status(), path).toBe(404);
      expect(await res.text()).not.toContain('KEM');
    }
    // Its own account only: pausing another account's line is unknown.
    const csrf = await page.getAttribute('input[name=csrf]', 'value');
    expect((await page.request.post(`${base}/accounts/seguros/pause`, { form: { csrf: csrf! } })).status()).toBe(404);
    await context.close();
  });

  it('works without JavaScript: sign in, the list, a download', async () => {
    const { context, page } = await newPage({ locale: 'en-US', javaScriptEnabled: false });
    await signIn(page, SEGUROS);
    const row = page.locator(`tr[data-batch="${batchId}"]`);
    expect(await row.locator('[data-field=percent]').textContent()).toBe('100 %');
    await shot(page, '08-no-js-list');
    await page.click(`tr[data-batch="${batchId}"] a`);
    const rows = await downloadCsv(page, 'a[href$="format=csv"]');
    expect(rows).toHaveLength(sampleRows.length);
    // Pause and resume the account's line, with plain forms.
    await page.click('text=Pause account seguros');
    expect(await h.services.accounts.line('seguros').state()).toMatchObject({ paused: true });
    expect(await page.textContent('[role=status]')).toContain('paused');
    await shot(page, '09-no-js-paused');
    await page.click('text=Resume account seguros');
    expect(await h.services.accounts.line('seguros').state()).toMatchObject({ paused: false });
    // A form posted without the session's CSRF token is refused.
    expect((await page.request.post(`${base}/accounts/seguros/pause`, { form: { csrf: 'forged' } })).status()).toBe(
      403,
    );
    // Sign out ends the session: the cookie no longer opens anything.
    await page.click('text=Sign out');
    expect(page.url()).toBe(`${base}/sign-in`);
    expect((await page.request.get(`${base}/`, { maxRedirects: 0 })).status()).toBe(303);
    await context.close();
  });

  it('the dashboard opens with the console session, links nothing outside, and refuses retry, clean and delete', async () => {
    // A failed plate in a batch of account frota.
    h.sim.update({ failPlates: ['FAL1A23'] });
    await h.enqueue('dash-batch', ['FAL1A23', 'BOM1A23'], { account: 'frota' });
    await h.waitForBatch('dash-batch');
    const before = await h.services.batchViews.get('dash-batch');
    expect(before.counts).toMatchObject({ done: 1, failed: 1 });
    const queue = h.services.accounts.queue('frota');
    const [failedJob] = await queue.getFailed();
    expect(failedJob).toBeDefined();

    const { context, page } = await newPage({ locale: 'en-US' });
    await signIn(page, ADMIN);
    await page.click('a[href="/admin/queues"]');
    await page.waitForSelector(`text=${queue.name}`, { timeout: 20_000 });
    await shot(page, '10-dashboard');
    // Issue 36 (13): the queue's workers are this process, which works it (its page said "No workers").
    await page.click(`text=${queue.name}`);
    await page.waitForSelector('text=LATEST', { timeout: 20_000 });
    await shot(page, '10b-dashboard-queue');
    expect(await page.getByText('No workers').count()).toBe(0);
    expect(await page.getByText("Workers: vqb's worker processes").isVisible()).toBe(true);
    // The console is one click away, in sight (Bull Board's own link hides in a menu).
    expect(await page.locator('a[data-vqb-console]').isVisible()).toBe(true);
    const html = await (await page.request.get(`${base}/admin/queues`)).text();
    expect(html).not.toMatch(/googleapis|https?:\/\/(?!www\.w3\.org)/);
    // A way back to the console (issue 22, 16).
    // Bull Board keeps its misc links in the menu behind the last header button.
    await page.click('ul[class*="actions"] > li:last-child button');
    await page.click('text=Console');
    await page.waitForURL(`${base}/`);
    await page.goto(`${base}/admin/queues`);
    await page.waitForSelector(`text=${queue.name}`, { timeout: 20_000 });

    const simBefore = h.sim.stats().requests;
    const name = encodeURIComponent(queue.name);
    const job = encodeURIComponent(failedJob!.id!);
    const actions = [
      `/api/queues/${name}/${job}/retry`,
      `/api/queues/${name}/retry/failed`,
      `/api/queues/${name}/${job}/clean`,
      `/api/queues/${name}/clean/failed`,
    ];
    for (const action of actions) {
      // With the session cookie (what the page's buttons would send) and with an admin header token.
      const viaSession = await page.request.put(`${base}/admin/queues${action}`);
      expect(viaSession.status(), action).toBe(403);
      const viaToken = await fetch(`${base}/admin/queues${action}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      expect(viaToken.status, action).toBeGreaterThanOrEqual(400);
      expect(viaToken.status, action).toBeLessThan(500);
    }
    expect(await queue.getJobState(failedJob!.id!)).toBe('failed');
    expect((await h.services.batchViews.get('dash-batch')).counts).toMatchObject({ done: 1, failed: 1 });
    expect(h.sim.stats().requests).toBe(simBefore);

    // vqb's own retry, from the console: the plate is asked upstream again and the counts follow.
    await page.goto(`${base}/batches/dash-batch`);
    // One plate, one noun (issue 22: "as 1 placas com falha").
    await page.click('text=Ask the upstream again for the plate (costs 1 query)');
    expect(await page.textContent('[role=status]')).toContain('1 failed plate queued again');
    await h.waitForBatch('dash-batch');
    expect(h.sim.stats().requests).toBeGreaterThan(simBefore);
    const after = await h.services.batchViews.get('dash-batch');
    expect(after.counts.done + after.counts.failed).toBe(after.counts.enqueued);
    await context.close();
  });

  it('issue 36 (11): failures arriving live show the failed list, the count and a retry that says its cost, with no reload; "ask again" asks the upstream', async () => {
    const plates = ['NAO1A01', 'NAO1A02', 'NAO1A03'];
    h.sim.update({ failPlates: plates });
    // The page is open before anything fails: the account's line is held until it is.
    const line = h.services.accounts.line('frota');
    await line.pauseByOperator('held by the test');
    await h.enqueue('live-failures', [...plates, 'BOM1A99'], { account: 'frota' });
    const { context, page } = await newPage({ locale: 'en-US' });
    await signIn(page, ADMIN);
    await page.goto(`${base}/batches/live-failures`);
    expect(await page.textContent('[data-field=failed]')).toBe('0');
    expect(await page.getByText('No failed plates.').isVisible()).toBe(true);
    await line.resume();
    await expect.poll(() => page.textContent('[data-field=failed]'), { timeout: 30_000, interval: 200 }).toBe('3');
    // The same live update brings the list and the button (it showed "failed 3" beside "No failed plates.").
    expect(await page.getByText('No failed plates.').count()).toBe(0);
    expect(await page.locator('[data-retry=ask]').textContent()).toBe(
      'Ask the upstream again for the 3 plates (costs 3 queries)',
    );
    expect(await page.textContent('tr[data-code=VEHICLE_NOT_FOUND]')).toContain('NAO1A01, NAO1A02, NAO1A03');
    // Polling a query the upstream answered FAILED reads the same answer: not offered.
    expect(await page.locator('[data-retry=poll]').count()).toBe(0);
    await shot(page, '13-failures-live');

    h.sim.update({ failPlates: [] });
    const before = h.sim.stats().creates;
    await Promise.all([page.waitForURL(/retried=3/), page.click('[data-retry=ask]')]);
    expect(await page.textContent('[role=status]')).toContain('3 failed plates queued again (3 created anew');
    await h.waitForBatch('live-failures');
    expect(h.sim.stats().creates).toBe(before + 3);
    // The page follows without a reload: nothing failed any more.
    await expect.poll(() => page.getByText('No failed plates.').count(), { timeout: 30_000, interval: 200 }).toBe(1);
    expect(await page.textContent('[data-field=failed]')).toBe('0');
    await shot(page, '14-failures-asked-again');
    await context.close();
  });

  it('issue 35: a page of another origin cannot sign the browser in, and a language link cannot lead it off-site', async () => {
    // The attacker's page (another port: another origin, the same site, so even a SameSite=Strict
    // cookie would go along) posts the sign-in form with its own token as soon as it loads.
    const evil = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(`<!doctype html><form method="post" action="${base}/sign-in">
<input name="token" value="${ADMIN}"><input name="csrf" value="guessed"></form>
<script>document.forms[0].submit()</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    const evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
    // Not newPage(): these pages are meant to ask for another origin.
    const context = await browser.newContext({ locale: 'en-US' });
    try {
      const page = await context.newPage();
      const signInAnswer = page.waitForResponse(
        (r) => r.url() === `${base}/sign-in` && r.request().method() === 'POST',
      );
      await page.goto(evilUrl);
      expect((await signInAnswer).status()).toBe(403);
      expect((await context.cookies(base)).map((c) => c.name)).not.toContain('vqb_session');
      await expect.poll(() => page.textContent('[role=alert]'), LOADED).toContain('did not come from this console');
      await shot(page, '12-cross-site-sign-in');
      // The language switch with a tab hidden in its back target: the browser stays on the console.
      await page.goto(`${base}/lang?to=en&back=%2F%09%2Fevil.example`);
      expect(new URL(page.url()).origin).toBe(base);
    } finally {
      await context.close();
      evil.close();
    }
  });

  it('no request left localhost', () => {
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((url) => !url.startsWith(`${base}/`))).toEqual([]);
  });
});
