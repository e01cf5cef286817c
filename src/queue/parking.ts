// Holding a batch's creates back without spending anything: when a batch reaches its create cap,
// its waiting create jobs are taken off the queue and remembered (an activation that only finds
// the cap reached would still use a slot of the shared limiter, slowing every other batch). When
// the cap is raised they are put back. Creates held by a key-wide cap (day, month) sleep in
// `delayed` until the reset and are woken early when the cap is raised.
import type { Redis } from 'ioredis';
import type { OutcomeStore } from './outcomes.js';
import { jobIdFor, newJobData, PRIORITY, type PlateQueue } from './plate-queue.js';
import type { VqbKeys } from './redis.js';

export interface ParkingDeps {
  queue: PlateQueue;
  redis: Redis;
  keys: VqbKeys;
  outcomes: OutcomeStore;
}

/** Takes the batch's waiting create jobs off the queue; returns how many were parked. */
export async function parkWaitingCreates(deps: ParkingDeps, batchId: string): Promise<number> {
  const prioritized = deps.queue.toKey('prioritized');
  let cursor = '0';
  let parked = 0;
  do {
    const [next, flat] = await deps.redis.zscan(prioritized, cursor, 'MATCH', `${batchId}.*`, 'COUNT', 500);
    cursor = next;
    for (let i = 0; i < flat.length; i += 2) {
      const job = await deps.queue.getJob(flat[i]!);
      if (!job || job.data.step !== 'create') continue;
      try {
        await job.remove();
      } catch {
        continue; // taken by a worker meanwhile: it will find the cap reached and park itself
      }
      await deps.redis.sadd(deps.keys.parked(batchId), job.data.plate);
      parked++;
    }
  } while (cursor !== '0');
  return parked;
}

/** Puts every parked plate of the batch back on the queue (a cap was raised). */
export async function unparkBatch(deps: ParkingDeps, batchId: string, product: string): Promise<number> {
  const plates = await deps.redis.smembers(deps.keys.parked(batchId));
  let restored = 0;
  for (const plate of plates) {
    const jobId = jobIdFor(batchId, plate);
    const job = await deps.queue.getJob(jobId);
    if (job) {
      if (await job.isDelayed()) await job.promote();
    } else if (!(await deps.outcomes.has(batchId, plate))) {
      await deps.queue.add('plate', newJobData(batchId, plate, product), { jobId, priority: PRIORITY.create });
    }
    await deps.redis.srem(deps.keys.parked(batchId), plate);
    restored++;
  }
  await deps.redis.hdel(deps.keys.batch(batchId), 'blocked');
  return restored;
}

/** Wakes creates that sleep until a day/month cap resets (the cap was raised or removed). */
export async function wakeBudgetBlocked(deps: ParkingDeps): Promise<number> {
  let woken = 0;
  for (let start = 0; ; start += 500) {
    const jobs = await deps.queue.getDelayed(start, start + 499);
    for (const job of jobs) {
      if (job?.data.budgetBlocked) {
        await job.updateData({ ...job.data, budgetBlocked: false });
        await job.promote().catch(() => undefined);
        woken++;
      }
    }
    if (jobs.length < 500) break;
  }
  await deps.redis.hdel(deps.keys.line, 'budgetUntil', 'budgetReason');
  return woken;
}
