// A hostile upstream cannot take the service down (docs/security.md, "The upstream is untrusted"):
// each attack replayed against workers, the HTTP API and `vqb` through an upstream that answers
// badly on purpose (helpers/hostile-upstream.ts, in front of the simulator). Each test names the
// finding it replays; each failed on the code before the bounds.
import { readdir, readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { exportBatch, fileSinkFor } from '../../src/sinks/export.js';
import { type Harness, makePlates, TEST_KEY, useHarness } from '../helpers/engine.js';
import {
  errorBody,
  type HostileRule,
  type HostileUpstream,
  prefixBytes,
  startHostileUpstream,
} from '../helpers/hostile-upstream.js';
import { apiCall } from '../helpers/http.js';
import { harnessEnv, runVqb, waitFor } from '../helpers/process.js';

const ADMIN = 'admin-token-0123456789abcdef';
const harness = useHarness();
let hostile: HostileUpstream | undefined;
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
  await hostile?.close();
  hostile = undefined;
});

const isCreate = (r: { method: string }) => r.method === 'POST';
const plateOf = (r: { body: string }) => (/"licensePlate":"([A-Z0-9]+)"/.exec(r.body) ?? [])[1];

/** A harness whose workers speak to a hostile upstream in front of its simulator. */
async function hostileHarness(rule: HostileRule, config: Record<string, string> = {}): Promise<Harness> {
  hostile = await startHostileUpstream(rule);
  const h = await harness.start({
    label: 'hostile',
    config: {
      VQ_BASE_URL: hostile.url,
      VQ_BACKOFF: '50ms',
      VQ_POLL_INITIAL: '100ms',
      VQ_POLL_INTERVAL: '100ms',
      VQ_API_TOKENS: ADMIN,
      ...config,
    },
  });
  hostile.target = h.sim.url;
  return h;
}

async function api(h: Harness): Promise<string> {
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, dashboard: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('a hostile upstream', () => {
  it('(2) a 400 with a 5 MB message and a 503 with 4 MB retried: Redis grows by less than 1 MiB', async () => {
    const [p400, p503] = makePlates(2);
    const big = (n: number) => 'A'.repeat(n * 1024 * 1024);
    const h = await hostileHarness(
      (r) => {
        if (!isCreate(r)) return undefined;
        if (plateOf(r) === p400) return { status: 400, body: errorBody(400, 'INVALID_PLATE', big(5)) };
        if (plateOf(r) === p503) return { status: 503, body: errorBody(503, 'UNAVAILABLE', big(4)) };
        return undefined;
      },
      { VQ_ATTEMPTS: '4' },
    );
    const before = await prefixBytes(h.redis.redis, h.config.prefix);
    await h.enqueue('b', [p400!, p503!]);
    await h.waitForBatch('b', 60_000);
    const grown = (await prefixBytes(h.redis.redis, h.config.prefix)) - before;
    expect(hostile!.answered.filter((r) => plateOf(r) === p503).length, '503 retried').toBeGreaterThanOrEqual(2);
    const ref = await h.services.batches.ref('b');
    expect((await h.services.outcomes.get(ref, p400!))?.error?.code).toBe('INVALID_PLATE');
    expect((await h.services.outcomes.get(ref, p503!))?.error?.message.length).toBeLessThan(4_096);
    console.log(`redis grew ${grown} bytes for a 5 MB 400 and a 4 MB 503 x4`);
    expect(grown).toBeLessThan(1024 * 1024);
    expect(h.logs.text().length, 'log lines are cut too').toBeLessThan(1024 * 1024);
  }, 90_000);

  it('(3, 5) a state echoing the key and 1 MB long: the pause, /healthz and the logs carry neither', async () => {
    const h = await hostileHarness((r) =>
      isCreate(r)
        ? {
            status: 201,
            body: JSON.stringify({ queryId: 'q-1', status: `DENIED_FOR_${r.key}_${'Z'.repeat(1 << 20)}` }),
          }
        : undefined,
    );
    const base = await api(h);
    await h.enqueue('b', makePlates(1));
    await waitFor(async () => (await h.line.state()).pause !== undefined, 20_000, 'the account holds');
    const state = await h.line.state();
    expect(state.pause?.code).toBe('UNRECOGNISED_ANSWER');
    expect(state.pause?.message.length).toBeLessThanOrEqual(4_096 + 64);
    const health = await apiCall(base, ADMIN, '/healthz');
    expect(health.status).toBe(200);
    expect(health.text.length).toBeLessThan(64 * 1024);
    expect(health.text).toContain('DENIED_FOR_[redacted]');
    for (const [where, text] of [
      ['healthz', health.text],
      ['pause', JSON.stringify(state)],
      ['logs', h.logs.text()],
      ['batch', (await apiCall(base, ADMIN, '/v1/batches/b')).text],
    ])
      expect(text, where).not.toContain(TEST_KEY);
  }, 60_000);

  it('(3) a result echoing the key is stored and exported (CSV, JSONL, XLSX) redacted', async () => {
    const h = await hostileHarness((r) =>
      r.method === 'GET'
        ? {
            status: 200,
            body: JSON.stringify({
              queryId: r.path.split('/').pop(),
              status: 'COMPLETED',
              owner: { note: `paid with ${r.key}` },
            }),
          }
        : undefined,
    );
    await h.enqueue('b', makePlates(2));
    await h.waitForBatch('b', 30_000);
    const ref = await h.services.batches.ref('b');
    const outcome = await h.services.outcomes.get(ref, makePlates(1)[0]!);
    expect(JSON.stringify(outcome?.result)).toContain('paid with [redacted]');
    await exportBatch(h.services, fileSinkFor(h.config), ref);
    const files = await readdir(h.config.outDir);
    expect(files.length).toBeGreaterThanOrEqual(2);
    for (const f of files) expect((await readFile(join(h.config.outDir, f))).includes(TEST_KEY), f).toBe(false);
  }, 60_000);

  it('(4) 429s asking 1e16 and 1e300 ms, a reset of 1e20 with nothing left: no hold, everything answers', async () => {
    let n = 0;
    const h = await hostileHarness((r) => {
      if (!isCreate(r)) return undefined;
      n += 1;
      if (n === 1) return { status: 429, body: errorBody(429, 'RATE_LIMIT_EXCEEDED', 'wait', { retryAfterMs: 1e16 }) };
      if (n === 2) return { status: 429, body: errorBody(429, 'RATE_LIMIT_EXCEEDED', 'wait', { retryAfterMs: 1e300 }) };
      return { status: 0, headers: { 'x-ratelimit-reset': '1e20', 'x-ratelimit-remaining': '0' } };
    });
    const base = await api(h);
    await h.enqueue('b', makePlates(3));
    await h.waitForBatch('b', 30_000);
    expect(n).toBeGreaterThanOrEqual(3);
    const hold = await h.redis.redis.hget(h.services.keys.pace('default'), 'hold');
    expect(Number(hold ?? 0)).toBeLessThan(Date.now() + 33 * 86_400_000);
    for (const path of ['/healthz', '/v1/batches']) expect((await apiCall(base, ADMIN, path)).status, path).toBe(200);
    const status = await runVqb(['status'], harnessEnv(h, { VQ_BASE_URL: hostile!.url }));
    expect(status.code, status.stderr).toBe(0);
  }, 60_000);

  it('(4) garbage stored as a hold (1e+300) is read as none, and `vqb resume` lifts it', async () => {
    const h = await hostileHarness(() => undefined);
    const keys = h.services.keys;
    await h.redis.redis.hset(keys.pace('default'), 'hold', '1e+300');
    await h.redis.redis.hset(keys.account('default'), 'limitedUntil', '1e+300', 'limitReason', 'quota');
    const base = await api(h);
    expect((await apiCall(base, ADMIN, '/healthz')).status).toBe(200);
    const env = harnessEnv(h, { VQ_BASE_URL: hostile!.url });
    expect((await runVqb(['status'], env)).code).toBe(0);
    const resumed = await runVqb(['resume'], env);
    expect(resumed.stdout).toMatch(/resumed account default/);
    expect(await h.redis.redis.hget(keys.pace('default'), 'hold')).toBeNull();
    await h.enqueue('b', makePlates(2));
    await h.waitForBatch('b', 30_000);
  }, 60_000);

  it('(5, 8) a 401 with a 2 MB message full of escape sequences: the pause is 4 KB, status and resume print it inert', async () => {
    const esc = '\u001b]0;pwned\u0007\u001b[2J';
    const h = await hostileHarness((r) =>
      isCreate(r)
        ? { status: 401, body: errorBody(401, 'INVALID_API_KEY', `${esc}${'k'.repeat(2 << 20)}`) }
        : undefined,
    );
    const base = await api(h);
    await h.enqueue('b', makePlates(1));
    await waitFor(async () => (await h.line.state()).pause !== undefined, 20_000, 'the account pauses');
    expect((await h.line.state()).pause?.message.length).toBeLessThanOrEqual(4_096 + 64);
    const health = await apiCall(base, ADMIN, '/healthz');
    expect(health.status).toBe(200);
    expect(health.text.length).toBeLessThan(64 * 1024);
    expect(h.logs.text().length).toBeLessThan(256 * 1024);
    const env = harnessEnv(h, { VQ_BASE_URL: hostile!.url });
    for (const args of [['status'], ['resume']]) {
      const out = await runVqb(args, env);
      expect(out.stdout, args[0]).toContain('\\u001b]0;pwned');
      expect(`${out.stdout}${out.stderr}`, args[0]).not.toContain('\u001b');
    }
  }, 60_000);

  it('(12) a result nested 6,000 levels: BAD_RESPONSE after one poll, not polled again', async () => {
    const deep = `${'{"a":'.repeat(6_000)}1${'}'.repeat(6_000)}`;
    const h = await hostileHarness(
      (r) =>
        r.method === 'GET'
          ? { status: 200, body: `{"queryId":"${r.path.split('/').pop()}","status":"COMPLETED","result":${deep}}` }
          : undefined,
      { VQ_ATTEMPTS: '4' },
    );
    await h.enqueue('b', makePlates(1));
    await h.waitForBatch('b', 30_000);
    const outcome = await h.services.outcomes.get(await h.services.batches.ref('b'), makePlates(1)[0]!);
    expect(outcome?.error?.code).toBe('BAD_RESPONSE');
    expect(hostile!.answered.filter((r) => r.method === 'GET')).toHaveLength(1);
  }, 60_000);
});
