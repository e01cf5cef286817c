// The HTTP enqueue API over a real port: auth, limits and the error shape, then batches posted as
// JSON and as CSV, followed until finished (real workers, the simulator), their results streamed,
// retried, listed; health and the OpenAPI document; and the token never in the logs.
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitingOf } from '../../src/api/views.js';
import type { Config } from '../../src/config.js';
import { estimateEta } from '../../src/presenters/line.js';
import type { BatchInfo } from '../../src/queue/batch/store.js';
import type { AccountLineState } from '../../src/queue/line.js';
import { createHttpApi } from '../../src/server.js';
import type { QueueServices } from '../../src/services.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { type Answer, apiCall, type CallOptions, expectError } from '../helpers/http.js';

const TOKEN = 'svc-token-0123456789-SECRET-abcdef';
const BODY_LIMIT = 64 * 1024;
const MAX_PLATES = 50;
const FAILING = 'FAL1A23';

const harness = useHarness('all');
let h: Harness;
let base: string;
const apps: FastifyInstance[] = [];
let tmp: string;

async function serve(config: Config, services: QueueServices = h.services): Promise<string> {
  const app = await createHttpApi({ services, config, logger: h.logs.logger });
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

function call(path: string, options: CallOptions = {}): Promise<Answer> {
  return apiCall(base, TOKEN, path, options);
}

async function waitFinished(id: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await call(`/v1/batches/${id}`);
    expect(answer.status).toBe(200);
    if (answer.json.finished) return answer.json;
    if (Date.now() > deadline) throw new Error(`batch ${id} not finished: ${answer.text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until no plate job is waiting, delayed or running (a parked job sleeps in `delayed`). */
async function queueIdle(timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await h.idle()) return;
    if (Date.now() > deadline) throw new Error('the queue is not idle');
    await new Promise((r) => setTimeout(r, 100));
  }
}

let markers = 0;

/**
 * A request that must cost nothing upstream, checked against one that must: a fresh plate posted
 * after it, finished, and the queue idle. Anything the first request had queued was queued ahead
 * of the marker, so by then it has reached the simulator; only the marker's create may be new.
 */
async function expectNoCreatesSince(creates: number): Promise<void> {
  const posted = await call('/v1/batches', { json: { plates: makePlates(1, 8_000 + markers++), name: 'marker' } });
  expect(posted.json.batch.created).toBe(true);
  await waitFinished(posted.json.batch.id);
  await queueIdle();
  expect(h.sim.stats().creates).toBe(creates + 1);
}

const jsonl = (text: string): any[] =>
  text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
const csvRows = (text: string): Record<string, string>[] =>
  parse(text, { bom: true, delimiter: ';', columns: true }) as Record<string, string>[];

beforeAll(async () => {
  h = await harness.start({
    label: 'http',
    sim: { failPlates: [FAILING] },
    config: { VQ_API_TOKENS: TOKEN, VQ_HTTP_BODY_LIMIT: String(BODY_LIMIT), VQ_HTTP_MAX_PLATES: String(MAX_PLATES) },
  });
  tmp = await mkdtemp(join(tmpdir(), 'vqb-http-'));
  base = await serve(h.config);
});

// Runs before the harness closes (vitest runs later hooks first).
afterAll(async () => {
  for (const app of apps) await app.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('auth', () => {
  it('refuses /v1 without a token or with a wrong one, in our error shape', async () => {
    const none = await call('/v1/batches', { auth: 'none' });
    expectError(none, 401, 'UNAUTHORIZED');
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expectError(await call('/v1/batches', { token: 'svc-token-0123456789-SECRET-abcdeX' }), 401, 'UNAUTHORIZED');
    expectError(
      await call('/v1/batches', { auth: 'x-api-key', token: 'wrong-but-long-enough-token' }),
      401,
      'UNAUTHORIZED',
    );
    // A wrong token is refused before its body is read or acted on.
    expectError(
      await call('/v1/batches', { token: 'nope-nope-nope-nope-nope', json: { plates: ['ABC1234'] } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('accepts the token as Bearer and as x-api-key', async () => {
    expect((await call('/v1/batches', { auth: 'bearer' })).status).toBe(200);
    expect((await call('/v1/batches', { auth: 'x-api-key' })).status).toBe(200);
  });

  it('serves no one when no tokens are configured, while /healthz still answers', async () => {
    const at = await serve({ ...h.config, http: { ...h.config.http, tokens: undefined } });
    expectError(await call('/v1/batches', { at }), 503, 'AUTH_NOT_CONFIGURED');
    expectError(
      await call('/v1/batches', { at, auth: 'none', json: { plates: ['ABC1234'] } }),
      503,
      'AUTH_NOT_CONFIGURED',
    );
    expect((await call('/healthz', { at, auth: 'none' })).status).toBe(200);
  });

  it('re-reads the tokens file when it changes', async () => {
    const file = join(tmp, 'tokens');
    const first = 'first-token-0123456789abcdef';
    const second = 'second-token-0123456789abcdef';
    await writeFile(file, `# service tokens\n${first}\nshort\n`);
    const at = await serve({ ...h.config, http: { ...h.config.http, tokens: { kind: 'file', path: file } } });
    expect((await call('/v1/batches', { at, token: first })).status).toBe(200);
    expectError(await call('/v1/batches', { at, token: 'short' }), 401, 'UNAUTHORIZED');
    await writeFile(file, `${second}\n`);
    await utimes(file, new Date(), new Date(Date.now() + 5_000));
    expectError(await call('/v1/batches', { at, token: first }), 401, 'UNAUTHORIZED');
    expect((await call('/v1/batches', { at, token: second })).status).toBe(200);
    await rm(file);
    expectError(await call('/v1/batches', { at, token: second }), 503, 'AUTH_NOT_CONFIGURED');
  });
});

describe('limits and errors', () => {
  it('refuses bodies over the limit, JSON or CSV, with 413', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`note${i}`, 'x'.repeat(4_000)])); // ~80 KiB
    expectError(await call('/v1/batches', { json: { plates: ['ABC1234'], metadata } }), 413, 'PAYLOAD_TOO_LARGE');
    expectError(
      await call('/v1/batches', { body: `placa\n${'ABC1234\n'.repeat(10_000)}`, type: 'text/csv' }),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    // Without a Content-Length (chunked), the stream is counted as it arrives.
    const chunked = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 20; i++) controller.enqueue(new TextEncoder().encode('ABC1234;x\n'.repeat(500)));
        controller.close();
      },
    });
    const res = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/csv' },
      body: chunked,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } });
  });

  it('refuses more than VQ_HTTP_MAX_PLATES plates with 413 TOO_MANY_PLATES, JSON or CSV, and enqueues nothing', async () => {
    const before = (await call('/v1/batches')).json.total;
    expectError(
      await call('/v1/batches', { json: { plates: makePlates(MAX_PLATES + 1, 9_000) } }),
      413,
      'TOO_MANY_PLATES',
    );
    expectError(
      await call('/v1/batches', { body: makePlates(MAX_PLATES + 1, 9_000).join('\n'), type: 'text/csv' }),
      413,
      'TOO_MANY_PLATES',
    );
    expect((await call('/v1/batches')).json.total).toBe(before);
  });

  it('answers malformed JSON and wrong types with 400', async () => {
    expectError(
      await call('/v1/batches', { body: '{"plates": ["ABC1234"', type: 'application/json' }),
      400,
      'BAD_REQUEST',
    );
    expectError(
      await call('/v1/batches', { body: '{"__proto__": {"x": 1}, "plates": []}', type: 'application/json' }),
      400,
      'BAD_REQUEST',
    );
    for (const json of [
      { plates: 'ABC1234' },
      { plates: [] },
      { plates: [true] },
      { plates: [123] },
      { plates: [{ plate: 'ABC1234', nested: { deep: 1 } }] },
      { plates: ['ABC1234'], force: 'yes' },
      { plates: ['ABC1234'], metadata: { a: { b: { c: { d: {} } } } } },
      { plates: ['ABC1234'], metadata: [1, 2] },
      { plate: ['ABC1234'] },
    ]) {
      const answer = await call('/v1/batches', { json });
      expectError(answer, 400, 'VALIDATION_FAILED');
    }
    // A batch id's form is enqueue's rule, the same error as at every door (request-rules.test.ts).
    expectError(await call('/v1/batches', { json: { plates: ['ABC1234'], batchId: '../etc' } }), 400, 'BAD_BATCH_ID');
    const deep = `{"plates":["ABC1234"],"metadata":{"a":${'['.repeat(5_000)}${']'.repeat(5_000)}}}`;
    expectError(await call('/v1/batches', { body: deep, type: 'application/json' }), 400, 'VALIDATION_FAILED');
    const typo = await call('/v1/batches', { json: { plates: [{ plate: 'ABC1234', flag: false }] } });
    expect(typo.json.error.message).toContain('body.plates[0]');
    expectError(await call('/v1/batches?limit=500'), 400, 'VALIDATION_FAILED');
    expectError(await call('/v1/batches?offset=-1'), 400, 'VALIDATION_FAILED');
  });

  it('answers other media types with 415, unknown things with 404, unusable CSV with its own code', async () => {
    expectError(
      await call('/v1/batches', { body: '<plates/>', type: 'application/xml' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(
      await call('/v1/batches/nope/retry', { body: 'ABC1234', type: 'text/csv' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(await call('/v1/batches/no-such-batch'), 404, 'NOT_FOUND');
    expectError(await call('/v1/batches/no-such-batch/results'), 404, 'NOT_FOUND');
    expectError(await call('/v1/batches/no-such-batch/retry', { json: {} }), 404, 'NOT_FOUND');
    expectError(await call('/v2/nothing'), 404, 'NOT_FOUND');
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(200, 1)]);
    expectError(await call('/v1/batches', { body: png, type: 'text/csv' }), 422, 'CSV_BINARY');
    expectError(
      await call('/v1/batches?column=chassi', { body: 'placa;nome\nABC1234;Ana\n', type: 'text/csv' }),
      422,
      'CSV_NO_PLATE_COLUMN',
    );
  });

  it('hides unexpected failures behind 500 INTERNAL', async () => {
    const broken = {
      ...h.services,
      batchViews: { list: () => Promise.reject(new Error('boom: /srv/secret/path')) },
    } as unknown as QueueServices;
    const at = await serve(h.config, broken);
    const answer = await call('/v1/batches', { at });
    expectError(answer, 500, 'INTERNAL');
    expect(answer.text).not.toContain('boom');
  });
});

describe('batches', () => {
  it('takes a JSON batch, reports progress, streams partial then final results', async () => {
    const [a, b, c] = makePlates(3, 100);
    const plates = [
      a!,
      { plate: b!, customer: 'ACME', seq: 7 },
      'not a plate',
      a!,
      FAILING,
      { plate: c!, customer: 'Zé' },
    ];
    const posted = await call('/v1/batches', { json: { plates, metadata: { by: 'test' }, name: 'frota' } });
    expect(posted.status).toBe(202);
    const id = posted.json.batch.id as string;
    expect(id).toMatch(/^frota-[0-9a-f]{12}$/);
    expect(posted.headers.get('location')).toBe(`/v1/batches/${id}`);
    expect(posted.json).toMatchObject({
      batch: {
        id,
        created: true,
        source: 'api',
        name: 'frota',
        metadata: { by: 'test' },
        counts: { total: 6, enqueued: 4, rejected: 1, duplicates: 1 },
      },
      rejects: [{ row: 3, input: 'not a plate', reason: 'BAD_LENGTH', message: expect.any(String) }],
      links: { self: `/v1/batches/${id}`, results: `/v1/batches/${id}/results` },
    });

    // Right after the POST no plate can have finished (the first poll comes after 300 ms).
    const partial = jsonl((await call(`/v1/batches/${id}/results`)).text);
    expect(partial).toHaveLength(6);
    expect(partial.filter((r) => r.status === 'pending').length).toBeGreaterThan(0);
    const running = (await call(`/v1/batches/${id}`)).json;
    expect(running).toMatchObject({ finished: false, progress: { of: 4 } });
    expect(running.eta?.seconds).toBeGreaterThanOrEqual(0);

    const done = await waitFinished(id);
    expect(done).toMatchObject({
      finished: true,
      progress: { percent: 100, finished: 4, of: 4 },
      counts: { done: 3, failed: 1 },
    });
    expect(done.eta).toBeUndefined();

    const results = await call(`/v1/batches/${id}/results?format=jsonl`);
    expect(results.headers.get('content-type')).toContain('application/x-ndjson');
    const rows = jsonl(results.text);
    expect(rows.map((r) => [r.row, r.status])).toEqual([
      [1, 'done'],
      [2, 'done'],
      [3, 'rejected'],
      [4, 'duplicate'],
      [5, 'failed'],
      [6, 'done'],
    ]);
    expect(rows[1]).toMatchObject({
      plate: b,
      input_columns: { customer: 'ACME', seq: '7' },
      result: expect.any(Object),
    });
    expect(rows[3]).toMatchObject({ duplicateOf: 1 });
    expect(rows[4].error.code).toBeTruthy();

    const csv = await call(`/v1/batches/${id}/results?format=csv`);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const records = csvRows(csv.text);
    expect(records.map((r) => r.status)).toEqual(['done', 'done', 'rejected', 'duplicate', 'failed', 'done']);
    expect(records[1]).toMatchObject({ plate: b, customer: 'ACME', seq: '7' });
    expect(records[5]).toMatchObject({ customer: 'Zé' });
    expect(Object.keys(records[0]!).some((k) => k.startsWith('result.'))).toBe(true);
  });

  it('takes a text/csv body (; and an extra column), and the same content again is the same batch', async () => {
    const [a, b] = makePlates(2, 200);
    const body = `placa;cliente\n${a};Ana\n${b};Bruno\nxx;Carla\n${a};Ana de novo\nABCD123;Edu\n`;
    const posted = await call('/v1/batches?name=frota.csv', { body, type: 'text/csv; charset=utf-8' });
    expect(posted.status).toBe(202);
    const id = posted.json.batch.id as string;
    expect(posted.json.batch).toMatchObject({
      created: true,
      extraColumns: ['cliente'],
      counts: { total: 5, enqueued: 2, rejected: 2, duplicates: 1 },
    });
    expect(posted.json.rejects).toEqual([
      expect.objectContaining({ row: 3, input: 'xx', reason: 'BAD_LENGTH' }),
      expect.objectContaining({ row: 5, input: 'ABCD123', reason: 'BAD_FORMAT' }),
    ]);
    await waitFinished(id);
    const creates = h.sim.stats().creates;

    const again = await call('/v1/batches?name=frota.csv', { body, type: 'text/csv; charset=utf-8' });
    expect(again.status).toBe(202);
    expect(again.json.batch).toMatchObject({ id, created: false, finished: true, counts: { total: 5, enqueued: 2 } });
    await expectNoCreatesSince(creates);

    const rows = jsonl((await call(`/v1/batches/${id}/results`)).text);
    expect(rows.map((r) => [r.status, r.input_columns.cliente])).toEqual([
      ['done', 'Ana'],
      ['done', 'Bruno'],
      ['rejected', 'Carla'],
      ['duplicate', 'Ana de novo'],
      ['rejected', 'Edu'],
    ]);
    const forced = await call('/v1/batches?name=frota.csv&force=true', { body, type: 'text/csv' });
    expect(forced.json.batch.id).not.toBe(id);
    expect(forced.json.batch.created).toBe(true);
    await waitFinished(forced.json.batch.id);
  });

  it('the same JSON again is the same batch and creates nothing, even sent twice at once', async () => {
    const json = { plates: makePlates(30, 300) };
    const [first, twin] = await Promise.all([call('/v1/batches', { json }), call('/v1/batches', { json })]);
    expect(twin.json.batch.id).toBe(first.json.batch.id);
    expect([first.json.batch.created, twin.json.batch.created].sort()).toEqual([false, true]);
    const finished = await waitFinished(first.json.batch.id);
    expect(finished.counts).toMatchObject({ total: 30, enqueued: 30, done: 30 });
    const creates = h.sim.stats().creates;
    const again = await call('/v1/batches', { json });
    expect(again.json.batch).toMatchObject({ id: first.json.batch.id, created: false, counts: { total: 30 } });
    await expectNoCreatesSince(creates);
  });

  it('retries failed plates: polling again by default, creating anew with recreate', async () => {
    const posted = await call('/v1/batches', {
      json: { plates: [FAILING, ...makePlates(2, 400)], batchId: 'retry-me' },
    });
    expect(posted.json.batch.id).toBe('retry-me');
    await waitFinished('retry-me');
    const creates = h.sim.stats().creates;
    const polled = await call('/v1/batches/retry-me/retry', { json: {} });
    expect(polled.status).toBe(202);
    expect(polled.json).toMatchObject({ batchId: 'retry-me', retried: 1, recreated: 0, skipped: 0 });
    await waitFinished('retry-me');
    expect(h.sim.stats().creates).toBe(creates);

    const recreated = await call('/v1/batches/retry-me/retry', { json: { recreate: true } });
    expect(recreated.json).toMatchObject({ retried: 1, recreated: 1 });
    const done = await waitFinished('retry-me');
    expect(h.sim.stats().creates).toBe(creates + 1);
    expect(done.counts).toMatchObject({ failed: 1, done: 2 }); // the simulator still fails that plate
    expectError(await call('/v1/batches/retry-me/retry', { json: { recreate: 'yes' } }), 400, 'VALIDATION_FAILED');
  });

  it('lists batches newest first, a page at a time', async () => {
    const all = await call('/v1/batches?limit=100');
    const total = all.json.total as number;
    expect(total).toBeGreaterThanOrEqual(5);
    const ids = all.json.batches.map((b: { id: string }) => b.id);
    const created = all.json.batches.map((b: { createdAt: string }) => Date.parse(b.createdAt));
    expect(created).toEqual([...created].sort((x, y) => y - x));
    const page1 = await call('/v1/batches?limit=2');
    const page2 = await call(page1.json.links.next);
    expect(page1.json).toMatchObject({ total, offset: 0, limit: 2 });
    expect(page1.json.links.prev).toBeUndefined();
    expect([...page1.json.batches, ...page2.json.batches].map((b: { id: string }) => b.id)).toEqual(ids.slice(0, 4));
    expect(page2.json.links.prev).toBe('/v1/batches?offset=0&limit=2');
  });
});

describe('operations', () => {
  it('/healthz says up or down without a token, the accounts with one, and 503 when Redis is unreachable', async () => {
    const bare = await call('/healthz', { auth: 'none' });
    expect(bare.status).toBe(200);
    expect(bare.json).toEqual({ status: 'ok', redis: 'ok' });
    const ok = await call('/healthz');
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({
      status: 'ok',
      redis: 'ok',
      accounts: [
        {
          account: 'default',
          rateLimit: h.config.rateLimit.text,
          rate: { perSecond: 50, source: 'configured', text: '50/s, configured' },
          paused: false,
          upstream: { state: 'ok' },
        },
      ],
    });

    await h.line.pauseByOperator('maintenance');
    const paused = await call('/healthz');
    expect(paused.json).toMatchObject({
      status: 'degraded',
      accounts: [{ paused: true, reason: expect.stringContaining('maintenance'), waiting: { reason: 'paused' } }],
    });
    await h.line.resume();

    const dead = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    const at = await serve(h.config, { ...h.services, redis: dead });
    const down = await call('/healthz', { at, auth: 'none' });
    expect(down.status).toBe(503);
    expect(down.json).toEqual({ status: 'degraded', redis: 'down' });
    dead.disconnect();
  });

  it('a batch says why it waits while the line is paused, and has no ETA then', async () => {
    await h.line.pauseByOperator('maintenance window');
    try {
      const posted = await call('/v1/batches', { json: { plates: makePlates(2, 500) } });
      const view = (await call(posted.json.links.self)).json;
      expect(view).toMatchObject({
        finished: false,
        waiting: {
          reason: 'paused',
          code: 'PAUSED_BY_OPERATOR',
          message: expect.stringContaining('maintenance window'),
        },
      });
      expect(view.eta).toBeUndefined();
    } finally {
      await h.line.resume();
    }
  });

  it('/openapi.json is an OpenAPI 3 document of the declared routes', async () => {
    const doc = (await call('/openapi.json', { auth: 'none' })).json;
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/batches',
        '/v1/batches/{id}',
        '/v1/batches/{id}/results',
        '/v1/batches/{id}/retry',
        '/healthz',
      ]),
    );
    const post = doc.paths['/v1/batches'].post;
    expect(Object.keys(post.requestBody.content)).toEqual([
      'application/json',
      'multipart/form-data',
      'text/csv',
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    ]);
    expect(post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreateBatchBody',
    });
    expect(doc.components.schemas.CreateBatchBody.properties.plates.type).toBe('array');
    expect(post.responses['202'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreateBatchReply',
    });
    expect(doc.components.schemas.CreateBatchReply.properties.batch).toBeDefined();
    expect(post.responses['413']).toBeDefined();
    expect(doc.paths['/v1/batches'].get.parameters.map((p: { name: string }) => p.name)).toEqual(['offset', 'limit']);
    expect(doc.components.securitySchemes).toMatchObject({
      bearer: { scheme: 'bearer' },
      apiKey: { name: 'x-api-key' },
    });
  });

  it('logs each request once at info, and never the token', async () => {
    await call('/v1/batches?limit=1', { auth: 'x-api-key' });
    // Its own 401, not one an earlier test left in the log (the tests of a file may run shuffled).
    expect((await call('/v1/batches', { auth: 'none' })).status).toBe(401);
    const lines = h.logs.lines.filter((l) => l.msg === 'request' && l.url === '/v1/batches?limit=1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 30, method: 'GET', statusCode: 200 });
    const unauthorized = h.logs.lines.filter((l) => l.msg === 'request' && l.statusCode === 401);
    expect(unauthorized.length).toBeGreaterThan(0);
    expect(unauthorized[0]).toMatchObject({ code: 'UNAUTHORIZED' });
    const text = h.logs.text();
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('first-token-0123456789abcdef');
    expect(text).not.toContain('svc-token-0123456789-SECRET');
  });
});

describe('views (pure)', () => {
  const line = (state: Partial<AccountLineState> = {}): AccountLineState => ({
    account: 'default',
    rateLimit: '60/min',
    paused: false,
    ...state,
  });
  const info = (counts: Partial<BatchInfo['counts']>): BatchInfo =>
    ({
      id: 'b',
      account: 'default',
      priority: 'normal',
      weight: 1,
      source: 'api',
      name: 'b',
      createdAt: 0,
      sealed: true,
      metadata: {},
      extraColumns: [],
      product: 'p',
      reuseWithinMs: 0,
      counts: { enqueued: 100, done: 0, failed: 0, creates: 0, polls: 0, ...counts },
    }) as BatchInfo;

  it('estimates the time left from the rate, requests per plate so far and any wait in force', () => {
    // 100 plates × 2 requests at 1/s before anything finished, the batch alone on its account.
    expect(estimateEta(info({}), line(), 1, 1, 0)?.seconds).toBe(200);
    // Sharing the account with an equal batch: half the rate.
    expect(estimateEta(info({}), line(), 1, 0.5, 0)?.seconds).toBe(400);
    // 50 left, 3 requests per finished plate so far.
    expect(estimateEta(info({ done: 50, creates: 50, polls: 100 }), line(), 1, 1, 0)?.seconds).toBe(150);
    expect(estimateEta(info({}), line({ limitedUntil: 60_000, limitReason: 'quota' }), 1, 1, 0)?.seconds).toBe(260);
    expect(estimateEta(info({}), line({ paused: true }), 1, 1, 0)).toBeUndefined();
    expect(estimateEta({ ...info({}), finishedAt: 1 }, line(), 1, 1, 0)).toBeUndefined();
  });

  it('says why the line waits', () => {
    expect(waitingOf(line())).toBeUndefined();
    expect(
      waitingOf(line({ paused: true, pause: { code: 'EXPIRED_API_KEY', message: 'the key expired', at: 0 } })),
    ).toMatchObject({ reason: 'paused', code: 'EXPIRED_API_KEY' });
    expect(waitingOf(line({ limitedUntil: 5_000, limitReason: 'rate_limit' }))).toMatchObject({
      reason: 'rate_limit',
      until: new Date(5_000).toISOString(),
    });
  });

  it('dryRun reports the cost and sends nothing upstream; maxCreates caps the batch', async () => {
    const plates = makePlates(12, 7_000);
    const dry = await call('/v1/batches', { json: { plates: [...plates, 'bad', plates[0]], dryRun: true } });
    expect(dry.status).toBe(200);
    expect(dry.json).toMatchObject({
      dryRun: true,
      estimate: { rows: 14, plates: 12, rejected: 1, duplicates: 1, creates: 12 },
    });
    // Other batches of this file may still be polling: look at these plates only.
    const createsByPlate = h.sim.stats({ plates: true }).createsByPlate ?? {};
    expect(plates.filter((p) => createsByPlate[p] !== undefined)).toEqual([]);
    const listed = await call('/v1/batches?limit=100');
    expect(listed.json.batches.map((b: { id: string }) => b.id)).not.toContain(dry.json.estimate.batchId);

    const capped = await call('/v1/batches', { json: { plates, maxCreates: 5, batchId: 'http-capped' } });
    expect(capped.status).toBe(202);
    // Settled: the batch is held at its cap (out of the scheduler: none of its plates can be
    // created until the cap is raised) and the plates within it are finished.
    const deadline = Date.now() + 20_000;
    let view: any;
    for (;;) {
      view = (await call('/v1/batches/http-capped')).json;
      const held = (await h.services.budget.forBatch(await h.services.batches.ref('http-capped'))).held;
      if (held && view.counts.done + view.counts.failed >= 5 && view.counts.inflight === 0) break;
      if (Date.now() > deadline) throw new Error(`the capped batch did not settle: ${JSON.stringify(view.counts)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(view.counts).toMatchObject({ done: 5, creates: 5 });
    expect(view.finished).toBe(false);
    expect(view.waiting?.reason).toBe('budget');
  });
});
