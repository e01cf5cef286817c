// One BullMQ queue per account: BullMQ's pause and rate-limit switches are per queue, so an
// account whose key failed or that must wait for a 429 stops alone while the others run on from
// the same workers. A job is one (batch, plate), id `<batch>.<plate>`, so adding it twice is a
// no-op in Redis itself.
import { type JobsOptions, Queue } from 'bullmq';
import type { Account, Config } from '../config.js';
import type { RedisClient } from '../redis/connection.js';
import { accountQueueName } from '../redis/keys.js';
import { withQueueTelemetry } from '../telemetry/index.js';
import type { PlateJobData, PriorityClass } from './types.js';

export const JOB_NAME = 'plate';

/**
 * BullMQ serves lower numbers first and jobs without a priority before any prioritized job, so
 * every job carries one. Interactive look-ups (a person waiting on a screen) come first, creates
 * and polls alike; then polls (already paid for); then the creates of normal and bulk batches.
 */
export const PRIORITY = { interactive: 1, poll: 2, normal: 3, bulk: 4 } as const;

export function createPriority(cls: PriorityClass): number {
  return PRIORITY[cls];
}

export function pollPriority(cls: PriorityClass): number {
  return cls === 'interactive' ? PRIORITY.interactive : PRIORITY.poll;
}

/**
 * The BullMQ priority of a normal batch's first plate, fed as the batch is submitted
 * (queue/feeder.ts): a poll's. Polls go before creates on the queue, and a large batch's polls come
 * due together (its creates went at the key's rate for an answer time before them): at a create's
 * priority, a 1-plate batch submitted then waited behind them, and behind the creates queued before
 * it. In the worker's line it may take a turn from a poll (workers/flow.ts #nextWaiter).
 */
export function freshPriority(): number {
  return PRIORITY.poll;
}

export type PlateQueue = Queue<PlateJobData, unknown, string>;

export function jobIdFor(batchId: string, plate: string): string {
  return `${batchId}.${plate}`;
}

/**
 * The account's queue name and BullMQ prefix: the name is the account's hash tag (keys.ts), so the
 * queue's keys share the account's slot with its line, pace and batches.
 */
export function queueNameFor(
  config: Pick<Config, 'queueName' | 'prefix'>,
  accountId: string,
): { name: string; prefix: string } {
  return accountQueueName(config, accountId);
}

export function defaultJobOptions(config: Pick<Config, 'attempts' | 'backoffMs' | 'keepFailedMs'>): JobsOptions {
  return {
    attempts: config.attempts,
    backoff: { type: 'exponential', delay: config.backoffMs, jitter: 0.5 },
    // Outcomes are stored separately before a job finishes, so finished jobs are only kept for
    // the dashboard: a bounded number, for a bounded time.
    removeOnComplete: { age: 3_600, count: 1_000 },
    removeOnFail: { age: Math.ceil(config.keepFailedMs / 1000) },
  };
}

export function newJobData(account: Account, batchId: string, plate: string, cls: PriorityClass): PlateJobData {
  return { account: account.id, batchId, plate, product: account.product, cls, step: 'create', polls: 0, requests: 0 };
}

/** Events kept in each queue's BullMQ events stream. */
const EVENTS_KEPT = 1_000;

/** Opens the account's queue on `connection` (every account's queue shares the process's command connection). */
export function openAccountQueue(
  config: Pick<Config, 'queueName' | 'prefix' | 'attempts' | 'backoffMs' | 'keepFailedMs'>,
  accountId: string,
  connection: RedisClient,
): PlateQueue {
  const { name, prefix } = queueNameFor(config, accountId);
  return new Queue<PlateJobData, unknown, string>(name, {
    connection,
    prefix,
    defaultJobOptions: defaultJobOptions(config),
    // BullMQ's events stream (trimmed with XADD MAXLEN ~): nothing in vqb reads it (no
    // QueueEvents), so 1,000 recent events for a person looking, not BullMQ's 10,000
    // (about a megabyte of Redis per account queue).
    streams: { events: { maxLen: EVENTS_KEPT } },
    ...withQueueTelemetry(),
  });
}
