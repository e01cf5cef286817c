// A plate's end in one step (queue/plate-settle.ts): the outcome stored once, the in-flight slot
// given back, the answer counted, and a call retried after its reply was lost (the same bytes)
// counted once, while another worker's answer for the same plate is counted as the paid request
// it was.
import { afterEach, describe, expect, it } from 'vitest';
import { OutcomeStore } from '../../src/queue/batch/outcomes.js';
import { CostLedger } from '../../src/queue/costs.js';
import { InFlight } from '../../src/queue/inflight.js';
import { PlateSettle } from '../../src/queue/plate-settle.js';
import { ReuseStore } from '../../src/queue/reuse.js';
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

/** The settle script's owners over a Redis prefix of the test's own, and batch `b` of account `a`. */
async function setUp(label: string) {
  const own = await redisTestContext(label);
  ctx = own;
  const redis = own.redis;
  const keys = new VqbKeys({ prefix: own.prefix, queueName: 'q' });
  const jobPrefix = `${own.prefix}:q:`;
  const outcomes = new OutcomeStore(redis, keys);
  const inflight = new InFlight(redis, keys, 5, () => jobPrefix);
  const costs = new CostLedger(redis, keys, () => ['a']);
  const settle = new PlateSettle(redis, outcomes, inflight);
  return { redis, keys, jobPrefix, outcomes, inflight, costs, settle, B: { id: 'b', account: 'a' } };
}

describe('plate settle', () => {
  it('stores once, gives the slot back, counts the answer; a lost reply retried counts once; another answer counts', async () => {
    const { redis, keys, jobPrefix, outcomes, inflight, costs, settle, B } = await setUp('settle');
    // A batch of two plates, sealed: the second outcome finishes it.
    await redis.hset(keys.batch(B), 'enqueued', '2', 'sealed', '1');
    for (const plate of ['AAA0001', 'AAA0002']) {
      await redis.hset(`${jobPrefix}b.${plate}`, 'data', '{}');
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
    expect(await redis.hmget(keys.batch(B), 'done', 'finishedAt')).toEqual(['2', '12']);
  });

  it('counts a reused result as reused in the step that stores it: only when it became the outcome, once on a retry', async () => {
    const { redis, keys, costs, settle, B } = await setUp('settle-reused');
    await redis.hset(keys.batch(B), 'enqueued', '2', 'sealed', '1');
    const reusing = (plate: string, finishedAt: number) =>
      settle.prepare({
        outcome: { ...outcome(plate, finishedAt), requests: 0, polls: 0, reused: true },
        account: 'a',
        jobId: `b.${plate}`,
        count: costs.counting(B),
        countIfStored: 'reused',
      });
    const first = reusing('AAA0001', 10);
    expect(await first()).toBe('recorded');
    expect((await costs.forBatch(B)).reused).toBe(1);
    // Its lost reply's retry, and another worker's reuse of the same plate: stored already, not counted.
    expect(await first()).toBe('exists');
    expect(await reusing('AAA0001', 11)()).toBe('exists');
    expect((await costs.forBatch(B)).reused).toBe(1);
    // The plate that finishes the batch: whoever reads the batch at its finish reads it counted.
    const last = reusing('AAA0002', 12);
    expect(await last()).toBe('batch-finished');
    expect((await costs.forBatch(B)).reused).toBe(2);
  });

  it("writes the pointer to the paid result with the outcome it stores (and on a lost reply's retry), never over another's", async () => {
    const { redis, keys, outcomes, costs, settle, B } = await setUp('settle-reuse');
    const reuse = new ReuseStore(redis, keys, outcomes, { keepMs: 86_400_000, sharing: ['pooled'] });
    await redis.hset(keys.batch(B), 'enqueued', '4', 'sealed', '1');
    const at = Date.UTC(2026, 10, 29, 12);
    const settling = (plate: string, finishedAt: number) => {
      const pointer = reuse.pointerTerms('a', plate, finishedAt, 'b');
      if (pointer === undefined) throw new Error('expected a pointer to write');
      return settle.prepare({
        outcome: outcome(plate, finishedAt),
        account: 'a',
        jobId: `b.${plate}`,
        count: costs.counting(B),
        pointer,
      });
    };
    const first = settling('AAA0001', at);
    expect(await first()).toBe('recorded');
    const dayKey = keys.accountReuseDay('a', Math.floor(at / 86_400_000));
    expect(await reuse.find('a', 'AAA0001', 3_600_000, at + 1_000)).toMatchObject({
      queryId: 'q-AAA0001',
      ageMs: 1_000,
    });
    // The day hash expires a keep after its day ends.
    const ttl = await redis.pttl(dayKey);
    expect(ttl).toBeGreaterThan(86_400_000);
    expect(ttl).toBeLessThanOrEqual(86_400_000 + 12 * 3_600_000);

    // The hash's expiry is the script's to set whenever the hash has none, not a process's memo.
    await redis.persist(dayKey);
    const third = settling('AAA0003', at);
    expect(await third()).toBe('recorded');
    expect(await redis.pttl(dayKey)).toBeGreaterThan(86_400_000);

    // Another worker's answer for the same plate stores nothing, and moves no pointer.
    expect(await settling('AAA0001', at + 5_000)()).toBe('exists');
    expect(await redis.hget(dayKey, 'AAA0001')).toBe(`${at.toString(36)} b`);
    // A lost reply's retry (the same call): the pointer is written if it was not.
    const second = settling('AAA0002', at);
    expect(await second()).toBe('recorded');
    await redis.hdel(dayKey, 'AAA0002');
    expect(await second()).toBe('exists');
    expect(await redis.hget(dayKey, 'AAA0002')).toBe(`${at.toString(36)} b`);

    // Kept whole, or in the shared pool (another slot of a Cluster): not the script's to write.
    expect(reuse.pointerTerms('a', 'AAA0003', at, 'b', 3_600_000)).toBeUndefined();
    expect(reuse.pointerTerms('pooled', 'AAA0003', at, 'b')).toBeUndefined();
    // With no pointer, the outcome is stored as before.
    const plain = settle.prepare({
      outcome: outcome('AAA0004', at),
      account: 'a',
      jobId: 'b.AAA0004',
      count: costs.counting(B),
    });
    expect(await plain()).toBe('batch-finished');
    expect(await redis.hget(dayKey, 'AAA0004')).toBeNull();
  });
});
