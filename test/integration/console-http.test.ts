// The web console over plain HTTP (no browser): its cookie, its headers, what it refuses (a form
// without the session's CSRF token, an upload it cannot read, someone else's staged upload) and
// that nothing is enqueued before the operator confirms.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/api/server.js';
import type { Config } from '../../src/config.js';
import { testConfig } from '../helpers/config.js';
import { type Harness, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const harness = useHarness();
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function serve(h: Harness, config: Config = h.config): Promise<string> {
  app = await createHttpApi({ services: h.services, config, logger: h.logs.logger, dashboard: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

async function signIn(base: string, headers: Record<string, string> = {}): Promise<{ cookie: string; setCookie: string; csrf: string }> {
  const res = await fetch(`${base}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: `token=${ADMIN}`,
  });
  expect(res.status).toBe(303);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const cookie = setCookie.split(';')[0]!;
  const page = await (await fetch(`${base}/upload`, { headers: { cookie } })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
  return { cookie, setCookie, csrf };
}

function form(file: string, name = 'plates.csv'): FormData {
  const body = new FormData();
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

    const forged = await fetch(`${base}/upload?csrf=nope`, { method: 'POST', headers: { cookie }, body: form('placa\nABC1D23\n') });
    expect(forged.status).toBe(403);
    const noSession = await fetch(`${base}/upload?csrf=${csrf}`, { method: 'POST', redirect: 'manual', body: form('placa\nABC1D23\n') });
    expect(noSession.status).toBe(303);
    expect(noSession.headers.get('location')).toMatch(/^\/sign-in/);

    const broken = await fetch(`${base}/upload?csrf=${csrf}`, { method: 'POST', headers: { cookie, 'accept-language': 'en' }, body: form('"placa\nABC1D23\n') });
    expect(broken.status).toBe(400);
    const brokenPage = await broken.text();
    expect(brokenPage).toContain('role="alert"');
    expect(brokenPage).toContain('type="file"');

    const staged = await fetch(`${base}/upload?csrf=${csrf}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie },
      body: form('placa;nome\nABC1D23;<b>Ana</b>\nXYZ9876;Bia\nbad;x\n'),
    });
    expect(staged.status).toBe(303);
    const stage = staged.headers.get('location')!;
    expect(stage).toMatch(/^\/upload\/[0-9a-f]{32}$/);
    const estimate = await (await fetch(`${base}${stage}`, { headers: { cookie } })).text();
    expect(estimate).toMatch(/data-estimate="creates">2</);
    expect(estimate).toMatch(/data-estimate="rejected">1</);
    expect((await h.services.batches.list(0, 10)).total).toBe(0);

    // Another session cannot see or confirm it.
    const other = await signIn(base);
    const confirmOther = await fetch(`${base}${stage}/confirm`, {
      method: 'POST',
      headers: { cookie: other.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${other.csrf}`,
    });
    expect(confirmOther.status).toBe(404);
    // Without the CSRF token: refused.
    const noCsrf = await fetch(`${base}${stage}/confirm`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: 'csrf=' });
    expect(noCsrf.status).toBe(403);
    expect((await h.services.batches.list(0, 10)).total).toBe(0);

    const confirm = () =>
      fetch(`${base}${stage}/confirm`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `csrf=${csrf}` });
    const first = await confirm();
    expect(first.status).toBe(303);
    const batchPath = first.headers.get('location')!;
    expect((await confirm()).status).toBe(404);
    const { batches } = await h.services.batches.list(0, 10);
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

  it('a session ends when its token is no longer configured; the language follows Accept-Language, then the switch', async () => {
    const h = await harness.start({ label: 'console-http', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const { cookie } = await signIn(base);
    const pt = await (await fetch(`${base}/`, { headers: { cookie, 'accept-language': 'pt-BR,pt;q=0.9,en;q=0.8' } })).text();
    expect(pt).toContain('<html lang="pt-BR">');
    const en = await (await fetch(`${base}/`, { headers: { cookie, 'accept-language': 'en-GB,en;q=0.9' } })).text();
    expect(en).toContain('<html lang="en">');
    const sw = await fetch(`${base}/lang?to=pt-BR&back=//evil.example/`, { redirect: 'manual' });
    expect(sw.headers.get('location')).toBe('/');
    const langCookie = (sw.headers.get('set-cookie') ?? '').split(';')[0]!;
    const chosen = await (await fetch(`${base}/`, { headers: { cookie: `${cookie}; ${langCookie}`, 'accept-language': 'en' } })).text();
    expect(chosen).toContain('<html lang="pt-BR">');
    await app!.close();

    // The same Redis, a server whose configuration no longer has the token.
    const rotated = testConfig(h.redis.prefix, { VQ_API_TOKENS: 'another-token-0123456789abcdef', VQ_API_KEY_FILE: h.keyFile, VQ_BASE_URL: h.sim.url });
    const next = await serve(h, { ...h.config, http: { ...h.config.http, tokens: rotated.http.tokens } });
    const after = await fetch(`${next}/`, { redirect: 'manual', headers: { cookie } });
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toBe('/sign-in');
  });
});
