// A failed lock renewal is said only when the lock is lost (workers/lock-loss.ts, HeldLocks).
// BullMQ's one renewal script for all of a Worker's locks reads each lock by a name it builds: in a
// Redis Cluster mid-reshard, a lock already moved reads as missing, and BullMQ says
// "lockRenewalFailed" for a job whose lock this worker still holds (test/topology/redis-cluster
// shows it for real). Here, on one Redis, BullMQ's event is raised for jobs this worker runs, as the
// reshard has it raised, and the lock behind each is either held, gone, or another worker's.
import { describe, expect, it } from 'vitest';
import { jobKeyPrefix, LOCK_SUFFIX } from '../../src/engine/bullmq/keys.js';
import { jobIdFor } from '../../src/queue/account-queues.js';
import { makePlates, sleep, useHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('a failed lock renewal', () => {
  it('is renewed on its own and not said when the lock is held; said when it is gone or another’s', async () => {
    // Answers of 30 s, polls 6 s apart: each plate's job waits in the worker (under 8 s) for its
    // polls, holding its lock.
    const h = await harness.start({
      label: 'held-locks',
      workers: 0,
      sim: { completionMs: [30_000, 30_000] },
      config: { VQ_LOCK_DURATION: '20s', VQ_POLL_ADAPTIVE: 'false', VQ_POLL_INITIAL: '6s', VQ_POLL_INTERVAL: '6s' },
    });
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    const handle = h.startWorker();
    const plates = makePlates(3);
    await h.enqueue('locks', plates);
    await waitFor(async () => h.sim.stats().creates === 3, 20_000, 'three creates');
    const queue = h.services.accounts.queue('default');
    const [held, gone, taken] = plates.map((plate) => jobIdFor('locks', plate));
    const lockOf = (jobId: string) => `${jobKeyPrefix(queue)}${jobId}${LOCK_SUFFIX}`;
    const redis = h.redis.redis;
    for (const id of [held, gone, taken]) expect(await redis.pttl(lockOf(id!))).toBeGreaterThan(0);

    // Held, with little of its time left (as a lock whose last renewal was missed).
    await redis.pexpire(lockOf(held!), 3_000);
    // Gone (expired while the process was paused), and another worker's (taken over since).
    await redis.del(lockOf(gone!));
    await redis.set(lockOf(taken!), 'another-worker:1', 'PX', 20_000);
    const worker = handle.workers[0]!;
    worker.emit('lockRenewalFailed', [held!, gone!, taken!]);

    const lost = () => h.logs.lines.filter((line) => line.event === 'job.lock_lost' && line.when === 'renewal-failed');
    await waitFor(async () => lost().length === 2, 10_000, 'two lock losses said');
    // Let a third line, were one coming, land as well.
    await sleep(200);
    expect(lost().map((line) => line.jobId)).toEqual([gone, taken]);
    // The held one was renewed for the whole lock duration, under the same token.
    expect(await redis.pttl(lockOf(held!))).toBeGreaterThan(15_000);
    expect(await redis.get(lockOf(taken!))).toBe('another-worker:1');
    expect(await redis.exists(lockOf(gone!))).toBe(0);
    expect(h.sim.stats().creates).toBe(3);
  });
});
