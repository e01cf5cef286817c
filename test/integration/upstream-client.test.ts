// UpstreamClient against the simulator over real HTTP (scaled-down times): the lifecycle, and each
// way the upstream fails becoming the one typed error the queue acts on.
import { createHook } from 'node:async_hooks';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type SimulatorHandle, type SimulatorOptions, startSimulator } from '../../src/simulator/index.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  RateLimitedError,
  TransientError,
} from '../../src/upstream/errors.js';
import type { QueryOutcome } from '../../src/upstream/response.js';
import { rejection } from '../helpers/process.js';

let sims: SimulatorHandle[] = [];
let clients: UpstreamClient[] = [];
let servers: Server[] = [];

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(sims.map((s) => s.close()));
  await Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
  clients = [];
  sims = [];
  servers = [];
});

async function sim(options: Partial<SimulatorOptions> = {}): Promise<SimulatorHandle> {
  const handle = await startSimulator({ port: 0, completionMs: [50, 100], ...options });
  sims.push(handle);
  return handle;
}

function client(baseUrl: string, key = 'demo-key', options: Partial<UpstreamClientOptions> = {}): UpstreamClient {
  const c = new UpstreamClient({ baseUrl, apiKey: async () => key, requestTimeoutMs: 2_000, ...options });
  clients.push(c);
  return c;
}

async function pollUntilTerminal(
  c: UpstreamClient,
  queryId: string,
  deadlineMs = 3_000,
): Promise<{ last: QueryOutcome; polls: number }> {
  const until = Date.now() + deadlineMs;
  let polls = 0;
  for (;;) {
    const last = await c.getQuery(queryId);
    polls += 1;
    if (last.terminal) return { last, polls };
    if (Date.now() > until) throw new Error(`query ${queryId} still ${last.status} after ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the query lifecycle', () => {
  it('create → PROCESSING → poll → COMPLETED with the vehicle as result', async () => {
    const s = await sim();
    const c = client(s.url);
    const created = await c.createQuery('ABC1D23');
    expect(created).toMatchObject({ state: 'pending', terminal: false, status: 'PROCESSING' });
    expect(created.queryId).toEqual(expect.any(String));
    expect(created.queryId).not.toBe('');

    const { last, polls } = await pollUntilTerminal(c, created.queryId);
    expect(polls).toBeGreaterThanOrEqual(1);
    expect(last).toMatchObject({ queryId: created.queryId, status: 'COMPLETED', state: 'completed', terminal: true });
    expect(last.result).toMatchObject({ licensePlate: 'ABC1D23', status: 'COMPLETED', result: expect.any(Object) });

    // Every answer carried X-RateLimit-*: the snapshot reflects the simulator's 600/min limit.
    expect(c.quota?.limit).toBe(600);
    expect(c.quota?.remaining).toBeLessThan(600);
    expect(c.quota?.resetAt).toBeGreaterThan(Date.now() - 1_000);
  });

  it('a plate the upstream cannot find ends FAILED with the reason kept', async () => {
    const s = await sim({ failPlates: ['XYZ9876'] });
    const c = client(s.url);
    const created = await c.createQuery('XYZ9876');
    const { last } = await pollUntilTerminal(c, created.queryId);
    expect(last).toMatchObject({ state: 'failed', terminal: true, status: 'FAILED' });
    expect(last.result).toMatchObject({ error: { code: 'VEHICLE_NOT_FOUND' } });
  });

  it('bare bodies with `id` instead of `queryId` still parse', async () => {
    const s = await sim({ envelope: false, idField: 'id' });
    const c = client(s.url);
    const created = await c.createQuery('ABC1234');
    expect(created.state).toBe('pending');
    expect(created.queryId).not.toBe('');
    const { last } = await pollUntilTerminal(c, created.queryId);
    expect(last).toMatchObject({ queryId: created.queryId, state: 'completed' });
    expect(last.result).toMatchObject({ id: created.queryId, licensePlate: 'ABC1234' });
  });

  it('an answer already terminal on create carries the result, no poll needed', async () => {
    const s = await sim({ terminalOnCreateRate: 1, completionMs: [5_000, 5_000], failPlates: ['XYZ9876'] });
    const c = client(s.url);
    const done = await c.createQuery('ABC1D23');
    expect(done).toMatchObject({ state: 'completed', terminal: true, status: 'COMPLETED' });
    expect(done.result).toMatchObject({ licensePlate: 'ABC1D23', result: expect.any(Object) });
    const failed = await c.createQuery('XYZ9876');
    expect(failed).toMatchObject({ state: 'failed', terminal: true });
    expect(failed.result).toMatchObject({ error: { code: 'VEHICLE_NOT_FOUND' } });
  });

  it('an unknown queryId → PermanentError 404 keeping QUERY_NOT_FOUND', async () => {
    const s = await sim();
    const error = await rejection(client(s.url).getQuery('no-such-query'));
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({
      status: 404,
      code: 'QUERY_NOT_FOUND',
      upstreamCode: 'QUERY_NOT_FOUND',
      kind: 'permanent',
    });
  });

  it('a plate the upstream rejects → PermanentError 400', async () => {
    const s = await sim();
    const error = await rejection(client(s.url).createQuery('NOT-A-PLATE'));
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ status: 400, code: 'INVALID_PLATE' });
  });
});

describe('keys and permissions', () => {
  it('an unknown or revoked key → InvalidKeyError', async () => {
    const s = await sim({ keys: [{ key: 'soon-revoked' }] });
    const unknown = await rejection(client(s.url, 'no-such-key').createQuery('ABC1D23'));
    expect(unknown).toBeInstanceOf(InvalidKeyError);
    expect(unknown).toMatchObject({ status: 401, code: 'INVALID_API_KEY', kind: 'invalid-key' });

    const c = client(s.url, 'soon-revoked');
    await c.createQuery('ABC1D23');
    expect(s.keys.revoke('soon-revoked')).toBe(true);
    expect(await rejection(c.createQuery('ABC1D23'))).toBeInstanceOf(InvalidKeyError);
  });

  it('an expired key → ExpiredKeyError, also when it expires between create and poll', async () => {
    const s = await sim();
    const old = await rejection(client(s.url, 'demo-expired').createQuery('ABC1D23'));
    expect(old).toBeInstanceOf(ExpiredKeyError);
    expect(old).toMatchObject({ status: 401, code: 'EXPIRED_API_KEY' });

    const c = client(s.url, 'demo-key');
    const created = await c.createQuery('ABC1D23');
    s.keys.expire('demo-key');
    const later = await rejection(c.getQuery(created.queryId));
    expect(later).toBeInstanceOf(ExpiredKeyError);
  });

  it('the key is read when the request leaves, after its wait for the slot: a rotation during the wait sends the new key; a key failure says when it was sent', async () => {
    const s = await sim({
      keys: [
        { key: 'before-rotation', label: 'old' },
        { key: 'after-rotation', label: 'new' },
      ],
    });
    let current = 'before-rotation';
    const c = client(s.url, undefined, { apiKey: async () => current });
    // The slot's wait (a hold can make it seconds) spans the operator's rotation.
    const created = await c.createQuery('ABC1D23', 'agregados', {
      ready: async () => {
        current = 'after-rotation';
      },
    });
    expect(created.queryId).toBeTruthy();
    expect(s.stats().byKey.new?.counted).toBe(1);
    expect(s.stats().byKey.old?.counted ?? 0).toBe(0);

    s.keys.expire('after-rotation');
    let readyAt = 0;
    const failed = await rejection(
      c.getQuery(created.queryId, {
        ready: async () => {
          await new Promise((r) => setTimeout(r, 30));
          readyAt = Date.now();
        },
      }),
    );
    expect(failed).toBeInstanceOf(ExpiredKeyError);
    expect((failed as ExpiredKeyError).sentAt).toBeGreaterThanOrEqual(readyAt);
    expect((failed as ExpiredKeyError).sentAt).toBeLessThanOrEqual(Date.now());
  });

  it('a key without run_queries → PermissionError(create) naming "Run vehicle queries"', async () => {
    const s = await sim({ keys: [{ key: 'viewer', permissions: ['view_queries'] }] });
    const error = await rejection(client(s.url, 'viewer').createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(PermissionError);
    expect(error).toMatchObject({
      status: 403,
      operation: 'create',
      permission: 'Run vehicle queries',
      kind: 'permission',
    });
    expect(error.message).toContain('Run vehicle queries');
  });

  it('a key without view_queries → PermissionError(get) naming "View queries already run"', async () => {
    const s = await sim({ keys: [{ key: 'runner', permissions: ['run_queries'] }] });
    const c = client(s.url, 'runner');
    const created = await c.createQuery('ABC1D23');
    const error = await rejection(c.getQuery(created.queryId));
    expect(error).toBeInstanceOf(PermissionError);
    expect(error).toMatchObject({ status: 403, operation: 'get', permission: 'View queries already run' });
    expect(error.message).toContain('View queries already run');
  });
});

describe('limits and faults', () => {
  it('past a tiny rate limit → RateLimitedError with retryAfterMs > 0, and the snapshot says 0 left', async () => {
    // A sliding second: the third create within a second of the first is refused wherever the
    // calls fall. A fixed window aligned to the epoch's seconds let it pass when the three
    // straddled a boundary (a fresh-clone CI run, once).
    const s = await sim({ rateLimit: '2/s', window: 'sliding' });
    const c = client(s.url);
    await c.createQuery('ABC1D23');
    await c.createQuery('ABC1D23');
    const error = await rejection(c.createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(RateLimitedError);
    const retryAfterMs = (error as RateLimitedError).retryAfterMs;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(1_000);
    expect(error).toMatchObject({ status: 429, kind: 'rate-limited' });
    expect(c.quota).toMatchObject({ limit: 2, remaining: 0 });

    // Waiting as told is enough.
    await new Promise((r) => setTimeout(r, retryAfterMs! + 20));
    expect((await c.createQuery('ABC1D23')).state).toBe('pending');
  });

  it('errorRate 1 → TransientError with the 5xx status, whatever the body (JSON or HTML)', async () => {
    const s = await sim({ errorRate: 1 });
    const c = client(s.url);
    for (let i = 0; i < 8; i += 1) {
      const error = await rejection(c.createQuery('ABC1D23'));
      expect(error).toBeInstanceOf(TransientError);
      const { status, code } = error as TransientError;
      expect([500, 502, 503]).toContain(status);
      expect(code).toBe(`HTTP_${status}`);
    }
  });

  it('dropRate 1 → TransientError with status 0 (no answer)', async () => {
    const s = await sim({ dropRate: 1 });
    const error = await rejection(client(s.url).createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 0, kind: 'transient', code: 'CONNECTION_RESET' });
  });

  it('dropAfterCreateRate 1: the create is lost (status 0) yet the upstream made the query', async () => {
    const s = await sim({ dropAfterCreateRate: 1 });
    const error = await rejection(client(s.url).createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 0 });
    expect(s.stats().queries).toBe(1);
  });

  it('latency beyond requestTimeoutMs → TransientError HEADERS_TIMEOUT, without waiting for the answer', async () => {
    // The answer would come after a minute: a timeout error means the client gave up first.
    const s = await sim({ latencyMs: [60_000, 60_000] });
    const started = Date.now();
    const error = await rejection(client(s.url, 'demo-key', { requestTimeoutMs: 150 }).createQuery('ABC1D23'));
    expect(error).toBeInstanceOf(TransientError);
    expect(['HEADERS_TIMEOUT', 'REQUEST_TIMEOUT']).toContain((error as TransientError).code);
    expect(error).toMatchObject({ status: 0 });
    expect(Date.now() - started, 'not before the configured timeout').toBeGreaterThanOrEqual(140);
    expect(s.stats().creates, 'the upstream made the query all the same').toBe(1);
  });
});

describe('bodies over real HTTP', () => {
  async function streamingServer(
    onRequest: (write: (chunk: string) => boolean, end: () => void, closed: (listener: () => void) => void) => void,
  ): Promise<string> {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }); // no content-length: chunked
      onRequest(
        (chunk) => (res.destroyed ? false : res.write(chunk)),
        () => res.end(),
        (listener) => res.once('close', listener),
      );
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('a chunked body that keeps growing is cut off at maxBodyBytes, without waiting for its end', async () => {
    let hungUp!: () => void;
    const connectionClosed = new Promise<void>((resolve) => (hungUp = resolve));
    const url = await streamingServer((write, _end, closed) => {
      write('{"statusCode":200,"body":{"queryId":"q","padding":"');
      // It never ends: only the client hanging up stops it.
      const timer = setInterval(() => write('x'.repeat(512)), 5);
      closed(() => {
        clearInterval(timer);
        hungUp();
      });
    });
    const error = await rejection(client(url, 'k', { maxBodyBytes: 4_096 }).getQuery('q'));
    expect(error).toBeInstanceOf(BadResponseError);
    expect(error).toMatchObject({ status: 200, kind: 'bad-response', code: 'BAD_RESPONSE' });
    expect(error.message).toContain('passed the 4096-byte limit');
    await connectionClosed;
  });

  it('a body that trickles forever ends in REQUEST_TIMEOUT after about twice requestTimeoutMs', async () => {
    const url = await streamingServer((write) => {
      write('{"statusCode":200,');
      const timer = setInterval(() => {
        if (!write(' ')) clearInterval(timer);
      }, 40);
      setTimeout(() => clearInterval(timer), 5_000);
    });
    const started = Date.now();
    const error = await rejection(client(url, 'k', { requestTimeoutMs: 150 }).getQuery('q'));
    expect(error).toBeInstanceOf(TransientError);
    // The overall bound, not the per-chunk idle timeout (the trickle keeps resetting that one).
    expect(error).toMatchObject({ code: 'REQUEST_TIMEOUT', kind: 'transient' });
    expect(error.message).toContain('within 300 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('a request that ends leaves no timer behind: its overall bound never fires afterwards', async () => {
    const s = await sim();
    // The bound is twice requestTimeoutMs; an odd figure tells its timer from undici's and vitest's.
    const boundMs = 2 * 173;
    const timers = new Set<number>();
    let fired = 0;
    const hook = createHook({
      init(id, type, _trigger, resource) {
        if (type === 'Timeout' && (resource as { _idleTimeout?: number })._idleTimeout === boundMs) timers.add(id);
      },
      before(id) {
        if (timers.has(id)) fired++;
      },
    }).enable();
    try {
      const c = client(s.url, 'demo-key', { requestTimeoutMs: 173 });
      const created = await c.createQuery('ABC1D23');
      await c.getQuery(created.queryId);
      expect(timers.size).toBe(2);
      await new Promise((r) => setTimeout(r, boundMs + 150));
      // AbortSignal.timeout's timer cannot be cleared: it fired once a request, after the answer.
      expect(fired).toBe(0);
    } finally {
      hook.disable();
    }
  });
});
