// The BullMQ queue of plate jobs: one job per (batch, plate), with a deterministic id so that
// adding the same plate to the same batch twice is a no-op in Redis itself.
import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { PlateJobData } from './types.js';

export const JOB_NAME = 'plate';

/**
 * BullMQ takes jobs without a priority before any prioritized job, and promoted delayed jobs queue
 * behind everything waiting. Creates therefore carry a priority too, and a job entering the poll
 * step is raised above them, so a large batch never starves its own polls.
 */
export const PRIORITY = { poll: 1, create: 10 } as const;

export type PlateQueue = Queue<PlateJobData, unknown, string>;

export function jobIdFor(batchId: string, plate: string): string {
  return `${batchId}.${plate}`;
}

export function defaultJobOptions(config: Pick<Config, 'attempts' | 'backoffMs' | 'keepFailedMs'>): JobsOptions {
  return {
    attempts: config.attempts,
    backoff: { type: 'exponential', delay: config.backoffMs, jitter: 0.5 },
    // Outcomes are stored separately before a job finishes, so finished jobs are only kept for
    // the dashboard: a bounded number, for a bounded time.
    removeOnComplete: { age: 3_600, count: 1_000 },
    removeOnFail: { age: Math.ceil(config.keepFailedMs / 1000) },
    priority: PRIORITY.create,
  };
}

export function createPlateQueue(config: Config, connection: Redis): PlateQueue {
  return new Queue<PlateJobData, unknown, string>(config.queueName, {
    connection,
    prefix: config.prefix,
    defaultJobOptions: defaultJobOptions(config),
  });
}

export function newJobData(batchId: string, plate: string, product: string): PlateJobData {
  return { batchId, plate, product, step: 'create', polls: 0, requests: 0 };
}
