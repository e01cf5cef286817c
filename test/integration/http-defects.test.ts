// The HTTP API defects issue 15 found with real clients and an adversarial probe, one block each:
// a batch id reused for other plates, the upstream key as a service token, bodies of an unknown
// media type, ids that reach other Redis keys, a CSV with only a header, errors from Node's parser
// and the dashboard outside our shape, tokens in the query string written to the log, and
// connections that send their body slowly (or never) held open without limit.
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { ConfigError, isError } from '../../src/errors.js';
import { createInboxWatcher } from '../../src/producers/inbox.js';
import { createHttpApi } from '../../src/server.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { Secret } from '../../src/setting-values.js';
import { type Harness, makePlates, sleep, TEST_KEY, useHarness } from '../helpers/engine.js';
import { type Answer, apiCall, type CallOptions, expectError } from '../helpers/http.js';
import { harnessEnv, runVqb } from '../helpers/process.js';

const TOKEN = 'svc-token-defects-0123456789-abcdef';

const harness = useHarness('all');
let h: Harness;
let base: string;
let tmp: string;
const apps: FastifyInstance[] = [];
const extraServices: QueueServices[] = [];

async function serve(
  config: Config = h.config,
  services: QueueServices = h.services,
): Promise<{ base: string; port: number }> {
  const app = await createHttpApi({ services, config, logger: h.logs.logger });
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  return { base: `http://127.0.0.1:${port}`, port };
}

function call(path: string, options: CallOptions = {}): Promise<Answer> {
  return apiCall(base, TOKEN, path, options);
}

async function batchTotal(): Promise<number> {
  return (await h.services.batchViews.list(0, 1)).total;
}

/** A raw HTTP exchange: what the server wrote back, and whether it closed the connection. */
interface RawConnection {
  socket: Socket;
  received(): string;
  /** Resolves when the server has closed the connection (true), or after `waitMs` (false). */
  closed(waitMs: number): Promise<boolean>;
}

function rawConnection(port: number): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    let isClosed = false;
    const closeWaiters: (() => void)[] = [];
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('utf8');
    });
    // The server's FIN or RST both mean it let go of the connection.
    const onClosed = () => {
      isClosed = true;
      for (const w of closeWaiters.splice(0)) w();
    };
    socket.on('end', onClosed);
    socket.on('close', onClosed);
    socket.on('error', () => {});
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => data,
        closed: (waitMs) =>
          isClosed
            ? Promise.resolve(true)
            : new Promise<boolean>((done) => {
                const timer = setTimeout(() => done(isClosed), waitMs);
                closeWaiters.push(() => {
                  clearTimeout(timer);
                  done(true);
                });
              }),
      }),
    );
    socket.once('error', reject);
  });
}

/** Splits a raw HTTP/1.1 response into its status and JSON body. */
function parseRaw(raw: string): { status: number; json: any; text: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1]);
  const text = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  // A chunked body: take the JSON between the chunk sizes.
  const jsonText = /^[0-9a-f]+\r\n/i.test(text)
    ? text.replace(/^[0-9a-f]+\r\n/i, '').replace(/\r\n0\r\n\r\n$/, '')
    : text;
  let json: unknown;
  try {
    json = JSON.parse(jsonText);
  } catch {
    json = undefined;
  }
  return { status, json, text: jsonText };
}

async function rawExchange(port: number, request: string): Promise<{ status: number; json: any; text: string }> {
  const conn = await rawConnection(port);
  conn.socket.write(request);
  expect(await conn.closed(20_000)).toBe(true);
  return parseRaw(conn.received());
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'vqb-defects-'));
  h = await harness.start({
    label: 'http-defects',
    config: { VQ_API_TOKENS: TOKEN, VQ_ROOT: join(tmp, 'root'), VQ_INBOX_STABLE: '100ms', VQ_INBOX_POLL: '100ms' },
  });
  base = (await serve()).base;
});

// Runs before the harness closes (vitest runs later hooks first).
afterAll(async () => {
  for (const app of apps) await app.close();
  for (const services of extraServices) await services.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('1. a batch id already taken by other content', () => {
  it('answers 409 BATCH_ID_TAKEN and queues nothing; the same content again is the same batch', async () => {
    const first = await call('/v1/batches', { json: { plates: makePlates(2, 100), batchId: 'taken-1' } });
    expect(first.status).toBe(202);
    expect(first.json.batch).toMatchObject({ id: 'taken-1', created: true });

    const again = await call('/v1/batches', { json: { plates: makePlates(2, 100), batchId: 'taken-1' } });
    expect(again.status).toBe(202);
    expect(again.json.batch).toMatchObject({ id: 'taken-1', created: false });

    const other = await call('/v1/batches', { json: { plates: makePlates(3, 200), batchId: 'taken-1' } });
    expectError(other, 409, 'BATCH_ID_TAKEN');
    expect(other.json.error.message).toContain('taken-1');
    // The same plates as other fields of a row are other content too.
    const withFields = await call('/v1/batches', {
      json: { plates: makePlates(2, 100).map((plate) => ({ plate, customer: '42' })), batchId: 'taken-1' },
    });
    expectError(withFields, 409, 'BATCH_ID_TAKEN');

    const info = await h.services.batchViews.get('taken-1');
    expect(info.counts).toMatchObject({ total: 2, enqueued: 2 });
    const rows = [];
    for await (const row of h.services.batches.rows('taken-1')) rows.push(row.input);
    expect(rows).toEqual(makePlates(2, 100));
  });
});

describe('2. the upstream key is never a service token', () => {
  it('refuses to start when a configured service token is an upstream key', async () => {
    const withKey: Config = {
      ...h.config,
      http: { ...h.config.http, tokens: { kind: 'inline', secrets: [new Secret(TOKEN), new Secret(TEST_KEY)] } },
    };
    const err = await createHttpApi({ services: h.services, config: withKey, logger: h.logs.logger }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isError(err, ConfigError)).toBe(true);
    expect((err as Error).message).toMatch(/upstream key/);
    expect((err as Error).message).not.toContain(TEST_KEY);

    // An account's own token list, with an inline key.
    const inlineKey = 'inline-upstream-key-0123456789';
    const account = {
      ...h.config.accounts[0]!,
      apiKey: { kind: 'inline' as const, secret: new Secret(inlineKey) },
      tokens: { kind: 'inline' as const, secrets: [new Secret(inlineKey)] },
    };
    const scoped: Config = { ...h.config, accounts: [account] };
    const err2 = await createHttpApi({ services: h.services, config: scoped, logger: h.logs.logger }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isError(err2, ConfigError)).toBe(true);
    expect(h.logs.text()).not.toContain(inlineKey);
  });

  it('`vqb serve` stops at start-up with one line naming the setting, never the key', async () => {
    const { code, stdout, stderr } = await runVqb(
      ['serve', '--no-inbox'],
      harnessEnv(h, { VQ_API_TOKENS: `${TOKEN},${TEST_KEY}`, VQ_HTTP_PORT: '0' }),
    );
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^vqb: VQ_API_TOKENS: a service token is the upstream key of account default/);
    expect(stderr).not.toContain(TEST_KEY);
  }, 30_000);

  it('refuses a request that presents the upstream key, even once a tokens file lists it', async () => {
    const file = join(tmp, 'tokens');
    await writeFile(file, `${TOKEN}\n`);
    const { base: at } = await serve({ ...h.config, http: { ...h.config.http, tokens: { kind: 'file', path: file } } });
    expect((await call('/v1/batches', { at })).status).toBe(200);
    expectError(await call('/v1/batches', { at, token: TEST_KEY }), 401, 'UNAUTHORIZED');

    // Someone adds the key to the tokens file while the server runs.
    await writeFile(file, `${TOKEN}\n${TEST_KEY}\n`);
    await utimes(file, new Date(), new Date(Date.now() + 5_000));
    expectError(await call('/v1/batches', { at, token: TEST_KEY }), 401, 'UNAUTHORIZED');
    expectError(await call('/v1/batches', { at, token: TEST_KEY, header: 'x-api-key' }), 401, 'UNAUTHORIZED');
    expect((await call('/v1/batches', { at })).status).toBe(200);
    expect(h.logs.lines.some((l) => l.level === 40 && /upstream key/.test(String(l.msg)))).toBe(true);
    expect(h.logs.text()).not.toContain(TEST_KEY);
  });
});

describe('3. a body of another media type', () => {
  it('answers 415 to text/plain (and other types) and enqueues nothing', async () => {
    const before = await batchTotal();
    expectError(
      await call('/v1/batches', { body: 'placa\nABC1234\n', type: 'text/plain' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(
      await call('/v1/batches', { body: '{"plates":["ABC1234"]}', type: 'text/plain; charset=utf-8' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(
      await call('/v1/batches', { body: 'plates=ABC1234', type: 'application/x-www-form-urlencoded' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expectError(
      await call('/v1/batches/taken-1/retry', { body: 'recreate', type: 'text/plain' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expect(await batchTotal()).toBe(before);
  });
});

describe('4. ids that are not batch ids', () => {
  it('answer 404 in our shape on every batch route, never a Redis type error', async () => {
    const made = await call('/v1/batches', { json: { plates: makePlates(1, 300), batchId: 'colon' } });
    expect(made.status).toBe(202);
    for (const id of ['colon:rows', 'colon:outcomes', 'colon:ingest', 'colon%3Arows', 'a.b', 'with space']) {
      expectError(await call(`/v1/batches/${id}`), 404, 'NOT_FOUND');
      expectError(await call(`/v1/batches/${id}/results`), 404, 'NOT_FOUND');
      expectError(await call(`/v1/batches/${id}/results?format=csv`), 404, 'NOT_FOUND');
      expectError(await call(`/v1/batches/${id}/retry`, { json: {} }), 404, 'NOT_FOUND');
    }
    expect(h.logs.text()).not.toMatch(/WRONGTYPE/);
  });

  it('vqb export, status and retry refuse them with one line (exit 2), never a Redis error', async () => {
    for (const args of [
      ['export', 'colon:rows'],
      ['status', 'colon:rows'],
      ['retry', 'colon:outcomes'],
      ['export', '../colon'],
    ]) {
      const { code, stdout, stderr } = await runVqb(args, harnessEnv(h));
      expect({ args, code, stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr).toMatch(/^vqb: .*batch id/);
      expect(stderr).not.toMatch(/WRONGTYPE|\bat .+\.js:\d+/);
    }
  }, 60_000);
});

describe('5. a CSV with a header and no rows', () => {
  it('is refused over HTTP with 422 CSV_EMPTY, and no batch is made', async () => {
    const before = await batchTotal();
    for (const body of ['placa\r\n', 'placa;cliente;obs\n', 'placa;cliente\r\n;;\r\n\r\n', '\uFEFFplaca,cliente\n']) {
      const answer = await call('/v1/batches', { body, type: 'text/csv' });
      expectError(answer, 422, 'CSV_EMPTY');
      expect(answer.json.error.message).toMatch(/header/);
    }
    expect(await batchTotal()).toBe(before);
  });

  it('is moved to failed/ by the drop folder, with the reason', async () => {
    const root = h.config.root;
    const watcher = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
    try {
      await watcher.scanOnce();
      const before = await batchTotal();
      await writeFile(join(root, 'inbox', 'so-cabecalho.csv'), 'placa;cliente\r\n');
      for (
        let i = 0;
        i < 100 &&
        !(await readdir(join(root, 'failed')).catch(() => [] as string[])).includes('so-cabecalho.csv.error.txt');
        i++
      ) {
        await watcher.scanOnce();
        await sleep(100);
      }
      expect((await readdir(join(root, 'failed'))).sort()).toEqual(['so-cabecalho.csv', 'so-cabecalho.csv.error.txt']);
      expect(await readFile(join(root, 'failed', 'so-cabecalho.csv.error.txt'), 'utf8')).toMatch(
        /header.*no rows.*\[CSV_EMPTY\]/s,
      );
      expect(await readdir(join(root, 'archive')).catch(() => [])).toEqual([]);
      expect(await batchTotal()).toBe(before);
    } finally {
      await watcher.stop();
    }
  });
});

describe("6. errors from Node's parser and from the dashboard", () => {
  it('431 and 400 from the HTTP parser are in our shape', async () => {
    const { port } = new URL(base);
    const big = await rawExchange(
      Number(port),
      `GET /v1/batches HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expectError(big, 431, 'HEADERS_TOO_LARGE');
    const garbage = await rawExchange(Number(port), 'GARBAGE\r\n\r\n');
    expectError(garbage, 400, 'BAD_REQUEST');
    const badLength = await rawExchange(
      Number(port),
      'POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
    );
    expectError(badLength, 400, 'BAD_REQUEST');
  });

  it("the dashboard's own errors (read-only, not found, bad query, a failure inside) are in our shape", async () => {
    const queue = h.services.accounts.queues()[0]!.name;
    const path = `/admin/queues/api/queues/${encodeURIComponent(queue)}`;
    expectError(await call(`${path}/pause`, { method: 'PUT' }), 405);
    expectError(await call(`${path}/add`, { json: { name: 'x', data: {} } }), 405);
    expectError(await call(`${path}/no-such-job`), 404);
    expectError(await call(`/admin/queues/api/queues/no-such-queue/clean/completed`, { method: 'PUT' }), 404);
    expectError(await call(`/admin/queues/api/queues?activeQueue=${encodeURIComponent(queue)}&page=abc`), 400);
    expectError(await call(`${path}/add`, { body: '{', type: 'application/json' }), 400);

    // A failure inside the dashboard: its own services, one of whose queues breaks.
    const services = await openQueueServices(h.config);
    extraServices.push(services);
    const broken = services.accounts.queues()[0]!;
    broken.getJobCounts = async () => {
      throw new Error('dashboard-internal-detail');
    };
    const { base: at } = await serve(h.config, services);
    const failed = await call(`/admin/queues/api/queues?activeQueue=${encodeURIComponent(queue)}`, { at });
    expectError(failed, 500, 'INTERNAL');
    expect(failed.text).not.toContain('dashboard-internal-detail');
  });
});

describe('7. a token in the query string', () => {
  it('is refused and never written to the log', async () => {
    const secrets = [
      'qs-secret-token-0000000001',
      'qs-secret-token-0000000002',
      'qs-secret-token-0000000003',
      'qs-secret-token-0000000004',
      'qs-secret-token-0000000005',
    ];
    const names = ['token', 'api_key', 'apikey', 'key', 'access_token'];
    for (const [i, name] of names.entries()) {
      expectError(await call(`/v1/batches?${name}=${secrets[i]}&limit=5`, { token: null }), 401, 'UNAUTHORIZED');
    }
    // Any case, and on a route that does not exist.
    expectError(await call(`/nowhere?Token=${secrets[0]}`, { token: null }), 404, 'NOT_FOUND');
    expectError(await call(`/v1/batches?ACCESS_TOKEN=${secrets[1]}`, { token: null }), 401, 'UNAUTHORIZED');
    const text = h.logs.text();
    for (const secret of secrets) expect(text).not.toContain(secret);
    // The request is still logged, with what is not secret.
    const lines = h.logs.lines.filter(
      (l) =>
        l.msg === 'request' &&
        typeof l.url === 'string' &&
        (l.url as string).startsWith('/v1/batches?') &&
        l.statusCode === 401,
    );
    expect(lines.length).toBeGreaterThanOrEqual(names.length);
    expect(lines.some((l) => String(l.url).includes('limit=5'))).toBe(true);
  });
});

describe('8. slow and stalled requests', () => {
  /** A request's head, its body announced as `length` bytes, of which only `sent` are written. */
  function slowPost(withToken: boolean, length = 100_000): string {
    return [
      'POST /v1/batches HTTP/1.1',
      'Host: x',
      'Content-Type: text/csv',
      `Content-Length: ${length}`,
      ...(withToken ? [`Authorization: Bearer ${TOKEN}`] : []),
      '',
      'placa\r\nABC1234\r\n',
    ].join('\r\n');
  }

  it('answers 408 in our shape and closes connections whose request does not arrive in VQ_HTTP_REQUEST_TIMEOUT', async () => {
    const { port } = await serve({ ...h.config, http: { ...h.config.http, requestTimeoutMs: 1_000 } });
    const slowBodies = await Promise.all(Array.from({ length: 5 }, () => rawConnection(port)));
    for (const c of slowBodies) c.socket.write(slowPost(true));
    const slowHeads = await Promise.all(Array.from({ length: 3 }, () => rawConnection(port)));
    for (const c of slowHeads) c.socket.write('GET /v1/batches HTTP/1.1\r\nHost: x\r\n');
    // Keep trickling: the timeout bounds the whole request, not the gaps between its bytes.
    const trickle = setInterval(() => {
      for (const c of slowBodies) if (!c.socket.destroyed) c.socket.write('ABC1234\r\n');
    }, 200);
    try {
      for (const c of [...slowBodies, ...slowHeads]) {
        expect(await c.closed(30_000)).toBe(true);
        expectError(parseRaw(c.received()), 408, 'REQUEST_TIMEOUT');
      }
    } finally {
      clearInterval(trickle);
    }
  }, 60_000);

  it('closes the connection of an unauthenticated request after its 401, without waiting for the body', async () => {
    const { port } = new URL(base);
    const conns = await Promise.all(Array.from({ length: 5 }, () => rawConnection(Number(port))));
    for (const c of conns) c.socket.write(slowPost(false));
    for (const c of conns) {
      expect(await c.closed(20_000)).toBe(true);
      const answer = parseRaw(c.received());
      expectError(answer, 401, 'UNAUTHORIZED');
    }
  }, 60_000);
});
