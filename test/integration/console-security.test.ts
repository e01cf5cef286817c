// Issue 35 (findings 5-8, 9 and 11 in part), each written as the attack: an open redirect through
// the language switch and the sign-in's follow-up, a sign-in posted from another site (login
// CSRF), live streams that outlived their session, staged uploads that filled Redis, and
// unthrottled guessing of service tokens.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ConsoleLimits } from '../../src/console/limits.js';
import { idHash } from '../../src/console/sessions.js';
import { type StagedUpload, StagedUploads, UPLOAD_TTL_MS } from '../../src/console/uploads.js';
import { createHttpApi } from '../../src/server.js';
import { postSignIn, signIn, signInForm } from '../helpers/console.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
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

async function serve(h: Harness, consoleLimits: Partial<ConsoleLimits> = {}): Promise<string> {
  app = await createHttpApi({
    services: h.services,
    config: h.config,
    logger: h.logs.logger,
    dashboard: false,
    consoleLimits,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** Where a browser goes after the answer's Location (a browser drops tabs and newlines first). */
function landing(base: string, res: Response): URL {
  return new URL(res.headers.get('location') ?? '', `${base}/`);
}

/** Reads a server-sent event stream until the server ends it; what it sent. */
async function untilEnd(res: Response): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * Live streams get connections of their own, destroyed after the test: a stream cancelled on the
 * client leaves the pool sockets it opened and never used, which the server would wait for.
 */
let streamAgent = new Agent();
afterEach(async () => {
  await streamAgent.destroy();
  streamAgent = new Agent();
});

/** GET /events as the page's EventSource does. */
async function events(url: string, cookie: string): Promise<Response> {
  return (await undiciFetch(url, { headers: { cookie }, dispatcher: streamAgent })) as unknown as Response;
}

/** Opens a stream and reads its first event; the stream stays open (cancel the reader to close it). */
async function openStream(url: string, cookie: string): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const res = await events(url, cookie);
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const { value } = await reader.read();
  expect(new TextDecoder().decode(value)).toContain('event: batches');
  return reader;
}

const BYPASSES = [
  '%2F%09%2Fevil.example',
  '//evil.example',
  '/%5Cevil.example',
  '/\\evil.example',
  'https://evil.example/',
  '%2F%2Fevil.example',
  '/%252F%252Fevil.example',
  '/.//evil.example',
  '%2F%0A%2Fevil.example',
  '/%E3%80%82',
  '/%E3%80%82evil.example',
  '%E3%80%82evil.example',
  '/%00',
];

describe('web console: issue 35', () => {
  it('the language switch and the sign-in never send a browser to another site, and never answer 500', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    for (const back of BYPASSES) {
      const res = await fetch(`${base}/lang?to=en&back=${back}`, { redirect: 'manual' });
      expect({ back, status: res.status }).toEqual({ back, status: 303 });
      const to = landing(base, res);
      expect({ back, origin: to.origin }).toEqual({ back, origin: base });
      expect(res.headers.get('location')).not.toMatch(/^\/\/|\\|[\u0000-\u001f]/);
    }
    // A path of this site is kept, encoded as a Location header takes it.
    const own = await fetch(`${base}/lang?to=en&back=%2Fbatches%2Fx%3Fy%3D1`, { redirect: 'manual' });
    expect(own.headers.get('location')).toBe('/batches/x?y=1');
    const accents = await fetch(`${base}/lang?to=en&back=/%E3%80%82`, { redirect: 'manual' });
    expect(accents.headers.get('location')).toBe('/%E3%80%82');

    // The sign-in's follow-up: after signing in, and when already signed in.
    for (const back of BYPASSES) {
      const res = await postSignIn(base, ADMIN, await signInForm(base), {}, `?back=${back}`);
      expect({ back, status: res.status }).toEqual({ back, status: 303 });
      expect({ back, origin: landing(base, res).origin }).toEqual({ back, origin: base });
    }
    const { cookie } = await signIn(base, ADMIN);
    for (const back of BYPASSES) {
      const res = await fetch(`${base}/sign-in?back=${back}`, { redirect: 'manual', headers: { cookie } });
      expect({ back, status: res.status }).toEqual({ back, status: 303 });
      expect({ back, origin: landing(base, res).origin }).toEqual({ back, origin: base });
    }
  });

  it('a sign-in posted from another site, or without the form’s token, is refused (403) and sets no session', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h);
    const sessionOf = (res: Response) => res.headers.getSetCookie().find((c) => c.startsWith('vqb_session='));
    const form = await signInForm(base);

    const attacks: [string, Response][] = [
      // The attacker's page posts the form: the browser says where it came from, and has no token.
      [
        'another origin, no token',
        await postSignIn(base, ADMIN, { cookie: '', csrf: '' }, { origin: 'https://evil.example' }),
      ],
      // Even with a pre-session pair (a cookie planted some other way), another origin is refused.
      ['another origin, a token', await postSignIn(base, ADMIN, form, { origin: 'https://evil.example' })],
      ['origin null', await postSignIn(base, ADMIN, form, { origin: 'null' })],
      ['another site’s Referer', await postSignIn(base, ADMIN, form, { referer: 'https://evil.example/x' })],
      ['no token at all', await postSignIn(base, ADMIN, { cookie: '', csrf: '' })],
      ['a token without its cookie', await postSignIn(base, ADMIN, { cookie: '', csrf: form.csrf })],
      ['a cookie without its token', await postSignIn(base, ADMIN, { cookie: form.cookie, csrf: '' })],
      [
        'another form’s token',
        await postSignIn(base, ADMIN, { cookie: form.cookie, csrf: (await signInForm(base)).csrf }),
      ],
    ];
    for (const [name, res] of attacks) {
      expect({ name, status: res.status }).toEqual({ name, status: 403 });
      expect({ name, session: sessionOf(res) }).toEqual({ name, session: undefined });
      // A clear page: the sign-in form again, with why.
      const page = await res.text();
      expect(page).toContain('role="alert"');
      expect(page).toContain('name="token"');
    }
    // The console's own form, from its own origin, signs in.
    expect(form.csrf).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    expect(form.cookie).toMatch(/^vqb_signin=/);
    const own = await postSignIn(base, ADMIN, form, { origin: base });
    expect(own.status).toBe(303);
    expect(sessionOf(own)).toMatch(/^vqb_session=[A-Za-z0-9_-]{43};/);
    // Behind a proxy the browser's origin is the public one (VQ_PUBLIC_URL).
    await app!.close();
    const publicUrl = 'https://vqb.example.com';
    app = await createHttpApi({
      services: h.services,
      config: { ...h.config, webhooks: { ...h.config.webhooks, publicUrl } },
      logger: h.logs.logger,
      dashboard: false,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const proxied = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const res = await postSignIn(proxied, ADMIN, await signInForm(proxied), { origin: publicUrl });
    expect(res.status).toBe(303);
  });

  it('a live stream ends at sign-out and when its token is revoked; a session holds at most 4 streams', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vqb-console-sec-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const tokens = join(dir, 'tokens');
    await writeFile(tokens, `${ADMIN}\n`);
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS_FILE: tokens } });
    await h.enqueue('live-1', makePlates(2));
    const base = await serve(h);

    // Sign-out: the open stream ends (nothing more of the account's batches reaches it).
    const one = await signIn(base, ADMIN);
    const stream = await events(`${base}/events`, one.cookie);
    expect(stream.status).toBe(200);
    const ended = untilEnd(stream);
    const out = await fetch(`${base}/sign-out`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: one.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${one.csrf}`,
    });
    expect(out.status).toBe(303);
    await h.enqueue('after-sign-out', makePlates(2, 10));
    expect(await ended).not.toContain('after-sign-out');

    if (process.env.CUT === '1') return;
    // The token removed from the tokens file: the stream ends (auth re-reads the file).
    const two = await signIn(base, ADMIN);
    const revoked = await events(`${base}/events`, two.cookie);
    expect(revoked.status).toBe(200);
    const revokedEnd = untilEnd(revoked);
    await writeFile(tokens, 'another-token-0123456789abcdef-longer\n');
    await revokedEnd;
    await writeFile(tokens, `${ADMIN}\n`);

    // Signed out through another serve process (the session gone from Redis): the next tick ends it.
    const elsewhere = await signIn(base, ADMIN);
    const far = await events(`${base}/events`, elsewhere.cookie);
    expect(far.status).toBe(200);
    const farEnd = untilEnd(far);
    await h.services.redis.del(h.services.keys.consoleSession(idHash(elsewhere.cookie.split('=')[1]!)));
    expect(await farEnd).toContain('event: end');

    if (process.env.CUT === '2') return;
    // At most 4 at once per session: the fifth is refused (429), another session is not.
    const three = await signIn(base, ADMIN);
    const open: ReadableStreamDefaultReader<Uint8Array>[] = [];
    for (let i = 0; i < 4; i++) open.push(await openStream(`${base}/events`, three.cookie));
    const fifth = await events(`${base}/events`, three.cookie);
    expect(fifth.status).toBe(429);
    expect(await fifth.text()).toContain('role="alert"');
    const four = await signIn(base, ADMIN);
    await (await openStream(`${base}/events`, four.cookie)).cancel();
    // One closed: a new one may open (once the server has seen it go).
    await open.pop()!.cancel();
    let again: Response | undefined;
    for (let i = 0; i < 50 && again?.status !== 200; i++) {
      if (again !== undefined) await again.text();
      again = await events(`${base}/events`, three.cookie);
    }
    expect(again!.status).toBe(200);
    await again!.body!.getReader().cancel();
    for (const reader of open) await reader.cancel();
  });

  it('the streams of every session together are capped per process: many sessions cannot add up to any number', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h, { streamsPerProcess: 3 });
    const open: ReadableStreamDefaultReader<Uint8Array>[] = [];
    for (let i = 0; i < 3; i++) open.push(await openStream(`${base}/events`, (await signIn(base, ADMIN)).cookie));
    const more = await events(`${base}/events`, (await signIn(base, ADMIN)).cookie);
    expect(more.status).toBe(429);
    await more.text();
    for (const reader of open) await reader.cancel();
  });

  it('staged uploads: a session’s beyond its cap are refused (429, a clear page), and all of them together stay under the total in Redis', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const file = `placa\n${makePlates(300).join('\n')}\n`;
    const stage = async (base: string, session: { cookie: string; csrf: string }) => {
      const body = new FormData();
      body.append('csrf', session.csrf);
      body.append('file', new Blob([file], { type: 'text/csv' }), 'plates.csv');
      return fetch(`${base}/upload`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: session.cookie, 'accept-language': 'en' },
        body,
      });
    };
    const uploadKeys = async () => {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, found] = await h.redis.redis.scan(
          cursor,
          'MATCH',
          h.services.keys.consoleUpload('*'),
          'COUNT',
          1000,
        );
        cursor = next;
        keys.push(...found);
      } while (cursor !== '0');
      return keys;
    };
    const stagedBytes = async () => {
      let total = 0;
      for (const key of await uploadKeys()) total += await h.redis.redis.strlen(key);
      return total;
    };

    // How big one staged upload of this file is in Redis.
    let base = await serve(h);
    const a = await signIn(base, ADMIN);
    const first = await stage(base, a);
    expect(first.status).toBe(303);
    const size = await stagedBytes();
    expect(size).toBeGreaterThan(file.length);
    await app!.close();

    const total = Math.floor(3.5 * size);
    base = await serve(h, { stagedPerSession: 2, stagedBytesTotal: total });
    expect((await stage(base, a)).status).toBe(303);
    // Session A's third: over its cap.
    const third = await stage(base, a);
    expect(third.status).toBe(429);
    const page = await third.text();
    expect(page).toContain('role="alert"');
    expect(page).toMatch(/unconfirmed uploads/);
    // Session B: one fits (3 in all), a second is over the server's total.
    const b = await signIn(base, ADMIN);
    expect((await stage(base, b)).status).toBe(303);
    const full = await stage(base, b);
    expect(full.status).toBe(429);
    expect(await full.text()).toContain('role="alert"');
    expect(await uploadKeys()).toHaveLength(3);
    expect(await stagedBytes()).toBeLessThanOrEqual(total);
    // A confirm frees its room.
    const location = first.headers.get('location')!;
    const confirmed = await fetch(`${base}${location}/confirm`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: a.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${a.csrf}`,
    });
    expect(confirmed.status).toBe(303);
    expect((await stage(base, b)).status).toBe(303);
    expect(await stagedBytes()).toBeLessThanOrEqual(total);
  });

  it('staged uploads that expire leave the caps (clock injected)', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    let now = Date.now();
    const limits = { stagedPerSession: 2, stagedBytesPerSession: 1e9, stagedTotal: 3, stagedBytesTotal: 1e9 };
    const uploads = new StagedUploads(h.services.redis, h.services.keys, limits, () => now);
    const upload = (owner: string): StagedUpload => ({
      owner,
      batchId: 'b',
      name: 'n',
      digest: 'd',
      account: 'default',
      extraColumns: [],
      force: false,
      estimate: {} as StagedUpload['estimate'],
      rows: [],
    });
    await uploads.put(upload('a'));
    await uploads.put(upload('a'));
    await expect(uploads.put(upload('a'))).rejects.toMatchObject({ code: 'TOO_MANY_UPLOADS' });
    await expect(uploads.checkRoom('a')).rejects.toMatchObject({ code: 'TOO_MANY_UPLOADS' });
    await uploads.put(upload('b'));
    // The server's count is full too.
    await expect(uploads.put(upload('c'))).rejects.toMatchObject({ code: 'TOO_MANY_UPLOADS' });
    now += UPLOAD_TTL_MS + 1;
    await uploads.checkRoom('a');
    await uploads.put(upload('a'));
    await uploads.put(upload('c'));
    expect(await h.redis.redis.zcard(h.services.keys.consoleUploads)).toBe(2);
  });

  it('failed sign-ins from one address back off: after K the next is refused (429, Retry-After), the right token too', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h, { signInFailures: 3 });
    // Successes are not counted.
    for (let i = 0; i < 4; i++) await signIn(base, ADMIN);
    for (let i = 0; i < 3; i++) {
      const res = await postSignIn(base, `wrong-token-${i}-0123456789abcdef`, await signInForm(base));
      expect(res.status).toBe(401);
    }
    const refused = await postSignIn(base, ADMIN, await signInForm(base));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.getSetCookie().find((c) => c.startsWith('vqb_session='))).toBeUndefined();
    const page = await refused.text();
    expect(page).toContain('role="alert"');
    expect(page).toContain('name="token"');
  });

  it('a burst of guesses sent at once gets no more than K through to the token check', async () => {
    const h = await harness.start({ label: 'console-sec', workers: 0, config: { VQ_API_TOKENS: ADMIN } });
    const base = await serve(h, { signInFailures: 3 });
    const forms = await Promise.all(Array.from({ length: 12 }, () => signInForm(base)));
    const answers = await Promise.all(
      forms.map((form, i) => postSignIn(base, `guess-${i}-0123456789abcdef`, form).then((r) => r.status)),
    );
    expect(answers.filter((s) => s === 401)).toHaveLength(3);
    expect(answers.filter((s) => s === 429)).toHaveLength(9);
  });
});
