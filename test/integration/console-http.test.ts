// The web console over plain HTTP (no browser): its cookie, its headers, what it refuses (a form
// without the session's CSRF token, an upload it cannot read, someone else's staged upload) and
// that nothing is enqueued before the operator confirms; an archived batch answered from its
// archive; a callback URL on the upload form and the deliveries on the batch page; an .xlsx upload
// run end to end; why an account's line waits, the Redis reasons too; the queue dashboard's workers.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { RedisWaitReason } from '../../src/accounts/wait.js';
import type { Config } from '../../src/config.js';
import { ingestList } from '../../src/producers/enqueue.js';
import { XLSX_MEDIA_TYPE } from '../../src/producers/xlsx.js';
import { Retention } from '../../src/retention.js';
import { createHttpApi, type HttpApiDeps } from '../../src/server.js';
import { archiveFor } from '../../src/sinks/export.js';
import { testConfig } from '../helpers/config.js';
import { type ConsoleSession, signIn as consoleSignIn } from '../helpers/console.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { sheetValues } from '../helpers/xlsx.js';

const ADMIN = 'admin-token-0123456789abcdef';
const DAY = 86_400_000;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
/** Fast lines: a batch of a few plates finishes in about a second. */
const FAST = { VQ_RATE_LIMIT: '100/s', VQ_POLL_INITIAL: '200ms', VQ_POLL_INTERVAL: '100ms' };
const harness = useHarness();
let app: FastifyInstance | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await app?.close();
  app = undefined;
});
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
});

async function serve(
  h: Harness,
  config: Config = h.config,
  extra: Pick<HttpApiDeps, 'health' | 'consoleLimits'> = {},
): Promise<string> {
  app = await createHttpApi({ services: h.services, config, logger: h.logs.logger, dashboard: false, ...extra });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** Signs in as the administrator (the sign-in page first, as a browser does). */
function signIn(base: string, headers: Record<string, string> = {}): Promise<ConsoleSession> {
  return consoleSignIn(base, ADMIN, headers);
}

/** The estimate page's Confirm button. */
function confirmUpload(base: string, stage: string, session: { cookie: string; csrf: string }): Promise<Response> {
  return fetch(`${base}${stage}/confirm`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: session.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: `csrf=${session.csrf}`,
  });
}

/** The upload form as a browser sends it: the CSRF token first (a field, never in the URL), then the file. */
function form(file: string, csrf?: string, name = 'plates.csv'): FormData {
  const body = new FormData();
  if (csrf !== undefined) body.append('csrf', csrf);
  body.append('file', new Blob([file], { type: 'text/csv' }), name);
  return body;
}

describe('web console over HTTP', () => {
  it('session cookie: HttpOnly, SameSite=Strict, Path=/; Secure only behind a trusted proxy that says https; strict CSP on pages', async () => {
    const h = await harness.start({ label: 'console-http', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const plain = await signIn(base, { 'x-forwarded-proto': 'https' });
    expect(plain.setCookie).toMatch(/HttpOnly/i);
    expect(plain.setCookie).toMatch(/SameSite=Strict/i);
    expect(plain.setCookie).toMatch(/Path=\//);
    // An untrusted X-Forwarded-Proto is ignored.
    expect(plain.setCookie).not.toMatch(/Secure/i);
    const page = await fetch(`${base}/`, { headers: { cookie: plain.cookie } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).not.toMatch(/<script>|style="/);
    await app!.close();

    const trusted = await serve(h, { ...h.config, http: { ...h.config.http, trustProxy: ['127.0.0.1'] } });
    expect((await signIn(trusted, { 'x-forwarded-proto': 'https' })).setCookie).toMatch(/; Secure/i);
  });

  it('an upload: refused without the CSRF token (unread), a clear error for an unreadable file, the estimate, nothing enqueued before confirm, confirmed once', async () => {
    const h = await harness.start({ label: 'console-http', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const { cookie, csrf } = await signIn(base);
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{20,}$/);

    const forged = await fetch(`${base}/upload`, {
      method: 'POST',
      headers: { cookie },
      body: form('placa\nABC1D23\n', 'nope'),
    });
    expect(forged.status).toBe(403);
    const noSession = await fetch(`${base}/upload`, {
      method: 'POST',
      redirect: 'manual',
      body: form('placa\nABC1D23\n', csrf),
    });
    expect(noSession.status).toBe(303);
    expect(noSession.headers.get('location')).toMatch(/^\/sign-in/);

    const broken = await fetch(`${base}/upload`, {
      method: 'POST',
      headers: { cookie, 'accept-language': 'en' },
      body: form('"placa\nABC1D23\n', csrf),
    });
    expect(broken.status).toBe(400);
    const brokenPage = await broken.text();
    expect(brokenPage).toContain('role="alert"');
    expect(brokenPage).toContain('type="file"');

    const staged = await fetch(`${base}/upload`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie },
      body: form('placa;nome\nABC1D23;<b>Ana</b>\nXYZ9876;Bia\nbad;x\n', csrf),
    });
    expect(staged.status).toBe(303);
    const stage = staged.headers.get('location')!;
    expect(stage).toMatch(/^\/upload\/[0-9a-f]{32}$/);
    const estimate = await (await fetch(`${base}${stage}`, { headers: { cookie } })).text();
    expect(estimate).toMatch(/data-estimate="creates">2</);
    expect(estimate).toMatch(/data-estimate="rejected">1</);
    // The CSRF token travels in the form, never in a URL: no request log line holds it (issue 22, 17).
    expect(h.logs.text()).toContain('/upload');
    expect(h.logs.text()).not.toContain(csrf);
    expect(await (await fetch(`${base}/upload`, { headers: { cookie } })).text()).toMatch(
      /<form method="post" action="\/upload" enctype="multipart\/form-data">\s*<input type="hidden" name="csrf"/,
    );
    expect((await h.services.batchViews.list(0, 10)).total).toBe(0);

    // Another session cannot see or confirm it.
    const other = await signIn(base);
    const confirmOther = await fetch(`${base}${stage}/confirm`, {
      method: 'POST',
      headers: { cookie: other.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${other.csrf}`,
    });
    expect(confirmOther.status).toBe(404);
    // Without the CSRF token: refused.
    const noCsrf = await fetch(`${base}${stage}/confirm`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'csrf=',
    });
    expect(noCsrf.status).toBe(403);
    expect((await h.services.batchViews.list(0, 10)).total).toBe(0);

    const confirm = () => confirmUpload(base, stage, { cookie, csrf });
    const first = await confirm();
    expect(first.status).toBe(303);
    const batchPath = first.headers.get('location')!;
    expect((await confirm()).status).toBe(404);
    const { batches } = await h.services.batchViews.list(0, 10);
    expect(batches).toHaveLength(1);
    expect(batches[0]!.counts).toMatchObject({ total: 3, enqueued: 2, rejected: 1 });

    // The extra column's markup is shown as text.
    const batchPage = await (await fetch(`${base}${batchPath}`, { headers: { cookie } })).text();
    expect(batchPage).toContain('data-field="percent"');
    const jsonl = await (await fetch(`${base}${batchPath}/results?format=jsonl`, { headers: { cookie } })).text();
    expect(jsonl.trim().split('\n')).toHaveLength(3);
    const rejects = await (await fetch(`${base}${batchPath}/rejects`, { headers: { cookie } })).text();
    expect(rejects).toContain('bad');

    // Live updates need the session; with it, the first event names the batch.
    expect((await fetch(`${base}/events`)).status).toBe(401);
    const events = await fetch(`${base}/events`, { headers: { cookie } });
    expect(events.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = events.body!.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toMatch(/^event: batches\ndata: \[\{"id":"plates-/);
    await reader.cancel();

    // Sign out deletes the session.
    const out = await fetch(`${base}/sign-out`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${csrf}`,
    });
    expect(out.status).toBe(303);
    expect((await fetch(`${base}/`, { redirect: 'manual', headers: { cookie } })).status).toBe(303);
  });

  it('a live page of finished batches waits for new work as a message, not a look every second', async () => {
    const h = await harness.start({ label: 'console-idle', workers: 1, config: { VQ_API_TOKENS: ADMIN, ...FAST } });
    await h.enqueue('idle-a', makePlates(2));
    await h.waitForBatch('idle-a');
    // Its fallback look an hour away: only the message can show the new batch within this test.
    const base = await serve(h, h.config, { consoleLimits: { streamIdleMs: 3_600_000 } });
    const { cookie } = await signIn(base);
    const events = await fetch(`${base}/events`, { headers: { cookie } });
    const reader = events.body!.getReader();
    let text = '';
    const until = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended; it sent:\n${text}`);
        text += new TextDecoder().decode(value);
      }
    };
    await until(/"id":"idle-a"/);
    // Every batch shown is finished: once it listens on the wake channel, the stream says it waits.
    const waits = () => h.logs.lines.filter((l) => String(l.msg).includes('waiting for new work')).length;
    await waitFor(async () => waits() === 1);
    await h.enqueue('idle-b', makePlates(1));
    // Shown, and looked at (at most every second) until it finished.
    await until(/"id":"idle-b","percent":100/);
    await reader.cancel();
  });

  it('a session ends when its token is no longer configured; the language follows Accept-Language, then the switch', async () => {
    const h = await harness.start({ label: 'console-http', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const { cookie } = await signIn(base);
    const pt = await (
      await fetch(`${base}/`, { headers: { cookie, 'accept-language': 'pt-BR,pt;q=0.9,en;q=0.8' } })
    ).text();
    expect(pt).toContain('<html lang="pt-BR">');
    const en = await (await fetch(`${base}/`, { headers: { cookie, 'accept-language': 'en-GB,en;q=0.9' } })).text();
    expect(en).toContain('<html lang="en">');
    const sw = await fetch(`${base}/lang?to=pt-BR&back=//evil.example/`, { redirect: 'manual' });
    expect(sw.headers.get('location')).toBe('/');
    const langCookie = (sw.headers.get('set-cookie') ?? '').split(';')[0]!;
    const chosen = await (
      await fetch(`${base}/`, { headers: { cookie: `${cookie}; ${langCookie}`, 'accept-language': 'en' } })
    ).text();
    expect(chosen).toContain('<html lang="pt-BR">');
    await app!.close();

    // The same Redis, a server whose configuration no longer has the token.
    const rotated = testConfig(h.redis.prefix, {
      VQ_API_TOKENS: 'another-token-0123456789abcdef',
      VQ_API_KEY_FILE: h.keyFile,
      VQ_BASE_URL: h.sim.url,
    });
    const next = await serve(h, { ...h.config, http: { ...h.config.http, tokens: rotated.http.tokens } });
    const after = await fetch(`${next}/`, { redirect: 'manual', headers: { cookie } });
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toBe('/sign-in');
  });

  it('an archived batch (retention pruned it, clock injected): its page answers from the manifest (archived, the same counts, no live updates, no retry or pause) and its downloads are the same rows', async () => {
    const archiveDir = await mkdtemp(join(tmpdir(), 'vqb-console-archive-'));
    cleanups.push(() => rm(archiveDir, { recursive: true, force: true }));
    const h = await harness.start({
      label: 'console-archive',
      sim: { failPlates: ['FAL1A23'] },
      config: { VQ_API_TOKENS: ADMIN, VQ_ARCHIVE_DIR: archiveDir, VQ_RETAIN: '30d', ...FAST },
    });
    const base = await serve(h);
    const { cookie, csrf } = await signIn(base);
    const rows = [
      ...makePlates(4).map((plate, i) => ({ plate, cliente: `c${i}` })),
      { plate: 'not a plate', cliente: 'x' },
      { plate: 'FAL1A23', cliente: 'y' },
    ];
    const { batch } = await ingestList(h.services, rows, { source: 'library', name: 'old' });
    await h.services.feeder.feed('default');
    await h.waitForBatch(batch.id);
    const path = `/batches/${encodeURIComponent(batch.id)}`;
    const get = (p: string, lang = 'en') => fetch(`${base}${p}`, { headers: { cookie, 'accept-language': lang } });
    const downloads = async () => ({
      csv: await (await get(`${path}/results?format=csv`)).text(),
      jsonl: await (await get(`${path}/results?format=jsonl`)).text(),
      rejects: await (await get(`${path}/rejects`)).text(),
      xlsx: await sheetValues(Buffer.from(await (await get(`${path}/results?format=xlsx`)).arrayBuffer())),
    });

    const running = await (await get(path)).text();
    expect(running).toContain(`action="${path}/retry"`);
    expect(running).toContain(`data-live="/events?batch=`);
    expect(running).toContain('action="/accounts/default/pause');
    const before = await downloads();
    expect(before.jsonl.trim().split('\n')).toHaveLength(6);
    expect(before.xlsx).toHaveLength(7);
    expect(before.rejects).toContain('not a plate');

    const finishedAt = (await h.services.batchViews.get(batch.id)).finishedAt!;
    const swept = await new Retention(h.services, archiveFor(h.config), {
      retainMs: h.config.retention.retainMs,
      now: () => finishedAt + 31 * DAY,
    }).sweep();
    expect(swept?.archived.map((a) => a.batchId)).toEqual([batch.id]);
    expect(await h.services.batches.exists(batch.id)).toBe(false);

    const res = await get(path);
    expect(res.status).toBe(200);
    const archived = await res.text();
    expect(archived).toContain('data-archived');
    expect(archived).toMatch(/data-field="state"[^>]*>archived</);
    expect(archived).toMatch(/data-field="done">4</);
    expect(archived).toMatch(/data-field="failed">1</);
    expect(archived).toMatch(/data-field="percent"[^>]*>100 %</);
    for (const gone of ['/retry', 'data-live', '/accounts/']) expect(archived).not.toContain(gone);
    expect(archived).toContain(`href="${path}/results?format=xlsx"`);
    expect(await (await get(path, 'pt-BR')).text()).toMatch(/data-field="state"[^>]*>arquivado</);
    // The downloads, rebuilt from the archive: the same rows.
    expect(await downloads()).toEqual(before);
    // Nothing can be run again: a forged retry finds no batch in Redis.
    const retry = await fetch(`${base}${path}/retry`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${csrf}`,
    });
    expect(retry.status).toBe(404);
    expect(await h.services.batches.exists(batch.id)).toBe(false);
  });

  it('a callback URL on the upload form: refused ones are a readable error in the page’s language and stage nothing; a blank field is none; an accepted one reaches the batch, whose page shows each delivery', async () => {
    const rx = await startReceiver(SECRET, () => 500);
    cleanups.push(() => rx.close());
    const h = await harness.start({
      label: 'console-hooks',
      config: {
        VQ_API_TOKENS: ADMIN,
        VQ_WEBHOOK_SECRET: SECRET,
        VQ_WEBHOOK_ALLOW: '127.0.0.1',
        VQ_WEBHOOK_BACKOFF: '50ms',
        VQ_WEBHOOK_ATTEMPTS: '2',
        VQ_WEBHOOK_TIMEOUT: '1s',
        ...FAST,
      },
    });
    const base = await serve(h);
    const { cookie, csrf } = await signIn(base);
    const file = `placa\n${makePlates(2).join('\n')}\n`;
    const upload = (at: string, session: { cookie: string; csrf: string }, callbackUrl: string, lang = 'en') => {
      const body = form(file, session.csrf);
      body.append('callbackUrl', callbackUrl);
      return fetch(`${at}/upload`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: session.cookie, 'accept-language': lang },
        body,
      });
    };
    const staged = async () => (await h.services.redis.keys(h.services.keys.consoleUpload('*'))).length;

    const notHttp = await upload(base, { cookie, csrf }, 'ftp://127.0.0.1/hooks');
    expect(notHttp.status).toBe(422);
    const notHttpPage = await notHttp.text();
    expect(notHttpPage).toMatch(
      /role="alert">The callback URL is not valid: it must be an http:\/\/ or https:\/\/ address/,
    );
    // The operator's URL stays in the field, to be corrected.
    expect(notHttpPage).toContain('value="ftp://127.0.0.1/hooks"');
    const otherHost = await upload(base, { cookie, csrf }, 'https://evil.example/hooks', 'pt-BR');
    expect(otherHost.status).toBe(422);
    expect(await otherHost.text()).toContain(
      'O host da URL de retorno não está na lista de permitidos deste servidor (VQ_WEBHOOK_ALLOW).',
    );
    const noSecretBase = await serve(h, { ...h.config, webhooks: { ...h.config.webhooks, secret: undefined } });
    const noSecret = await upload(noSecretBase, await signIn(noSecretBase), rx.url);
    expect(noSecret.status).toBe(422);
    expect(await noSecret.text()).toContain('This server has no webhook secret (VQ_WEBHOOK_SECRET)');
    await app!.close();
    expect(await staged()).toBe(0);
    expect((await h.services.batchViews.list(0, 10)).total).toBe(0);
    const again = await serve(h);

    // A browser sends the empty field: no callback.
    const blank = await upload(again, { cookie, csrf }, '');
    expect(blank.status).toBe(303);
    expect(
      await (await fetch(`${again}${blank.headers.get('location')}`, { headers: { cookie } })).text(),
    ).not.toContain('data-callback');

    const accepted = await upload(again, { cookie, csrf }, rx.url);
    expect(accepted.status).toBe(303);
    const stage = accepted.headers.get('location')!;
    expect(await (await fetch(`${again}${stage}`, { headers: { cookie } })).text()).toContain(
      `data-callback>${rx.url}<`,
    );
    const confirm = await confirmUpload(again, stage, { cookie, csrf });
    const batchPath = confirm.headers.get('location')!;
    const id = decodeURIComponent(batchPath.slice('/batches/'.length));
    expect((await h.services.batchViews.get(id)).callbackUrl).toBe(rx.url);
    await h.waitForBatch(id);
    // The receiver refuses both tries: the delivery ends `failed`, its last error kept.
    await rx.waitFor(2);
    const deadline = Date.now() + 15_000;
    while ((await h.services.webhooks.deliveries.list(id))[0]?.state !== 'failed') {
      if (Date.now() > deadline)
        throw new Error(`delivery not given up: ${JSON.stringify(await h.services.webhooks.deliveries.list(id))}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const en = await (await fetch(`${again}${batchPath}`, { headers: { cookie, 'accept-language': 'en' } })).text();
    expect(en).toContain(`data-callback>${rx.url}<`);
    expect(en).toMatch(
      /<th scope="row"><code>batch\.finished<\/code><\/th>\n<td data-delivery-state="failed"[^>]*>failed \(gave up\)<\/td>\n<td class="num"[^>]*>2<\/td>\n<td[^>]*>http_5xx \(HTTP 500\)<\/td>/,
    );
    const pt = await (await fetch(`${again}${batchPath}`, { headers: { cookie, 'accept-language': 'pt-BR' } })).text();
    expect(pt).toMatch(/<td data-delivery-state="failed"[^>]*>falhou \(desistiu\)<\/td>/);
    expect(pt).toContain('>Tentativas<');
  });

  it('a deadline on the upload form: the estimate and the batch page say its line in the page’s language', async () => {
    const h = await harness.start({ label: 'console-deadline', config: { VQ_API_TOKENS: ADMIN, ...FAST } });
    const base = await serve(h);
    const session = await signIn(base);
    const upload = async (lang: string) => {
      const body = form(`placa\n${makePlates(3).join('\n')}\n`, session.csrf);
      body.append('deadline', '2h');
      const staged = await fetch(`${base}/upload`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: session.cookie, 'accept-language': lang },
        body,
      });
      expect(staged.status).toBe(303);
      const stage = staged.headers.get('location')!;
      const page = await (
        await fetch(`${base}${stage}`, { headers: { cookie: session.cookie, 'accept-language': lang } })
      ).text();
      return { stage, line: /data-estimate="deadline"[^>]*>([^<]*)</.exec(page)?.[1] };
    };
    // 100/s configured: known, so judged; three plates in two hours are in time.
    const pt = await upload('pt-BR');
    expect(pt.line).toMatch(
      /^prazo: viável — até .+ \(em 2 horas\); termina em .+ \(no prazo, com folga de (1 h 59|2 h 00) min\)$/,
    );
    const en = await upload('en');
    expect(en.line).toMatch(
      /^deadline: feasible — due .+ \(in 2 hours\); finishes in .+ \(on time by (1 h 59|2 h 00) min\)$/,
    );
    const confirm = await confirmUpload(base, pt.stage, session);
    const batchPath = confirm.headers.get('location')!;
    const id = decodeURIComponent(batchPath.slice('/batches/'.length));
    await h.waitForBatch(id);
    const page = await (
      await fetch(`${base}${batchPath}`, { headers: { cookie: session.cookie, 'accept-language': 'pt-BR' } })
    ).text();
    expect(/data-field="deadline"[^>]*>([^<]*)</.exec(page)?.[1]).toMatch(
      /^prazo: cumprido — até .+; concluído em .+ \(no prazo, com folga de (1 h 59|2 h 00) min\)$/,
    );
  });

  it('a console confirm and a POST /v1/batches of the same file at once make one batch, its rows stored once', async () => {
    const h = await harness.start({ label: 'console-race', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const session = await signIn(base);
    // Big enough that the two ingests would overlap (a few hundred ms each).
    const file = `placa\n${makePlates(5000).join('\n')}\nbad\n`;
    const staged = await fetch(`${base}/upload`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: session.cookie },
      body: form(file, session.csrf),
    });
    expect(staged.status).toBe(303);
    const [confirmed, posted] = await Promise.all([
      confirmUpload(base, staged.headers.get('location')!, session),
      fetch(`${base}/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: form(file) }),
    ]);
    expect(confirmed.status).toBe(303);
    expect(posted.status).toBe(202);
    const { batches } = await h.services.batchViews.list(0, 10);
    expect(batches).toHaveLength(1);
    expect(batches[0]!.counts).toMatchObject({ total: 5001, enqueued: 5000, rejected: 1 });
  });

  it('an .xlsx made by exceljs through the console: the estimate, confirm, the batch runs, and its XLSX download has the same rows as its CSV download', async () => {
    const h = await harness.start({ label: 'console-xlsx', config: { VQ_API_TOKENS: ADMIN, ...FAST } });
    const base = await serve(h);
    const { cookie, csrf } = await signIn(base);
    const wb = new ExcelJS.Workbook();
    const ws = wb.addWorksheet('Frota');
    ws.addRow(['cliente', 'placa', 'codigo']);
    for (const [i, plate] of makePlates(3).entries()) ws.addRow([`Cliente ${i}`, plate, 1000 + i]);
    ws.addRow(['Sem placa', 'not a plate', 7]);
    const body = new FormData();
    body.append('csrf', csrf);
    body.append('file', new Blob([Buffer.from(await wb.xlsx.writeBuffer())], { type: XLSX_MEDIA_TYPE }), 'frota.xlsx');
    const staged = await fetch(`${base}/upload`, { method: 'POST', redirect: 'manual', headers: { cookie }, body });
    expect(staged.status).toBe(303);
    const stage = staged.headers.get('location')!;
    const estimate = await (await fetch(`${base}${stage}`, { headers: { cookie } })).text();
    expect(estimate).toMatch(/data-estimate="rows">4</);
    expect(estimate).toMatch(/data-estimate="creates">3</);
    expect(estimate).toMatch(/data-estimate="rejected">1</);
    const confirm = await confirmUpload(base, stage, { cookie, csrf });
    const batchPath = confirm.headers.get('location')!;
    const id = decodeURIComponent(batchPath.slice('/batches/'.length));
    expect(id).toMatch(/^frota-/);
    await h.waitForBatch(id);
    const page = await (await fetch(`${base}${batchPath}`, { headers: { cookie } })).text();
    expect(page).toContain(`href="${batchPath}/results?format=xlsx"`);

    const csv = parse(await (await fetch(`${base}${batchPath}/results?format=csv`, { headers: { cookie } })).text(), {
      bom: true,
      delimiter: h.config.csvDelimiter,
      relax_column_count: true,
    }) as string[][];
    const xlsxRes = await fetch(`${base}${batchPath}/results?format=xlsx`, { headers: { cookie } });
    expect(xlsxRes.headers.get('content-type')).toContain('spreadsheetml');
    const xlsx = await sheetValues(Buffer.from(await xlsxRes.arrayBuffer()));
    expect(csv).toHaveLength(5);
    expect(xlsx).toHaveLength(csv.length);
    expect(xlsx[0]).toEqual(csv[0]);
    expect(csv[0]).toEqual(expect.arrayContaining(['cliente', 'codigo']));
    csv.forEach((cells, r) => {
      const width = Math.max(cells.length, xlsx[r]!.length);
      for (let c = 0; c < width; c++)
        expect(
          sameCell(xlsx[r]![c], cells[c] ?? ''),
          `row ${r + 1} col ${c + 1}: ${String(xlsx[r]![c])} / ${cells[c]}`,
        ).toBe(true);
    });
    expect(csv.filter((row) => row.includes('done'))).toHaveLength(3);
  });

  it('the batch page says why its account’s line waits, in both languages: Redis full or lost (this process’s health), an operator’s pause', async () => {
    const h = await harness.start({ label: 'console-wait', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    await h.enqueue('waiting-batch', makePlates(2));
    const health: { waitReason: RedisWaitReason | undefined } = { waitReason: 'redis_full' };
    const base = await serve(h, h.config, { health });
    const { cookie } = await signIn(base);
    const page = async (lang: string, path = '/batches/waiting-batch') =>
      (await fetch(`${base}${path}`, { headers: { cookie, 'accept-language': lang } })).text();
    expect(await page('en')).toMatch(/<td class="wait"[^>]*>waiting for Redis: it is full \(maxmemory reached\)/);
    expect(await page('pt-BR')).toMatch(/<td class="wait"[^>]*>Redis cheio: /);
    expect(await page('pt-BR', '/')).toMatch(/<td class="wait"[^>]*>Redis cheio: /);
    health.waitReason = 'redis_down';
    expect(await page('en')).toMatch(/<td class="wait"[^>]*>waiting for Redis: the connection is lost/);
    expect(await page('pt-BR')).toMatch(/<td class="wait"[^>]*>Redis fora do ar: /);
    health.waitReason = undefined;
    await h.line.pauseByOperator('paused in a test');
    // The operator's own words, once (issue 22: "pausada: paused: paused in the console").
    expect(await page('en')).toMatch(/<td class="wait"[^>]*>paused: by an operator: “paused in a test”<\/td>/);
    expect(await page('pt-BR')).toMatch(/<td class="wait"[^>]*>pausada: por um operador: “paused in a test”<\/td>/);
    await h.line.resume();
    await h.line.pauseByOperator('paused in the console');
    expect(await page('en')).toMatch(/<td class="wait"[^>]*>paused: by an operator, in the console<\/td>/);
    expect(await page('pt-BR')).toMatch(/<td class="wait"[^>]*>pausada: por um operador, no console<\/td>/);
    // Nothing waits: the placeholder is not styled as an error (issue 22, 15).
    await h.line.resume();
    expect(await page('pt-BR')).toMatch(/<td class="muted"[^>]*>—<\/td>/);
    expect(await page('pt-BR')).not.toMatch(/class="wait"/);
  });

  it('issue 36 (11): a failed plate is run again the way that can help, its cost said before the click: "poll again" (free) where no answer came, "ask again" (a new query each) where the upstream answered', async () => {
    // Answers that come after the poll deadline: those plates fail POLL_TIMEOUT, their queries paid for.
    const h = await harness.start({
      label: 'console-retry-ways',
      sim: { completionMs: [60_000, 60_000] },
      config: { ...FAST, VQ_POLL_DEADLINE: '1s', VQ_API_TOKENS: ADMIN },
    });
    const base = await serve(h);
    const session = await signIn(base);
    const page = async (id: string) =>
      (await fetch(`${base}/batches/${id}`, { headers: { cookie: session.cookie, 'accept-language': 'en' } })).text();
    const retry = (id: string, way: string) =>
      fetch(`${base}/batches/${id}/retry`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: session.cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: `csrf=${session.csrf}&way=${way}`,
      });
    const buttons = (text: string) =>
      [...text.matchAll(/<button type="submit" data-retry="(\w+)"[^>]*>([^<]*)<\/button>/g)].map(
        (m) => `${m[1]}: ${m[2]}`,
      );

    const slow = makePlates(2, 700);
    await h.enqueue('timeouts', slow);
    await h.waitForBatch('timeouts');
    expect((await h.services.batchViews.get('timeouts')).counts).toMatchObject({ failed: 2 });
    const timeouts = await page('timeouts');
    expect(timeouts).toContain('<tr data-code="POLL_TIMEOUT" data-way="poll">');
    expect(buttons(timeouts)).toEqual(['poll: Poll the 2 plates again (free: no new query)']);
    let before = h.sim.stats();
    expect((await retry('timeouts', 'poll')).headers.get('location')).toBe(
      '/batches/timeouts?retried=2&recreated=0&skipped=0',
    );
    await h.waitForBatch('timeouts');
    // The same queries polled again: no create.
    expect(h.sim.stats().creates).toBe(before.creates);
    expect(h.sim.stats().gets).toBeGreaterThan(before.gets);

    // The upstream's own answer (VEHICLE_NOT_FOUND): polling reads it again, so only "ask again" is offered.
    h.sim.update({ completionMs: [100, 200], failPlates: ['NAO1A23'] });
    await h.enqueue('not-found', ['NAO1A23', ...makePlates(1, 800)]);
    await h.waitForBatch('not-found');
    const notFound = await page('not-found');
    expect(notFound).toContain('<tr data-code="VEHICLE_NOT_FOUND" data-way="ask">');
    expect(notFound).toContain('NAO1A23');
    expect(buttons(notFound)).toEqual(['ask: Ask the upstream again for the plate (costs 1 query)']);
    // A forged "poll" runs nothing (it was 1 poll and the same failure again).
    before = h.sim.stats();
    expect((await retry('not-found', 'poll')).headers.get('location')).toContain('retried=0');
    expect(h.sim.stats().requests).toBe(before.requests);
    expect((await h.services.batchViews.get('not-found')).counts).toMatchObject({ done: 1, failed: 1 });
    // "Ask again": one new query, which the upstream now answers.
    h.sim.update({ failPlates: [] });
    expect((await retry('not-found', 'ask')).headers.get('location')).toContain('retried=1&recreated=1');
    await h.waitForBatch('not-found');
    expect(h.sim.stats().creates).toBe(before.creates + 1);
    expect((await h.services.batchViews.get('not-found')).counts).toMatchObject({ done: 2, failed: 0 });
    expect(await page('not-found')).toContain('data-no-failed');
  });

  it('issue 36 (13): the queue dashboard lists the worker processes while jobs are active (it said "No workers"), says what that list is, and links back to the console', async () => {
    // Slow answers: the plates stay active in the worker while the dashboard is asked.
    const h = await harness.start({
      label: 'console-dashboard',
      sim: { latencyMs: [1_500, 1_500] },
      config: { ...FAST, VQ_API_TOKENS: ADMIN },
    });
    app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
      expect(res.status, path).toBe(200);
      return res;
    };
    await h.enqueue('dash-workers', makePlates(4));
    const queue = h.services.accounts.queues()[0]!.name;
    type Listed = { name: string; counts: { active: number }; hasWorkers: boolean | null; description?: string };
    const listed = async () => {
      const body = (await (await get('/admin/queues/api/queues')).json()) as { queues: Listed[] };
      return body.queues.find((q) => q.name === queue)!;
    };
    await expect.poll(async () => (await listed()).counts.active, { timeout: 20_000 }).toBeGreaterThan(0);
    const busy = await listed();
    expect(busy.hasWorkers).toBe(true);
    expect(busy.description).toContain("vqb's worker processes");
    const { workers } = (await (await get(`/admin/queues/api/queues/${encodeURIComponent(queue)}/workers`)).json()) as {
      workers: { name: string; addr: string; age: number }[];
    };
    expect(workers.map((w) => w.name)).toContain(`${hostname()}:${process.pid}`);
    // A way back to the console a person sees, not only in Bull Board's menu.
    const page = await (await get('/admin/queues')).text();
    expect(page).toMatch(/<body[^>]*>\s*<a href="\/" data-vqb-console[^>]*>← vqb console<\/a>/);
    await h.waitForBatch('dash-workers');
  });
});

/** An .xlsx cell against the CSV's text: the same value once typed (a date's instant; text the CSV escapes with "'"). */
function sameCell(value: unknown, text: string): boolean {
  if (value === null || value === undefined) return text === '';
  if (value instanceof Date) return Math.abs(value.getTime() - Date.parse(text)) <= 1;
  if (typeof value === 'object') return false;
  const s = String(value);
  return s === text || `'${s}` === text;
}
