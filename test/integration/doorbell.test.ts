// The doorbell (workers/doorbell.ts) in place of BullMQ's blocking connection, with real Redis and
// real BullMQ Workers on its backend:
// - a job whose worker died (its lock expired) is put back in wait by another process's stalled
//   check; that process's Worker, waiting on its doorbell, fetches it at once on BullMQ's public
//   `stalled` event, not at the end of its wait (up to 10 s);
// - a producer's wake lends a Worker at its concurrency one place beyond it (ringNew,
//   workers/poll-room.ts lend): its most urgent job, an interactive plate, is fetched at once, not
//   when a place frees. Polls free none, so under a large batch whose polls took every slot an
//   interactive plate waited up to 5 s for its fetch. The job at work is held by the test.
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { Doorbell } from '../../workers/doorbell.js';
import { PollRoom } from '../../workers/poll-room.js';
import { sleep } from '../helpers/engine.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

describe('the doorbell', () => {
  let ctx: RedisTestContext;
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await ctx?.cleanup();
  });

  /** A Redis context of the test's own, a connection BullMQ may block on, and queue `q` on it. */
  async function queueOn(label: string): Promise<{ connection: RedisTestContext['redis']; queue: Queue }> {
    ctx = await redisTestContext(label);
    const connection = ctx.redis.duplicate({ maxRetriesPerRequest: null });
    closers.push(() => connection.quit());
    const queue = new Queue('q', { connection, prefix: ctx.prefix });
    closers.push(() => queue.close());
    return { connection, queue };
  }

  it('a Worker waiting on its doorbell fetches a stalled job as soon as its stalled check puts it back', async () => {
    const { connection, queue } = await queueOn('doorbell-stalled');
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

  it('a Worker at its concurrency fetches an interactive job at a producer’s wake, not at a feed pass’s ring', async () => {
    const { connection, queue } = await queueOn('doorbell-new-work');
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
