// The in-flight cap: slots are shared by every worker, and a slot whose job was removed by hand
// (the dashboard can) is taken back when the cap is reached, instead of blocking creates for ever.
import { afterEach, describe, expect, it } from 'vitest';
import { InFlight } from '../../src/queue/inflight.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

describe('in-flight cap', () => {
  it('holds at the cap while the jobs exist, and takes back slots of jobs that are gone', async () => {
    ctx = await redisTestContext('inflight');
    const keys = new VqbKeys({ prefix: ctx.prefix, queueName: 'q' });
    const jobPrefix = `${ctx.prefix}:q:`;
    const inflight = new InFlight(ctx.redis, keys, 2, () => jobPrefix);
    await ctx.redis.hset(`${jobPrefix}b.AAA0001`, 'data', '{}');
    await ctx.redis.hset(`${jobPrefix}b.AAA0002`, 'data', '{}');
    expect(await inflight.acquire('a', 'b.AAA0001', 'b', 1)).toBe(true);
    expect(await inflight.acquire('a', 'b.AAA0002', 'b', 2)).toBe(true);
    expect(await inflight.acquire('a', 'b.AAA0001', 'b', 3)).toBe(true); // already holds one
    expect(await inflight.acquire('a', 'b.AAA0003', 'b', 4)).toBe(false);
    expect(await inflight.forBatch('a', 'b')).toBe(2);

    await ctx.redis.del(`${jobPrefix}b.AAA0001`); // removed by hand while in flight
    expect(await inflight.acquire('a', 'b.AAA0003', 'b', 5)).toBe(true);
    // Another account's cap is its own.
    expect(await inflight.acquire('other', 'c.AAA0004', 'c', 6)).toBe(true);
    expect(await inflight.count('other')).toBe(1);
    expect(await inflight.count('a')).toBe(2);
    expect(await inflight.forBatch('a', 'b')).toBe(2);
    await inflight.release('a', 'b.AAA0002', 'b');
    expect(await inflight.forBatch('a', 'b')).toBe(1);
  });
});
