// What `vqb serve` tells, and takes, from anyone who can reach its port (issue 35, findings 9, 11
// and 12): /healthz without a token, /metrics without an administrator's token, /openapi.json
// with a forged Host, the documentation's example token, a body-less POST, a flood of requests
// under one token or of guessed tokens from one address, and an account's list read from its own.

import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { monitorRedis } from '../../bench/redis-monitor.js';
import { Metrics } from '../../src/metrics.js';
import { createHttpApi } from '../../src/server.js';
import { makePlates, useHarness } from '../helpers/engine.js';

const ADMIN = 'admin-token-0123456789abcdef';
const A = 'frota-token-0123456789abcdef';
const B = 'seguros-token-0123456789abcd';
const EXAMPLE = 'change-me-to-a-long-random-token';

const harness = useHarness();

async function serve(config: Record<string, string> = {}) {
  const h = await harness.start({
    label: 'exposure',
    accounts: [
      { id: 'frota', tokens: [A] },
      { id: 'seguros', tokens: [B] },
    ],
    config: { VQ_API_TOKENS: `${ADMIN},${EXAMPLE}`, ...config },
  });
  const metrics = new Metrics({ accounts: h.config.accounts, defaults: false });
  metrics.observeQueue(h.services);
  const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, metrics });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const call = async (path: string, headers: Record<string, string> = {}, init: RequestInit = {}) => {
    const res = await fetch(`${base}${path}`, { ...init, headers });
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, text, json, headers: res.headers };
  };
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const post = (token: string, body: unknown) =>
    call(
      '/v1/batches',
      { ...bearer(token), 'content-type': 'application/json' },
      {
        method: 'POST',
        body: JSON.stringify(body),
      },
    );
  return { h, call, bearer, post, close: () => app.close() };
}

describe('what an unauthenticated caller learns', () => {
  it('/healthz: up or down only; the accounts, rates and reasons to a token, and only its own', async () => {
    const { h, call, bearer, close } = await serve();
    try {
      await h.services.accounts.line('seguros').pauseByOperator('contract renegotiation');
      const bare = await call('/healthz');
      expect(bare.status).toBe(200);
      expect(bare.json).toEqual({ status: 'ok', redis: 'ok' });
      expect(bare.text).not.toMatch(/frota|seguros|renegotiation/);
      const mine = await call('/healthz', bearer(A));
      expect(mine.json.accounts.map((l: { account: string }) => l.account)).toEqual(['frota']);
      expect(mine.text).not.toContain('renegotiation');
      const all = await call('/healthz', bearer(ADMIN));
      expect(all.json.status).toBe('degraded');
      expect(all.json.accounts.map((l: { account: string }) => l.account).sort()).toEqual(['frota', 'seguros']);
    } finally {
      await close();
    }
  });

  it('/metrics: no batch ids without an administrator token', async () => {
    const { call, bearer, post, close } = await serve();
    try {
      const posted = await post(A, { plates: makePlates(2), batchId: 'secret-order-77' });
      expect(posted.status).toBe(202);
      const open = await call('/metrics');
      expect(open.status).toBe(200);
      expect(open.text).toContain('vqb_batches');
      expect(open.text).not.toContain('secret-order-77');
      expect(open.text).not.toContain('vqb_batch_plates_enqueued');
      expect((await call('/metrics', bearer(A))).text).not.toContain('secret-order-77');
      expect((await call('/metrics', bearer(ADMIN))).text).toContain('batch="secret-order-77"');
    } finally {
      await close();
    }
  });

  it('/openapi.json names no server from the request’s Host header', async () => {
    const { call, close } = await serve();
    try {
      const doc = await call('/openapi.json', { host: 'evil.example', 'x-forwarded-host': 'evil.example' });
      expect(doc.status).toBe(200);
      expect(doc.json.servers).toEqual([{ url: '/', description: 'this server' }]);
      expect(doc.text).not.toContain('evil.example');
    } finally {
      await close();
    }
  });

  it("the documentation's example token is refused even when configured", async () => {
    const { call, bearer, close } = await serve();
    try {
      const answer = await call('/v1/batches', bearer(EXAMPLE));
      expect(answer.status).toBe(401);
      expect(answer.json.error.code).toBe('UNAUTHORIZED');
      expect((await call('/v1/batches', bearer(ADMIN))).status).toBe(200);
    } finally {
      await close();
    }
  });

  it('POST /v1/batches with no body is a 400 in the error shape, not a 500', async () => {
    const { call, bearer, close } = await serve();
    try {
      for (const headers of [bearer(A), { ...bearer(A), 'content-type': 'application/json' }]) {
        const answer = await call('/v1/batches', headers, { method: 'POST' });
        expect(answer.status, answer.text).toBeGreaterThanOrEqual(400);
        expect(answer.status, answer.text).toBeLessThan(500);
        expect(answer.json).toMatchObject({ statusCode: answer.status, error: { code: expect.any(String) } });
      }
    } finally {
      await close();
    }
  });
});

describe('floods and lists', () => {
  it('a token past VQ_API_RATE_LIMIT gets 429 with Retry-After; another token goes on', async () => {
    const { call, bearer, close } = await serve({ VQ_API_RATE_LIMIT: '5' });
    try {
      const answers = [];
      for (let i = 0; i < 7; i++) answers.push(await call('/v1/batches', bearer(A)));
      expect(answers.slice(0, 5).map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      const refused = answers[5]!;
      expect(refused.status).toBe(429);
      expect(refused.json).toMatchObject({ statusCode: 429, error: { code: 'TOO_MANY_REQUESTS' } });
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await call('/v1/batches', bearer(B))).status).toBe(200);
    } finally {
      await close();
    }
  });

  it('guessed tokens from one address are held to 30 a minute, while a real token from it goes on', async () => {
    const { call, bearer, close } = await serve();
    try {
      const statuses = [];
      for (let i = 0; i < 32; i++)
        statuses.push((await call('/v1/batches', bearer(`guess-${i}-0123456789abcdef`))).status);
      expect(statuses.slice(0, 30).every((s) => s === 401)).toBe(true);
      expect(statuses.slice(30)).toEqual([429, 429]);
      expect((await call('/v1/batches', bearer(A))).status).toBe(200);
    } finally {
      await close();
    }
  });

  it("an account's list is read from its own index: other accounts' batches are not scanned", async () => {
    const { h, call, bearer, post, close } = await serve();
    try {
      expect((await post(A, { plates: makePlates(1), name: 'mine' })).status).toBe(202);
      for (let i = 0; i < 5; i++)
        expect((await post(B, { plates: makePlates(1, 10 + i), name: `b${i}` })).status).toBe(202);
      // Once B's plates are done, nothing but the list reads B's keys.
      for (let i = 0; i < 100 && !(await h.idle()); i++) await new Promise((r) => setTimeout(r, 100));
      // MONITOR sees the whole server, the other lane's tests too, on a socket of its own
      // (ioredis's monitor mode lost its footing on a busy server: bench/redis-monitor.ts).
      const seen: string[] = [];
      const monitor = await monitorRedis(h.config.redisUrl, ({ args }) => seen.push(args.join(' ')));
      try {
        const listed = await call('/v1/batches', bearer(A));
        expect(listed.json.total).toBe(1);
        expect(listed.json.batches.map((b: { name: string }) => b.name)).toEqual(['mine']);
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        monitor.stop();
      }
      const mine = seen.filter((c) => c.includes(h.redis.prefix.replace(/[{}]/g, '')));
      expect(mine.length).toBeGreaterThan(0);
      // Not the list of every batch, nor every batch's account, nor another account's batch.
      const { batches, batchAccounts } = h.services.keys;
      const global = mine.filter((c) => c.split(' ').some((arg) => arg === batches || arg === batchAccounts));
      expect(global, global.join('\n')).toEqual([]);
      expect(
        mine.some((c) => /seguros\}:vqb:batch/.test(c)),
        mine.join('\n'),
      ).toBe(false);
    } finally {
      await close();
    }
  });
});
