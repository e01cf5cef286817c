// The simulator over real HTTP. Limits, quotas and query status read an injected clock, so those
// tests move time by hand instead of sleeping; latency, drops and one lifecycle run use real time.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { type SimulatorHandle, type SimulatorOptions, startSimulator } from '../../src/simulator/index.js';
import { runSimulate } from '../../src/simulator/main.js';
import { seededRandom } from '../../src/simulator/vehicle.js';
import { waitFor } from '../helpers/process.js';
import { type SimResponse, simCall, simClock, simCreate, simGet } from '../helpers/sim-http.js';

let sims: SimulatorHandle[] = [];
afterEach(async () => {
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

async function start(
  options: Partial<SimulatorOptions> = {},
  deps: { now?: () => number; random?: () => number } = {},
) {
  const sim = await startSimulator({ completionMs: [100, 400], ...options }, { random: seededRandom(7), ...deps });
  sims.push(sim);
  return sim;
}

function queryIdOf(res: SimResponse): string {
  return res.json.body.queryId as string;
}

describe('authentication and permissions', () => {
  it('answers 401 INVALID_API_KEY without x-api-key, with Authorization: Bearer, and for unknown keys', async () => {
    const sim = await start();
    const cases = [
      await simCall(sim.url, 'POST', '/queries/integration/agregados', { body: { keys: { licensePlate: 'ABC1D23' } } }),
      await simCall(sim.url, 'POST', '/queries/integration/agregados', {
        headers: { authorization: 'Bearer demo-key' },
        body: { keys: { licensePlate: 'ABC1D23' } },
      }),
      await simCall(sim.url, 'GET', '/queries/integration/q0-0000', { headers: { authorization: 'Bearer demo-key' } }),
      await simCreate(sim.url, 'ABC1D23', 'no-such-key'),
    ];
    for (const res of cases) {
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ statusCode: 401, error: { code: 'INVALID_API_KEY', message: expect.any(String) } });
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
    expect(sim.stats().queries).toBe(0);
  });

  it('answers 401 EXPIRED_API_KEY for an expired key', async () => {
    const sim = await start({
      keys: [
        { key: 'old', expiresAt: Date.now() - 1000 },
        { key: 'later', expiresAt: new Date(Date.now() + 3_600_000).toISOString() },
      ],
    });
    const expired = await simCreate(sim.url, 'ABC1D23', 'old');
    expect(expired.status).toBe(401);
    expect(expired.json.error.code).toBe('EXPIRED_API_KEY');
    expect((await simCreate(sim.url, 'ABC1D23', 'later')).status).toBe(201);
    expect((await simCreate(sim.url, 'ABC1D23', 'demo-expired')).status).toBe(401);
  });

  it('answers 403 INSUFFICIENT_PERMISSIONS naming the missing permission', async () => {
    const sim = await start({
      keys: [
        { key: 'runner', permissions: ['run_queries'] },
        { key: 'viewer', permissions: ['view_queries'] },
      ],
    });
    const created = await simCreate(sim.url, 'ABC1D23', 'runner');
    expect(created.status).toBe(201);

    const noRun = await simCreate(sim.url, 'ABC1D23', 'viewer');
    expect(noRun.status).toBe(403);
    expect(noRun.json.statusCode).toBe(403);
    expect(noRun.json.error.code).toBe('INSUFFICIENT_PERMISSIONS');
    expect(noRun.json.error.message).toContain('Run vehicle queries');

    const noView = await simGet(sim.url, queryIdOf(created), 'runner');
    expect(noView.status).toBe(403);
    expect(noView.json.error.message).toContain('View queries already run');
    expect((await simGet(sim.url, queryIdOf(created), 'viewer')).status).toBe(200);
    expect(sim.stats().queries).toBe(1);
  });
});

describe('rate limit', () => {
  it('answers 429 past the limit with Retry-After, retryAfter, retryAfterMs and X-RateLimit headers; a 429 costs nothing', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 12, 0, 0, 0));
    const sim = await start({ rateLimit: '3/2s' }, { now: clock.now });
    const first = await simCreate(sim.url, 'ABC1D23');
    expect(first.headers).toMatchObject({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '2',
      'x-ratelimit-reset': String((clock.t + 2000) / 1000),
    });
    clock.advance(300);
    await simGet(sim.url, queryIdOf(first));
    clock.advance(300);
    const third = await simGet(sim.url, queryIdOf(first));
    expect(third.headers['x-ratelimit-remaining']).toBe('0');

    clock.advance(100); // 700 ms after the first request, which frees its slot at +2000
    const limited = await simCreate(sim.url, 'XYZ9K87');
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('2');
    expect(limited.json).toEqual({
      statusCode: 429,
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: 'Rate limit exceeded. Try again in 2 seconds.',
        retryAfter: 2,
        retryAfterMs: 1300,
      },
    });
    expect(limited.headers).toMatchObject({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Date.UTC(2030, 0, 1, 12, 0, 2) / 1000),
    });

    // Rejected requests did not take slots: exactly at +2000 one request passes again.
    for (let i = 0; i < 3; i += 1) expect((await simCreate(sim.url, 'XYZ9K87')).status).toBe(429);
    clock.advance(1299);
    expect((await simCreate(sim.url, 'XYZ9K87')).status).toBe(429);
    clock.advance(1);
    expect((await simCreate(sim.url, 'XYZ9K87')).status).toBe(201);
    expect(sim.stats()).toMatchObject({ rateLimited: 5, creates: 2, gets: 2, counted: 4, maxInWindow: 3 });
  });

  it('fixed window lets 2× the limit through across a boundary', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 12, 0, 0, 990));
    const sim = await start({ rateLimit: '5/s', window: 'fixed' }, { now: clock.now });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await simCreate(sim.url, 'ABC1D23')).status);
    const limited = await simCreate(sim.url, 'ABC1D23');
    expect(limited.json.error.retryAfterMs).toBe(10);
    clock.advance(10);
    for (let i = 0; i < 6; i += 1) statuses.push((await simCreate(sim.url, 'ABC1D23')).status);
    expect(statuses).toEqual([201, 201, 201, 201, 201, 429, 201, 201, 201, 201, 201, 429]);
    expect(sim.stats().maxInWindow).toBe(10);
  });

  it('sliding window never lets more than max through in any interval of the duration', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 12, 0, 0, 990));
    const sim = await start({ rateLimit: '5/s', window: 'sliding' }, { now: clock.now });
    const random = seededRandom(3);
    const accepted: number[] = [];
    for (let i = 0; i < 120; i += 1) {
      clock.advance(Math.floor(random() * 90));
      const res = await simCreate(sim.url, 'ABC1D23');
      if (res.status === 201) accepted.push(clock.t);
      else {
        expect(res.status).toBe(429);
        // Rejected only when the last second already holds 5.
        expect(accepted.filter((t) => t > clock.t - 1000).length).toBe(5);
      }
    }
    for (const t of accepted) expect(accepted.filter((u) => u > t - 1000 && u <= t).length).toBeLessThanOrEqual(5);
    expect(sim.stats().maxInWindow).toBe(5);
    expect(sim.stats().rateLimited).toBe(120 - accepted.length);
    expect(accepted.length).toBeGreaterThan(20);
  });

  it('token bucket allows a burst of max, then a steady max per duration', async () => {
    const clock = simClock();
    const sim = await start({ rateLimit: '4/s', window: 'token-bucket' }, { now: clock.now });
    const burst: number[] = [];
    for (let i = 0; i < 5; i += 1) burst.push((await simCreate(sim.url, 'ABC1D23')).status);
    expect(burst).toEqual([201, 201, 201, 201, 429]);
    let passed = 0;
    for (let step = 0; step < 20; step += 1) {
      clock.advance(125);
      for (let i = 0; i < 2; i += 1) if ((await simCreate(sim.url, 'ABC1D23')).status === 201) passed += 1;
    }
    expect(passed).toBe(10); // 2.5 s at 4/s
    const limited = await simCreate(sim.url, 'ABC1D23');
    expect(limited.json.error.retryAfterMs).toBe(250);
    expect(limited.headers['x-ratelimit-reset']).toBe(String(Math.ceil((clock.t + 250) / 1000)));
  });

  it('applies plan presets per key (starter 60/min + 1000/day, enterprise unlimited) and per-key overrides', async () => {
    const sim = await start({
      keys: [
        { key: 's', plan: 'starter' },
        { key: 'e', plan: 'enterprise' },
        { key: 'o', plan: 'starter', rateLimit: '2/s' },
      ],
    });
    expect((await simCreate(sim.url, 'ABC1D23', 's')).headers).toMatchObject({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
    });
    const unlimited = await simCreate(sim.url, 'ABC1D23', 'e');
    expect(unlimited.status).toBe(201);
    expect(unlimited.headers['x-ratelimit-limit']).toBeUndefined();
    expect((await simCreate(sim.url, 'ABC1D23', 'o')).headers['x-ratelimit-limit']).toBe('2');
  });

  it('limits each key separately', async () => {
    const clock = simClock();
    const sim = await start({ rateLimit: '1/min', keys: [{ key: 'a' }, { key: 'b' }] }, { now: clock.now });
    expect((await simCreate(sim.url, 'ABC1D23', 'a')).status).toBe(201);
    expect((await simCreate(sim.url, 'ABC1D23', 'a')).status).toBe(429);
    expect((await simCreate(sim.url, 'ABC1D23', 'b')).status).toBe(201);
  });
});

describe('daily quota', () => {
  it('is exhausted after dailyQuota counted requests and resets with the (scaled-down) window', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 12, 0, 0, 0));
    const sim = await start({ dailyQuota: 3, quotaWindowMs: 10_000 }, { now: clock.now });
    const created = await simCreate(sim.url, 'ABC1D23');
    clock.advance(1000);
    await simGet(sim.url, queryIdOf(created));
    clock.advance(1000);
    const last = await simGet(sim.url, queryIdOf(created));
    expect(last.status).toBe(200);
    expect(last.headers['x-ratelimit-remaining']).toBe('0');
    clock.advance(2500);
    const over = await simGet(sim.url, queryIdOf(created));
    expect(over.status).toBe(429);
    expect(over.json.error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', retryAfter: 6, retryAfterMs: 5500 });
    expect(over.json.error.message).toMatch(/daily quota/i);
    expect(over.headers['retry-after']).toBe('6');
    expect(over.headers).toMatchObject({
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Date.UTC(2030, 0, 1, 12, 0, 10) / 1000),
    });
    clock.advance(5499);
    expect((await simCreate(sim.url, 'ABC1D23')).status).toBe(429);
    clock.advance(1);
    expect((await simCreate(sim.url, 'ABC1D23')).status).toBe(201);
    expect(sim.stats()).toMatchObject({ quotaExceeded: 2, rateLimited: 2, counted: 4 });
  });

  it('resets at UTC midnight by default', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 23, 59, 59, 500));
    const sim = await start({ dailyQuota: 1 }, { now: clock.now });
    expect((await simCreate(sim.url, 'ABC1D23')).status).toBe(201);
    const over = await simCreate(sim.url, 'ABC1D23');
    expect(over.json.error.retryAfterMs).toBe(500);
    clock.advance(500);
    expect((await simCreate(sim.url, 'ABC1D23')).status).toBe(201);
  });
});

describe('query lifecycle', () => {
  it('goes PROCESSING → COMPLETED with data that depends only on the plate', async () => {
    const clock = simClock();
    const sim = await start({ completionMs: [1000, 1000] }, { now: clock.now });
    const created = await simCreate(sim.url, 'abc-1d23');
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      statusCode: 201,
      body: {
        queryId: expect.stringMatching(/^q/),
        status: 'PROCESSING',
        licensePlate: 'ABC1D23',
        createdAt: new Date(clock.t).toISOString(),
      },
    });
    const id = queryIdOf(created);
    clock.advance(999);
    expect((await simGet(sim.url, id)).json.body.status).toBe('PROCESSING');
    clock.advance(1);
    const done = await simGet(sim.url, id);
    expect(done.status).toBe(200);
    expect(done.json.body).toMatchObject({
      queryId: id,
      status: 'COMPLETED',
      licensePlate: 'ABC1D23',
      completedAt: new Date(clock.t).toISOString(),
    });
    expect(done.json.body.result).toMatchObject({
      brand: expect.any(String),
      model: expect.any(String),
      year: expect.any(Number),
      uf: expect.any(String),
    });
    expect(done.json.body.result.chassis).toContain('*');
    expect(done.json.body.error).toBeUndefined();

    const again = await simCreate(sim.url, 'ABC1D23');
    clock.advance(1000);
    const second = await simGet(sim.url, queryIdOf(again));
    expect(queryIdOf(again)).not.toBe(id);
    expect(second.json.body.result).toEqual(done.json.body.result);
  });

  it('completes on real time within completionMs', async () => {
    const sim = await start({ completionMs: [100, 200] });
    const id = queryIdOf(await simCreate(sim.url, 'ABC1234'));
    expect((await simGet(sim.url, id)).json.body.status).toBe('PROCESSING');
    await new Promise((r) => setTimeout(r, 250));
    expect((await simGet(sim.url, id)).json.body.status).toBe('COMPLETED');
  });

  it('ends FAILED with VEHICLE_NOT_FOUND for failPlates', async () => {
    const clock = simClock();
    const sim = await start({ failPlates: ['bad-0000'] }, { now: clock.now });
    const id = queryIdOf(await simCreate(sim.url, 'BAD0000'));
    clock.advance(400);
    const res = await simGet(sim.url, id);
    expect(res.json.body).toMatchObject({
      status: 'FAILED',
      error: { code: 'VEHICLE_NOT_FOUND', message: expect.any(String) },
    });
    expect(res.json.body.result).toBeUndefined();
  });

  it('ends FAILED for a failRate share of queries', async () => {
    const clock = simClock();
    const sim = await start({ failRate: 1 }, { now: clock.now });
    const id = queryIdOf(await simCreate(sim.url, 'ABC1D23'));
    clock.advance(400);
    expect((await simGet(sim.url, id)).json.body.status).toBe('FAILED');
  });

  it('answers terminal at creation with the result inline at terminalOnCreateRate 1', async () => {
    const sim = await start({ terminalOnCreateRate: 1, failPlates: ['BAD0000'] });
    const ok = await simCreate(sim.url, 'ABC1D23');
    expect(ok.status).toBe(201);
    expect(ok.json.body).toMatchObject({
      status: 'COMPLETED',
      result: { brand: expect.any(String) },
      completedAt: expect.any(String),
    });
    const failed = await simCreate(sim.url, 'BAD0000');
    expect(failed.json.body).toMatchObject({ status: 'FAILED', error: { code: 'VEHICLE_NOT_FOUND' } });
    expect(sim.stats().createsByStatus).toEqual({ COMPLETED: 1, FAILED: 1 });
  });

  it('forgets queries after queryTtlMs (404 QUERY_NOT_FOUND)', async () => {
    const clock = simClock();
    const sim = await start({ queryTtlMs: 5000 }, { now: clock.now });
    const id = queryIdOf(await simCreate(sim.url, 'ABC1D23'));
    clock.advance(4999);
    expect((await simGet(sim.url, id)).status).toBe(200);
    clock.advance(1);
    const gone = await simGet(sim.url, id);
    expect(gone.status).toBe(404);
    expect(gone.json.error.code).toBe('QUERY_NOT_FOUND');
  });
});

describe('bad requests', () => {
  it('answers 400 for invalid plates and bodies, 404 for unknown products, queries and routes', async () => {
    const sim = await start({ products: ['agregados', 'renainf'], maxBodyBytes: 200 });
    const post = (body: { rawBody: string } | { body: unknown }, slug = 'agregados') =>
      simCall(sim.url, 'POST', `/queries/integration/${slug}`, { key: 'demo-key', ...body });
    const cases: Array<[Promise<SimResponse>, number, string]> = [
      [post({ body: { keys: { licensePlate: 'AB12' } } }), 400, 'INVALID_PLATE'],
      [post({ body: { keys: { licensePlate: 'ABCD123' } } }), 400, 'INVALID_PLATE'],
      [post({ body: { keys: {} } }), 400, 'INVALID_PLATE'],
      [post({ body: { keys: { licensePlate: 1234567 } } }), 400, 'INVALID_PLATE'],
      [post({ rawBody: '{"keys":' }), 400, 'INVALID_BODY'],
      [post({ body: { licensePlate: 'ABC1D23' } }), 400, 'INVALID_BODY'],
      [
        post({ rawBody: JSON.stringify({ keys: { licensePlate: 'ABC1D23' }, pad: 'x'.repeat(300) }) }),
        413,
        'PAYLOAD_TOO_LARGE',
      ],
      [post({ body: { keys: { licensePlate: 'ABC1D23' } } }, 'nope'), 404, 'PRODUCT_NOT_FOUND'],
      [simGet(sim.url, 'q0-zzzz'), 404, 'QUERY_NOT_FOUND'],
      [simGet(sim.url, 'not-an-id'), 404, 'QUERY_NOT_FOUND'],
      [simCall(sim.url, 'GET', '/v2/whatever', { key: 'demo-key' }), 404, 'NOT_FOUND'],
      [simCall(sim.url, 'DELETE', '/queries/integration/agregados', { key: 'demo-key' }), 404, 'NOT_FOUND'],
    ];
    for (const [pending, status, code] of cases) {
      const res = await pending;
      expect({ status: res.status, body: res.json }).toEqual({
        status,
        body: { statusCode: status, error: { code, message: expect.any(String) } },
      });
    }
    expect((await post({ body: { keys: { licensePlate: 'ABC1D23' } } }, 'renainf')).status).toBe(201);
    expect(sim.stats().queries).toBe(1);
  });
});

describe('response shape variants', () => {
  it('sends bare bodies with envelope false and the id as `id` with idField id', async () => {
    const sim = await start({ envelope: false, idField: 'id' });
    const created = await simCreate(sim.url, 'ABC1D23');
    expect(created.json).toEqual({
      id: expect.stringMatching(/^q/),
      status: 'PROCESSING',
      licensePlate: 'ABC1D23',
      createdAt: expect.any(String),
    });
    const got = await simGet(sim.url, created.json.id);
    expect(got.json).toMatchObject({ id: created.json.id, status: 'PROCESSING' });
    expect(got.json.queryId).toBeUndefined();
    // Errors keep the contract's shape.
    expect((await simGet(sim.url, 'q9-zzzz')).json).toMatchObject({
      statusCode: 404,
      error: { code: 'QUERY_NOT_FOUND' },
    });
  });
});

describe('faults', () => {
  it('errorRate 1 answers 5xx (some with HTML), after counting the request, without creating queries', async () => {
    const sim = await start({ errorRate: 1, rateLimit: '100/min' });
    const seen = new Set<number>();
    let html = 0;
    let remaining = '';
    for (let i = 0; i < 20; i += 1) {
      const res = await simCreate(sim.url, 'ABC1D23');
      seen.add(res.status);
      if (res.headers['content-type']?.startsWith('text/html')) {
        html += 1;
        expect(res.text).toMatch(/<html>[\s\S]*(Bad Gateway|Unavailable)[\s\S]*<\/html>/);
      }
      remaining = res.headers['x-ratelimit-remaining'] ?? '';
    }
    expect([...seen].every((s) => [500, 502, 503].includes(s))).toBe(true);
    expect(seen.size).toBeGreaterThan(1);
    expect(html).toBeGreaterThan(0);
    expect(remaining).toBe('80');
    expect(sim.stats()).toMatchObject({
      queries: 0,
      creates: 0,
      faults: { errors: 20, drops: 0, dropsAfterCreate: 0 },
    });
  });

  it('dropRate 1 destroys the socket without a response and creates nothing', async () => {
    const sim = await start({ dropRate: 1 });
    await expect(simCreate(sim.url, 'ABC1D23')).rejects.toThrow(/other side closed|socket|closed/i);
    await expect(simGet(sim.url, 'q0-0000')).rejects.toThrow();
    expect(sim.stats()).toMatchObject({ queries: 0, requests: 2, counted: 2, faults: { drops: 2 } });
  });

  it('dropAfterCreateRate 1 creates the query, then drops the connection', async () => {
    const sim = await start({ dropAfterCreateRate: 1 });
    await expect(simCreate(sim.url, 'ABC1D23')).rejects.toThrow();
    expect(sim.stats({ plates: true })).toMatchObject({
      queries: 1,
      creates: 1,
      createsByPlate: { ABC1D23: 1 },
      faults: { dropsAfterCreate: 1 },
    });
    sim.update({ dropAfterCreateRate: 0 });
    const again = await simCreate(sim.url, 'ABC1D23');
    expect(again.status).toBe(201);
    expect(queryIdOf(again)).toMatch(/^q1-/);
    expect(sim.stats()).toMatchObject({ duplicateCreates: 1, maxCreatesPerPlate: 2 });
  });

  it('adds latencyMs before responding; a new setting applies to later requests only', async () => {
    const sim = await start({ latencyMs: [150, 150] });
    const started = performance.now();
    const res = await simCreate(sim.url, 'ABC1D23');
    expect(res.status).toBe(201);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    // A request held for a minute, then none: the later request is answered while the first waits.
    sim.update({ latencyMs: [60_000, 60_000] });
    const held = simCreate(sim.url, 'ABC1D24').then(() => 'held' as const);
    held.catch(() => {}); // rejected when the simulator closes its connections after the test
    await waitFor(async () => sim.stats().creates === 2, 5_000, 'the held create to arrive');
    sim.update({ latencyMs: [0, 0] });
    const quick = simCreate(sim.url, 'ABC1D25').then((r) => r.status);
    expect(await Promise.race([held, quick])).toBe(201);
  });
});

describe('admin endpoints', () => {
  const admin = (sim: SimulatorHandle, method: string, path: string, body?: unknown) =>
    simCall(sim.url, method, path, body === undefined ? {} : { body });

  it('adds, expires and revokes keys at run time', async () => {
    const sim = await start({ keys: [{ key: 'main' }] });
    expect((await simCreate(sim.url, 'ABC1D23', 'fresh')).status).toBe(401);
    const added = await admin(sim, 'POST', '/__admin/keys', { key: 'fresh', permissions: ['view_queries'] });
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({ key: 'fresh', permissions: ['view_queries'], revoked: false });
    expect((await simCreate(sim.url, 'ABC1D23', 'fresh')).status).toBe(403);
    expect((await admin(sim, 'POST', '/__admin/keys', { key: 'fresh' })).status).toBe(201); // replace: all permissions
    expect((await simCreate(sim.url, 'ABC1D23', 'fresh')).status).toBe(201);

    expect((await admin(sim, 'POST', '/__admin/keys/fresh/expire')).status).toBe(200);
    expect((await simCreate(sim.url, 'ABC1D23', 'fresh')).json.error.code).toBe('EXPIRED_API_KEY');
    expect((await admin(sim, 'POST', '/__admin/keys/main/revoke')).status).toBe(200);
    expect((await simCreate(sim.url, 'ABC1D23', 'main')).json.error.code).toBe('INVALID_API_KEY');
    expect((await admin(sim, 'POST', '/__admin/keys/ghost/revoke')).status).toBe(404);
    expect((await admin(sim, 'POST', '/__admin/keys', { key: '', permissions: ['fly'] })).status).toBe(400);
    const listed = await admin(sim, 'GET', '/__admin/keys');
    expect(listed.json.keys.map((k: { key: string }) => k.key)).toEqual(['main', 'fresh']);

    sim.keys.add({ key: 'via-handle', permissions: ['run_queries'] });
    expect((await simCreate(sim.url, 'ABC1D23', 'via-handle')).status).toBe(201);
    sim.keys.revoke('via-handle');
    expect((await simCreate(sim.url, 'ABC1D23', 'via-handle')).status).toBe(401);
  });

  it('patches config at run time and rejects invalid patches', async () => {
    const clock = simClock();
    const sim = await start({ rateLimit: '100/min' }, { now: clock.now });
    const patched = await admin(sim, 'PATCH', '/__admin/config', {
      rateLimit: '1/min',
      window: 'fixed',
      envelope: false,
    });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ rateLimit: '1/min', window: 'fixed', envelope: false });
    const first = await simCreate(sim.url, 'ABC1D23');
    expect(first.json.status).toBe('PROCESSING');
    expect(first.headers['x-ratelimit-limit']).toBe('1');
    expect((await simCreate(sim.url, 'ABC1D23')).status).toBe(429);
    const bad = await admin(sim, 'PATCH', '/__admin/config', { rateLimit: 'fast', failRat: 1 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('INVALID_CONFIG');
    expect((await admin(sim, 'GET', '/__admin/config')).json.rateLimit).toBe('1/min');
  });

  it('reset clears stats and limiter state but keeps queries', async () => {
    const clock = simClock();
    const sim = await start({ rateLimit: '1/min' }, { now: clock.now });
    const id = queryIdOf(await simCreate(sim.url, 'ABC1D23'));
    expect((await simGet(sim.url, id)).status).toBe(429);
    expect((await admin(sim, 'POST', '/__admin/reset')).status).toBe(200);
    const stats = (await admin(sim, 'GET', '/__stats')).json;
    expect(stats).toMatchObject({
      requests: 0,
      creates: 0,
      rateLimited: 0,
      queries: 1,
      maxInWindow: 0,
      firstRequestAt: null,
    });
    expect((await simGet(sim.url, id)).status).toBe(200);
  });
});

describe('/__stats', () => {
  it('counts creates per plate, gets per query, 429s, faults and the densest window exactly', async () => {
    const clock = simClock(Date.UTC(2030, 0, 1, 12, 0, 0, 0));
    const sim = await start({ rateLimit: '4/s', window: 'fixed' }, { now: clock.now });
    const a1 = queryIdOf(await simCreate(sim.url, 'AAA1A11'));
    await simCreate(sim.url, 'AAA1A11');
    await simCreate(sim.url, 'BBB2222');
    await simGet(sim.url, a1);
    expect((await simGet(sim.url, a1)).status).toBe(429);
    clock.advance(1000);
    await simCreate(sim.url, 'AAA1A11');
    await simGet(sim.url, a1);
    await simGet(sim.url, a1);
    sim.update({ errorRate: 1 });
    const fault = await simGet(sim.url, a1);
    expect(fault.status).toBeGreaterThanOrEqual(500);
    clock.advance(1000);
    sim.update({ errorRate: 0, dropRate: 1 });
    await expect(simGet(sim.url, a1)).rejects.toThrow();

    const stats = (await simCall(sim.url, 'GET', '/__stats?plates=1')).json;
    expect(stats).toEqual({
      requests: 10,
      counted: 9,
      creates: 4,
      gets: 3,
      createsByStatus: { PROCESSING: 4 },
      responsesByStatus: { '201': 4, '200': 3, '429': 1, [String(fault.status)]: 1 },
      rateLimited: 1,
      quotaExceeded: 0,
      faults: {
        errors: 1,
        drops: 1,
        dropsAfterCreate: 0,
        slowCreates: 0,
        gatewayErrorsAfterCreate: 0,
        cutBodiesAfterCreate: 0,
        truncatedBodiesAfterCreate: 0,
        stalledBodiesAfterCreate: 0,
        pollsNotFound: 0,
      },
      // Past the key and the limits, whatever was answered: 4 creates, 3 gets answered, one 5xx, one dropped.
      countedCreates: 4,
      countedGets: 5,
      queries: 4,
      duplicateCreates: 1,
      maxCreatesPerPlate: 3,
      maxInWindow: 4,
      firstRequestAt: Date.UTC(2030, 0, 1, 12, 0, 0, 0),
      lastRequestAt: Date.UTC(2030, 0, 1, 12, 0, 2, 0),
      // Per key, by label (the key itself never appears in stats).
      byKey: {
        key1: {
          counted: 9,
          rateLimited: 1,
          maxInWindow: 4,
          firstAt: Date.UTC(2030, 0, 1, 12, 0, 0, 0),
          lastAt: Date.UTC(2030, 0, 1, 12, 0, 2, 0),
        },
      },
      createsByPlate: { AAA1A11: 3, BBB2222: 1 },
      getsByQuery: { max: 3, total: 3, queries: 1 },
    });
    const { createsByPlate: _p, getsByQuery: _g, ...plain } = stats;
    expect(sim.stats()).toEqual(plain);

    // ?times=1: when each counted request arrived, per key; the 429 (not counted) apart, in `refused`.
    const t = (ms: number) => Date.UTC(2030, 0, 1, 12, 0, 0, 0) + ms;
    const times = (await simCall(sim.url, 'GET', '/__stats?times=1')).json;
    expect(times.timesByKey).toEqual({
      key1: {
        creates: [t(0), t(0), t(0), t(1000)],
        gets: [t(0), t(1000), t(1000), t(1000), t(2000)],
        refused: [t(0)],
      },
    });
    expect(sim.stats({ times: true }).timesByKey).toEqual(times.timesByKey);
  });

  it('runSimulate parses flags, starts, and prints the URL and keys', async () => {
    let printed = '';
    const sim = await runSimulate(
      ['--key', 'cli-key:run_queries', '--rate-limit', '7/s', '--completion', '100-200'],
      (t) => (printed += t),
    );
    sims.push(sim);
    expect(printed).toContain(sim.url);
    expect(printed).toContain('cli-key: run_queries');
    expect(printed).toContain('7/s');
    expect((await simCreate(sim.url, 'ABC1D23', 'cli-key')).headers['x-ratelimit-limit']).toBe('7');
  });

  it('does not count admin calls as requests', async () => {
    const sim = await start();
    await simCall(sim.url, 'GET', '/__stats');
    await simCall(sim.url, 'GET', '/__admin/keys');
    expect(sim.stats().requests).toBe(0);
    // And the handle closes cleanly while a keep-alive connection is open.
    const res = await request(`${sim.url}/__stats`);
    await res.body.text();
  });
});
