// A job whose worker died (its lock expired) is put back in wait by another process's stalled
// check; that process's Worker, waiting on its doorbell (no blocking connection), fetches it at
// once on BullMQ's public `stalled` event, not at the end of its wait (up to 10 s).
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { Doorbell } from '../../workers/doorbell.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

describe('the doorbell and stalled jobs', () => {
  let ctx: RedisTestContext;
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await ctx?.cleanup();
  });

  it('a Worker waiting on its doorbell fetches a stalled job as soon as its stalled check puts it back', async () => {
    ctx = await redisTestContext('doorbell-stalled');
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(() => connection.quit());
    const queue = new Queue('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    await queue.add('plate', { n: 1 }, { jobId: 'b.ABC1D23' });

    // A worker that took the job and died: its lock (1 s) is never renewed.
    const dead = new Worker('q', null, { connection, prefix: ctx.prefix, autorun: false, lockDuration: 1_000 });
    expect((await dead.getNextJob('dead-token'))?.id).toBe('b.ABC1D23');
    await dead.close();

    const doorbell = new Doorbell();
    let stalledAt = 0;
    let processedAt = 0;
    const worker = new Worker(
      'q',
      async () => {
        processedAt = Date.now();
      },
      // drainDelay: an empty queue's wait lasts BullMQ's longest block (10 s) unless the bell rings.
      { connection, prefix: ctx.prefix, stalledInterval: 300, drainDelay: 60 },
      doorbell.backendFor('a'),
    );
    doorbell.listen(worker, 'a');
    worker.on('stalled', () => {
      stalledAt = Date.now();
    });
    closers.push(() => worker.close());
    // Fetched before the Worker's own wait (10 s) could have ended: only a ring fetches it in time.
    await expect.poll(() => processedAt, { timeout: 8_000, interval: 50 }).toBeGreaterThan(0);
    expect(stalledAt).toBeGreaterThan(0);
    expect(processedAt).toBeGreaterThanOrEqual(stalledAt);
  });
});
