// A producer's wake lends a Worker at its concurrency one place beyond it (workers/doorbell.ts
// ringNew, workers/poll-room.ts lend): its most urgent job, an interactive plate, is fetched at
// once, not when a place frees. Polls free none, so under a large batch whose polls took every
// slot an interactive plate waited up to 5 s for its fetch. Real Redis and a real BullMQ Worker
// on the doorbell's backend; the job at work is held by the test.
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { Doorbell } from '../../workers/doorbell.js';
import { PollRoom } from '../../workers/poll-room.js';
import { sleep } from '../helpers/engine.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

describe('the doorbell and new work', () => {
  let ctx: RedisTestContext;
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await ctx?.cleanup();
  });

  it('a Worker at its concurrency fetches an interactive job at a producer’s wake, not at a feed pass’s ring', async () => {
    ctx = await redisTestContext('doorbell-new-work');
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(() => connection.quit());
    const queue = new Queue('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    await queue.add('plate', { n: 0 }, { jobId: 'bulk.AAA0000', priority: 3 });

    const doorbell = new Doorbell();
    const room = new PollRoom(1);
    const started: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const worker = new Worker(
      'q',
      async (job) => {
        room.fetched();
        started.push(job.id!);
        // The bulk plate stays at work (its slot far off), taking the Worker's one place.
        if (job.id!.startsWith('bulk')) await held;
      },
      { connection, prefix: ctx.prefix, concurrency: room.atWork, drainDelay: 60 },
      doorbell.backendFor('a', () => room.lend()),
    );
    room.attach(worker);
    closers.push(() => worker.close());
    closers.push(async () => release());
    await expect.poll(() => started, { timeout: 5_000, interval: 20 }).toEqual(['bulk.AAA0000']);

    // Another bulk plate and a feed pass's ring: the Worker is at its concurrency and stays there.
    await queue.add('plate', { n: 1 }, { jobId: 'bulk.AAA0001', priority: 3 });
    doorbell.ring('a');
    await sleep(500);
    expect(started).toEqual(['bulk.AAA0000']);
    expect(worker.concurrency).toBe(1);

    // An interactive plate and its producer's wake: fetched now, ahead of the bulk plate queued
    // before it, and the place lent for it is taken back.
    await queue.add('plate', { n: 2 }, { jobId: 'screen.XYZ1A23', priority: 1 });
    doorbell.ringNew('a');
    await expect.poll(() => started, { timeout: 2_000, interval: 20 }).toEqual(['bulk.AAA0000', 'screen.XYZ1A23']);
    expect(worker.concurrency).toBe(1);
    await sleep(300);
    expect(started).toEqual(['bulk.AAA0000', 'screen.XYZ1A23']);
  });
});
