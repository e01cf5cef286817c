// BullMQ's Redis layout as vqb relies on it, named here and nowhere else in src/ (issue 45). vqb's
// scripts read and write a few of BullMQ's keys in the same step as its own (a job's data written
// under its lock, a feed that counts what the queue holds), which BullMQ's public API cannot do
// atomically or without a round trip of its own per plate; docs/development.md#bullmq-internals
// says which and what BullMQ would need to make them public. A BullMQ upgrade that moves any of
// this fails test/integration/bullmq-contract.test.ts, which reads the installed BullMQ's scripts.
import type { Job, Queue } from 'bullmq';
import type { RedisClient } from '../../redis/connection.js';

/** The types of BullMQ queue key (its QueueKeys) that vqb's scripts are handed. */
export const QUEUE_KEY_TYPES = ['wait', 'prioritized', 'delayed', 'active', 'paused', 'limiter', 'marker'] as const;
export type QueueKeyType = (typeof QUEUE_KEY_TYPES)[number];

/** A queue's keys by type: `<prefix>:<name>:<type>`. */
export type BullQueueKeys = Record<QueueKeyType, string>;

/** The fields of BullMQ's job hash that job-fence-5.lua reads and writes (what updateData and changePriority set). */
export const JOB_FIELDS = { data: 'data', priority: 'priority' } as const;

/** The suffix of a job's lock key: the token of the worker that holds the job (BullMQ's prepareJobForProcessing). */
export const LOCK_SUFFIX = ':lock';

/**
 * The Lua files of src/redis/lua that touch BullMQ's keys or fields, handed the keys by this
 * module: the only ones that may name a job hash field or a lock (test/unit/bullmq-reach.test.ts).
 */
export const OWNED_SCRIPTS = ['job-fence-5.lua', 'sched-feed-15.lua', 'includes/inflight-take.lua'] as const;

type KeyedQueue = Pick<Queue, 'toKey'>;

/** The queue's keys vqb's scripts read (sched-feed-15.lua) or write (the marker, below). */
export function queueKeys(queue: KeyedQueue): BullQueueKeys {
  return Object.fromEntries(QUEUE_KEY_TYPES.map((type) => [type, queue.toKey(type)])) as BullQueueKeys;
}

/** What a job id is appended to for its hash's key (inflight-take.lua checks the job still exists). */
export function jobKeyPrefix(queue: KeyedQueue): string {
  return queue.toKey('');
}

/** A job's hash and lock keys (job-fence-5.lua). */
export function jobKeys(job: Pick<Job, 'queueQualifiedName' | 'id'>): { hash: string; lock: string } {
  const hash = `${job.queueQualifiedName}:${job.id}`;
  return { hash, lock: `${hash}${LOCK_SUFFIX}` };
}

/**
 * Makes a Worker blocked on the queue's marker (BZPOPMIN) look at `at` (epoch ms), unless it is
 * to look earlier already (LT). BullMQ's rate limit (Queue.rateLimit) adds no marker, and a job
 * with a priority put back while it is on adds none either, so a blocked Worker would sleep
 * through the end of the limit (up to its drainDelay). BullMQ's own scripts write a delayed
 * marker the same way (includes/addDelayMarkerIfNeeded.lua); no public call does.
 */
export async function wakeAt(redis: RedisClient, queue: KeyedQueue, at: number): Promise<void> {
  await redis.zadd(queue.toKey('marker'), 'LT', at, '1');
}

/**
 * BullMQ's limiter, as a switch only: a hold (a 429, a quota) stops every worker taking the
 * account's jobs (BullMQ honours `queue.rateLimit` only when `max` is set). It gates nothing:
 * the exact pace (queue/line.ts) decides when each request goes, and a job taken early waits
 * for its slot in the worker (workers/flow.ts). A gate of one job per interval cost up to three
 * fetches per job that found it shut (issue 21: moveToActive 5.5 times a plate at 30/s).
 * BullMQ counts every job a Worker takes in the limiter key (its value, expiring `duration` after
 * the first) and holds the queue only while that count is at `max` (includes/getRateLimitTTL.lua);
 * `queue.rateLimit(ms)` sets it there. So the key's time to live alone is no switch: it lives a
 * second after any job was taken, and sched-feed asks whether the count is at `max`.
 */
export const RATE_LIMIT_SWITCH = { max: 1_000_000_000, duration: 1_000 } as const;
