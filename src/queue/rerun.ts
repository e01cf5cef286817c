// Running a batch's failed plates again. A plate that has a queryId resumes polling that query (it
// was paid for); it is created anew only when asked (`recreate`), since that pays again, and then
// it goes back to the scheduler like any plate waiting to be created.
//
// Issue 36 (11): a query the upstream itself ended FAILED (VEHICLE_NOT_FOUND) answers the same to
// every poll: re-polling it cost 14 polls for 14 failures again. `retryWay` tells the two kinds
// apart, `only` runs one kind, and `failedSummary` counts them, so the console offers "poll
// again" (no create) only where an answer never came and says what "ask again" costs before it.

import { clock } from '../clock.js';
import type { BatchRef } from '../redis/keys.js';
import { jobIdFor, newJobData, pollPriority } from './account-queues.js';
import type { Accounts } from './accounts.js';
import type { OutcomeStore } from './batch/outcomes.js';
import type { BatchKey } from './batch/store.js';
import type { BatchViews } from './batch/view.js';
import type { Feeder } from './feeder.js';
import type { Scheduler } from './scheduler.js';
import type { Outcome, PlateJobData } from './types.js';

/**
 * How a failed plate can be run again. `poll`: its query was created (and paid for) and no answer
 * ended it (the poll deadline passed, its polls kept failing, its job stalled): polling that query
 * again costs no create. `ask`: the upstream ended the query itself (its FAILED answer is stored:
 * a poll would read the same answer again), or the plate has no query: only a new create, a charge,
 * asks the upstream again.
 */
export type RetryWay = 'poll' | 'ask';

export function retryWay(outcome: Pick<Outcome, 'queryId' | 'result'>): RetryWay {
  return outcome.queryId && outcome.result === undefined ? 'poll' : 'ask';
}

/** The error code of a plate a cancel dropped (delete --cancel): never sent, never charged. */
export const CANCELLED_CODE = 'CANCELLED';

/**
 * A plate dropped by a cancel is not a failure: the upstream never saw it. It is counted apart and
 * never run again by a retry (its batch was cancelled: running it would buy what was called off).
 */
export function wasCancelled(outcome: Pick<Outcome, 'status' | 'error'>): boolean {
  return outcome.status === 'failed' && outcome.error?.code === CANCELLED_CODE;
}

/** A batch's failed plates by error code: how many, a few of them, how a retry can run them. */
export interface FailedSummary {
  total: number;
  /** Plates a poll can run again (no create). */
  poll: number;
  /** Plates only a new create can ask again (a charge each). */
  ask: number;
  /** Plates a cancel dropped (never sent, never charged): not in `total`, never retried. */
  cancelled: number;
  codes: { code: string; way: RetryWay; count: number; plates: string[] }[];
}

/** Plates named per code in a summary. */
const SUMMARY_PLATES = 5;

/** Reads every outcome of the batch (HSCAN): call it when the failed count says there are some. */
export async function failedSummary(outcomes: OutcomeStore, batch: BatchRef): Promise<FailedSummary> {
  const summary: FailedSummary = { total: 0, poll: 0, ask: 0, cancelled: 0, codes: [] };
  const byKey = new Map<string, FailedSummary['codes'][number]>();
  for await (const outcome of outcomes.scan(batch)) {
    if (outcome.status !== 'failed') continue;
    if (wasCancelled(outcome)) {
      summary.cancelled++;
      continue;
    }
    const way = retryWay(outcome);
    const code = outcome.error?.code ?? 'FAILED';
    const key = `${way} ${code}`;
    let entry = byKey.get(key);
    if (!entry) {
      entry = { code, way, count: 0, plates: [] };
      byKey.set(key, entry);
      summary.codes.push(entry);
    }
    entry.count++;
    if (entry.plates.length < SUMMARY_PLATES) entry.plates.push(outcome.plate);
    summary.total++;
    summary[way]++;
  }
  summary.codes.sort((a, b) => b.count - a.count || a.code.localeCompare(b.code));
  for (const entry of summary.codes) entry.plates.sort();
  return summary;
}

export interface RerunResult {
  retried: number;
  /** Of those, plates that will be created (and paid for) again. */
  recreated: number;
  /** Failed plates whose job is still running; left alone. */
  skipped: number;
}

/** The parts of the queue a retry touches, and how long a poll may go on. */
export interface RerunParts {
  config: { poll: { deadlineMs: number } };
  accounts: Accounts;
  batchViews: BatchViews;
  outcomes: OutcomeStore;
  scheduler: Scheduler;
  feeder: Feeder;
}

export async function rerunFailed(
  services: RerunParts,
  batch: BatchKey,
  options: {
    recreate?: boolean;
    /** Only the failed plates a retry runs this way (a `poll` never creates; an `ask` always does). */
    only?: RetryWay;
    now?: () => number;
  } = {},
): Promise<RerunResult> {
  const { batchViews, outcomes, accounts, scheduler, config } = services;
  const info = await batchViews.get(batch);
  const batchId = info.id;
  const { account, queue } = accounts.for(info.account);
  const now = options.now ?? clock.now;
  const result: RerunResult = { retried: 0, recreated: 0, skipped: 0 };
  const failed = [];
  for await (const outcome of outcomes.scan(info))
    if (
      outcome.status === 'failed' &&
      !wasCancelled(outcome) &&
      (options.only === undefined || retryWay(outcome) === options.only)
    )
      failed.push(outcome);

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
    if (options.recreate === true || options.only === 'ask' || !outcome.queryId) {
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
  if (result.retried > recreate.length) await services.feeder.activateAndWake(account.id);
  if (recreate.length > 0) {
    await scheduler.push(info, recreate);
    await scheduler.enlist(account.id, batchId, info.priority, info.weight, info.deadline);
    await services.feeder.feedAndWake(account.id);
  }
  result.recreated = recreate.length;
  return result;
}
