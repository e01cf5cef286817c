// The pace's arithmetic on a clock the test owns (issue 45): the pace, hold and learn scripts take
// the test's `now` (production passes none and keeps Redis TIME), so thousands of slots run in
// about a second with no sleeps, and a check that counts sends per window fails when the pace sends
// one request too many. Rates and shares on the wall clock live in the bench, not here.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { luaScripts } from '../../src/redis/scripts.js';
import { createLimiter, type Limiter } from '../../src/simulator/limiter.js';
import { testConfig } from '../helpers/config.js';
import { REDIS_URL, type RedisTestContext, redisTestContext } from '../helpers/redis.js';
import { mostInWindow, perSecond, runPace, VirtualClock, virtualLine } from '../helpers/virtual-pace.js';

const contexts: RedisTestContext[] = [];
const extra: Redis[] = [];
afterEach(async () => {
  for (const r of extra.splice(0)) r.disconnect();
  for (const c of contexts.splice(0)) await c.cleanup();
});

async function setUp(rateLimit: string) {
  const ctx = await redisTestContext('pace-clock');
  contexts.push(ctx);
  const config = testConfig(ctx.prefix, { VQ_RATE_LIMIT: rateLimit });
  return { ctx, config, account: config.accounts[0]! };
}

/**
 * An account set to `rateLimit`, run for `durationMs` of virtual time against a key of `limits`
 * (sliding windows of a second; `limits(start)` picks the one in force at each send), its answers
 * fed to the learner. `rate(from, to)`: requests taken per second between those seconds of the run.
 */
async function againstKey(
  rateLimit: string,
  limits: number | ((start: number) => (at: number) => Limiter),
  run: { workers: number; durationMs: number; announce?: boolean },
) {
  const { ctx, config, account } = await setUp(rateLimit);
  const clock = new VirtualClock();
  const line = virtualLine(config, ctx.redis, account, clock);
  const start = clock.now;
  const fixed = typeof limits === 'number' ? createLimiter('sliding', { max: limits, durationMs: 1_000 }) : undefined;
  const limiter = fixed ? () => fixed : (limits as (start: number) => (at: number) => Limiter)(start);
  const paced = await runPace(line, clock, {
    workers: run.workers,
    durationMs: run.durationMs,
    upstream: { limiter, announce: run.announce ?? false, jitterMs: config.pacingJitterMs },
  });
  const rate = (from: number, to: number) => perSecond(paced.sends, start + from * 1_000, start + to * 1_000);
  const refusedAfter = (from: number) => paced.refusedAt.filter((at) => at >= start + from * 1_000).length;
  return { ...paced, line, start, rate, refusedAfter };
}

describe('the pace on a virtual clock', () => {
  it('a configured 10/s: never more than 10 in any second over 10 virtual minutes, and the limit is used', async () => {
    const { ctx, config, account } = await setUp('10/s');
    const clock = new VirtualClock();
    const line = virtualLine(config, ctx.redis, account, clock);
    const run = await runPace(line, clock, { workers: 6, durationMs: 600_000 });
    expect(mostInWindow(run.sends, 1_000)).toBeLessThanOrEqual(10);
    // The jitter allowance is the only room left: 10 per (1 s + allowance).
    const used = run.sends.length / 600 / 10;
    expect(used).toBeGreaterThan(0.9);
  });

  it("a hold's end is a field read against the test's now: what a request about to leave is told counts down with it", async () => {
    // A request that slept for its slot asks how long a hold started meanwhile has left
    // (AccountLine.heldFor, before every send). A hold kept as a key's time to live would answer
    // on the wall clock: 30 s left however far the test's clock had gone.
    const { ctx, config, account } = await setUp('10/s');
    const clock = new VirtualClock();
    const line = virtualLine(config, ctx.redis, account, clock);
    expect(await line.heldFor()).toBe(0);
    await line.hold(30_000, 'rate_limit');
    expect(await line.heldFor()).toBe(30_000);
    clock.now += 29_000;
    expect(await line.heldFor()).toBe(1_000);
    clock.now += 1_000;
    expect(await line.heldFor()).toBe(0);
    // A shorter hold does not cut a longer one short; a released one is gone at once.
    await line.hold(60_000, 'quota');
    await line.hold(1_000, 'rate_limit');
    expect(await line.heldFor()).toBe(60_000);
    await line.releaseHold();
    expect(await line.heldFor()).toBe(0);
  });

  it('a hold: nothing is sent until it ends, then the pace goes on at the limit', async () => {
    const { ctx, config, account } = await setUp('10/s');
    const clock = new VirtualClock();
    const line = virtualLine(config, ctx.redis, account, clock);
    const before = await runPace(line, clock, { workers: 4, durationMs: 5_000 });
    const heldAt = clock.now;
    await line.hold(30_000, 'rate_limit');
    const after = await runPace(line, clock, { workers: 4, durationMs: 40_000 });
    expect(before.sends.length).toBeGreaterThan(40);
    expect(after.sends.filter((at) => at < heldAt + 30_000)).toEqual([]);
    expect(mostInWindow([...before.sends, ...after.sends], 1_000)).toBeLessThanOrEqual(10);
    expect(after.sends.length).toBeGreaterThan(90);
  });

  it('auto, a 30/s limit announced in the answers: not one request refused, cold start included, and the limit used', async () => {
    const { ctx, config, account } = await setUp('auto');
    const clock = new VirtualClock();
    const line = virtualLine(config, ctx.redis, account, clock);
    const limit = createLimiter('sliding', { max: 30, durationMs: 1_000 });
    const upstream = { limiter: () => limit, announce: true, jitterMs: config.pacingJitterMs };
    const run = await runPace(line, clock, { workers: 16, durationMs: 120_000, upstream });
    expect(run.refused).toBe(0);
    expect(mostInWindow(run.sends, 1_000)).toBeLessThanOrEqual(30);
    const start = run.sends[0]!;
    // Cold: the first answers announce the limit, and the key is near it from its third second
    // (8, 18, 29 requests in its first three seconds when this was written).
    expect(run.sends.filter((at) => at < start + 3_000).length).toBeGreaterThan(45);
    const late = run.sends.filter((at) => at >= start + 20_000).length;
    expect(late / 100 / 30).toBeGreaterThan(0.9);
  });

  it('a pace one step too generous sends one request too many in a window, and the check says so (a mutation)', async () => {
    const { config, account } = await setUp('10/s');
    // The shipped rule, with the next slot 10 % sooner: the mutation a review might miss.
    const shipped = luaScripts().get('pace-acquire')!;
    const mutated = shipped.lua.replace(
      "local fields = { 'tat', tostring(next.start + step) }",
      "local fields = { 'tat', tostring(next.start + step * 0.9) }",
    );
    expect(mutated).not.toBe(shipped.lua);
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    extra.push(redis);
    // Defined first on its own connection: the line then finds the command there and keeps it.
    redis.defineCommand('vqbPaceAcquire', { numberOfKeys: shipped.numberOfKeys, lua: mutated });
    const clock = new VirtualClock();
    const line = virtualLine(config, redis, account, clock);
    const run = await runPace(line, clock, { workers: 6, durationMs: 60_000 });
    expect(mostInWindow(run.sends, 1_000)).toBeGreaterThan(10);
  });

  it('auto, no rate-limit headers, a 20/s key: the slow start overshoot costs one step down, and the key runs near its limit (≤ 5 429s a minute)', async () => {
    const run = await againstKey('auto', 20, { workers: 32, durationMs: 120_000 });
    // Each refusal of a request paced before the last step down stepped down again: 32/s went to
    // 7.2/s in 700 ms and stayed at 14/s (0.7) until the probe 30 s later. Then 0.97 over 30-60 s
    // and 0.90 over the first two minutes (issue 43's cold target: 0.85), 2 429s a minute.
    expect(run.rate(30, 60) / 20).toBeGreaterThan(0.9);
    expect(run.rate(0, 120) / 20).toBeGreaterThan(0.85);
    expect(run.refusedAfter(30)).toBeLessThanOrEqual(5 * 1.5);
    // The first ten seconds: doubling every 2 s, each step's first slot still at the old interval,
    // and a rate called unused for one slot short, it used 0.185 of them (20/s at 11 s); now a
    // doubling a second, 20/s at 6 s: 0.52 (0.405 with no slot of slack).
    expect(run.rate(0, 10) / 20).toBeGreaterThan(0.45);
    expect(run.refused).toBeLessThanOrEqual(35);
    expect(await run.line.rate()).toMatchObject({ source: 'learned' });
  });

  it('auto, no headers, a 50/s key: a window refused after the next doubling steps from the rate before it', async () => {
    // A second's refusals are heard after it: 64/s doubled to 128 before the 429s of its window
    // came, and stepping from 128 took three steps and 119 429s; from 64, 36 (the old two-second
    // doubling: 23, and 0.79 of the first minute).
    const run = await againstKey('auto', 50, { workers: 64, durationMs: 60_000 });
    expect(run.refused).toBeLessThanOrEqual(50);
    expect(run.rate(0, 60) / 50).toBeGreaterThan(0.85);
    expect(run.refusedAfter(30)).toBeLessThanOrEqual(5);
  });

  it('configured too high (40/s against a 20/s key, no headers): followed below it, a few 429s at most', async () => {
    const run = await againstKey('40/s', 20, { workers: 16, durationMs: 60_000 });
    // Every refusal a second after a step, while the upstream's window still held what the rate
    // before it sent, took a step of its own: 40, 36, 20.3, then 14.3/s, and the climb back
    // stopped under where it last hit: 0.94 over the last 30 s. Now 0.98, 41 429s in all.
    expect(run.rate(30, 60) / 20).toBeGreaterThan(0.95);
    expect(run.refusedAfter(30)).toBeLessThanOrEqual(6);
    expect(run.refused).toBeLessThanOrEqual(50);
    expect(await run.line.rate()).toMatchObject({ source: 'learned', ceilingPerSecond: 40 });
  });

  it('a refused probe goes back to the rate that held before it, not 0.9x below the probe', async () => {
    const run = await againstKey('40/s', 20, { workers: 16, durationMs: 120_000 });
    // Settled, the rate probes (+3 %) every 30 s and is refused. Stepped 0.9x from the probe, it
    // went 20.3, 18.2, and 19.7/s 2 s later (about three requests a probe); back to the 19.7 that
    // held, it loses none.
    const settled = run.rates.filter(([at]) => at >= run.start + 30_000).map(([, perSecond]) => perSecond);
    expect(settled.length, 'the probes and their steps').toBeGreaterThanOrEqual(4);
    expect(Math.min(...settled)).toBeGreaterThan(19);
    expect(run.refusedAfter(30)).toBeLessThanOrEqual(6);
  });

  it('a limit that drops from 30/s to 10/s and back (no headers) is followed within 60 s each way', async () => {
    const limits = [30, 10, 30].map((max) => createLimiter('sliding', { max, durationMs: 1_000 }));
    const { rate } = await againstKey(
      'auto',
      (start) => (at) => limits[at < start + 30_000 ? 0 : at < start + 60_000 ? 1 : 2]!,
      { workers: 16, durationMs: 130_000 },
    );
    // 27.9, 9.7 and 28.5/s when this was written.
    expect(rate(22, 30) / 30).toBeGreaterThan(0.85);
    expect(rate(50, 60) / 10).toBeGreaterThan(0.85);
    expect(rate(50, 60) / 10).toBeLessThanOrEqual(1.05);
    expect(rate(110, 120) / 30).toBeGreaterThan(0.85);
  });

  it('three processes share one estimate: their lines, each its own connection, pace the key as one', async () => {
    const { config, account } = await setUp('auto');
    const clock = new VirtualClock();
    const lines = [0, 1, 2].map(() => {
      const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
      extra.push(redis);
      return virtualLine(config, redis, account, clock);
    });
    const limit = createLimiter('sliding', { max: 24, durationMs: 1_000 });
    const run = await runPace(lines, clock, {
      workers: 24,
      durationMs: 60_000,
      upstream: { limiter: () => limit, announce: true, jitterMs: config.pacingJitterMs },
    });
    expect(run.refused).toBe(0);
    expect(mostInWindow(run.sends, 1_000)).toBeLessThanOrEqual(24);
    const rates = await Promise.all(lines.map((l) => l.rate()));
    for (const rate of rates) expect(rate).toMatchObject({ source: 'announced', limit: 24 });
  });

  it('production never hands the scripts a clock: only queue/line.ts names one, and only tests set it', () => {
    const root = join(import.meta.dirname, '../..');
    const files = (dir: string): string[] =>
      readdirSync(join(root, dir)).flatMap((name) => {
        const path = join(dir, name);
        return statSync(join(root, path)).isDirectory() ? files(path) : name.endsWith('.ts') ? [path] : [];
      });
    const naming = [...files('src'), ...files('workers')].filter((file) =>
      readFileSync(join(root, file), 'utf8').includes('scriptNow'),
    );
    expect(naming.map((f) => relative('.', f))).toEqual(['src/queue/line.ts']);
  });
});

describe('key pauses on a virtual clock', () => {
  it('a key failure pauses once; one sent before the resume is old news, one sent after pauses again', async () => {
    // Every worker that sees the key fail calls pause: one records it (one fatal line), the others
    // hear `already`. A request that left before the operator's resume and came back failing only
    // now (it waited out a hold, the upstream was slow) must not pause the fixed key again.
    const { ctx, config, account } = await setUp('10/s');
    const clock = new VirtualClock();
    const line = virtualLine(config, ctx.redis, account, clock);
    const t0 = clock.now;
    clock.now = t0 + 1_000;
    expect(await line.pause('EXPIRED_API_KEY', 'the API key has expired', t0 + 900)).toBe('recorded');
    expect(await line.pause('EXPIRED_API_KEY', 'the API key has expired', t0 + 950)).toBe('already');
    expect(await line.state()).toMatchObject({ paused: true, pause: { code: 'EXPIRED_API_KEY', at: t0 + 1_000 } });
    clock.now = t0 + 5_000;
    expect((await line.resume())?.code).toBe('EXPIRED_API_KEY');
    clock.now = t0 + 7_000;
    expect(await line.pause('EXPIRED_API_KEY', 'the API key has expired', t0 + 4_999)).toBe('before-resume');
    expect(await line.pause('EXPIRED_API_KEY', 'the API key has expired', t0 + 5_000)).toBe('before-resume');
    expect(await line.state()).toMatchObject({ paused: false });
    expect((await line.state()).pause).toBeUndefined();
    expect(await line.pause('EXPIRED_API_KEY', 'the API key has expired', t0 + 5_001)).toBe('recorded');
    expect(await line.state()).toMatchObject({ paused: true, pause: { code: 'EXPIRED_API_KEY', at: t0 + 7_000 } });
  });
});
