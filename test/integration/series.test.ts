// The console's series (queue/series.ts, series-add.lua) stay small whatever the batch's length:
// at most one sample a gap, a batch's life thinned to at most BATCH_POINTS spread over all of it
// (its first sample kept), an account's last hour only; and rates read across UTC midnight.
import { afterEach, describe, expect, it } from 'vitest';
import { BATCH_POINTS, ProgressSeries, ratesOf } from '../../src/queue/series.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

async function series(clock: { now: number }): Promise<ProgressSeries> {
  ctx = await redisTestContext('series');
  return new ProgressSeries(ctx.redis, new VqbKeys({ prefix: ctx.prefix, queueName: 'vqb' }), () => clock.now);
}

describe('bounded series for the console charts (issue 47, 6)', () => {
  it('a 14-hour batch sampled every second keeps at most BATCH_POINTS, its first and last among them', async () => {
    const clock = { now: 1_000_000 };
    const s = await series(clock);
    const ref = { id: 'long', account: 'default' };
    expect(await s.sampleBatch(ref, { done: 0, failed: 0, requests: 0, limit: 4 })).toBe(true);
    // Within the 5 s gap: refused.
    clock.now += 1_000;
    expect(await s.sampleBatch(ref, { done: 1, failed: 0, requests: 1, limit: 4 })).toBe(false);
    let added = 1;
    for (let second = 2; second <= 14 * 3600; second += 1) {
      clock.now = 1_000_000 + second * 1_000;
      if (second % 60 !== 0) continue; // one look a minute is enough to cover the gaps
      if (await s.sampleBatch(ref, { done: second, failed: 0, requests: second * 2, limit: 4 })) added++;
    }
    const points = await s.batch(ref);
    expect(points.length).toBeLessThanOrEqual(BATCH_POINTS);
    expect(points.length).toBeGreaterThan(BATCH_POINTS / 2 - 1);
    expect(added).toBeLessThan(400);
    expect(points[0]).toEqual({ at: 1_000_000, done: 0, failed: 0, requests: 0, limit: 4 });
    expect(points.at(-1)!.at).toBeGreaterThan(1_000_000 + 13.5 * 3_600_000);
    for (let i = 1; i < points.length; i++) expect(points[i]!.at).toBeGreaterThan(points[i - 1]!.at);
  });

  it("an account keeps about its last hour (241 samples 15 s apart), and a rate across midnight counts the new day's requests", async () => {
    const clock = { now: 0 };
    const s = await series(clock);
    for (let minute = 0; minute <= 120; minute++) {
      clock.now = minute * 60_000;
      await s.sampleAccount('default', { requests: minute * 60, limit: 2 });
    }
    // Bounded by count (an hour of 15 s gaps); the charts read the last hour.
    expect((await s.account('default')).length).toBeLessThanOrEqual(241);
    for (let second = 0; second < 3 * 3600; second += 5) {
      clock.now = 121 * 60_000 + second * 1_000;
      await s.sampleAccount('default', { requests: second, limit: 2 });
    }
    const all = await s.account('default');
    expect(all.length).toBe(241);
    expect(all.at(-1)!.at - all[0]!.at).toBeLessThanOrEqual(3_600_000);
    expect((await s.account('default', clock.now - 600_000)).length).toBeGreaterThanOrEqual(40);
    const rates = ratesOf([
      { at: 0, requests: 1_000, limit: 2 },
      { at: 10_000, requests: 1_010, limit: 2 },
      { at: 20_000, requests: 5, limit: 2 },
    ]);
    expect(rates.map((r) => r.perSecond)).toEqual([1, 0.5]);
  });
});
