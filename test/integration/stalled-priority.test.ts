// A job whose worker died goes back at its own priority (workers/stalled-priority.ts). BullMQ's
// stalled check puts it at the tail of the wait list, which a Worker takes before the prioritized
// set: a bulk create stalled with its worker went before an interactive plate submitted after it.
// Real BullMQ and Redis; the worker that dies is a lock left to expire.
import { once } from 'node:events';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { keepPriorityOnStall } from '../../workers/stalled-priority.js';
import { waitFor } from '../helpers/process.js';
import { REDIS_URL, type RedisTestContext, redisTestContext } from '../helpers/redis.js';

let ctx: RedisTestContext | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await ctx?.cleanup();
  ctx = undefined;
});

describe('a stalled job', () => {
  it('goes back at its priority, after an interactive job added since, not before it', async () => {
    ctx = await redisTestContext('stalled-priority');
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    closing.push(() => connection.quit());
    const queue = new Queue('q', { connection, prefix: ctx.prefix });
    closing.push(() => queue.close());
    // A bulk create (priority 4) taken by a worker that then dies: its lock lapses unrenewed.
    await queue.add('plate', { n: 'bulk' }, { jobId: 'bulk', priority: 4 });
    const dying = new Worker('q', null, { connection, prefix: ctx.prefix, lockDuration: 300, autorun: false });
    closing.push(() => dying.close(true));
    expect((await dying.getNextJob('dead-token'))?.id).toBe('bulk');
    // A person's plate arrives meanwhile (priority 1).
    await queue.add('plate', { n: 'interactive' }, { jobId: 'interactive', priority: 1 });

    // Another worker's stalled check finds the bulk job (its first pass marks, the next moves).
    const order: string[] = [];
    const worker = new Worker(
      'q',
      async (job) => {
        order.push(job.id!);
      },
      { connection, prefix: ctx.prefix, autorun: false, stalledInterval: 100, lockDuration: 300 },
    );
    closing.push(() => worker.close());
    const failures: unknown[] = [];
    keepPriorityOnStall(worker, queue, (err) => failures.push(err));
    const stalled = once(worker, 'stalled');
    void worker.startStalledCheckTimer();
    expect((await stalled)[0]).toBe('bulk');
    // Back among the prioritized jobs, not at the wait list's tail (the hook's two calls end after
    // the event: their effect is read in Redis, the test's own bounded look, not the product's).
    await waitFor(async () => (await queue.getJobState('bulk')) === 'prioritized', 10_000, 'the bulk job prioritized');
    expect(await queue.getJobCounts('wait', 'prioritized')).toEqual({ wait: 0, prioritized: 2 });
    expect((await queue.getJob('bulk'))?.priority).toBe(4);

    // So the interactive plate goes first.
    const both = new Promise<void>((resolve) => worker.on('completed', () => order.length === 2 && resolve()));
    void worker.run();
    await both;
    expect(order).toEqual(['interactive', 'bulk']);
    expect(failures).toEqual([]);
  });
});
