// Running a batch's failed plates again. A plate that has a queryId resumes polling that query (it
// was paid for); it is created anew only when asked (`recreate`), since that pays again, and then
// it goes back to the scheduler like any plate waiting to be created.
import type { QueueServices } from '../services.js';
import { jobIdFor, newJobData, pollPriority } from './account-queues.js';
import type { BatchKey } from './batch/store.js';
import type { PlateJobData } from './types.js';

export interface RerunResult {
  retried: number;
  /** Of those, plates that will be created (and paid for) again. */
  recreated: number;
  /** Failed plates whose job is still running; left alone. */
  skipped: number;
}

export async function rerunFailed(
  services: QueueServices,
  batch: BatchKey,
  options: { recreate?: boolean; now?: () => number } = {},
): Promise<RerunResult> {
  const { batchViews, outcomes, accounts, scheduler, config } = services;
  const info = await batchViews.get(batch);
  const batchId = info.id;
  const { account, queue } = accounts.for(info.account);
  const now = options.now ?? Date.now;
  const result: RerunResult = { retried: 0, recreated: 0, skipped: 0 };
  const failed = [];
  for await (const outcome of outcomes.scan(info)) if (outcome.status === 'failed') failed.push(outcome);

  const recreate: string[] = [];
  for (const outcome of failed) {
    const jobId = jobIdFor(batchId, outcome.plate);
    const job = await queue.getJob(jobId);
    if (job && (await job.isActive())) {
      result.skipped++;
      continue;
    }
    await job?.remove();
    await outcomes.removeFailed(info, [outcome.plate]);
    result.retried++;
    if (options.recreate === true || !outcome.queryId) {
      recreate.push(outcome.plate);
      continue;
    }
    const data: PlateJobData = {
      ...newJobData(account, batchId, outcome.plate, info.priority),
      step: 'poll',
      queryId: outcome.queryId,
      ...(outcome.createdAt ? { createdAt: outcome.createdAt } : {}),
      pollDeadline: now() + config.poll.deadlineMs,
      polls: 1, // not a first poll: the learner only learns from first polls
      requests: outcome.requests,
    };
    await queue.add('plate', data, { jobId, priority: pollPriority(info.priority) });
  }
  // Poll jobs went on the queue directly: the account has work again, so worker processes run a
  // Worker for it (the enlist below does the same for plates created again).
  if (result.retried > recreate.length) await scheduler.activate([account.id]);
  if (recreate.length > 0) {
    await scheduler.push(info, recreate);
    await scheduler.enlist(account.id, batchId, info.priority, info.weight);
    await services.feeder.feedAndWake(account.id);
  }
  result.recreated = recreate.length;
  return result;
}
