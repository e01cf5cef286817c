// The fence around a plate job's data. BullMQ hands a job to one worker at a time with a lock
// token, but a worker that was paused (SIGSTOP, a frozen container, a blocked event loop) past its
// lock does not know it lost the job: it wakes up holding a stale copy. Every write of job data
// that matters goes through here, so such a worker can neither send a create (the `creating` mark
// is written only under the lock) nor write its older step over a newer one.
//
// The create protocol, as each activation reads the stored step:
//
// | stored step | who may act                  | what a crash or pause leaves         | next activation               |
// |-------------|------------------------------|--------------------------------------|-------------------------------|
// | create      | the lock holder: it writes   | nothing sent (the mark is written    | creates                       |
// |             | `creating` + a new createId  | first)                               |                               |
// |             | under the lock, then sends   |                                      |                               |
// | creating    | the sender of that createId: | a create that may have been made and | re-sends flagged              |
// |             | it stores the queryId (CAS   | paid (a pause after the fence, a     | possibleDuplicate (or fails   |
// |             | on createId, lock not        | crash, a cut answer)                 | CREATE_UNCERTAIN when         |
// |             | needed: a paid id is kept if |                                      | VQ_RECREATE_UNCERTAIN=false)  |
// |             | nobody has moved on; also    |                                      |                               |
// |             | over `create`: a mark lost   |                                      |                               |
// |             | in a failover)               |                                      |                               |
// | poll        | the lock holder writes poll  | a queryId: nothing is paid twice     | polls the same queryId        |
// |             | progress; anyone's terminal  |                                      |                               |
// |             | answer is stored once        |                                      |                               |
// |             | (HSETNX)                     |                                      |                               |
//
// A worker whose write is refused sends nothing and leaves the job to its holder.
import type { Job } from 'bullmq';
import { jobKeys } from '../engine/bullmq/keys.js';
import type { RedisClient } from '../redis/connection.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { CostCount } from './costs.js';
import type { JobStep, PlateJobData } from './types.js';

/**
 * ok: written. lock-lost: another worker holds the job. moved-on: the stored step is newer than
 * the writer's. gone: the job was removed.
 */
export type FenceResult = 'ok' | 'lock-lost' | 'moved-on' | 'gone';

const RESULTS: Record<string, FenceResult> = { '1': 'ok', '0': 'lock-lost', '-1': 'moved-on', '-2': 'gone' };

type PlateJob = Job<PlateJobData, unknown, string>;

export class JobFence {
  readonly #redis: Scripted<'job-fence'>;

  constructor(redis: RedisClient) {
    this.#redis = withScripts(redis, ['job-fence']);
  }

  /**
   * Writes `next` as the job's data when the stored data is still at `seen`'s step and createId
   * and, with a token, the caller still holds the job's lock. On success the job's in-memory data
   * is `next` too. `count`: cost counters moved in the same step, whether or not the write is
   * allowed (an answer is paid for whoever stores it). `priority`: the job's new BullMQ priority,
   * written with the data (the job is active: BullMQ's changePriority would only set this field,
   * in a round trip of its own and outside the fence). Job.updateData is no substitute either: it
   * writes whatever it is given, with no look at the lock or the stored step.
   */
  async write(
    job: PlateJob,
    token: string | undefined,
    seen: Pick<PlateJobData, 'step' | 'createId'>,
    next: PlateJobData,
    options: { orLostMark?: boolean; count?: CostCount; priority?: number } = {},
  ): Promise<FenceResult> {
    return (await this.#write(job, token, seen, next, options)).result;
  }

  /**
   * The write right before a create is sent (the `creating` mark), which also reads the account's
   * hold (`holdKey`, queue/line.ts) in the same step: `heldMs` left of it, 0 when none. The
   * request then needs no check of its own (workers/flow.ts `ready`).
   */
  async mark(
    job: PlateJob,
    token: string | undefined,
    seen: Pick<PlateJobData, 'step' | 'createId'>,
    next: PlateJobData,
    holdKey: string,
  ): Promise<{ result: FenceResult; heldMs: number }> {
    return this.#write(job, token, seen, next, {}, holdKey);
  }

  async #write(
    job: PlateJob,
    token: string | undefined,
    seen: Pick<PlateJobData, 'step' | 'createId'>,
    next: PlateJobData,
    options: { orLostMark?: boolean; count?: CostCount; priority?: number },
    holdKey?: string,
  ): Promise<{ result: FenceResult; heldMs: number }> {
    const { hash: key, lock } = jobKeys(job);
    const count = options.count;
    const reply = await this.#redis.vqbJobFence(
      key,
      lock,
      // Without counts the cost keys are not touched; the job's own key stands in (same slot).
      count?.keys[0] ?? key,
      count?.keys[1] ?? key,
      holdKey ?? key,
      token ?? '',
      seen.step satisfies JobStep,
      seen.createId ?? '',
      JSON.stringify(next),
      options.orLostMark ? '1' : '0',
      count?.fields ?? '',
      options.priority !== undefined ? String(options.priority) : '',
      count?.dayTtlS ?? 0,
      holdKey !== undefined ? '1' : '0',
    );
    const [raw, held] = Array.isArray(reply) ? reply : [reply, 0];
    const result = RESULTS[String(raw)] ?? 'moved-on';
    if (result === 'ok') {
      job.data = next;
      if (options.priority !== undefined) job.priority = options.priority;
    }
    return { result, heldMs: Number(held) };
  }
}
