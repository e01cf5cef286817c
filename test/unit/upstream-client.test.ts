// UpstreamClient against undici's MockAgent with the network disabled: what goes on the wire, what
// comes back, and that the key never leaks into an error.
import { mkdtemp, rm, unlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockAgent, type MockPool } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { Secret } from '../../src/setting-values.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import {
  BadResponseError,
  InvalidKeyError,
  PermanentError,
  RateLimitedError,
  TransientError,
  UpstreamError,
} from '../../src/upstream/errors.js';
import { createKeyProvider, type KeyProvider } from '../../src/upstream/key.js';
import { decide } from '../../workers/actions.js';
import { rejection } from '../helpers/process.js';

const ORIGIN = 'https://api.vehicles.test';
const KEY = 'sk_live_9f8e7d6c5b4a';
const NOW = Date.UTC(2030, 0, 1, 12, 0, 0);
const NOW_S = NOW / 1000;
const CREATE_PATH = '/queries/integration/agregados';

let agent: MockAgent;
let pool: MockPool;
let clients: UpstreamClient[] = [];

beforeEach(() => {
  agent = new MockAgent();
  agent.disableNetConnect();
  pool = agent.get(ORIGIN);
});

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await agent.close();
});

function client(options: Partial<UpstreamClientOptions> = {}): UpstreamClient {
  const c = new UpstreamClient({
    baseUrl: ORIGIN,
    apiKey: async () => KEY,
    dispatcher: agent,
    now: () => NOW,
    ...options,
  });
  clients.push(c);
  return c;
}

interface Seen {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

function lowerHeaders(headers: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      out[name] = value;
    });
  } else if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) out[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
  } else if (headers && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = String(value);
  }
  return out;
}

const envelope = (statusCode: number, body: unknown) => JSON.stringify({ statusCode, body });
const rateHeaders = (limit: number, remaining: number, resetS: number) => ({
  'x-ratelimit-limit': String(limit),
  'x-ratelimit-remaining': String(remaining),
  'x-ratelimit-reset': String(resetS),
});

describe('the request on the wire', () => {
  it('create: POST /queries/integration/agregados, JSON body, bare x-api-key, JSON content type', async () => {
    const seen: Seen[] = [];
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply((opts) => {
      seen.push({ method: opts.method, path: opts.path, headers: lowerHeaders(opts.headers), body: opts.body });
      return { statusCode: 201, data: envelope(201, { queryId: 'q-1', status: 'PROCESSING' }) };
    });
    const out = await client().createQuery('ABC1D23');
    expect(out).toMatchObject({ queryId: 'q-1', status: 'PROCESSING', state: 'pending', terminal: false });

    expect(seen).toHaveLength(1);
    const req = seen[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe(CREATE_PATH);
    expect(req.body).toBe('{"keys":{"licensePlate":"ABC1D23"}}');
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['authorization']).toBeUndefined();
    expect(req.headers['content-type']).toBe('application/json');
  });

  it('get: GET /queries/integration/{queryId} (encoded), no body, still JSON content type', async () => {
    const seen: Seen[] = [];
    pool.intercept({ path: '/queries/integration/q%2F7%20x', method: 'GET' }).reply((opts) => {
      seen.push({ method: opts.method, path: opts.path, headers: lowerHeaders(opts.headers), body: opts.body });
      return { statusCode: 200, data: envelope(200, { status: 'COMPLETED', result: { make: 'FIAT' } }) };
    });
    const out = await client().getQuery('q/7 x');
    expect(out.queryId).toBe('q/7 x');
    expect(out.state).toBe('completed');
    expect(out.result).toEqual({ status: 'COMPLETED', result: { make: 'FIAT' } });

    const req = seen[0]!;
    expect(req.method).toBe('GET');
    expect(req.body == null || req.body === '').toBe(true);
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['content-type']).toBe('application/json');
  });

  it('keeps a path prefix of the base URL, with or without a trailing slash', async () => {
    for (const base of [`${ORIGIN}/api/v2`, `${ORIGIN}/api/v2/`]) {
      pool.intercept({ path: `/api/v2${CREATE_PATH}`, method: 'POST' }).reply(201, envelope(201, { queryId: 'p' }));
      pool
        .intercept({ path: '/api/v2/queries/integration/p', method: 'GET' })
        .reply(200, envelope(200, { queryId: 'p', status: 'DONE' }));
      const c = client({ baseUrl: base });
      expect((await c.createQuery('ABC1234')).queryId).toBe('p');
      expect((await c.getQuery('p')).state).toBe('completed');
    }
    agent.assertNoPendingInterceptors();
  });
});

describe('the quota snapshot', () => {
  it('is undefined until an answer carries X-RateLimit-* headers', async () => {
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(201, envelope(201, { queryId: 'a' }));
    const c = client();
    await c.createQuery('ABC1D23');
    expect(c.quota).toBeUndefined();
  });

  it('is updated from a success answer', async () => {
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .reply(201, envelope(201, { queryId: 'a' }), { headers: rateHeaders(60, 59, NOW_S + 60) });
    const c = client();
    await c.createQuery('ABC1D23');
    expect(c.quota).toEqual({ limit: 60, remaining: 59, resetAt: NOW + 60_000, observedAt: NOW });
  });

  it('is updated from error answers (429 and 5xx) too', async () => {
    let now = NOW;
    const c = client({ now: () => now });
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(
      429,
      JSON.stringify({
        statusCode: 429,
        error: { code: 'RATE_LIMIT_EXCEEDED', message: 'Try again in 30 seconds.', retryAfter: 30 },
      }),
      {
        headers: { ...rateHeaders(60, 0, NOW_S + 30), 'retry-after': '30' },
      },
    );
    const limited = await rejection(c.createQuery('ABC1D23'));
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect((limited as RateLimitedError).retryAfterMs).toBe(30_000);
    expect(c.quota).toEqual({ limit: 60, remaining: 0, resetAt: NOW + 30_000, observedAt: NOW });

    now = NOW + 31_000;
    pool
      .intercept({ path: '/queries/integration/q1', method: 'GET' })
      .reply(503, 'Service Unavailable', { headers: rateHeaders(60, 58, NOW_S + 90) });
    const down = await rejection(c.getQuery('q1'));
    expect(down).toBeInstanceOf(TransientError);
    expect(c.quota).toEqual({ limit: 60, remaining: 58, resetAt: NOW + 90_000, observedAt: NOW + 31_000 });
  });
});

describe('answers the client refuses', () => {
  it('a declared content-length over maxBodyBytes → BadResponseError', async () => {
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .reply(201, envelope(201, { queryId: 'a' }), { headers: { 'content-length': '5000000' } });
    const error = await rejection(client({ maxBodyBytes: 1_000_000 }).createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(BadResponseError);
    expect(error.message).toContain('5000000');
    expect(decide(error as BadResponseError).action).toBe('fail');
  });

  it('an undeclared (chunked) body that grows past maxBodyBytes → BadResponseError', async () => {
    const big = envelope(200, { queryId: 'a', status: 'COMPLETED', padding: 'x'.repeat(4_096) });
    pool
      .intercept({ path: '/queries/integration/a', method: 'GET' })
      .reply(200, big, { headers: { 'transfer-encoding': 'chunked' } });
    const error = await rejection(client({ maxBodyBytes: 1_024 }).getQuery('a'));
    expect(error).toBeInstanceOf(BadResponseError);
    expect(error.message).toContain('1024-byte limit');
    expect(decide(error as BadResponseError).action).toBe('retry');
  });

  it('the same body under the limit is accepted', async () => {
    const body = envelope(200, { queryId: 'a', status: 'COMPLETED', padding: 'x'.repeat(4_096) });
    pool.intercept({ path: '/queries/integration/a', method: 'GET' }).reply(200, body);
    expect((await client({ maxBodyBytes: 8_192 }).getQuery('a')).state).toBe('completed');
  });

  it('an oversized error answer keeps its HTTP class: 429 still rate-limited, 502 still transient', async () => {
    const c = client({ maxBodyBytes: 1_024 });
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .reply(429, 'x'.repeat(4_096), { headers: { 'retry-after': '7', 'content-length': '4096' } });
    const limited = await rejection(c.createQuery('ABC1D23'));
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect((limited as RateLimitedError).retryAfterMs).toBe(7_000);

    pool
      .intercept({ path: '/queries/integration/q', method: 'GET' })
      .reply(502, `<html>${'<p>Bad Gateway</p>'.repeat(500)}</html>`);
    const gateway = await rejection(c.getQuery('q'));
    expect(gateway).toBeInstanceOf(TransientError);
    expect(gateway).toMatchObject({ status: 502, code: 'HTTP_502' });
  });

  it('truncated JSON → BadResponseError (not retryable on create)', async () => {
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(201, '{"statusCode":201,"body":{"queryId":"q-1","sta');
    const error = await rejection(client().createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(BadResponseError);
    expect(error).toMatchObject({ status: 201, code: 'BAD_RESPONSE', kind: 'bad-response' });
  });

  it('a 404 with the upstream code → PermanentError', async () => {
    pool
      .intercept({ path: '/queries/integration/nope', method: 'GET' })
      .reply(
        404,
        JSON.stringify({ statusCode: 404, error: { code: 'QUERY_NOT_FOUND', message: 'No query with id "nope".' } }),
      );
    const error = await rejection(client().getQuery('nope'));
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ status: 404, code: 'QUERY_NOT_FOUND' });
  });
});

describe('network failures', () => {
  it('a connection reset → TransientError CONNECTION_RESET with status 0', async () => {
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .replyWithError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    const error = await rejection(client().createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 0, code: 'CONNECTION_RESET', kind: 'transient' });
  });

  it('any other dispatch error → TransientError NETWORK_ERROR with status 0', async () => {
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).replyWithError(new Error('something broke'));
    const error = await rejection(client().createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 0, code: 'NETWORK_ERROR' });
    expect(error.message).toContain('something broke');
  });

  it('reports each call to observers, with the error', async () => {
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(201, envelope(201, { queryId: 'a' }));
    pool
      .intercept({ path: '/queries/integration/a', method: 'GET' })
      .replyWithError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
    const c = client();
    const events: { operation: string; status: number; code: string | undefined }[] = [];
    c.onRequest((e) => events.push({ operation: e.operation, status: e.status, code: e.error?.code }));
    await c.createQuery('ABC1D23');
    await rejection(c.getQuery('a'));
    expect(events).toEqual([
      { operation: 'create', status: 201, code: undefined },
      { operation: 'get', status: 0, code: 'CONNECTION_REFUSED' },
    ]);
  });
});

describe('the key from a file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vqb-key-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function recordKeys(times: number): string[] {
    const keys: string[] = [];
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .reply((opts) => {
        keys.push(lowerHeaders(opts.headers)['x-api-key'] ?? '(none)');
        return { statusCode: 201, data: envelope(201, { queryId: 'a' }) };
      })
      .times(times);
    return keys;
  }

  it('is trimmed, and re-read after the file changes (rotation without restart)', async () => {
    const path = join(dir, 'api-key');
    await writeFile(path, 'first-key\n');
    await utimes(path, new Date(NOW), new Date(NOW));
    const keys = recordKeys(3);
    const c = client({ apiKey: createKeyProvider({ kind: 'file', path }) });

    await c.createQuery('ABC1D23');
    await c.createQuery('ABC1D23');
    await writeFile(path, 'second-key\n');
    await utimes(path, new Date(NOW + 60_000), new Date(NOW + 60_000));
    await c.createQuery('ABC1D23');
    expect(keys).toEqual(['first-key', 'first-key', 'second-key']);
  });

  it('a missing or empty key file is a ConfigError naming VQ_API_KEY_FILE, and nothing is sent', async () => {
    const keys = recordKeys(1);
    const path = join(dir, 'api-key');
    const c = client({ apiKey: createKeyProvider({ kind: 'file', path }) });
    const missing = await rejection(c.createQuery('ABC1D23'));
    expect(missing).toBeInstanceOf(ConfigError);
    expect(missing.message).toContain('VQ_API_KEY_FILE');

    await writeFile(path, '  \n');
    const empty = await rejection(c.createQuery('ABC1D23'));
    expect(empty).toBeInstanceOf(ConfigError);
    expect(empty.message).toMatch(/empty/);
    expect(keys).toEqual([]);
    await unlink(path);
  });

  it('a key file with more than the key (two lines, inner spaces) is a ConfigError, and nothing is sent', async () => {
    const keys = recordKeys(1);
    const path = join(dir, 'api-key');
    await writeFile(path, 'old-key\nnew-key\n');
    const c = client({ apiKey: createKeyProvider({ kind: 'file', path }) });
    const twoLines = await rejection(c.createQuery('ABC1D23'));
    expect(twoLines).toBeInstanceOf(ConfigError);
    expect(twoLines.message).toContain('VQ_API_KEY_FILE');
    expect(twoLines.message).not.toContain('old-key');
    expect(twoLines.message).not.toContain('new-key');

    await writeFile(path, 'x-api-key: abc\n');
    await utimes(path, new Date(NOW + 1_000), new Date(NOW + 1_000));
    expect(await rejection(c.createQuery('ABC1D23'))).toBeInstanceOf(ConfigError);
    expect(keys).toEqual([]);
  });

  it('an inline key comes from its Secret', async () => {
    const keys = recordKeys(1);
    await client({ apiKey: createKeyProvider({ kind: 'inline', secret: new Secret('inline-key') }) }).createQuery(
      'ABC1D23',
    );
    expect(keys).toEqual(['inline-key']);
  });
});

describe('the API key never appears in an error', () => {
  function expectNoKey(error: Error, key = KEY): void {
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error.message).not.toContain(key);
    expect(JSON.stringify(error)).not.toContain(key);
    expect(String(error.stack)).not.toContain(key);
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof Error) expect(cause.message).not.toContain(key);
  }

  it('not when the upstream echoes it back in a 401, a 403 or a 5xx page', async () => {
    const c = client();
    pool
      .intercept({ path: CREATE_PATH, method: 'POST' })
      .reply(
        401,
        JSON.stringify({ statusCode: 401, error: { code: 'INVALID_API_KEY', message: `Invalid API key ${KEY}.` } }),
      );
    const invalid = await rejection(c.createQuery('ABC1D23'));
    expect(invalid).toBeInstanceOf(InvalidKeyError);
    expectNoKey(invalid);

    pool.intercept({ path: '/queries/integration/q', method: 'GET' }).reply(
      403,
      JSON.stringify({
        statusCode: 403,
        error: { code: 'INSUFFICIENT_PERMISSIONS', message: `Key ${KEY} may not view queries.` },
      }),
    );
    expectNoKey(await rejection(c.getQuery('q')));

    pool
      .intercept({ path: '/queries/integration/q', method: 'GET' })
      .reply(502, `<html><body><h1>502 Bad Gateway</h1><pre>x-api-key: ${KEY}</pre></body></html>`);
    const gateway = await rejection(c.getQuery('q'));
    expect(gateway).toBeInstanceOf(TransientError);
    expectNoKey(gateway);
  });

  it('not in a 2xx the client cannot read', async () => {
    pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(200, `<html>Welcome ${KEY}</html>`);
    const error = await rejection(client().createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(BadResponseError);
    expectNoKey(error);
  });

  it('not when a lower layer puts the request headers in its message', async () => {
    // MockAgent's "not matched" error quotes every request header, as some proxies' errors do.
    pool
      .intercept({ path: CREATE_PATH, method: 'POST', headers: { 'x-api-key': 'some-other-key' } })
      .reply(201, envelope(201, { queryId: 'a' }));
    const error = await rejection(client().createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 0 });
    expectNoKey(error);
  });

  it('not for a key read from a file either', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vqb-key-'));
    try {
      const path = join(dir, 'api-key');
      await writeFile(path, 'file-secret-123\n');
      pool.intercept({ path: CREATE_PATH, method: 'POST' }).reply(
        401,
        JSON.stringify({
          statusCode: 401,
          error: { code: 'EXPIRED_API_KEY', message: 'API key file-secret-123 expired.' },
        }),
      );
      const provider: KeyProvider = createKeyProvider({ kind: 'file', path });
      const error = await rejection(client({ apiKey: provider }).createQuery('ABC1D23'));
      expect(error).toMatchObject({ code: 'EXPIRED_API_KEY', status: 401 });
      expectNoKey(error, 'file-secret-123');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
