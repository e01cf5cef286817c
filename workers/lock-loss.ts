// A worker that lost a job's lock: it was paused (SIGSTOP, a frozen container, a long blocked event
// loop) or cut off from Redis past VQ_LOCK_DURATION, and another worker may hold the job now. That
// is a decision worth one warning line naming the job and what this worker did about it, never a
// "redis client error"; the fence (src/queue/job-fence.ts) makes sure it did nothing harmful.
import type { Job, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { clock } from '../src/clock.js';
import { noMetrics, type WorkerMetrics } from '../src/metrics.js';
import { isSlotMigrating } from '../src/redis/health.js';

/** What the worker that lost the lock had done, as the `lockLost` label and the log line say it. */
export type LockLossWhen = 'renewal-failed' | 'nothing-sent' | 'answer-stored' | 'create-superseded' | 'answer-dropped';

const MESSAGES: Record<LockLossWhen, string> = {
  'renewal-failed':
    'lost the lock on a job (this process was paused or cut off from Redis): another worker may take it over',
  'nothing-sent': 'another worker took the job over; nothing was sent',
  'answer-stored':
    "another worker took the job over after this one's create was answered; its query id is stored, " +
    'nothing is sent twice',
  'create-superseded':
    'another worker took the job over and sent the create again: the create had already been sent, ' +
    'the plate is flagged possible duplicate',
  'answer-dropped': "another worker took the job over; this worker's answer was not written over the newer state",
};

/**
 * BullMQ's words for it: the lock could not be renewed, it is gone ("Missing lock"), or another
 * worker holds it now ("Lock mismatch", when a paused worker wakes and tries to finish the job).
 */
const LOCK_ERROR = /^(?:could not renew lock for job|Missing lock for job|Lock mismatch for job) (\S+?)\.?(?:\s|$)/;

/** The job id when `err` is BullMQ saying this worker no longer holds a job's lock. */
export function lockErrorJob(err: unknown): string | undefined {
  const message = (err as Error | undefined)?.message;
  return typeof message === 'string' ? LOCK_ERROR.exec(message)?.[1] : undefined;
}

/**
 * BullMQ tries to renew the locks of the jobs this worker still runs every half lock duration, and
 * says "lockRenewalFailed" each time for a lock already lost (a job waiting in the worker for its
 * poll keeps running): one job made 12 warnings in 6 s in the chaos suite. A job's failed renewal
 * is said once, then not again for this long.
 */
const RENEWAL_FAILED_QUIET_MS = 10 * 60_000;

export class LockLoss {
  readonly #log: Logger;
  readonly #metrics: WorkerMetrics;
  readonly #now: () => number;
  /** Jobs whose failed renewal was said, and when (oldest first: a Map keeps insertion order). */
  readonly #renewalSaid = new Map<string, number>();

  constructor(log: Logger, metrics: WorkerMetrics = noMetrics, now: () => number = clock.now) {
    this.#log = log;
    this.#metrics = metrics;
    this.#now = now;
  }

  report(account: string, jobId: string | undefined, when: LockLossWhen, extra: Record<string, unknown> = {}): void {
    if (when === 'renewal-failed' && jobId !== undefined && this.#saidLately(`${account}\n${jobId}`)) return;
    this.#metrics.lockLost?.(account, when);
    this.#log.warn({ event: 'job.lock_lost', account, jobId, when, ...extra }, MESSAGES[when]);
  }

  #saidLately(key: string): boolean {
    const now = this.#now();
    for (const [said, at] of this.#renewalSaid) {
      if (now - at < RENEWAL_FAILED_QUIET_MS) break;
      this.#renewalSaid.delete(said);
    }
    if (this.#renewalSaid.has(key)) return true;
    this.#renewalSaid.set(key, now);
    return false;
  }
}

/**
 * The jobs one account's Worker runs now, each with the lock token BullMQ gave it: what a failed
 * renewal is checked against before it is said.
 *
 * BullMQ renews all of a Worker's locks in one script (extendLocks-1.lua) that reaches each lock by
 * a name it builds rather than one it declares. In a Redis Cluster whose slot is being migrated,
 * that script runs where the queue's stalled set still is, and a lock already moved to the other
 * node reads as missing there: the renewal "fails" although the lock is held. A fresh-clone CI run
 * said 15 such lost locks in one reshard. One renewal of the job alone (Job#extendLock, whose keys
 * are declared, so the client follows ASK and waits out TRYAGAIN) tells a moved lock, renewed now,
 * from a lost one (another worker's token, or none), which is said as before.
 */
export class HeldLocks {
  readonly #held = new Map<string, { job: Job; token: string }>();

  /** Runs `work` (the processor, for `job`) with the job's lock known here until it returns. */
  async around<T>(job: Job, token: string | undefined, work: () => Promise<T>): Promise<T> {
    const id = job.id;
    if (id === undefined || token === undefined) return await work();
    this.#held.set(id, { job, token });
    try {
      return await work();
    } finally {
      if (this.#held.get(id)?.token === token) this.#held.delete(id);
    }
  }

  /**
   * Renews the job's lock on its own, for `durationMs`: false when the lock is lost (another
   * worker's token or none) while the job still runs here. A job that ended meanwhile (its lock
   * released as BullMQ moved it on) lost nothing.
   */
  async renew(jobId: string, durationMs: number): Promise<boolean> {
    const held = this.#held.get(jobId);
    if (!held) return true;
    let renewed = false;
    try {
      renewed = (await held.job.extendLock(held.token, durationMs)) === 1;
    } catch {
      // Redis did not answer: whether the lock is held is not known, and a lost one must be said.
    }
    return renewed || this.#held.get(jobId)?.token !== held.token;
  }

  /** The ids of the jobs whose locks this worker holds now. */
  ids(): string[] {
    return [...this.#held.keys()];
  }
}

/**
 * An account Worker's lock events: each lock BullMQ's renewal missed is renewed on its own
 * (HeldLocks) and said only if lost; BullMQ's lock-loss errors are said that way, not as Redis
 * errors; every other error goes to `report`.
 */
export function watchLocks(
  worker: Pick<Worker, 'on'>,
  held: HeldLocks,
  loss: LockLoss,
  account: string,
  lockDurationMs: number,
  report: (err: Error) => void,
): void {
  const renewAlone = (jobIds: string[]) =>
    Promise.all(
      jobIds.map(async (jobId) => {
        if (!(await held.renew(jobId, lockDurationMs))) loss.report(account, jobId, 'renewal-failed');
      }),
    );
  worker.on('lockRenewalFailed', (jobIds: string[]) => void renewAlone(jobIds));
  // One renewal of every held lock at a time: a reshard can raise many errors in a second.
  let renewingAll: Promise<unknown> | undefined;
  worker.on('error', (err) => {
    if (lockErrorJob(err) !== undefined) return;
    // A slot on the move can fail BullMQ's renewal of every lock at once (a key "non local" to the
    // node its script ran on): each held lock is renewed on its own. Said only if it lasts (health).
    if (isSlotMigrating(err) && !renewingAll)
      renewingAll = renewAlone(held.ids()).finally(() => {
        renewingAll = undefined;
      });
    report(err);
  });
}
