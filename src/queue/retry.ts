// Running a batch's failed plates again. A plate that has a queryId resumes polling that query (it
// was paid for); it is created anew only when asked (`recreate`), since that pays again.
import { jobIdFor, newJobData, PRIORITY } from './plate-queue.js';
import type { QueueServices } from './services.js';
import type { PlateJobData } from './types.js';

export interface RetryResult {
  retried: number;
  /** Of those, plates that will be created (and paid for) again. */
  recreated: number;
  /** Failed plates whose job is still running; left alone. */
  skipped: number;
}

export async function retryFailed(services: QueueServices, batchId: string, options: { recreate?: boolean; now?: () => number } = {}): Promise<RetryResult> {
  const { batches, outcomes, queue, config } = services;
  const info = await batches.get(batchId);
  const now = options.now ?? Date.now;
  const result: RetryResult = { retried: 0, recreated: 0, skipped: 0 };
  const failed = [];
  for await (const outcome of outcomes.scan(batchId)) if (outcome.status === 'failed') failed.push(outcome);

  for (const outcome of failed) {
    const jobId = jobIdFor(batchId, outcome.plate);
    const job = await queue.getJob(jobId);
    if (job && (await job.isActive())) {
      result.skipped++;
      continue;
    }
    await job?.remove();
    await outcomes.removeFailed(batchId, [outcome.plate]);
    const recreate = options.recreate === true || !outcome.queryId;
    const data: PlateJobData = recreate
      ? newJobData(batchId, outcome.plate, info.product)
      : {
          ...newJobData(batchId, outcome.plate, info.product),
          step: 'poll',
          queryId: outcome.queryId!,
          ...(outcome.createdAt ? { createdAt: outcome.createdAt } : {}),
          pollDeadline: now() + config.poll.deadlineMs,
          polls: 1, // not a first poll: the learner only learns from first polls
          requests: outcome.requests,
        };
    await queue.add('plate', data, { jobId, priority: recreate ? PRIORITY.create : PRIORITY.poll });
    result.retried++;
    if (recreate) result.recreated++;
  }
  return result;
}
