// A plate's end in one step (queue/plate-settle.ts): the outcome stored once, the in-flight slot
// given back, the answer counted, and a call retried after its reply was lost (the same bytes)
// counted once, while another worker's answer for the same plate is counted as the paid request
// it was.
import { afterEach, describe, expect, it } from 'vitest';
import { OutcomeStore } from '../../src/queue/batch/outcomes.js';
import { CostLedger } from '../../src/queue/costs.js';
import { InFlight } from '../../src/queue/inflight.js';
import { PlateSettle } from '../../src/queue/plate-settle.js';
import type { Outcome } from '../../src/queue/types.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

function outcome(plate: string, finishedAt: number): Outcome {
  return {
    batchId: 'b',
    plate,
    status: 'done',
    queryId: `q-${plate}`,
    result: { ok: true },
    enqueuedAt: 1,
    finishedAt,
    requests: 2,
    polls: 1,
    attempts: 1,
  };
}

describe('plate settle', () => {
  it('stores once, gives the slot back, counts the answer; a lost reply retried counts once; another answer counts', async () => {
    ctx = await redisTestContext('settle');
    const keys = new VqbKeys({ prefix: ctx.prefix, queueName: 'q' });
    const jobPrefix = `${ctx.prefix}:q:`;
    const outcomes = new OutcomeStore(ctx.redis, keys);
    const inflight = new InFlight(ctx.redis, keys, 5, () => jobPrefix);
    const costs = new CostLedger(ctx.redis, keys, () => ['a']);
    const settle = new PlateSettle(ctx.redis, outcomes, inflight);
    const B = { id: 'b', account: 'a' };
    // A batch of two plates, sealed: the second outcome finishes it.
    await ctx.redis.hset(keys.batch(B), 'enqueued', '2', 'sealed', '1');
    for (const plate of ['AAA0001', 'AAA0002']) {
      await ctx.redis.hset(`${jobPrefix}b.${plate}`, 'data', '{}');
      expect(await inflight.acquire('a', `b.${plate}`, 'b', 1)).toBe(true);
    }
    const count = () => costs.counting(B, 'polls', 'pollsSent');

    const first = settle.prepare({ outcome: outcome('AAA0001', 10), account: 'a', jobId: 'b.AAA0001', count: count() });
    expect(await first()).toBe('recorded');
    expect(await inflight.forBatch('a', 'b')).toBe(1);
    // The same call again, as untilStored sends it when the reply was lost: nothing moves.
    expect(await first()).toBe('exists');
    expect((await costs.forBatch(B)).polls).toBe(1);
    // Another worker's answer for the same plate was a request of its own: counted, not stored.
    const other = settle.prepare({ outcome: outcome('AAA0001', 11), account: 'a', jobId: 'b.AAA0001', count: count() });
    expect(await other()).toBe('exists');
    expect(await costs.forBatch(B)).toMatchObject({ polls: 2, pollsSent: 2 });
    expect((await outcomes.get(B, 'AAA0001'))?.finishedAt).toBe(10);

    // No fields: nothing counted; the last outcome finishes the batch.
    const last = settle.prepare({
      outcome: outcome('AAA0002', 12),
      account: 'a',
      jobId: 'b.AAA0002',
      count: costs.counting(B),
    });
    expect(await last()).toBe('batch-finished');
    expect(await inflight.count('a')).toBe(0);
    expect(await costs.forBatch(B)).toMatchObject({ polls: 2, pollsSent: 2 });
    expect(await ctx.redis.hmget(keys.batch(B), 'done', 'finishedAt')).toEqual(['2', '12']);
  });
});
