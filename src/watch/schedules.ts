// When rounds fire: one BullMQ job scheduler per watch on the watches' own queue
// `<VQ_QUEUE>.watches`, so BullMQ (not a timer of ours) decides each due time and makes one job of
// it, whichever and however many processes run the watch worker (workers/watch-worker.ts). A
// round that must start at another time than the schedule's (the window opens, the round it
// waited for ended, the budget was raised) is a one-off job whose id says which round it is, so
// two processes asking for it make one job.

import { Queue } from 'bullmq';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import type { RedisClient } from '../redis/connection.js';
import type { WatchRef } from './store.js';

export const ROUND_JOB = 'round';

export interface RoundJobData {
  account: string;
  name: string;
}

export function watchQueueName(config: Pick<Config, 'queueName'>): string {
  return `${config.queueName}.watches`;
}

/** The scheduler's id: one per watch. */
export function schedulerId(ref: WatchRef): string {
  return `${ref.account}/${ref.name}`;
}

export class WatchSchedules {
  readonly #config: Config;
  readonly #redis: RedisClient;
  readonly #added: () => void;
  #queue: Queue<RoundJobData, unknown, string> | undefined;

  /** `added`: a job was added by this process (a worker process wakes its watch Worker at once). */
  constructor(config: Config, redis: RedisClient, added: () => void = () => {}) {
    this.#config = config;
    this.#redis = redis;
    this.#added = added;
  }

  get queue(): Queue<RoundJobData, unknown, string> {
    if (this.#queue === undefined) {
      this.#queue = new Queue<RoundJobData, unknown, string>(watchQueueName(this.#config), {
        connection: this.#redis,
        prefix: this.#config.prefix,
        defaultJobOptions: { removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 }, attempts: 3 },
      });
      // A failed call reaches its caller; the connection's own watcher logs outages.
      this.#queue.on('error', () => {});
    }
    return this.#queue;
  }

  /** Starts (or changes) the watch's schedule. An `every` schedule fires its first round now. */
  async upsert(ref: WatchRef, timing: { everyMs?: number; cron?: string }): Promise<void> {
    const repeat = timing.cron !== undefined ? { pattern: timing.cron, tz: 'UTC' } : { every: timing.everyMs ?? 0 };
    await this.queue.upsertJobScheduler(schedulerId(ref), repeat, {
      name: ROUND_JOB,
      data: { account: ref.account, name: ref.name },
    });
    this.#added();
  }

  async remove(ref: WatchRef): Promise<void> {
    await this.queue.removeJobScheduler(schedulerId(ref));
  }

  /** When the schedule fires next (undefined: no schedule, the watch is paused or removed). */
  async next(ref: WatchRef): Promise<number | undefined> {
    const s = await this.queue.getJobScheduler(schedulerId(ref));
    return s?.next ?? undefined;
  }

  /** A round outside the schedule, at `at` (now when omitted); `why` makes its id: one job per reason. */
  async once(ref: WatchRef, why: string, at?: number): Promise<void> {
    const delay = at === undefined ? 0 : Math.max(0, at - clock.now());
    await this.queue.add(
      ROUND_JOB,
      { account: ref.account, name: ref.name },
      { jobId: `${ref.account}.${ref.name}.${why}`, delay },
    );
    this.#added();
  }

  async close(): Promise<void> {
    await this.#queue?.close();
  }
}
